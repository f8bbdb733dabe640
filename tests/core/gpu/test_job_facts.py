"""Per-job GPU facts: throttle seconds by reason, ECC errors, peak temperature, energy.

First the folding rules on hand-made frames, then a whole job through the real pynvml
on the fake libnvidia-ml.so.1: a job that throttles, an ECC error during the job and
the energy counter growing with a known power.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuci_tui.core.gpu.accounting import JobAccountant, JobKey
from gpuci_tui.core.gpu.job_facts import JobFacts, summary
from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler
from gpuci_tui.core.gpu_readings import (
    GpuFrame,
    GpuHealthReading,
    GpuHostInfo,
    GpuProcess,
    GpuSample,
)
from tests.core.nvml_helpers import NvmlState

HOST = GpuHostInfo(available=True, gpu_count=2)
CID = "a" * 64
JOB = JobKey("inst", 0, "gpuhost-0")
OWNERS = {CID: JOB}
POWER_CAP, SW_THERMAL, HW_THERMAL, IDLE = 0x4, 0x20, 0x40, 0x1


def gpu(
    index: int,
    *,
    mask: int | None = 0,
    temp: float | None = 50.0,
    ecc: tuple[int | None, int | None] = (0, 0),
    proc: bool = True,
    health: bool = True,
) -> GpuSample:
    reading = GpuHealthReading(
        clocks_event_mask=mask, ecc_corrected_volatile=ecc[0], ecc_uncorrected_volatile=ecc[1]
    )
    procs = (GpuProcess(10 + index, 100.0, "python", CID, None),) if proc else ()
    return GpuSample(
        index,
        f"GPU{index}",
        f"GPU-{index}",
        temperature_c=temp,
        processes=procs,
        health=reading if health else None,
    )


def fold(acc: JobAccountant, t: float, *gpus: GpuSample) -> None:
    assert acc.observe(GpuFrame(taken_at=t, host=HOST, gpus=gpus), OWNERS)


def test_throttle_seconds_by_reason_summed_over_the_jobs_gpus() -> None:
    acc = JobAccountant(min_interval=1.0)
    masks = [(0, IDLE), (0, SW_THERMAL), (POWER_CAP, SW_THERMAL | HW_THERMAL), (POWER_CAP, 0)]
    for t, (m0, m1) in enumerate(masks, start=10):
        fold(acc, t, gpu(0, mask=m0, temp=60.0 + t), gpu(1, mask=m1, temp=40.0))
    facts = acc.finish(JOB).facts
    # A frame's reasons count for the second since the previous frame; the first counts none.
    assert facts.throttle_s == (("sw_power_cap", 2.0), ("sw_thermal", 2.0), ("hw_thermal", 1.0))
    assert facts.peak_temp_c == 73.0
    assert (facts.ecc_corrected, facts.ecc_uncorrected) == (0, 0)


def test_a_stalled_sampler_does_not_turn_one_reading_into_minutes() -> None:
    acc = JobAccountant(min_interval=1.0)
    fold(acc, 10, gpu(0, mask=0))
    fold(acc, 70, gpu(0, mask=SW_THERMAL))  # a minute without a frame
    fold(acc, 71, gpu(0, mask=SW_THERMAL))
    assert acc.finish(JOB).facts.throttle_s == (("sw_thermal", 3.0),)  # 2 s cap + 1 s


def test_facts_keep_accruing_between_the_jobs_processes() -> None:
    """The GPU is the slot's while the job's container runs: a step without a process counts."""
    acc = JobAccountant(min_interval=1.0)
    fold(acc, 10, gpu(0, ecc=(0, 0)))
    fold(acc, 11, gpu(0, proc=False, mask=SW_THERMAL, temp=88.0, ecc=(3, 1)))
    fold(acc, 12, gpu(0, ecc=(3, 1)))
    facts = acc.finish(JOB).facts
    assert (facts.throttle_s, facts.peak_temp_c) == ((("sw_thermal", 1.0),), 88.0)
    assert (facts.ecc_corrected, facts.ecc_uncorrected) == (3, 1)


def test_unknown_is_none_never_zero() -> None:
    acc = JobAccountant(min_interval=1.0)
    for t in (10, 11):
        fold(acc, t, gpu(0, mask=None, temp=None, ecc=(None, None)))
    assert acc.finish(JOB).facts == JobFacts()
    for t in (10, 11):
        fold(acc, t, gpu(0, health=False))
    facts = acc.finish(JOB).facts
    assert (facts.throttle_s, facts.ecc_uncorrected, facts.peak_temp_c) == (None, None, 50.0)
    # One GPU whose counter does not answer makes the job's count unknown, not smaller.
    for t in (10, 11):
        fold(acc, t, gpu(0, ecc=(1, 1)), gpu(1, ecc=(None, t)))
    facts = acc.finish(JOB).facts
    assert (facts.ecc_corrected, facts.ecc_uncorrected) == (None, 1)
    assert acc.finish(JOB).facts == JobFacts()  # never seen


def test_a_counter_that_went_down_is_a_driver_reload_not_a_negative_count() -> None:
    acc = JobAccountant(min_interval=1.0)
    for t, ecc in ((10, (5, 2)), (11, (0, 0)), (12, (1, 0))):
        fold(acc, t, gpu(0, ecc=ecc))
    facts = acc.finish(JOB).facts
    assert (facts.ecc_corrected, facts.ecc_uncorrected) == (None, None)


def test_summary_is_compact_and_leaves_out_what_is_unknown_or_zero() -> None:
    throttle = (("sw_power_cap", 0.2), ("sw_thermal", 12.4))
    assert (
        summary(412_345.0, throttle, (0, 0), (79,), 83.4)
        == "412 kJ · thermal 12 s · Xid 79 · 83 °C"
    )
    assert summary(None, None, (None, 2), (), None) == "ECC 2 uncorrected"
    assert summary(2.5e6, (), (1, None), (48, 79), None) == "2.5 MJ · ECC 1 corrected · Xid 48,79"
    assert summary(None, None, (None, None), (), None) == ""


# ------------------------------------------------------------------ through the fake NVML

GPU_LINE = "gpu NVIDIA_H100_80GB_HBM3 GPU-00000000-0000-0000-0000-000000000001 99 30 13290 81559 {temp} 300000 700000 0"


@pytest.mark.nvml
def test_a_job_through_the_fake_nvml(
    make_sampler: Callable[..., NvmlSampler], nvml_state: NvmlState, tmp_path: Path
) -> None:
    """300 W for 10 s is 3,000 J; 4 s thermal, 2 s power cap; one uncorrectable ECC error."""
    proc_root = tmp_path / "proc"
    (proc_root / "4242").mkdir(parents=True)
    (proc_root / "4242" / "cgroup").write_text(f"0::/system.slice/docker-{CID}.scope\n")
    now = [1000.0]
    sampler = make_sampler(proc_root=proc_root, clock=lambda: now[0])
    acc = JobAccountant(min_interval=1.0, proc_root=proc_root)
    # (clock, clocks-event reasons, temperature, uncorrectable ECC, corrected ECC)
    steps = [(1000, IDLE, 40, 0, 4), (1001, POWER_CAP, 60, 0, 4), (1002, POWER_CAP, 71, 0, 4)]
    steps += [(t, SW_THERMAL | POWER_CAP * (t == 1004), 87, 1, 6) for t in range(1003, 1007)]
    steps += [(t, 0, 80, 1, 6) for t in range(1007, 1011)]
    for t, mask, temp, unc, corr in steps:
        now[0] = float(t)
        nvml_state.write(
            f"{GPU_LINE.format(temp=temp)}\nclock {t}\nenergy 0 5000000 1000\n"
            f"clocks 0 {mask}\necc 0 {unc} {unc} {corr} {corr}\nproc 0 4242 13290 98 30\n"
        )
        assert acc.observe(sampler.sample(), OWNERS)
    stats = acc.finish(JOB)
    assert stats.samples == 11
    assert stats.energy_j == 3000.0
    assert stats.facts.throttle_s == (("sw_power_cap", 3.0), ("sw_thermal", 4.0))
    assert (stats.facts.ecc_uncorrected, stats.facts.ecc_corrected) == (1, 2)
    assert stats.facts.peak_temp_c == 87.0


@pytest.mark.nvml
def test_corrected_ecc_is_read_only_for_a_gpu_that_runs_a_process(
    make_sampler: Callable[..., NvmlSampler], nvml_state: NvmlState
) -> None:
    """Like the energy counter, only a job's facts use it: an idle sample costs no more."""
    line = GPU_LINE.format(temp=40)
    nvml_state.write(f"{line}\n{line.replace('01 99', '02 99')}\necc 0 0 0 7 7\necc 1 0 0 7 7\n"
                     "proc 1 4242 13290\n")  # fmt: skip
    idle, busy = make_sampler().sample().gpus
    assert idle.health is not None and busy.health is not None
    assert (idle.health.ecc_corrected_volatile, busy.health.ecc_corrected_volatile) == (None, 7)
    assert idle.health.clocks_event_mask == 0 and idle.health.ecc_uncorrected_volatile == 0
