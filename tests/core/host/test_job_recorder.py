"""The finished-job history row: result and times from Azure DevOps, GPU use from the accountant."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

from gpuci_tui.core.engine.lifecycle import Lane, PoolView
from gpuci_tui.core.engine.steps import JobEnded
from gpuci_tui.core.gpu.accounting import JobAccountant, container_owners, key_of
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo, GpuProcess, GpuSample
from gpuci_tui.core.host.gpus.watch import GpuWatch
from gpuci_tui.core.host.observers.history_rows import (
    exit_record,
    history_seed,
    ran_job,
    seconds_between,
    with_request,
)
from gpuci_tui.core.host.observers.job_match import Finished, match
from gpuci_tui.core.host.observers.job_recorder import JobRecorder
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
from gpuci_tui.core.protocols import Agent, JobRequest
from gpuci_tui.core.store.history import JobHistory, JobQuery
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.container import sim_image_id
from gpuci_tui.sim.gpu_synthetic import FixtureSampler
from gpuci_tui.sim.org import SimOrg
from tests.core.supervisor_env import PAT, StaticTokens, wait_until
from tests.core.virtual_env import VirtualEnv, on_virtual_time

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
    row = exit_record("inst", replace(ENDED, image=image), None)
    assert (row.image, row.image_id, row.repo_digest) == (
        image.reference,
        image.image_id,
        image.repo_digest,
    )
    unknown = exit_record("inst", ENDED, None)
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
    row = with_request(exit_record("inst", ENDED, None), request)
    assert (row.result, row.queue_wait_s, row.duration_s) == ("failed", 4.0, 45.0)
    assert row.failed and row.agent == "h-1-b" and row.slot == 1
    # The agent's last job is an older one: not this job's.
    assert match(ran_job(ENDED), [Finished("h-1-b", replace(request, request_id=5))]) is None
    # Started and ended between two reads: its request by the agent and the times.
    started = datetime(2026, 11, 23, 10, 0, tzinfo=UTC).timestamp()
    unseen = replace(ENDED, job=None, started_at=started, exit=replace(ENDED.exit, at=started + 60))
    assert match(ran_job(unseen), [Finished("h-1-b", request)]) is not None


@on_virtual_time
async def test_a_finished_job_is_written_with_its_result_and_queue_wait(env: VirtualEnv) -> None:
    """On virtual time (tests/core/virtual_env.py)."""
    history = JobHistory(":memory:")
    sup: Supervisor | None = None
    recorder = JobRecorder(history, env.api, "inst", pool_id=lambda: env.pool_id, clock=env.clock)
    sup = Supervisor(
        env.config,
        api=env.api,
        runtime=env.runtime,
        tokens=StaticTokens(),
        on_job_finished=recorder,
        clock=env.clock,
    )
    sup.pool.on_read.append(recorder.pool_read)
    task = asyncio.create_task(sup.run())
    try:
        await wait_until(lambda: all(s.state == SlotState.IDLE for s in sup.snapshot().slots))
        job = env.org.queue_job(env.pool_id, pipeline="eval - nightly", duration=0.2)
        fail = env.org.queue_job(env.pool_id, pipeline="eval - nightly", duration=0.1, kind="fail")
        # Each row is written when its container ends and completed in place by a later read
        # of the agents (their last finished request): wait for both results.
        await wait_until(
            lambda: sum(1 for r in history.query(JobQuery()) if r.result) == 2,
            what="two history rows with their results",
        )
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
    """An AgentPoolApi stand-in that counts reads of our agents' finished requests."""

    def __init__(self, *found: JobRequest) -> None:
        self.reads = 0
        self.found = list(found)

    def finished_jobs(self, pool_id: int, agent_ids: list[int], count: int) -> list[JobRequest]:
        self.reads += 1
        return [r for r in self.found if r.reserved_agent_id in agent_ids]


def view(at: float, *agents: Agent) -> PoolView:
    return PoolView(pool_id=42, began_at=at, agents=agents)


async def test_a_job_costs_no_read_of_its_own_and_its_view_comes_with_the_list() -> None:
    """The row is written at once; the list's ``lastCompletedRequest`` completes it. Only
    the first read and one after a failure read our agents' finished requests."""
    api = CountingApi()
    recorder = JobRecorder(
        JobHistory(":memory:"), api, "inst", pool_id=lambda: 42,  # type: ignore[arg-type]
        holds=lambda name: name.startswith("h-"),
    )  # fmt: skip
    recorder.pool_read(view(1.0, Agent(7, "h-1-b")), recovered=False)
    await wait_until(lambda: api.reads == 1, what="the first reconciliation")
    recorder(ENDED)
    await wait_until(lambda: len(recorder.history.query(JobQuery())) == 1, what="the row")
    (row,) = recorder.history.query(JobQuery())
    assert row.request_id == 890001 and row.result is None  # written at once, view to come
    done = JobRequest(890001, assign_time="2026-11-23T10:00:04Z", result="failed",
                      finish_time="2026-11-23T10:00:50Z")  # fmt: skip
    listed = Agent(7, "h-1-b", last_completed_request=done)
    foreign = Agent(8, "other-1", last_completed_request=replace(done, request_id=5))
    for at in (2.0, 3.0, 4.0):
        recorder.pool_read(view(at, listed, foreign), recovered=False)
    await recorder.drain()
    (row,) = recorder.history.query(JobQuery())
    assert (row.request_id, row.result, api.reads) == (890001, "failed", 1)
    recorder.pool_read(view(5.0, listed), recovered=True)  # the organisation is back
    await wait_until(lambda: api.reads == 2, what="the reconciliation after a failure")


async def test_a_job_whose_end_the_list_skipped_brings_one_read_of_them_all() -> None:
    """Seen running, then gone from a read with neither its end nor its view (its agent
    ended it and finished another between two reads): after ``pending_read`` one read of
    our agents' finished requests writes its row, and only one."""
    base = datetime(2026, 11, 23, 10, 1, tzinfo=UTC).timestamp()
    clock = [base]
    lost = JobRequest(890001, assign_time="2026-11-23T10:00:04Z", result="abandoned",
                      finish_time="2026-11-23T10:01:10Z", reserved_agent_id=7)  # fmt: skip
    api = CountingApi()  # it still runs at the first read
    recorder = JobRecorder(
        JobHistory(":memory:"), api, "inst", pool_id=lambda: 42,  # type: ignore[arg-type]
        clock=lambda: clock[0], grace=0.0, pending_read=5.0, full_read_gap=10.0,
    )  # fmt: skip
    running = Agent(7, "h-1", assigned_request=replace(lost, result=None, finish_time=None))
    recorder.pool_read(view(base, running), recovered=False)
    await wait_until(lambda: api.reads == 1, what="the first reconciliation")
    newer = replace(lost, request_id=890002, result="succeeded",
                    finish_time="2026-11-23T10:01:10.5Z")  # fmt: skip
    for after in (11.0, 12.0, 15.0, 17.0):
        clock[0] = base + after
        recorder.pool_read(view(base + after, Agent(7, "h-1", last_completed_request=newer)), False)
        await recorder.drain()
        if after == 15.0:
            assert api.reads == 1  # waiting 4 s: not yet
            api.found = [lost, newer]
    assert api.reads == 2
    rows = {r.request_id: r.result for r in recorder.history.query(JobQuery())}
    assert rows == {890001: "abandoned", 890002: "succeeded"}


async def test_the_rows_still_waiting_are_reported_at_shutdown() -> None:
    reported: list[int | None] = []
    recorder = JobRecorder(
        JobHistory(":memory:"), CountingApi(), "inst", pool_id=lambda: 42,  # type: ignore[arg-type]
        on_record=lambda r: reported.append(r.request_id),
    )  # fmt: skip
    recorder(ENDED)
    await recorder.drain()
    (row,) = recorder.history.query(JobQuery())
    assert row.request_id == 890001 and row.result is None and reported == [890001]


def test_the_row_keeps_the_agents_startup_and_a_restart_reads_it_back() -> None:
    """`history_seed`: job lengths as the organisation timed them, and the start-ups."""
    history = JobHistory(":memory:")
    timed = JobRequest(
        request_id=890001,
        result="succeeded",
        assign_time="2026-11-23T10:00:00Z",
        finish_time="2026-11-23T10:00:03Z",
    )

    def row(request_id: int, startup: float | None, view: bool, instance: str = "inst") -> None:
        ended = replace(ENDED, startup_s=startup, job=replace(ENDED.job, request_id=request_id))
        record = exit_record(instance, ended, None)
        history.add(with_request(record, replace(timed, request_id=request_id)) if view else record)

    row(1, 9.2, True)
    row(2, 8.8, False)  # Unread (the organisation was refusing): its "duration" is the container's
    row(3, None, True)  # an adopted agent: not measured
    row(4, 1.0, True, "other")
    rows = history.query(JobQuery(instance="inst"))
    assert sorted(r.startup_s or 0.0 for r in rows) == [0.0, 8.8, 9.2]
    seed = history_seed(history, "inst")
    assert sorted(seed.jobs) == [3.0, 3.0] and sorted(seed.startups) == [8.8, 9.2]
