"""Issue 28: every job that ran on our agents has exactly one history row, whatever happened.

A seeded world against the simulated organisation and runtime: jobs keep coming,
the daemon is killed (SIGKILL: its supervisor and recorder vanish mid-step, nothing
is drained; the next one rebuilds its state from the runtime's containers, the pool
and the history file) and restarted at random points, busy agents are killed under
their jobs (abandoned), while the daemon runs and while it is away. At the end the
history holds one row per finished request of our agents, exactly: none missing,
none twice, none without its request, none of another instance.

On virtual time (tests/core/virtual_env.py): a seed's world runs the same whatever
the machine's load, so each seed replays the same interleaving.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from gpuci_tui.core.docker.agentspec import instance_id
from gpuci_tui.core.host.observers.job_recorder import JobRecorder
from gpuci_tui.core.host.observers.pool_scope import lane_names
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.store.history import JobHistory, JobQuery
from tests.core.supervisor_env import PAT, StaticTokens, wait_until
from tests.core.virtual_env import VirtualEnv, on_virtual_time

#: Seconds a finished request waits for its container's end before its own row: short
#: here (the world's agents end at once), `history_book.GRACE` in the daemon.
GRACE = 1.0
#: A row waiting this long for its request asks for a read of our agents' finished
#: requests, at most every `FULL_READ_GAP` s: short here, the recorder's own in the daemon.
PENDING_READ = 0.5
FULL_READ_GAP = 1.0


@dataclass
class Daemon:
    """One incarnation of the daemon: its supervisor and recorder, on the shared history."""

    supervisor: Supervisor
    recorder: JobRecorder
    task: asyncio.Task[None]

    def kill(self) -> None:
        """SIGKILL: everything in flight is dropped, nothing drained or stopped."""
        self.task.cancel()
        for task in list(self.recorder._tasks):
            task.cancel()


def start(env: VirtualEnv, history: JobHistory) -> Daemon:
    config = env.config
    instance = instance_id(config)
    recorder = JobRecorder(
        history,
        env.api,
        instance,
        pool_id=lambda: sup.pool.pool_id,
        holds=lane_names(config.agents.name_prefix),
        grace=GRACE,
        pending_read=PENDING_READ,
        full_read_gap=FULL_READ_GAP,
        clock=env.clock,
    )
    sup = Supervisor(
        config,
        api=env.api,
        runtime=env.runtime,
        tokens=StaticTokens(),
        on_job_finished=recorder,
        clock=env.clock,
    )
    sup.pool.on_read.append(recorder.pool_read)
    return Daemon(sup, recorder, asyncio.get_running_loop().create_task(sup.run()))


def ours(env: VirtualEnv) -> set[int]:
    """The finished requests of our agents, by the organisation's own records."""
    prefix = env.config.agents.name_prefix
    holds = lane_names(prefix)
    return {
        j.request_id
        for j in env.org.jobs(env.pool_id)
        if j.result is not None and j.agent_name is not None and holds(j.agent_name)
    }


def busy_containers(env: VirtualEnv) -> list[str]:
    busy = {a.name for a in env.org.agents(env.pool_id) if a.assigned_request is not None}
    return [
        c.id for c in env.runtime.list_containers({}) if c.status == "running" and c.name in busy
    ]


async def finished_more(env: VirtualEnv, count: int, queued: list[int]) -> None:
    """Wait until ``count`` more requests of ours finished (as many as are left to run)."""
    left = sum(1 for r in queued if env.org.job(r).result is None)
    goal = len(ours(env)) + min(count, left)
    await wait_until(lambda: len(ours(env)) >= goal, timeout=20, what=f"{count} more jobs")


@pytest.mark.parametrize("seed", [1, 2, 6, 15])  # 6, 15: a job abandoned by a lane's new start
@on_virtual_time
async def test_history_rows_are_the_finished_requests_of_our_agents_exactly(
    env: VirtualEnv, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    env.config = replace(
        env.config, agents=replace(env.config.agents, count=2, standby=True, name_prefix="hr")
    )
    # Another instance's agent in the same pool runs a job too: never ours.
    other, key = env.org.register("gpu", "elsewhere-0", PAT, capabilities={"elsewhere": "1"})
    foreign = env.org.queue_job(env.pool_id, demands=("elsewhere",))
    assert env.org.poll(other, key, timeout=1) is not None
    env.org.finish(foreign, "succeeded", key)
    history = JobHistory(tmp_path / "history.sqlite3")
    queued: list[int] = []

    def feed(n: int) -> None:
        for _ in range(n):
            queued.append(env.org.queue_job(env.pool_id, duration=rng.uniform(0.05, 0.4)))

    daemon = start(env, history)
    try:
        for _ in range(4):
            feed(rng.randint(4, 8))
            await finished_more(env, rng.randint(1, 4), queued)
            if rng.random() < 0.6 and (busy := busy_containers(env)):
                env.runtime.kill(rng.choice(busy), 137)  # an agent killed under its job
            await finished_more(env, rng.randint(0, 2), queued)
            daemon.kill()
            feed(rng.randint(0, 3))
            if rng.random() < 0.5 and (busy := busy_containers(env)):
                env.runtime.kill(rng.choice(busy), 137)  # while no daemon watches
            if rng.random() < 0.5:  # down until every job then running has ended
                await wait_until(lambda: not busy_containers(env), timeout=20, what="idle")
            daemon = start(env, JobHistory(tmp_path / "history.sqlite3"))
        await wait_until(
            lambda: all(env.org.job(r).result is not None for r in queued),
            timeout=60,
            what="every queued job finished",
        )
        expected = ours(env)
        final = daemon.recorder.history

        def rows() -> list[int | None]:
            return [r.request_id for r in final.query(JobQuery(limit=None))]

        def complete() -> bool:
            results = {r.request_id: r.result for r in final.query(JobQuery(limit=None))}
            return all(results.get(r) == env.org.job(r).result for r in expected)

        await wait_until(complete, timeout=30, what="every job's row with its result")
    finally:
        daemon.supervisor.request_stop()
        await asyncio.wait_for(daemon.task, 10)
        await daemon.recorder.drain()
        env.runtime.close()
    got = rows()
    assert None not in got, "a row without its request"
    assert [r for r, n in Counter(got).items() if n > 1] == [], "a job with two rows"
    assert set(got) == expected and foreign not in got
