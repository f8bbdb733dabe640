"""Hot standby end to end: the in-process supervisor, the simulated organisation and agents
that take time to register and to get a session (like the real agent, only shorter).

On virtual time (tests/core/virtual_env.py): the seconds below are the loop's, so a
bound like "within 2.5 s" holds however busy the machine is.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from gpuci_tui.core.command_types import Drain, Restart, Resume
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.sim.records import AgentStartup
from tests.core.supervisor_env import Env, wait_until
from tests.core.virtual_env import VirtualEnv, on_virtual_time, running

STARTUP = AgentStartup(register=0.3, session=0.2)


def standby(env: VirtualEnv) -> VirtualEnv:
    """``env`` with a standby per slot and agents that take 0.5 s to come up."""
    env.org.startup = STARTUP
    config = replace(env.config, agents=replace(env.config.agents, standby=True))
    # A slow poll: nothing below may depend on it (handovers are event-driven).
    config = replace(config, supervisor=replace(config.supervisor, poll_interval=10.0))
    return replace(env, config=config)


def steady(sup: Supervisor) -> bool:
    return all(s.state == SlotState.IDLE and s.standby == "ready" for s in sup.snapshot().slots)


def jobs_per_slot_never_overlap(env: Env, jobs: list[int]) -> None:
    by_slot: dict[str, list[tuple[float, float]]] = {}
    for job in (env.org.job(j) for j in jobs):
        assert job.agent_name and job.assign_time and job.finish_time
        slot = job.agent_name.removesuffix("-b")
        by_slot.setdefault(slot, []).append((job.assign_time, job.finish_time))
    for slot, spans in by_slot.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end, f"two jobs at once on slot {slot}"


@on_virtual_time
async def test_each_slot_gets_an_active_agent_and_a_disabled_standby(env: VirtualEnv) -> None:
    standby_env = standby(env)
    async with running(standby_env.supervisor()) as sup:
        await _each_slot_gets_an_active_agent_and_a_disabled_standby(standby_env, sup)


async def _each_slot_gets_an_active_agent_and_a_disabled_standby(
    standby_env: Env, sup: Supervisor
) -> None:
    await wait_until(lambda: steady(sup), timeout=20, what="active + ready standby per slot")
    names = sorted(standby_env.running())
    assert names == ["t-0", "t-0-b", "t-1", "t-1-b"]
    for slot in sup.snapshot().slots:
        roles = sorted(a.role for a in slot.agents)
        assert roles == ["active", "standby"]
        enabled = [a for a in slot.agents if a.agent_enabled]
        assert len(enabled) == 1 and enabled[0].name == slot.name
    # The pool's own counts come with its next read (the lanes' lines came first).
    await wait_until(lambda: sup.snapshot().pool_summary.disabled == 2, what="the pool's read")
    assert sup.snapshot().pool_summary.standby == 2


@on_virtual_time
async def test_the_standby_takes_the_next_job_without_waiting_for_a_start(env: VirtualEnv) -> None:
    standby_env = standby(env)
    async with running(standby_env.supervisor()) as sup:
        await _the_standby_takes_the_next_job_without_waiting_for_a_start(standby_env, sup)


async def _the_standby_takes_the_next_job_without_waiting_for_a_start(
    standby_env: Env, sup: Supervisor
) -> None:
    await wait_until(lambda: steady(sup), timeout=20, what="steady state")
    jobs = [standby_env.org.queue_job(standby_env.pool_id, duration=0.8) for _ in range(6)]
    await wait_until(
        lambda: all(standby_env.org.job(j).result for j in jobs), timeout=30, what="six jobs"
    )
    records = [standby_env.org.job(j) for j in jobs]
    assert {r.result for r in records} == {"succeeded"} and all(
        r.assign_count == 1 for r in records
    )
    jobs_per_slot_never_overlap(standby_env, jobs)
    # The second job of a slot starts right after the first one ends: no 0.5 s start-up.
    by_slot: dict[str, list[float]] = {}
    for r in sorted(records, key=lambda r: r.assign_time or 0):
        assert r.agent_name is not None
        by_slot.setdefault(r.agent_name.removesuffix("-b"), []).append(r.assign_time or 0)
    firsts = [r for r in records if r.assign_time == min(by_slot[r.agent_name.removesuffix("-b")])]
    for first in firsts:
        after = [
            r for r in records
            if r.agent_name and r.agent_name.removesuffix("-b") == first.agent_name.removesuffix("-b")
            and r.assign_time and first.finish_time and r.assign_time >= first.finish_time
        ]  # fmt: skip
        assert after, "every slot ran more than one job"
        gap = min(r.assign_time or 0 for r in after) - (first.finish_time or 0)
        assert gap < 0.45, f"handover took {gap:.2f} s (start-up alone is 0.5 s)"


@on_virtual_time
async def test_drain_stops_the_standby_now_and_lets_the_busy_one_finish(env: VirtualEnv) -> None:
    standby_env = standby(env)
    async with running(standby_env.supervisor()) as sup:
        await _drain_stops_the_standby_now_and_lets_the_busy_one_finish(standby_env, sup)


async def _drain_stops_the_standby_now_and_lets_the_busy_one_finish(
    standby_env: Env, sup: Supervisor
) -> None:
    await wait_until(lambda: steady(sup), timeout=20, what="steady state")
    job = standby_env.org.queue_job(standby_env.pool_id, duration=1.5)
    await wait_until(lambda: standby_env.org.job(job).state == "running", what="the job running")
    busy_name = standby_env.org.job(job).agent_name
    await sup.execute(Drain(None))
    await wait_until(
        lambda: standby_env.running() == [busy_name], timeout=10, what="only the busy agent left"
    )
    await wait_until(lambda: standby_env.org.job(job).result is not None, timeout=10)
    assert standby_env.org.job(job).result == "succeeded"
    await wait_until(
        lambda: [s.state for s in sup.snapshot().slots] == [SlotState.DRAINED] * 2, timeout=10
    )
    assert standby_env.running() == []


@on_virtual_time
async def test_resumed_agents_are_enabled_at_once_not_after_a_poll_interval(
    env: VirtualEnv,
) -> None:
    standby_env = standby(env)
    async with running(standby_env.supervisor()) as sup:
        await _resumed_agents_are_enabled_at_once_not_after_a_poll_interval(standby_env, sup)


async def _resumed_agents_are_enabled_at_once_not_after_a_poll_interval(
    standby_env: Env, sup: Supervisor
) -> None:
    await wait_until(lambda: steady(sup), timeout=20, what="steady state")
    await sup.execute(Drain(None))
    await wait_until(lambda: standby_env.running() == [], timeout=10, what="drained")
    loop = asyncio.get_running_loop()
    resumed = loop.time()
    await sup.execute(Resume(None))

    def serving(slot: int) -> bool:
        agents = [standby_env.org.find_agent(f"t-{slot}{suffix}") for suffix in ("", "-b")]
        return any(a is not None and a.status == "online" and a.enabled for a in agents)

    # The poll interval is 10 s: an agent that waited for a read to be enabled would
    # stay disabled that long. Start-up alone is 0.5 s here.
    await wait_until(lambda: serving(0) and serving(1), timeout=8, what="an enabled agent per slot")
    assert loop.time() - resumed < 2.5


@on_virtual_time
async def test_restart_keeps_each_slot_taking_jobs(env: VirtualEnv) -> None:
    standby_env = standby(env)
    async with running(standby_env.supervisor()) as sup:
        await _restart_keeps_each_slot_taking_jobs(standby_env, sup)


async def _restart_keeps_each_slot_taking_jobs(standby_env: Env, sup: Supervisor) -> None:
    await wait_until(lambda: steady(sup), timeout=20, what="steady state")
    before = {a.container_id for s in sup.snapshot().slots for a in s.agents}
    await sup.execute(Restart(None))
    # While the standbys are replaced, the active agents keep serving.
    job = standby_env.org.queue_job(standby_env.pool_id, duration=0.2)
    await wait_until(lambda: standby_env.org.job(job).result is not None, timeout=5)
    await wait_until(
        lambda: (
            steady(sup)
            and not ({a.container_id for s in sup.snapshot().slots for a in s.agents} & before)
        ),
        timeout=30,
        what="every agent replaced",
    )


@on_virtual_time
async def test_a_restarted_supervisor_adopts_both_agents_of_every_slot(env: VirtualEnv) -> None:
    standby_env = standby(env)
    first = standby_env.supervisor()
    task = asyncio.create_task(first.run())
    await wait_until(lambda: steady(first), timeout=20, what="steady state")
    ids = sorted(c.id for c in standby_env.runtime.list_containers({}))
    first.request_stop()
    await asyncio.wait_for(task, 10)
    second = standby_env.supervisor()
    task = asyncio.create_task(second.run())
    try:
        await wait_until(lambda: steady(second), timeout=10, what="adopted steady state")
        assert sorted(c.id for c in standby_env.runtime.list_containers({})) == ids
        assert len(standby_env.runtime.history()) == len(ids), "nothing new was started"
    finally:
        second.request_stop()
        await asyncio.wait_for(task, 10)


def test_config_keeps_the_poll_slow(env: Env) -> None:
    config = standby(env).config  # type: ignore[arg-type]
    assert config.supervisor.poll_interval == 10.0
    assert isinstance(config.supervisor, SupervisorConfig)
