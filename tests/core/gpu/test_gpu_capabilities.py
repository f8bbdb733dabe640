"""GPU capabilities under GFD names: the pure table, and the facts read from the fake NVML.

The H100 values are those a real H100 80GB HBM3 reported (../shared/gpu-h100:
driver 580.159.04, CUDA 13.0, 81559 MiB, MIG mode readable and disabled).
"""

from __future__ import annotations

import pytest

from gpuci_tui.core.gpu.capabilities import (
    GpuFacts,
    HostGpuFacts,
    arch_family,
    product_name,
    select_gpus,
    slot_capabilities,
)
from gpuci_tui.core.gpu.nvml_facts import read_nvml_facts
from tests.core.nvml_helpers import NvmlState

H100_UUID = "GPU-93cb0da6-b089-f8ad-8e61-ca5990b5283c"
H100 = GpuFacts(0, H100_UUID, "NVIDIA H100 80GB HBM3", 81559, (9, 0), True)
A100 = GpuFacts(1, "GPU-a100", "NVIDIA A100 80GB PCIe", 81920, (8, 0), True)
HOST = HostGpuFacts("580.159.04", (13, 0), (H100, A100))

H100_CAPS = {
    "gpuci.host": "gpubox3",
    "gpu.product": "NVIDIA-H100-80GB-HBM3",
    "gpu.memory": "81559",
    "gpu.count": "1",
    "gpu.family": "hopper",
    "gpu.compute.major": "9",
    "gpu.compute.minor": "0",
    "cuda.driver.major": "580",
    "cuda.driver.minor": "159",
    "cuda.driver.rev": "04",
    "cuda.runtime.major": "13",
    "cuda.runtime.minor": "0",
    "cuda.driver-version.full": "580.159.04",
    "cuda.driver-version.major": "580",
    "cuda.driver-version.minor": "159",
    "cuda.driver-version.revision": "04",
    "cuda.runtime-version.full": "13.0",
    "cuda.runtime-version.major": "13",
    "cuda.runtime-version.minor": "0",
    "mig.capable": "true",
}


def test_an_h100_slot_advertises_every_fact_under_gfd_names() -> None:
    assert slot_capabilities(HOST, (H100,), "gpubox3") == H100_CAPS


@pytest.mark.parametrize(
    ("name", "product"),
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"),
        ("NVIDIA GeForce RTX 4090", "NVIDIA-GeForce-RTX-4090"),
        ("Tesla  V100 (PCIe)", "Tesla-V100-PCIe"),  # runs of spaces and brackets, as GFD
    ],
)
def test_product_names_are_sanitised_as_gfd_does(name: str, product: str) -> None:
    assert product_name(name) == product


@pytest.mark.parametrize(
    ("cc", "family"),
    [
        ((7, 0), "volta"),
        ((7, 5), "turing"),
        ((8, 0), "ampere"),
        ((8, 9), "ada-lovelace"),
        ((9, 0), "hopper"),
        ((10, 0), "blackwell"),
        ((12, 0), "blackwell"),
        ((4, 0), None),
    ],
)
def test_family_follows_the_compute_capability(cc: tuple[int, int], family: str | None) -> None:
    assert arch_family(*cc) == family


def test_what_could_not_be_read_is_left_out_not_guessed() -> None:
    unknown = GpuFacts(0, None, None, None, None, None)
    caps = slot_capabilities(HostGpuFacts(None, None, (unknown,)), (unknown,))
    assert caps == {"gpu.count": "1"}
    # A driver version in an unexpected form says nothing of its parts either.
    odd = slot_capabilities(HostGpuFacts("580", None), (H100,))
    assert not {"cuda.driver.major", "cuda.runtime.major"} & set(odd)
    assert slot_capabilities(HostGpuFacts("550.54", (12, 4)), (H100,))["cuda.driver.minor"] == "54"
    assert "cuda.driver.rev" not in slot_capabilities(HostGpuFacts("550.54", None), (H100,))


def test_a_slot_of_unlike_gpus_advertises_only_what_they_share() -> None:
    caps = slot_capabilities(HOST, (H100, A100))
    assert caps["gpu.count"] == "2"
    assert caps["mig.capable"] == "true"
    assert caps["cuda.runtime.major"] == "13"
    assert not {"gpu.product", "gpu.memory", "gpu.family", "gpu.compute.major"} & set(caps)


def test_a_slot_without_gpus_advertises_only_the_host() -> None:
    assert slot_capabilities(HOST, (), "gpubox3") == {"gpuci.host": "gpubox3"}


@pytest.mark.parametrize(
    ("selection", "indexes"),
    [
        ("all", [0, 1]),
        ("none", []),
        (("1",), [1]),
        ((H100_UUID,), [0]),
        (("0", H100_UUID), [0]),  # the same GPU named twice is one GPU
        (("7",), []),  # an unknown id is not counted
    ],
)
def test_slot_selection(selection: str | tuple[str, ...], indexes: list[int]) -> None:
    assert [g.index for g in select_gpus(HOST, selection)] == indexes


# --------------------------------------------------------------------------- from NVML


@pytest.mark.nvml
def test_facts_read_from_nvml_give_the_h100_table(make_sampler, nvml_state: NvmlState) -> None:
    nvml_state.write(
        "driver 580.159.04\ncuda 13000\ncuda_v2 13000\n"
        f"gpu NVIDIA_H100_80GB_HBM3 {H100_UUID} 0 0 0 81559 38 70800 700000 0\n"
        "gpu NVIDIA_L4 GPU-l4 0 0 0 23034 34 16000 72000 0\n"
        "compute 0 9 0\nmig 0 0 0\n"
        "compute 1 8 9\n"
    )
    facts = read_nvml_facts(make_sampler())
    assert facts.gpus[0] == H100
    # The L4 has no MIG (NOT_SUPPORTED: false, not unknown).
    assert facts.gpus[1] == GpuFacts(1, "GPU-l4", "NVIDIA L4", 23034, (8, 9), False)
    caps = slot_capabilities(facts, select_gpus(facts, ("0",)), "gpubox3")
    assert caps == H100_CAPS


@pytest.mark.nvml
def test_what_a_real_h200_answered_gives_its_table(make_sampler, nvml_state: NvmlState) -> None:
    """The NVML answers of a lent H200 (driver 580.159.04): name, 150754820096 bytes, 9.0, MIG 0 0."""
    nvml_state.write(
        "driver 580.159.04\ncuda 13000\ncuda_v2 13000\n"
        "gpu NVIDIA_H200 GPU-31752293-c3e8-fdaf-b4f2-6bf1c39ebd6f 0 0 0 143771 30 80000 700000 0\n"
        "compute 0 9 0\nmig 0 0 0\n"
    )
    facts = read_nvml_facts(make_sampler())
    caps = slot_capabilities(facts, facts.gpus)
    assert caps["gpu.product"] == "NVIDIA-H200"
    assert caps["gpu.memory"] == "143771"  # nvidia-smi: 143771 MiB
    assert (caps["gpu.family"], caps["mig.capable"]) == ("hopper", "true")
    assert caps["cuda.driver-version.full"] == "580.159.04"


@pytest.mark.nvml
def test_a_failing_nvml_call_leaves_its_fact_out(make_sampler, nvml_state: NvmlState) -> None:
    nvml_state.write(
        "driver 580.159.04\ncuda 13000\ncuda_v2 13000\n"
        f"gpu NVIDIA_H100_80GB_HBM3 {H100_UUID} 0 0 0 81559 38 70800 700000 0\n"
        "compute 0 9 0\nmig 0 0 0\n"
        "fail nvmlDeviceGetMigMode 999\nfail nvmlDeviceGetCudaComputeCapability 13\n"
    )
    facts = read_nvml_facts(make_sampler())
    assert facts.gpus[0].mig_capable is None
    assert facts.gpus[0].compute_capability is None
    caps = slot_capabilities(facts, facts.gpus)
    assert caps["gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert not {"mig.capable", "gpu.family", "gpu.compute.major"} & set(caps)


@pytest.mark.nvml
def test_no_driver_no_gpu_facts(make_sampler, nvml_state: NvmlState) -> None:
    nvml_state.write("init 9\n")  # DRIVER_NOT_LOADED
    facts = read_nvml_facts(make_sampler())
    assert facts.gpus == ()
