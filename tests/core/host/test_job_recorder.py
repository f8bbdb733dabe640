"""The finished-job history row: result and times from Azure DevOps, GPU use from the accountant."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from gpuci_tui.core.engine.lifecycle import Lane
from gpuci_tui.core.engine.steps import JobEnded
from gpuci_tui.core.gpu.accounting import JobAccountant, container_owners, key_of
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo, GpuProcess, GpuSample
from gpuci_tui.core.host.gpus.watch import GpuWatch
from gpuci_tui.core.host.observers.job_recorder import (
    JobRecorder,
    history_seed,
    job_record,
    seconds_between,
)
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.models import (
    AgentSnapshot,
    ExitInfo,
    ImageUsed,
    JobInfo,
    SlotSnapshot,
    SlotState,
    SupervisorSnapshot,
)
from gpuci_tui.core.protocols import JobRequest
from gpuci_tui.core.store.history import JobHistory, JobQuery
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.container import sim_image_id
from gpuci_tui.sim.gpu_synthetic import FixtureSampler
from gpuci_tui.sim.org import SimOrg
from tests.core.supervisor_env import PAT, Env, StaticTokens, wait_until

ENDED = JobEnded(
    slot=1,
    lane=Lane.B,
    agent="h-1-b",
    container_id="c" * 64,
    job=JobInfo(request_id=890001, pipeline="train - main", run="20261123.1"),
    started_at=100.0,
    exit=ExitInfo(code=0, at=160.0, reason="job finished", took_job=True),
    agent_id=7,
)


def test_the_row_names_the_image_the_job_ran_on() -> None:
    image = ImageUsed("reg:5000/agent:1", "sha256:" + "e" * 64, "reg:5000/agent@sha256:" + "f" * 64)
    row = job_record("inst", replace(ENDED, image=image), None, None)
    assert (row.image, row.image_id, row.repo_digest) == (
        image.reference,
        image.image_id,
        image.repo_digest,
    )
    unknown = job_record("inst", ENDED, None, None)
    assert (unknown.image, unknown.image_id, unknown.repo_digest) == (None, None, None)


def test_times_between_azure_timestamps() -> None:
    assert seconds_between("2026-11-23T10:00:00.5Z", "2026-11-23T10:00:12.75Z") == 12.25
    assert seconds_between(None, "2026-11-23T10:00:12Z") is None
    assert seconds_between("garbage", "2026-11-23T10:00:12Z") is None


def test_the_row_prefers_what_the_server_says_of_the_same_job() -> None:
    request = JobRequest(
        request_id=890001,
        queue_time="2026-11-23T10:00:00Z",
        assign_time="2026-11-23T10:00:04Z",
        receive_time="2026-11-23T10:00:05Z",
        finish_time="2026-11-23T10:00:50Z",
        result="failed",
        definition_name="train - main",
        owner_name="20261123.1",
    )
    row = job_record("inst", ENDED, request, None)
    assert (row.result, row.queue_wait_s, row.duration_s) == ("failed", 4.0, 45.0)
    assert row.failed and row.agent == "h-1-b" and row.slot == 1
    other = replace(request, request_id=5)  # the agent's last job is an older one
    row = job_record("inst", ENDED, other, None)
    assert row.result is None and row.request_id == 890001 and row.pipeline == "train - main"
    unseen = replace(ENDED, job=None)  # started and ended between two reads of the pool
    assert job_record("inst", unseen, request, None).request_id == 890001


async def test_a_finished_job_is_written_with_its_result_and_queue_wait(env: Env) -> None:
    history = JobHistory(":memory:")
    sup: Supervisor | None = None
    recorder = JobRecorder(history, env.api, "inst", pool_id=lambda: env.pool_id)
    sup = Supervisor(
        env.config,
        api=env.api,
        runtime=env.runtime,
        tokens=StaticTokens(),
        on_job_finished=recorder,
    )
    task = asyncio.create_task(sup.run())
    try:
        await wait_until(lambda: all(s.state == SlotState.IDLE for s in sup.snapshot().slots))
        job = env.org.queue_job(env.pool_id, pipeline="eval - nightly", duration=0.2)
        fail = env.org.queue_job(env.pool_id, pipeline="eval - nightly", duration=0.1, kind="fail")
        await wait_until(lambda: len(history.query(JobQuery())) == 2, what="two history rows")
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)
    rows = {r.request_id: r for r in history.query(JobQuery())}
    assert rows[job].result == "succeeded" and rows[fail].result == "failed"
    assert rows[job].pipeline == "eval - nightly" and rows[job].queue_wait_s is not None
    assert rows[fail].failed and not rows[job].failed
    # Every row says which image the job ran on: the configured reference and its id.
    image = env.config.agents.image
    assert {(r.image, r.image_id) for r in rows.values()} == {(image, sim_image_id(image))}
    assert all(r.repo_digest is None for r in rows.values()), "built here: no registry digest"


def frame(at: float, container: str, memory: float, util: float) -> GpuFrame:
    process = GpuProcess(pid=4242, used_memory_mib=memory, container_id=container, sm_util_pct=util)
    gpu = GpuSample(
        index=0, name="A100", uuid="GPU-0", utilization_pct=util, memory_used_mib=memory,
        memory_total_mib=81920, processes=(process,),
    )  # fmt: skip
    return GpuFrame(taken_at=at, host=GpuHostInfo(True, gpu_count=1), gpus=(gpu,))


async def test_gpu_use_of_a_container_is_the_job_of_its_agent() -> None:
    container = "d" * 64
    snapshot = SupervisorSnapshot(
        taken_at=0.0,
        org_url="u",
        pool="p",
        instance="inst",
        desired_count=2,
        slots=(
            SlotSnapshot(
                slot=1,
                name="h-1-b",
                state=SlotState.BUSY,
                container_id=container,
                agents=(
                    AgentSnapshot(lane="a", name="h-1", phase="ready", container_id="e" * 64),
                    AgentSnapshot(lane="b", name="h-1-b", phase="busy", container_id=container),
                ),
            ),
        ),
    )
    owners = container_owners(snapshot)
    assert owners[container] == key_of("inst", 1, "h-1-b") and len(owners) == 2
    accountant = JobAccountant(min_interval=1.0)
    sampler = FixtureSampler([frame(10.0, container, 1000, 50), frame(11.0, container, 3000, 90)])
    watch = GpuWatch(sampler, accountant, lambda: owners, interval=1.0)
    await watch.sample_once()
    await watch.sample_once()
    recorder = JobRecorder(JobHistory(":memory:"), SimPoolApi(SimOrg(), PAT), "inst",
                           pool_id=lambda: None, accountant=accountant)  # fmt: skip
    recorder(replace(ENDED, agent="h-1-b", agent_id=None))
    await recorder.drain()
    (row,) = recorder.history.query(JobQuery())
    assert row.peak_gpu_memory_mib == 3000 and row.peak_util_pct == 90 and row.gpus == (0,)
    assert accountant.jobs() == ()


class CountingApi:
    """An AgentPoolApi stand-in that counts `last_job` reads."""

    def __init__(self) -> None:
        self.reads = 0

    def last_job(self, pool_id: int, agent_id: int) -> JobRequest | None:
        self.reads += 1
        return None


async def test_the_read_of_a_finished_job_waits_out_the_organisations_backoff() -> None:
    now = [1000.0]
    blocked = [1030.0]
    api = CountingApi()
    recorder = JobRecorder(
        JobHistory(":memory:"), api, "inst", pool_id=lambda: 42,  # type: ignore[arg-type]
        blocked_until=lambda: blocked[0], clock=lambda: now[0],
    )  # fmt: skip
    recorder(ENDED)
    await asyncio.sleep(0)  # the task starts and finds the organisation backing off
    assert api.reads == 0 and recorder.history.query(JobQuery()) == []
    blocked[0] = 0.0  # the observer read the pool again: healthy
    await wait_until(lambda: len(recorder.history.query(JobQuery())) == 1, what="the row")
    assert api.reads == 1


async def test_rows_waiting_for_a_backoff_are_written_at_shutdown_without_the_read() -> None:
    api = CountingApi()
    recorder = JobRecorder(
        JobHistory(":memory:"), api, "inst", pool_id=lambda: 42,  # type: ignore[arg-type]
        blocked_until=lambda: 10.0**12,
    )  # fmt: skip
    recorder(ENDED)
    await asyncio.sleep(0)
    await recorder.drain()
    (row,) = recorder.history.query(JobQuery())
    assert row.request_id == 890001 and row.result is None and api.reads == 0


def test_the_row_keeps_the_agents_startup_and_a_restart_reads_it_back() -> None:
    """`history_seed`: job lengths as the organisation timed them, and the start-ups."""
    history = JobHistory(":memory:")
    timed = JobRequest(
        request_id=890001,
        result="succeeded",
        assign_time="2026-11-23T10:00:00Z",
        finish_time="2026-11-23T10:00:03Z",
    )
    history.add(job_record("inst", replace(ENDED, startup_s=9.2), timed, None))
    # Unread (the organisation was refusing): its "duration" is the container's life.
    history.add(job_record("inst", replace(ENDED, startup_s=8.8), None, None))
    history.add(job_record("inst", ENDED, timed, None))  # an adopted agent: not measured
    history.add(job_record("other", replace(ENDED, startup_s=1.0), timed, None))
    rows = history.query(JobQuery(instance="inst"))
    assert sorted(r.startup_s or 0.0 for r in rows) == [0.0, 8.8, 9.2]
    seed = history_seed(history, "inst")
    assert sorted(seed.jobs) == [3.0, 3.0] and sorted(seed.startups) == [8.8, 9.2]
