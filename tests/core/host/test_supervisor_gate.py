"""The supervisor with the start gate, against the simulated organisation (in-process agents).

The simulated image carries the gate label (as the emulator image does), so the
daemon starts its agents with AZP_GO_FILE: each registers, waits for the go,
and only then opens its session. A new lane name is registered while jobs wait;
a go that cannot be written stops the container and never lets it take a job.

On virtual time (tests/core/virtual_env.py): the agents are tasks on the test's loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from gpuci_tui.cli.render import render_status
from gpuci_tui.core.docker.errors import ContainerOperationError
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.sim.org import SimOrg
from tests.core.supervisor_env import StaticTokens, wait_until
from tests.core.virtual_env import VirtualEnv, on_virtual_time
from tests.core.virtual_runtime import VirtualRuntime


def overlaps(org: SimOrg, pool_id: int) -> list[str]:
    """Pairs of jobs that ran at the same time on one slot's agents (``t-N``, ``t-N-b``…)."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for job in org.jobs(pool_id):
        if job.agent_name and job.assign_time is not None:
            slot = job.agent_name.split("-")[1]
            spans.setdefault(slot, []).append((job.assign_time, job.finish_time or 1e18))
    found = []
    for slot, runs in spans.items():
        runs.sort()
        found += [
            f"slot {slot}"
            for (_, end), (start, _) in zip(runs, runs[1:], strict=False)
            if start < end
        ]
    return found


@on_virtual_time
async def test_new_lanes_register_while_jobs_wait_and_never_two_jobs_on_a_slot(
    env: VirtualEnv,
) -> None:
    """A cold pool with a queue: every lane of the depth is registered at once."""
    jobs = [env.org.queue_job(env.pool_id, duration=0.6) for _ in range(12)]
    sup = env.supervisor(standby=2)
    task = asyncio.create_task(sup.run())
    registered_while_queued = 0
    try:

        def check() -> bool:
            nonlocal registered_while_queued
            queued = sum(1 for j in jobs if env.org.job(j).state == "queued")
            if queued:
                registered_while_queued = max(
                    registered_while_queued, len(env.org.agents(env.pool_id))
                )
            return all(env.org.job(j).result == "succeeded" for j in jobs)

        await wait_until(check, timeout=30, what="the queue served")
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)
    assert registered_while_queued == 6, "3 lanes per slot registered while jobs waited"
    assert overlaps(env.org, env.pool_id) == []
    assert sorted(a.name for a in env.org.agents(env.pool_id)) == [
        "t-0", "t-0-b", "t-0-c", "t-1", "t-1-b", "t-1-c",
    ]  # fmt: skip


@on_virtual_time
async def test_an_image_without_the_gate_runs_as_before_and_says_so(env: VirtualEnv) -> None:
    """No label: no AZP_GO_FILE, no go; the old rules (tables: test_planner.py)."""
    assert env.loop is not None
    runtime = VirtualRuntime(env.org, env.loop, destroy_delay=0.05, start_gate=False)
    jobs = [env.org.queue_job(env.pool_id, duration=0.3) for _ in range(6)]
    config = replace(env.config, agents=replace(env.config.agents, standby=1))
    sup = Supervisor(config, api=env.api, runtime=runtime, tokens=StaticTokens(), clock=env.clock)
    task = asyncio.create_task(sup.run())
    try:
        await wait_until(
            lambda: all(env.org.job(j).result == "succeeded" for j in jobs),
            timeout=30,
            what="the queue served",
        )
        lines = render_status(sup.snapshot()).splitlines()
        assert any(line.endswith("start gate: no") for line in lines), lines
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)
        runtime.close()
    assert all("AZP_GO_FILE" not in c.spec.environment for c in runtime.history())
    assert not any("waiting for the go" in line for c in runtime.history() for line in c.tail(50))
    assert overlaps(env.org, env.pool_id) == []


class NoGoRuntime(VirtualRuntime):
    """An engine that refuses to write into containers (the go file never arrives)."""

    def put_file(self, container_id: str, path: str, content: str) -> None:
        raise ContainerOperationError(f"Docker could not write {path}: read-only file system")


@on_virtual_time
async def test_a_go_that_cannot_be_written_stops_the_container_and_it_never_takes_a_job(
    env: VirtualEnv,
) -> None:
    assert env.loop is not None
    runtime = NoGoRuntime(env.org, env.loop, destroy_delay=0.05)
    job = env.org.queue_job(env.pool_id, duration=0.2)
    sup = Supervisor(
        env.config, api=env.api, runtime=runtime, tokens=StaticTokens(), clock=env.clock
    )
    task = asyncio.create_task(sup.run())
    online: set[str] = set()
    try:

        def parked() -> bool:
            online.update(a.name for a in env.org.agents(env.pool_id) if a.online)
            return all(slot.parked for slot in sup.state.slots)

        await wait_until(parked, timeout=30, what="both slots parked")
        assert "could not give the go" in sup.state.slots[0].message
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)
        runtime.close()
    assert online == set(), "no agent ever had a session"
    assert env.org.job(job).state == "queued"
    exits = {c.exit_code for c in runtime.history()}
    # SIGTERM (143) at the gate; virtual time never lets the stop timeout run out first.
    assert exits == {143}, "each was stopped at its gate (registered, offline)"
