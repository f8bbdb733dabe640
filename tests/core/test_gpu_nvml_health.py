"""GPU health through the real pynvml and the fake libnvidia-ml.so.1.

What the sampler must say is what a real H100 says (shared/gpu-h100): v2 memory
without the driver's reserved 480 MiB, ECC counters, remapped rows and clocks-event
reasons that answer, Xid events from an event set whose wait times out when
nothing happened, and energy (3.4 ms a call) read only for GPUs that run a process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.gpu.health_reader import slowdown_names
from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler, is_lost
from gpuci_tui.core.gpu_readings import GpuFrame
from tests.waiting import wait_until

pytestmark = pytest.mark.nvml

H100_READINGS = Path(__file__).resolve().parents[3] / "shared" / "gpu-h100" / "nvml-readings.json"
# An idle H100 as NVML describes it: 0 used (v2), 480 MiB reserved, ECC on and clean.
H100 = "gpu NVIDIA_H100_80GB_HBM3 GPU-93cb0da6-b089-f8ad-8e61-ca5990b5283c 0 0 0 81559 38 70800 700000 0"
L4 = "gpu NVIDIA_L4 GPU-bbbbbbbb-0000-0000-0000-000000000000 5 1 600 23034 34 16000 72000 0"
IDLE = f"{H100}\nreserved 0 480\nclocks 0 1\n"

Make = Callable[..., NvmlSampler]


def wait_for(
    sample: Callable[[], GpuFrame], pred: Callable[[GpuFrame], Any], timeout: float
) -> Any:
    """Sample until ``pred`` holds for a frame (the Xid watch delivers from its own thread)."""
    last: list[GpuFrame] = []

    def holds() -> Any:
        last[:] = [sample()]
        return pred(last[0])

    return wait_until(holds, timeout, lambda: f"the frame; the last was {last[:1]}")


def test_memory_is_v2_used_without_the_drivers_reserved_memory(
    make_sampler: Make, nvml_state
) -> None:
    nvml_state.write(IDLE)
    gpu = make_sampler().sample().gpus[0]
    assert gpu.memory_used_mib == 0.0  # what nvidia-smi shows; v1 would say 480
    assert gpu.memory_total_mib == 81559.0


def test_a_driver_without_v2_falls_back_to_v1(make_sampler: Make, nvml_state) -> None:
    nvml_state.write(IDLE + "fail nvmlDeviceGetMemoryInfo_v2 13\n")  # FUNCTION_NOT_FOUND
    assert make_sampler().sample().gpus[0].memory_used_mib == 480.0


def test_the_h100_readings_match(make_sampler: Make, nvml_state) -> None:
    """The fake says what the real H100 said for the same calls."""
    if not H100_READINGS.exists():
        pytest.fail(f"{H100_READINGS} is missing (the project's shared/ readings)")
    real = json.loads(H100_READINGS.read_text())["nvml_calls"]
    nvml_state.write(IDLE)
    gpu = make_sampler().sample().gpus[0]
    assert gpu.memory_used_mib == real["memory_v2"]["value"]["used"] / 2**20
    assert gpu.health is not None
    assert gpu.health.ecc_uncorrected_volatile == real["ecc_dbe_volatile"]["value"] == 0
    corr, unc, pending, failed = real["remapped_rows"]["value"]
    assert (gpu.health.remapped_rows_pending, gpu.health.remapped_rows_failed) == (
        bool(pending),
        bool(failed),
    )
    # Idle (bit 0x1) is not a slowdown.
    assert slowdown_names(real["clocks_event_reasons"]["value"]) == ()
    assert gpu.health.slowdown_reasons == ()


def test_health_counters_are_read_each_sample(make_sampler: Make, nvml_state) -> None:
    sampler = make_sampler()
    nvml_state.write(IDLE)
    assert sampler.sample().gpus[0].health.ecc_uncorrected_volatile == 0  # type: ignore[union-attr]
    nvml_state.write(f"{H100}\necc 0 3 5\nremap 0 0 1 1 0\nclocks 0 {0x40 | 0x80 | 0x4}\n")
    health = sampler.sample().gpus[0].health
    assert health is not None
    assert (health.ecc_uncorrected_volatile, health.ecc_uncorrected_aggregate) == (3, 5)
    assert (health.remapped_rows_pending, health.remapped_rows_failed) == (True, False)
    # The software power cap (0x4) is normal at full load; thermal and power brake are not.
    assert health.slowdown_reasons == ("hw_thermal", "hw_power_brake")


def test_calls_the_board_does_not_support_are_none(make_sampler: Make, nvml_state) -> None:
    nvml_state.write(f"{L4}\necc 0 E3 E3\nremap 0 E3 E3 E3 E3\nclocks 0 E13\n")
    health = make_sampler().sample().gpus[0].health
    assert health is not None
    assert health.ecc_uncorrected_volatile is None
    assert health.remapped_rows_pending is None and health.remapped_rows_failed is None
    assert health.slowdown_reasons == ()


@pytest.mark.parametrize(("code", "lost", "reset"), [(1, True, False), (2, False, True)])
def test_a_lost_gpu_or_one_that_needs_a_reset_says_so(
    make_sampler: Make, nvml_state, code: int, lost: bool, reset: bool
) -> None:
    nvml_state.write(f"{L4.removesuffix(' 0')} {code}\n")
    gpu = make_sampler().sample().gpus[0]
    assert is_lost(gpu)
    assert gpu.health is not None
    assert (gpu.health.lost, gpu.health.reset_required) == (lost, reset)


def test_xid_events_reach_the_sample_once(make_sampler: Make, nvml_state) -> None:
    nvml_state.write(f"{IDLE}{L4}\nxid 1 1 13\n")  # before registration: never delivered
    sampler = make_sampler()
    first = sampler.sample()
    assert all(g.health is not None and g.health.xid_events == () for g in first.gpus)
    nvml_state.write(f"{IDLE}{L4}\nxid 1 1 13\nxid 1 2 79\nevent 0 3 2 0\nxid 0 4 48\n")

    seen: dict[int, list[int]] = {0: [], 1: []}

    def collect(frame: GpuFrame) -> bool:
        for gpu in frame.gpus:
            assert gpu.health is not None
            seen[gpu.index] += [e.xid for e in gpu.health.xid_events]
        return seen == {0: [48], 1: [79]}

    wait_for(sampler.sample, collect, 5.0)
    # A later event: events come in order, so once it is here nothing earlier came twice.
    nvml_state.write(f"{IDLE}{L4}\nxid 1 1 13\nxid 1 2 79\nevent 0 3 2 0\nxid 0 4 48\nxid 1 5 31\n")
    seen = {0: [], 1: []}
    wait_for(sampler.sample, lambda frame: collect(frame) or seen[1] == [31], 5.0)
    assert seen == {0: [], 1: [31]}


def test_waiting_for_events_never_stalls_a_sample(make_sampler: Make, nvml_state) -> None:
    nvml_state.write(IDLE + L4 + "\n")
    sampler = make_sampler()
    sampler.sample()  # starts the watch: its thread now waits 200 ms at a time
    costs = []
    for _ in range(10):
        start = time.perf_counter()
        sampler.sample()
        costs.append(time.perf_counter() - start)
    # Generous for a loaded 2-core machine; a sample that waited on the event set would
    # take a whole wait (200 ms) every time.
    assert sorted(costs)[len(costs) // 2] < 0.1, costs


def test_no_event_support_is_no_xid_and_no_error(make_sampler: Make, nvml_state, caplog) -> None:
    nvml_state.write(IDLE + "fail nvmlEventSetCreate 3\n")
    with caplog.at_level("INFO"):
        sampler = make_sampler()
        gpu = sampler.sample().gpus[0]
    assert gpu.health is not None and gpu.health.xid_events == ()
    assert "Xid events are not watched" in caplog.text
    assert sampler.sample().gpus[0].memory_used_mib == 0.0


def test_close_stops_the_event_thread(make_sampler: Make, nvml_state) -> None:
    import threading

    nvml_state.write(IDLE)
    sampler = make_sampler()
    sampler.sample()
    assert any(t.name == "nvml-xid-watch" for t in threading.enumerate())
    start = time.monotonic()
    sampler.close()
    assert time.monotonic() - start < 1.5
    assert not any(t.name == "nvml-xid-watch" for t in threading.enumerate())
    # Sampling again starts NVML and the watch afresh.
    assert sampler.sample().gpus[0].health is not None


def test_energy_is_read_only_for_a_gpu_that_runs_a_process(make_sampler: Make, nvml_state) -> None:
    """3.4 ms a call on an H100: an idle GPU's counter is not worth it (only jobs use it)."""
    nvml_state.write(f"{IDLE}{L4}\nenergy 0 2325625\nenergy 1 700000\nproc 1 4242 600\n")
    idle, busy = make_sampler().sample().gpus
    assert idle.energy_mj is None
    assert busy.energy_mj == 700_000
