"""The host's topology read through the real pynvml from the fake libnvidia-ml.so.1.

MIG devices (a parent in MIG mode with child handles, UUIDs, profile names and
the slice's memory) and NVLink / common-ancestor levels, as slot shapes use them.
"""

from __future__ import annotations

import pytest

from gpuci_tui.core.config.slot_shapes import HostTopology, MigDevice, gpu_slots, mig_slots
from gpuci_tui.core.gpu.capabilities import GpuFacts, HostGpuFacts
from gpuci_tui.core.gpu.nvml_topology import read_nvml_topology, topology_reader
from gpuci_tui.core.host.gpus.caps import mig_capabilities
from tests.core.nvml_helpers import NvmlState

pytestmark = pytest.mark.nvml

H100 = "gpu NVIDIA_H100_80GB_HBM3 GPU-93cb0da6-b089-f8ad-8e61-ca5990b5283c 0 0 0 81559 38 70800 700000 0"
MIG_NAME = "NVIDIA_H100_80GB_HBM3_MIG_1g.10gb"
MIG_3G = "NVIDIA_H100_80GB_HBM3_MIG_3g.40gb"


def test_a_parent_in_mig_mode_lists_its_slices(make_sampler, nvml_state: NvmlState) -> None:
    nvml_state.write(
        f"driver 580.159.04\n{H100}\nmig 0 1 1\n"
        # Slots 0, 2 and 5 are used; the others answer NOT_FOUND, as empty ones do.
        f"migdev 0 0 MIG-aaaaaaaa-0000-5000-8000-000000000000 {MIG_NAME} 9856\n"
        f"migdev 0 2 MIG-aaaaaaaa-0000-5000-8000-000000000002 {MIG_NAME} 9856\n"
        f"migdev 0 5 MIG-aaaaaaaa-0000-5000-8000-000000000005 {MIG_3G} 40192\n"
        "gpu NVIDIA_L4 GPU-l4 0 0 0 23034 34 16000 72000 0\n"
    )
    topology = read_nvml_topology(make_sampler())
    assert topology.gpus == (0, 1)
    assert topology.mig_mode == frozenset({0})
    assert topology.mig == (
        MigDevice(0, 0, "MIG-aaaaaaaa-0000-5000-8000-000000000000", "1g.10gb", 9856),
        MigDevice(0, 2, "MIG-aaaaaaaa-0000-5000-8000-000000000002", "1g.10gb", 9856),
        MigDevice(0, 5, "MIG-aaaaaaaa-0000-5000-8000-000000000005", "3g.40gb", 40192),
    )
    slots = mig_slots(topology, 3)
    assert [s.label for s in slots] == ["MIG 1g.10gb 0/0", "MIG 1g.10gb 0/2", "MIG 3g.40gb 0/5"]
    assert {s.watch for s in slots} == {("0",)}


def test_mig_disabled_or_unsupported_gives_no_slices(make_sampler, nvml_state: NvmlState) -> None:
    # The real H100 of ../shared/gpu-h100 answers MIG mode 0 0 (disabled).
    nvml_state.write(f"{H100}\nmig 0 0 0\nmigdev 0 0 MIG-x {MIG_NAME} 9856\n")
    assert read_nvml_topology(make_sampler()).mig == ()
    nvml_state.write(f"{H100}\n")
    assert read_nvml_topology(make_sampler()) == HostTopology(
        gpus=(0,), uuids={0: "GPU-93cb0da6-b089-f8ad-8e61-ca5990b5283c"}
    )


def test_nvlink_pairs_and_levels_shape_two_gpu_slots(make_sampler, nvml_state: NvmlState) -> None:
    gpus = "".join(
        f"gpu NVIDIA_A100 GPU-{i}0000000 0 0 0 81920 30 60000 400000 0\n" for i in range(4)
    )
    nvml_state.write(gpus + "link 0 1 10\nlink 0 2 50 nvlink\nlink 1 3 50 nvlink\nlink 2 3 10\n")
    topology = read_nvml_topology(make_sampler())
    assert topology.nvlinks == frozenset({(0, 2), (1, 3)})
    assert topology.levels == {(0, 1): 10, (0, 2): 50, (1, 3): 50, (2, 3): 10}
    slots = gpu_slots(topology, 2, 2)
    assert [s.ids for s in slots] == [
        ("GPU-00000000", "GPU-20000000"),
        ("GPU-10000000", "GPU-30000000"),
    ]


def test_no_nvml_means_no_topology(make_sampler, nvml_state: NvmlState) -> None:
    nvml_state.write("init 12\n")
    assert read_nvml_topology(make_sampler()) == HostTopology()


def test_the_reader_prefers_the_samplers_own_topology() -> None:
    class Own:
        def topology(self) -> HostTopology:
            return HostTopology(gpus=(7,))

    assert topology_reader(Own())() == HostTopology(gpus=(7,))  # type: ignore[arg-type]


def test_a_mig_slot_advertises_the_slice_memory_and_profile() -> None:
    parent = GpuFacts(0, "GPU-h100", "NVIDIA H100 80GB HBM3", 81559, (9, 0), True)
    facts = HostGpuFacts("580.159.04", (13, 0), (parent,))
    caps = mig_capabilities(facts, MigDevice(0, 2, "MIG-1", "1g.10gb", 9856), "gpubox3")
    assert caps["gpu.mig.profile"] == "1g.10gb"
    assert caps["gpu.memory"] == "9856"
    assert caps["gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    assert (caps["gpu.count"], caps["gpu.family"], caps["mig.capable"]) == ("1", "hopper", "true")
    # A slice whose memory was not read promises none (not the parent's 80 GB).
    assert "gpu.memory" not in mig_capabilities(facts, MigDevice(0, 2, "MIG-1"), None)
