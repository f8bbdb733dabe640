"""The CUDA check before every start (`cuda_fit`): what an image needs, and whether the driver runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuci_tui.core.gpu.cuda_fit import CudaNeed, DriverCuda, need_of, refusal
from gpuci_tui.core.gpu.imagechoice import driver_for

OURS = "ghcr.io/o/agent:amd64-ubuntu24.04-cuda12.8"
NVIDIA_124 = (
    "NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=470,driver<471 "
    "brand=unknown,driver>=470,driver<471 brand=tesla,driver>=525,driver<526"
)


@pytest.mark.parametrize(
    ("env", "labels", "need"),
    [
        ([], {}, None),
        (["PATH=/bin"], {"org.opencontainers.image.title": "x"}, None),
        (["NVIDIA_REQUIRE_CUDA=cuda>=12.8"], {}, CudaNeed((12, 8), "NVIDIA_REQUIRE_CUDA")),
        (
            [NVIDIA_124, "CUDA_VERSION=12.4.1"],
            {},
            CudaNeed(
                (12, 4),
                "NVIDIA_REQUIRE_CUDA",
                (
                    "brand=tesla,driver>=470,driver<471",
                    "brand=unknown,driver>=470,driver<471",
                    "brand=tesla,driver>=525,driver<526",
                ),
            ),
        ),
        (["CUDA_VERSION=12.9.1"], {}, CudaNeed((12, 9), "CUDA_VERSION")),
        ([], {"io.gpuci.cuda": "13.0.1"}, CudaNeed((13, 0), "label io.gpuci.cuda")),
        (
            ["NVIDIA_DISABLE_REQUIRE=1"],
            {"io.gpuci.cuda": "12.8.1"},
            CudaNeed((12, 8), "label io.gpuci.cuda", disabled=True),
        ),
        (
            ["NVIDIA_REQUIRE_CUDA=cuda>=12.8", "NVIDIA_DISABLE_REQUIRE=true"],
            {},
            CudaNeed((12, 8), "NVIDIA_REQUIRE_CUDA", disabled=True),
        ),
        # The env wins over the label: it is what nvidia-container-cli enforces.
        (
            ["NVIDIA_REQUIRE_CUDA=cuda>=12.4"],
            {"io.gpuci.cuda": "12.8.1"},
            CudaNeed((12, 4), "NVIDIA_REQUIRE_CUDA"),
        ),
    ],
)
def test_need_of_an_image(env: list[str], labels: dict[str, str], need: CudaNeed | None) -> None:
    assert need_of(env, labels) == need


D535 = DriverCuda("535.104.05", (12, 2))
D550 = DriverCuda("550.54.15", (12, 4))
D580 = DriverCuda("580.65.06", (13, 0))
D470 = DriverCuda("470.256.02", (11, 4))


@pytest.mark.parametrize(
    ("image", "need", "driver", "words"),
    [
        # The issue's own example: the driver's family minimum is met, the minor is not.
        (
            "ghcr.io/o/agent:amd64-ubuntu22.04-cuda12.4",
            CudaNeed((12, 4), "NVIDIA_REQUIRE_CUDA"),
            D535,
            "image needs CUDA 12.4 (NVIDIA_REQUIRE_CUDA); driver 535.104.05 supports up to "
            "CUDA 12.2: build an image for CUDA 12.2 (a row in dockeragent/matrix.txt, then "
            "dockeragent/build.sh), or upgrade the driver to 550 or newer",
        ),
        # One of our tags the driver runs exists: it is named.
        (
            OURS,
            CudaNeed((12, 8), "NVIDIA_REQUIRE_CUDA"),
            D550,
            "image needs CUDA 12.8 (NVIDIA_REQUIRE_CUDA); driver 550.54.15 supports up to "
            "CUDA 12.4: use ghcr.io/o/agent:amd64-ubuntu22.04-cuda12.4, or upgrade the driver "
            "to 570 or newer",
        ),
        # Another project's image: no tag is invented.
        (
            "nvidia/cuda:13.0.0-runtime-ubuntu24.04",
            CudaNeed((13, 0), "NVIDIA_REQUIRE_CUDA"),
            D535,
            "image needs CUDA 13.0 (NVIDIA_REQUIRE_CUDA); driver 535.104.05 supports up to "
            "CUDA 12.2: use an image built for CUDA 12.2 or older, or upgrade the driver to 580 "
            "or newer",
        ),
        # A whole family too new (below the family minimum): refused as well.
        (
            "x:y",
            CudaNeed((12, 0), "CUDA_VERSION"),
            D470,
            "image needs CUDA 12.0 (CUDA_VERSION); driver 470.256.02 supports up to CUDA 11.4",
        ),
    ],
)
def test_an_image_the_driver_cannot_run_is_refused_with_the_fix(
    image: str, need: CudaNeed, driver: DriverCuda, words: str
) -> None:
    why = refusal(image, need, driver)
    assert why is not None and why.startswith(words), why


@pytest.mark.parametrize(
    ("need", "driver"),
    [
        (None, D470),  # declares nothing: never held on a guess from its tag
        (CudaNeed((12, 4), "NVIDIA_REQUIRE_CUDA"), None),  # no NVML on this host
        (CudaNeed((12, 4), "NVIDIA_REQUIRE_CUDA"), DriverCuda(None, None)),  # NVML said nothing
        (CudaNeed((12, 4), "NVIDIA_REQUIRE_CUDA"), D550),  # exactly enough
        (CudaNeed((12, 4), "NVIDIA_REQUIRE_CUDA"), D580),  # more than enough
        (CudaNeed((13, 0), "CUDA_VERSION", disabled=True), D535),  # the check is switched off
        # Our label alone, same family: the container starts (nothing in its env to refuse it).
        (CudaNeed((12, 4), "label io.gpuci.cuda"), D535),
        # Only the version: the CUDA is derived from the driver branch.
        (CudaNeed((12, 4), "NVIDIA_REQUIRE_CUDA"), DriverCuda("550.54.15", None)),
        # nvidia/cuda's forward-compatibility clause for the 535 branch.
        (
            CudaNeed((12, 4), "NVIDIA_REQUIRE_CUDA", ("brand=tesla,driver>=535,driver<536",)),
            D535,
        ),
    ],
)
def test_what_is_never_refused(need: CudaNeed | None, driver: DriverCuda | None) -> None:
    assert refusal("ghcr.io/o/agent:amd64-ubuntu22.04-cuda12.4", need, driver) is None


def test_a_clause_for_another_branch_does_not_let_the_image_through() -> None:
    need = CudaNeed((12, 4), "NVIDIA_REQUIRE_CUDA", ("brand=tesla,driver>=470,driver<471",))
    assert refusal("x:y", need, D535) is not None
    assert refusal("x:y", need, DriverCuda("470.256.02", (11, 4))) is None
    # A clause with nothing the driver can be compared with lets nothing through.
    assert refusal("x:y", CudaNeed((12, 4), "NVIDIA_REQUIRE_CUDA", ("brand=tesla",)), D535)


def test_a_label_alone_is_refused_below_the_family_minimum() -> None:
    why = refusal("x:y", CudaNeed((13, 0), "label io.gpuci.cuda"), D535)
    assert why is not None and why.startswith("image needs CUDA 13.0 (label io.gpuci.cuda)")


def test_the_driver_version_only_is_enough_to_refuse() -> None:
    why = refusal("x:y", CudaNeed((12, 8), "NVIDIA_REQUIRE_CUDA"), DriverCuda("535.104.05", None))
    assert why is not None and "supports up to CUDA 12.2" in why


@pytest.mark.parametrize(
    ("cuda", "driver"),
    [((12, 2), 535), ((12, 4), 550), ((12, 8), 570), ((13, 0), 580), ((14, 0), None)],
)
def test_driver_for(cuda: tuple[int, int], driver: int | None) -> None:
    assert driver_for(cuda) == driver


def test_check_config_names_the_group_whose_image_the_driver_cannot_run(tmp_path: Path) -> None:
    from gpuci_tui.core.config.loader import load_config
    from gpuci_tui.core.errors import GpuciError
    from gpuci_tui.core.gpu.check import check_images_cuda
    from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo
    from gpuci_tui.core.protocols import ImageConfig

    path = tmp_path / "config.toml"
    path.write_text(
        '[azure]\nurl = "https://dev.azure.com/o"\npool = "gpu"\n'
        '[agents]\nimage = "a/old:1"\n'
        '[groups.old]\ncount = 1\nimage = "a/old:1"\ngpus = ["0"]\n'
        '[groups.new]\ncount = 1\nimage = "a/new:1"\ngpus = ["1"]\n'
        '[groups.cpu]\ncount = 1\nimage = "a/new:1"\ngpus = "none"\n'
        '[groups.gone]\ncount = 1\nimage = "a/missing:1"\ngpus = ["2"]\n'
        '[groups.down]\ncount = 1\nimage = "a/down:1"\ngpus = ["3"]\n'
    )
    config = load_config(path)
    images = {
        "a/old:1": ImageConfig("sha256:1", {"NVIDIA_REQUIRE_CUDA": "cuda>=12.2"}, {}),
        "a/new:1": ImageConfig("sha256:2", {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}, {}),
    }

    def inspect(image: str) -> ImageConfig | None:
        if image == "a/down:1":
            raise GpuciError("Docker is not answering")
        return images.get(image)

    host = GpuHostInfo(True, driver_version="535.104.05", cuda_driver_version=(12, 2))
    (error,) = check_images_cuda(config, GpuFrame(0.0, host), inspect)
    assert error.key == "groups.new.image"
    assert error.problem.startswith("image needs CUDA 12.4 (NVIDIA_REQUIRE_CUDA); driver 535")
    newer = GpuHostInfo(True, driver_version="550.54.15", cuda_driver_version=(12, 4))
    assert check_images_cuda(config, GpuFrame(0.0, newer), inspect) == []
    assert check_images_cuda(config, GpuFrame(0.0, GpuHostInfo(False)), inspect) == []
