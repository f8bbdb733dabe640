"""CUDA image ↔ driver rules, tag parsing and tag choice (table-driven)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuci_tui.core.gpu.imagechoice import (
    KNOWN_TAGS,
    Verdict,
    check_compatibility,
    choose_tag,
    cuda_of_driver,
    cuda_of_tag,
    image_cuda,
    require_cuda_of_env,
    required_driver,
    suggest_image,
    tag_of,
)

MATRIX = Path(__file__).resolve().parents[3] / "dockeragent" / "matrix.txt"


@pytest.mark.parametrize(
    ("tag", "cuda"),
    [
        ("12.4.1-runtime-ubuntu22.04", (12, 4)),
        ("13.0.0-cudnn-devel-ubuntu24.04", (13, 0)),
        ("12.9.1-base-ubuntu24.04", (12, 9)),
        ("11.8.0-devel-ubuntu22.04", (11, 8)),
        ("11.0-base", (11, 0)),
        ("10.2-cudnn7-devel-ubuntu18.04", (10, 2)),
        ("nvidia/cuda:12.8.1-runtime-ubuntu24.04", (12, 8)),
        ("nvcr.io/nvidia/cuda:13.1.0-devel-ubuntu24.04", (13, 1)),
        ("amd64-ubuntu24.04-cuda12.8", (12, 8)),
        ("arm64-ubuntu22.04-cuda13.0-devel", (13, 0)),
        ("ghcr.io/acme/gpuci-agent:amd64-ubuntu24.04-cuda12.9-cudnn-devel", (12, 9)),
        ("localhost:5000/gpuci-agent:amd64-ubuntu22.04-cuda12.4", (12, 4)),
        ("2.3.0-cuda12.1-cudnn8-runtime", (12, 1)),  # PyTorch 2.3.0, not CUDA 2.3
        ("cuda-12.6-py311", (12, 6)),
        ("py3.11-cu121", (12, 1)),
        ("cu118", (11, 8)),
        ("latest", None),
        ("ubuntu24.04", None),
        ("2.3.0-runtime", None),
        ("localhost:5000/gpuci-agent", None),
        ("", None),
    ],
)
def test_cuda_of_tag(tag: str, cuda) -> None:
    assert cuda_of_tag(tag) == cuda


def test_tag_of() -> None:
    assert tag_of("localhost:5000/a/b:t1") == "t1"
    assert tag_of("a/b") == "b"
    assert tag_of("amd64-ubuntu24.04-cuda12.8") == "amd64-ubuntu24.04-cuda12.8"


@pytest.mark.parametrize(
    ("cuda", "driver"),
    [
        ((13, 0), 580),
        ((13, 4), 580),
        ((12, 0), 525),
        ((12, 9), 525),
        ((11, 8), 450),
        ((11, 0), 450),
        ((10, 2), 440),
        ((10, 1), 418),
    ],
)
def test_required_driver(cuda, driver: int) -> None:
    assert required_driver(cuda) == driver


@pytest.mark.parametrize("cuda", [(14, 0), (8, 0)])
def test_required_driver_unknown(cuda) -> None:
    with pytest.raises(ValueError, match="No driver requirement"):
        required_driver(cuda)


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("580.82.07", (13, 0)),
        ("575.51.03", (12, 9)),
        ("570.124.06", (12, 8)),
        ("565.57.01", (12, 6)),
        ("550.54.15", (12, 4)),
        ("535.183.01", (12, 2)),
        ("525.60.13", (12, 0)),
        ("470.256.02", (11, 4)),
        ("450.36.06", (11, 0)),
        ("440.33.01", None),
        (None, None),
        ("garbage", None),
    ],
)
def test_cuda_of_driver(driver, cuda) -> None:
    assert cuda_of_driver(driver) == cuda


# (image CUDA, driver CUDA, driver version) -> verdict, words in the message
RULES = [
    # fully supported: the driver's CUDA is at least the image's
    ((12, 4), (12, 4), "550.54.15", Verdict.OK, "runs on driver 550.54.15 (CUDA 12.4)"),
    ((12, 4), (12, 8), "570.124.06", Verdict.OK, "runs"),
    ((12, 8), (13, 0), "580.82.07", Verdict.OK, "runs"),  # newer drivers run older CUDA
    ((11, 8), (13, 0), "580.82.07", Verdict.OK, "runs"),
    ((10, 2), (12, 4), "550.54.15", Verdict.OK, "runs"),
    ((13, 0), (13, 0), "580.65.06", Verdict.OK, "runs"),
    ((13, 0), (13, 0), None, Verdict.OK, "runs on driver with CUDA 13.0"),
    ((12, 8), None, "570.86.10", Verdict.OK, "runs"),  # NVML gave no CUDA: table
    # same family, driver older than the image: minor-version compatibility only
    ((12, 8), (12, 4), "550.54.15", Verdict.MINOR_COMPAT, "NVIDIA_DISABLE_REQUIRE=1"),
    ((12, 9), (12, 0), "525.60.13", Verdict.MINOR_COMPAT, "Choose a cuda12.0 tag"),
    ((12, 8), (12, 4), None, Verdict.MINOR_COMPAT, "refuse to start"),
    ((12, 8), None, "550.54.15", Verdict.MINOR_COMPAT, "newer than driver 550.54.15"),
    ((11, 8), (11, 4), "470.256.02", Verdict.MINOR_COMPAT, "minor-version compatibility"),
    ((13, 1), (13, 0), "580.82.07", Verdict.MINOR_COMPAT, "cuda13.0"),
    # below the family minimum: nothing runs
    (
        (13, 0),
        (12, 4),
        "550.54",
        Verdict.TOO_OLD,
        "Image CUDA 13.0 needs NVIDIA driver ≥ 580; this host has 550.54 (CUDA 12.4). "
        "Choose a cuda12.x tag or update the driver.",
    ),
    ((13, 0), (12, 9), "575.51.03", Verdict.TOO_OLD, "≥ 580"),
    ((12, 0), (11, 8), "520.61.05", Verdict.TOO_OLD, "Choose a cuda11.x tag"),
    ((12, 4), None, "470.82.01", Verdict.TOO_OLD, "≥ 525"),
    ((12, 4), None, "440.33.01", Verdict.TOO_OLD, "this host has 440.33.01"),
    ((10, 2), (10, 1), "418.87", Verdict.TOO_OLD, "≥ 440"),  # no minor compat before 11
    ((14, 0), (13, 0), "580.82.07", Verdict.TOO_OLD, "CUDA 13.0 or older"),
    # nothing to compare with
    ((12, 8), None, None, Verdict.UNKNOWN, "No NVIDIA driver detected"),
    (None, (12, 4), "550.54.15", Verdict.UNKNOWN, "Cannot tell which CUDA"),
]


@pytest.mark.parametrize(("image", "driver_cuda", "driver", "verdict", "words"), RULES)
def test_check_compatibility(image, driver_cuda, driver, verdict, words) -> None:
    result = check_compatibility(image, driver_cuda, driver)
    assert result.verdict is verdict, result.message
    assert words in result.message
    assert result.ok is (verdict is Verdict.OK)
    if image is not None and image[0] in (11, 12, 13):
        assert result.required_driver == required_driver(image)


def test_minor_compat_with_require_disabled_says_it_starts() -> None:
    result = check_compatibility((12, 8), (12, 4), "550.54.15", require_disabled=True)
    assert result.verdict is Verdict.MINOR_COMPAT
    assert "lets it start" in result.message


def test_known_tags_match_the_build_matrix() -> None:
    rows = [
        line.split()
        for line in MATRIX.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    tags = []
    for cuda, ubuntu, flavor, *archs in rows:
        major_minor = ".".join(cuda.split(".")[:2])
        suffix = "" if flavor == "runtime" else f"-{flavor}"
        for arch in archs or ["amd64"]:
            if arch == "amd64":
                tags.append(f"{arch}-ubuntu{ubuntu}-cuda{major_minor}{suffix}")
    assert sorted(tags) == sorted(KNOWN_TAGS)


@pytest.mark.parametrize(
    ("driver_cuda", "driver", "prefer", "tag", "verdict"),
    [
        ((13, 0), "580.82.07", (), "amd64-ubuntu24.04-cuda13.0", Verdict.OK),
        ((12, 9), "575.51.03", (), "amd64-ubuntu24.04-cuda12.9", Verdict.OK),
        ((12, 9), "575.51.03", ("devel",), "amd64-ubuntu24.04-cuda12.9-devel", Verdict.OK),
        ((12, 8), "570.124.06", ("ubuntu22.04",), "amd64-ubuntu22.04-cuda12.8", Verdict.OK),
        ((12, 8), "570.124.06", (), "amd64-ubuntu24.04-cuda12.8", Verdict.OK),
        ((12, 6), "560.35.03", (), "amd64-ubuntu22.04-cuda12.4", Verdict.OK),
        ((12, 2), "535.183.01", (), "amd64-ubuntu22.04-cuda12.4", Verdict.MINOR_COMPAT),
        ((11, 4), "470.256.02", (), None, Verdict.TOO_OLD),
        (None, None, (), "amd64-ubuntu24.04-cuda13.0", Verdict.UNKNOWN),
    ],
)
def test_choose_tag_from_the_matrix(driver_cuda, driver, prefer, tag, verdict) -> None:
    choice = choose_tag(KNOWN_TAGS, driver_cuda, prefer, driver_version=driver)
    assert choice.tag == tag, choice.explanation
    assert choice.compatibility is not None
    assert choice.compatibility.verdict is verdict
    if tag is None:
        assert "No tag fits driver 470.256.02" in choice.explanation
        assert "needs driver ≥ 525" in choice.explanation
        assert "dockeragent/build.sh" in choice.explanation
    if verdict is Verdict.OK:
        assert tag not in choice.alternatives
        assert all(cuda_of_tag(t) <= driver_cuda for t in choice.alternatives)


def test_choose_tag_prefers_exact_over_higher_minor_compat() -> None:
    tags = ["img:12.4.1-runtime-ubuntu22.04", "img:12.8.1-runtime-ubuntu24.04"]
    choice = choose_tag(tags, (12, 6), driver_version="560.35.03")
    assert choice.tag == "img:12.4.1-runtime-ubuntu22.04"


def test_choose_tag_with_unparseable_tags_only() -> None:
    choice = choose_tag(["latest", "main"], (12, 4))
    assert choice.tag is None
    assert "names a CUDA version" in choice.explanation


@pytest.mark.parametrize(
    ("driver_cuda", "ubuntu", "flavor", "image"),
    [
        ((13, 0), "24.04", "runtime", "reg/gpuci-agent:amd64-ubuntu24.04-cuda13.0"),
        ((12, 8), "24.04", "devel", "reg/gpuci-agent:amd64-ubuntu24.04-cuda12.8-devel"),
        ((12, 8), "22.04", "runtime", "reg/gpuci-agent:amd64-ubuntu22.04-cuda12.8"),
        ((12, 4), "24.04", "runtime", "reg/gpuci-agent:amd64-ubuntu24.04-cuda12.8"),
        ((13, 0), "24.04", "cudnn-devel", "reg/gpuci-agent:amd64-ubuntu24.04-cuda12.9-cudnn-devel"),
        ((11, 4), "22.04", "runtime", "reg/gpuci-agent:amd64-ubuntu22.04-cuda12.4"),
    ],
)
def test_suggest_image(driver_cuda, ubuntu, flavor, image) -> None:
    assert suggest_image("reg/gpuci-agent", driver_cuda, ubuntu, flavor=flavor) == image


def test_require_cuda_of_env_from_docker_config_env() -> None:
    env = [
        "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin",
        "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=unknown,driver>=470,driver<471 "
        "brand=tesla,driver>=535,driver<536",
        "CUDA_VERSION=12.8.1",
    ]
    req = require_cuda_of_env(env)
    assert req is not None
    assert req.cuda == (12, 8)
    assert req.alternatives == (
        "brand=unknown,driver>=470,driver<471",
        "brand=tesla,driver>=535,driver<536",
    )
    assert not req.disabled


def test_require_cuda_of_env_variants() -> None:
    assert require_cuda_of_env({"PATH": "/bin"}) is None
    fallback = require_cuda_of_env({"CUDA_VERSION": "11.8.0"})
    assert fallback is not None and fallback.cuda == (11, 8) and fallback.raw == ""
    disabled = require_cuda_of_env(
        {"NVIDIA_REQUIRE_CUDA": "cuda>=13.0", "NVIDIA_DISABLE_REQUIRE": "1"}
    )
    assert disabled is not None and disabled.disabled and disabled.cuda == (13, 0)
    not_disabled = require_cuda_of_env(
        {"NVIDIA_REQUIRE_CUDA": "cuda>=13.0", "NVIDIA_DISABLE_REQUIRE": "false"}
    )
    assert not_disabled is not None and not not_disabled.disabled
    only_brand = require_cuda_of_env({"NVIDIA_REQUIRE_CUDA": "brand=tesla,driver>=470"})
    assert only_brand is not None and only_brand.cuda is None


def test_image_cuda_prefers_the_image_env_over_its_tag() -> None:
    # A mislabelled tag: the environment is what nvidia-container-cli enforces.
    assert image_cuda("acme/agent:cuda12.4", ["NVIDIA_REQUIRE_CUDA=cuda>=12.8"]) == (12, 8)
    assert image_cuda("acme/agent:cuda12.4", ["PATH=/bin"]) == (12, 4)
    assert image_cuda("acme/agent:latest") is None


def test_suggest_image_for_another_architecture() -> None:
    # The matrix builds amd64; build.sh --arch arm64 builds the same tags for arm64.
    image = suggest_image("reg/gpuci-agent", (13, 0), arch="arm64")
    assert image == "reg/gpuci-agent:arm64-ubuntu24.04-cuda13.0"
