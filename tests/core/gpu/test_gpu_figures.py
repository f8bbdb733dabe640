"""A busy slot's live GPU figures: accountant → supervisor snapshot → JSON (the control socket)."""

from __future__ import annotations

import asyncio
import json

from gpuci_tui.core.engine.snapshots import SnapshotMeta, supervisor_snapshot
from gpuci_tui.core.gpu.accounting import JobAccountant, JobKey, key_of
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo, GpuProcess, GpuSample, JobGpuNow
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.models import HealthSnapshot, SlotState
from gpuci_tui.core.wire import snapshot_from_dict, to_dict
from tests.core.lifecycle_helpers import ACTIVE, BUSY, NOW, STANDBY, engine
from tests.core.supervisor_env import Env, StaticTokens, wait_until

META = SnapshotMeta(
    org_url="https://dev.azure.com/o", pool="gpu", instance="inst", mode="daemon", pid=1,
    started_at=1.0,
)  # fmt: skip
GIB = 1024**3


def frame(
    at: float, memory: float | None, util: float | None, *, available: bool = True
) -> GpuFrame:
    process = GpuProcess(pid=1, used_memory_mib=memory, container_id="ca", sm_util_pct=util)
    gpu = GpuSample(
        index=0, name="A100", uuid="GPU-0", utilization_pct=util, memory_used_mib=memory,
        memory_total_mib=81920, processes=(process,),
    )  # fmt: skip
    gpus = (gpu,) if available else ()
    return GpuFrame(taken_at=at, host=GpuHostInfo(available, gpu_count=len(gpus)), gpus=gpus)


def test_the_accountant_keeps_the_latest_frame_per_job_and_drops_stale_ones() -> None:
    accountant = JobAccountant(min_interval=1.0)
    key = JobKey("inst", 0, "h-0")
    accountant.observe(frame(10.0, 1000.0, 40.0), {"ca": key})
    accountant.observe(frame(11.0, 3000.0, 90.0), {"ca": key})
    assert accountant.current(key) == JobGpuNow(3000.0, 90.0, 11.0)
    # The statistics still see both frames: the current figure is not the peak.
    stats = accountant.live(key)
    assert stats is not None and stats.mean_util_pct == 65.0
    accountant.observe(frame(12.0, None, None, available=False), {"ca": key})
    assert accountant.current(key) is None
    accountant.observe(frame(13.0, 500.0, 10.0), {"ca": key})
    accountant.clear_current()
    assert accountant.current(key) is None


def test_a_busy_slot_carries_its_jobs_figures_through_json() -> None:
    asked: list[tuple[int, str]] = []

    def gpu_now(slot: int, agent: str) -> JobGpuNow | None:
        asked.append((slot, agent))
        return JobGpuNow(memory_mib=7.75 * 1024, util_pct=93.0, at=NOW)

    state = engine(BUSY, STANDBY)
    snap = supervisor_snapshot(
        state, META, NOW, azure=HealthSnapshot(), azure_requests=0, gpus_of=lambda n: ("0",),
        gpu_now=gpu_now,
    )  # fmt: skip
    (slot,) = snap.slots
    assert slot.state is SlotState.BUSY and asked == [(0, slot.name)]
    assert slot.gpu_memory_bytes == round(7.75 * GIB) and slot.gpu_util_percent == 93.0
    assert snap.gpu_accounting
    # What the control socket does: JSON out, JSON in.
    wire = json.loads(json.dumps(to_dict(snap)))
    assert wire["slots"][0]["gpu_memory_bytes"] == round(7.75 * GIB)
    assert snapshot_from_dict(wire) == snap


def test_idle_slots_and_unmeasured_supervisors_have_no_figures() -> None:
    idle = supervisor_snapshot(
        engine(ACTIVE, STANDBY), META, NOW, azure=HealthSnapshot(), azure_requests=0,
        gpus_of=lambda n: (), gpu_now=lambda s, a: JobGpuNow(1.0, 1.0, NOW),
    )  # fmt: skip
    assert idle.slots[0].gpu_memory_bytes is None and idle.slots[0].gpu_util_percent is None
    unmeasured = supervisor_snapshot(
        engine(BUSY, STANDBY), META, NOW, azure=HealthSnapshot(), azure_requests=0,
        gpus_of=lambda n: (),
    )  # fmt: skip
    assert not unmeasured.gpu_accounting and unmeasured.slots[0].gpu_memory_bytes is None
    # An older daemon sends neither key: the console reads "not measured".
    old = to_dict(unmeasured)
    del old["gpu_accounting"]
    for item in old["slots"]:
        del item["gpu_memory_bytes"], item["gpu_util_percent"]
    assert snapshot_from_dict(old) == unmeasured


async def test_the_supervisor_asks_by_its_instance_and_the_running_agent(env: Env) -> None:
    """End to end on the simulated organisation: the key is the daemon's accounting key."""
    asked: set[JobKey] = set()

    def gpu_use(key: JobKey) -> JobGpuNow | None:
        asked.add(key)
        return JobGpuNow(2048.0, 55.0, 0.0)

    sup = Supervisor(
        env.config, api=env.api, runtime=env.runtime, tokens=StaticTokens(), gpu_use=gpu_use
    )
    task = asyncio.create_task(sup.run())
    try:
        await wait_until(lambda: all(s.state == SlotState.IDLE for s in sup.snapshot().slots))
        assert all(s.gpu_memory_bytes is None for s in sup.snapshot().slots)
        env.org.queue_job(env.pool_id, pipeline="train", duration=30.0)
        await wait_until(
            lambda: any(s.state == SlotState.BUSY for s in sup.snapshot().slots), what="a job"
        )
        busy = next(s for s in sup.snapshot().slots if s.state == SlotState.BUSY)
        assert busy.gpu_memory_bytes == 2 * GIB and busy.gpu_util_percent == 55.0
        assert key_of(sup.instance, busy.slot, busy.name) in asked
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)
