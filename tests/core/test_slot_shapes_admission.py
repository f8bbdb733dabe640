"""Shaped slots in containers and gates: what Docker gets, and what admission and health watch.

A MIG slot's container gets its ``MIG-…`` UUID; its gate watches the parent GPU
(NVML's frame is per physical GPU): a fault on the parent holds every slice of
it, and a foreign process on the parent holds the parent's slots (the frame's
process list does not say which slice a process runs on), never another GPU's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from gpuci_tui.core.config.file import ConfigError
from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config
from gpuci_tui.core.config.slot_shapes import UNPLACED, HostTopology, MigDevice, use_topology
from gpuci_tui.core.docker.agentspec import build_spec, slot_gpus
from gpuci_tui.core.docker.mapping import device_requests
from gpuci_tui.core.docker.slot_devices import watched_gpus
from gpuci_tui.core.engine.gpu_admission import (
    FOREIGN_PROCESS,
    GateKind,
    GpuAdmission,
    slot_reading,
)
from gpuci_tui.core.engine.gpu_health import HealthBook, assess
from gpuci_tui.core.gpu.check import check_host_gpus
from gpuci_tui.core.gpu_readings import (
    GpuFrame,
    GpuHealthReading,
    GpuHostInfo,
    GpuProcess,
    GpuSample,
    XidEvent,
)
from gpuci_tui.core.host.supervision.slot_layout import prepare_shapes

MIGS = tuple(
    MigDevice(
        parent, index, f"MIG-{parent}{index}000000-0000-5000-8000-000000000000", "1g.10gb", 9856
    )
    for parent in (0, 1)
    for index in (0, 1, 2)
)
TOPOLOGY = HostTopology(
    gpus=(0, 1, 2, 3),
    uuids={i: f"GPU-{i}" for i in range(4)},
    nvlinks=frozenset({(0, 3), (1, 2)}),
    mig_mode=frozenset({0, 1}),
    mig=MIGS,
)


@pytest.fixture(autouse=True)
def topology() -> Iterator[None]:
    use_topology(lambda: TOPOLOGY)
    yield
    use_topology(None)


def config(**agents: object) -> Config:
    base = AgentsConfig(count=2, image="acme/agent:1", name_prefix="gpuhost")
    return Config(
        azure=AzureConfig(url="https://dev.azure.com/acme", pool="gpu"),
        agents=replace(base, **agents),  # type: ignore[arg-type]
    )


def test_a_mig_slot_gets_its_mig_uuid_and_watches_its_parent() -> None:
    mig = config(gpus="mig", count=4)
    assert [slot_gpus(mig, s) for s in range(4)] == [(m.uuid,) for m in MIGS[:4]]
    assert [watched_gpus(mig, s) for s in range(4)] == [("0",), ("0",), ("0",), ("1",)]
    spec = build_spec(mig, 3)
    assert spec.gpus == (MIGS[3].uuid,)
    (request,) = device_requests(spec.gpus)
    assert request.device_ids == [MIGS[3].uuid]


def test_a_two_gpu_slot_gets_both_nvlink_gpus() -> None:
    pairs = config(gpus="per-agent", gpus_per_slot=2, count=2)
    assert [slot_gpus(pairs, s) for s in range(2)] == [("GPU-0", "GPU-3"), ("GPU-1", "GPU-2")]
    assert watched_gpus(pairs, 1) == ("1", "2")
    # Past what fits: unplaced, never "no GPU" (a GPU job must not run without one).
    more = config(gpus="per-agent", gpus_per_slot=2, count=3)
    assert slot_gpus(more, 0) == ("GPU-0", "GPU-3")
    assert slot_gpus(more, 2) == (UNPLACED,)


def frame(procs0: tuple[GpuProcess, ...] = (), xid0: int | None = None) -> GpuFrame:
    health0 = GpuHealthReading(xid_events=(XidEvent(xid0, 1.0),) if xid0 else ())
    gpus = (
        GpuSample(0, "H100", uuid="GPU-0", health=health0, processes=procs0),
        GpuSample(1, "H100", uuid="GPU-1", health=GpuHealthReading()),
    )
    return GpuFrame(1.0, GpuHostInfo(available=True, gpu_count=2), gpus)


def gates(cfg: Config, now: GpuFrame) -> list[GateKind]:
    result = assess(HealthBook(), now)
    return [
        slot_reading(watched_gpus(cfg, s), now, result.book, GpuAdmission(), lambda p: False).kind
        for s in range(cfg.agents.count)
    ]


def test_admission_and_health_per_slice_and_parent() -> None:
    mig = config(gpus="mig", count=6)
    assert gates(mig, frame()) == [GateKind.OPEN] * 6
    # A fault on parent 0 quarantines its three slices, not parent 1's.
    assert gates(mig, frame(xid0=79)) == [GateKind.QUARANTINED] * 3 + [GateKind.OPEN] * 3
    # A foreign process on parent 0 holds its slices (which slice it is on is not in the frame).
    foreign = (GpuProcess(4242, 2048.0, "python"),)
    assert gates(mig, frame(procs0=foreign)) == [GateKind.HELD] * 3 + [GateKind.OPEN] * 3
    result = assess(HealthBook(), frame(procs0=foreign))
    reading = slot_reading(
        watched_gpus(mig, 0), frame(procs0=foreign), result.book, GpuAdmission(), lambda p: False
    )
    assert reading.code == FOREIGN_PROCESS


def test_an_unplaced_slot_is_held() -> None:
    more = config(gpus="mig", count=7)
    assert gates(more, frame())[6] is GateKind.HELD


class TopologySampler:
    """A sampler that knows its host's topology (as the demo's synthetic one does)."""

    def topology(self) -> HostTopology:
        return TOPOLOGY


def test_a_shape_that_does_not_fit_stops_the_start_with_how_to_fix_it() -> None:
    sampler = TopologySampler()
    prepare_shapes(config(gpus="mig", count=6), sampler)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as info:
        prepare_shapes(config(gpus="mig", count=7), sampler)  # type: ignore[arg-type]
    assert str(info.value) == (
        "agents.gpus: count is 7, but this host has 6 MIG devices; lower count to 6"
    )
    with pytest.raises(ConfigError, match="2 slots of 4 GPUs need 8 GPUs, but there are 4 GPUs"):
        prepare_shapes(config(gpus="per-agent", gpus_per_slot=4), sampler)  # type: ignore[arg-type]
    # Without a GPU sampler there is no topology to shape slots with.
    with pytest.raises(ConfigError, match="no GPU of this host has any"):
        prepare_shapes(config(gpus="mig"), None)


def test_check_config_counts_every_gpu_of_a_shaped_group() -> None:
    # A host process on GPU 3 is worth a warning when a slot of two GPUs may hold it.
    frame = GpuFrame(
        1.0,
        GpuHostInfo(available=True, gpu_count=4),
        tuple(
            GpuSample(
                i, "H100", uuid=f"GPU-{i}", processes=(GpuProcess(7, 100.0, "python"),) * (i == 3)
            )
            for i in range(4)
        ),
    )
    errors, warnings = check_host_gpus(config(gpus="per-agent", gpus_per_slot=2), frame)
    assert errors == [] and [w.split(" is in use")[0] for w in warnings] == ["GPU 3"]
    assert check_host_gpus(config(gpus="per-agent"), frame) == ([], [])
    assert check_host_gpus(config(gpus="mig"), frame) == ([], [])
