"""JobAccountant's folding rules on hand-made frames (the NVML and Docker path: test_accounting_docker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuci_tui.core.gpu.accounting import (
    ENERGY_COUNTER_RESET,
    ENERGY_NOT_REPORTED,
    ENERGY_NOT_SEEN,
    ENERGY_ONE_SAMPLE,
    ENERGY_SHARED,
    JobAccountant,
    JobKey,
    container_owners,
    foreign_processes,
    owner_of,
)
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo, GpuProcess, GpuSample
from gpuci_tui.core.models import JobInfo, SlotSnapshot, SlotState, SupervisorSnapshot

HOST = GpuHostInfo(available=True, gpu_count=2)
CID_A, CID_B, CID_X = "a" * 64, "b" * 64, "c" * 64
JOB_A = JobKey("inst", 0, "gpuhost-0", 101)
JOB_B = JobKey("inst", 1, "gpuhost-1", 102)
OWNERS = {CID_A: JOB_A, CID_B: JOB_B}


def proc(pid: int, cid: str | None, mem: float | None, sm: float | None = None) -> GpuProcess:
    return GpuProcess(pid, mem, "python", cid, None, sm, None if sm is None else 1.0)


def gpu(index: int, *procs: GpuProcess, util: float | None = 50.0, energy: int | None = 0):
    return GpuSample(
        index, f"GPU{index}", f"GPU-{index}", util, 0, 40_000, processes=procs, energy_mj=energy
    )


def frame(t: float, *gpus: GpuSample) -> GpuFrame:
    return GpuFrame(taken_at=t, host=HOST, gpus=gpus)


def test_exclusive_job_gets_memory_util_and_energy() -> None:
    acc = JobAccountant(min_interval=1.0)
    assert acc.live(JOB_A) is None
    for t, mem, sm, energy in ((10, 1000, 40, 5_000_000), (11, 3000, 80, 5_250_000)):
        assert acc.observe(frame(t, gpu(0, proc(1, CID_A, mem, sm), energy=energy)), OWNERS)
    live = acc.live(JOB_A)
    assert live is not None and live.samples == 2
    stats = acc.finish(JOB_A)
    assert stats.gpu_indexes == (0,)
    assert stats.gpu_uuids == ("GPU-0",)
    assert (stats.first_seen, stats.last_seen, stats.samples) == (10, 11, 2)
    assert stats.peak_memory_mib == 3000
    assert stats.mean_util_pct == 60.0
    assert stats.peak_util_pct == 80.0
    assert stats.energy_j == 250.0
    assert stats.energy_note == ""
    assert not stats.shared
    assert acc.jobs() == ()  # finished jobs are forgotten
    assert acc.finish(JOB_A).energy_note == ENERGY_NOT_SEEN


def test_foreign_and_host_processes_never_count_and_spoil_energy() -> None:
    acc = JobAccountant(min_interval=0)
    host_proc = proc(7, None, 9000, 90)
    foreign = proc(8, CID_X, 5000, 90)
    for t in (1, 2, 3):
        acc.observe(
            frame(
                t,
                gpu(0, proc(1, CID_A, 100, 10), energy=t * 1000),
                gpu(1, proc(2, CID_B, 200, 20), host_proc, foreign, energy=t * 1000),
            ),
            OWNERS,
        )
    a, b = acc.finish(JOB_A), acc.finish(JOB_B)
    assert (a.peak_memory_mib, a.mean_util_pct, a.energy_j) == (100, 10.0, 2.0)
    assert (b.peak_memory_mib, b.mean_util_pct) == (200, 20.0)
    assert b.gpu_indexes == (1,)
    assert b.energy_j is None
    assert b.energy_note == ENERGY_SHARED
    assert b.shared


def test_foreign_processes_lists_host_and_other_containers() -> None:
    f = frame(
        1,
        gpu(0, proc(1, CID_A, 100)),
        gpu(1, proc(2, CID_B, 200), proc(7, None, 9000), proc(8, CID_X, 5000)),
    )
    foreign = foreign_processes(f, OWNERS, proc_root=Path("/nonexistent"))
    assert list(foreign) == [1]
    assert [p.pid for p in foreign[1]] == [7, 8]


def test_frames_faster_than_the_interval_are_skipped() -> None:
    acc = JobAccountant(min_interval=1.0)
    folded = [
        acc.observe(frame(t, gpu(0, proc(1, CID_A, 100, 50))), OWNERS)
        for t in (100.0, 100.3, 100.95, 101.2, 102.0)
    ]
    # 100.95 is within the 10 % jitter slack of a 1 s interval.
    assert folded == [True, False, True, False, True]
    assert acc.finish(JOB_A).samples == 3


def test_no_gpu_frame_is_not_folded() -> None:
    acc = JobAccountant()
    assert not acc.observe(GpuFrame(taken_at=1, host=GpuHostInfo(available=False)), OWNERS)


def test_gpu_utilisation_used_only_when_the_job_is_alone() -> None:
    acc = JobAccountant(min_interval=0)
    # No per-process figure (driver without it): alone → the GPU's own figure.
    acc.observe(frame(1, gpu(0, proc(1, CID_A, 100), util=70.0)), OWNERS)
    # Shared with a host process in this sample → no value at all.
    acc.observe(frame(2, gpu(0, proc(1, CID_A, 100), proc(9, None, 1), util=99.0)), OWNERS)
    stats = acc.finish(JOB_A)
    assert (stats.mean_util_pct, stats.peak_util_pct, stats.samples) == (70.0, 70.0, 2)


def test_util_over_two_gpus_and_memory_summed() -> None:
    acc = JobAccountant(min_interval=0)
    acc.observe(
        frame(
            1,
            gpu(0, proc(1, CID_A, 1000, 60), proc(2, CID_A, 500, 60)),
            gpu(1, proc(3, CID_A, 250, 20)),
        ),
        OWNERS,
    )
    stats = acc.finish(JOB_A)
    # GPU 0: 60 + 60 capped at 100; GPU 1: 20 → mean over the job's GPUs 60.
    assert stats.mean_util_pct == 60.0
    assert stats.peak_memory_mib == 1750
    assert stats.gpu_indexes == (0, 1)


@pytest.mark.parametrize(
    ("energies", "note"),
    [
        ((5000, None, 7000), ENERGY_NOT_REPORTED),
        ((5000, 100), ENERGY_COUNTER_RESET),
        ((5000,), ENERGY_ONE_SAMPLE),
    ],
)
def test_energy_none_with_the_reason(energies, note) -> None:
    acc = JobAccountant(min_interval=0)
    for t, energy in enumerate(energies):
        acc.observe(frame(t, gpu(0, proc(1, CID_A, 1), energy=energy)), OWNERS)
    stats = acc.finish(JOB_A)
    assert (stats.energy_j, stats.energy_note) == (None, note)


def test_other_process_after_the_job_left_the_gpu_is_not_sharing() -> None:
    acc = JobAccountant(min_interval=0)
    acc.observe(frame(1, gpu(0, proc(1, CID_A, 1), energy=1000)), OWNERS)
    acc.observe(frame(2, gpu(0, proc(1, CID_A, 1), energy=3000)), OWNERS)
    acc.observe(frame(3, gpu(0, proc(2, CID_B, 1), energy=9000)), OWNERS)
    a = acc.finish(JOB_A)
    assert (a.energy_j, a.shared) == (2.0, False)
    # ...but if the job comes back to that GPU, the other process was inside its window.
    acc.observe(frame(4, gpu(0, proc(1, CID_A, 1), energy=1000)), OWNERS)
    acc.observe(frame(5, gpu(0, proc(2, CID_B, 1), energy=2000)), OWNERS)
    acc.observe(frame(6, gpu(0, proc(1, CID_A, 1), energy=3000)), OWNERS)
    assert acc.finish(JOB_A).energy_note == ENERGY_SHARED


def test_unmapped_process_is_resolved_through_proc(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "cgroup").write_text(f"12:memory:/docker/{CID_A}\n")
    lone = proc(42, None, 64)
    assert owner_of(lone, OWNERS, tmp_path) == JOB_A
    assert owner_of(proc(43, None, 64), OWNERS, tmp_path) is None
    acc = JobAccountant(proc_root=tmp_path)
    acc.observe(frame(1, gpu(0, lone)), OWNERS)
    assert acc.finish(JOB_A).peak_memory_mib == 64


def test_discard_forgets_a_job() -> None:
    acc = JobAccountant()
    acc.observe(frame(1, gpu(0, proc(1, CID_A, 1))), OWNERS)
    assert acc.jobs() == (JOB_A,)
    acc.discard(JOB_A)
    assert acc.jobs() == ()
    assert acc.live(JOB_A) is None


def test_container_owners_of_a_snapshot() -> None:
    """Every container with an id, idle or busy; keyed by agent (the job is found again by it)."""
    snap = SupervisorSnapshot(
        taken_at=0,
        org_url="https://dev.azure.com/o",
        pool="gpu",
        instance="inst",
        desired_count=3,
        slots=(
            SlotSnapshot(0, "gpuhost-0", SlotState.BUSY, CID_A, job=JobInfo(101)),
            SlotSnapshot(1, "gpuhost-1", SlotState.IDLE, CID_B),
            SlotSnapshot(2, "gpuhost-2", SlotState.EMPTY),
        ),
    )
    assert container_owners(snap) == {
        CID_A: JobKey("inst", 0, "gpuhost-0"),
        CID_B: JobKey("inst", 1, "gpuhost-1"),
    }
