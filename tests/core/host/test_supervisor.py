"""Supervisor logic against the simulated organisation and the in-process runtime.

On virtual time (tests/core/virtual_env.py): the agents are tasks on the test's loop,
and its seconds (a 4 s job, the back-off, the poll) cost no real time.
"""

from __future__ import annotations

import asyncio

from gpuci_tui.core.command_types import Drain, Pause, Restart, Resume, Scale, Unpause
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.models import SlotState
from tests.core.supervisor_env import BROKEN, Env, wait_until
from tests.core.virtual_env import on_virtual_time


def states(sup: Supervisor) -> list[SlotState]:
    return [s.state for s in sup.snapshot().slots]


@on_virtual_time(supervised=True)
async def test_fills_every_slot_and_agents_come_online(running: tuple[Env, Supervisor]) -> None:
    env, sup = running
    await wait_until(lambda: states(sup) == [SlotState.IDLE] * 2, what="two idle agents")
    assert sorted(env.running()) == ["t-0", "t-1"]
    snap = sup.snapshot()
    assert all(s.agent_status == "online" and s.agent_enabled for s in snap.slots)


@on_virtual_time(supervised=True)
async def test_finished_job_slot_is_refilled_without_duplicates(
    running: tuple[Env, Supervisor],
) -> None:
    env, sup = running
    await wait_until(lambda: states(sup) == [SlotState.IDLE] * 2)
    first_ids = {s.slot: s.container_id for s in sup.snapshot().slots}
    job = env.org.queue_job(env.pool_id, duration=0.2)
    await wait_until(lambda: env.org.job(job).result == "succeeded", what="job to finish")
    await wait_until(
        lambda: (
            {s.slot: s.container_id for s in sup.snapshot().slots} != first_ids
            and all(s.container_id for s in sup.snapshot().slots)
        ),
        what="the slot to be refilled",
    )
    assert sorted(env.running()) == ["t-0", "t-1"]
    assert env.org.job(job).assign_count == 1
    assert sum(s.jobs_done for s in sup.snapshot().slots) == 1


@on_virtual_time
async def test_adopts_running_containers_after_restart(env: Env) -> None:
    sup = env.supervisor()
    task = asyncio.create_task(sup.run())
    await wait_until(lambda: states(sup) == [SlotState.IDLE] * 2)
    job = env.org.queue_job(env.pool_id, duration=1.0)
    await wait_until(lambda: env.org.job(job).state == "running")
    sup.request_stop()
    await asyncio.wait_for(task, 5)
    assert sorted(env.running()) == ["t-0", "t-1"], "stopping the supervisor must leave agents"
    started_before = len(env.runtime.history())

    again = env.supervisor()
    task = asyncio.create_task(again.run())
    try:
        await wait_until(lambda: SlotState.BUSY in states(again), what="busy agent adopted")
        assert len(env.runtime.history()) == started_before, "adoption must not start containers"
        await wait_until(lambda: env.org.job(job).result == "succeeded")
        await wait_until(
            lambda: len(env.running()) == 2 and len(env.runtime.history()) == started_before + 1
        )
    finally:
        again.request_stop()
        await asyncio.wait_for(task, 5)
    assert env.org.job(job).assign_count == 1


@on_virtual_time(supervised=True)
async def test_drain_lets_busy_job_finish_and_starts_nothing(
    running: tuple[Env, Supervisor],
) -> None:
    env, sup = running
    await wait_until(lambda: states(sup) == [SlotState.IDLE] * 2)
    job = env.org.queue_job(env.pool_id, duration=1.0)
    await wait_until(lambda: SlotState.BUSY in states(sup), what="a busy slot")
    started = len(env.runtime.history())
    result = await sup.execute(Drain(None))
    assert result.ok and "busy" in result.message
    await wait_until(lambda: states(sup) == [SlotState.DRAINED] * 2, timeout=10, what="drained")
    assert env.org.job(job).result == "succeeded"
    assert len(env.runtime.history()) == started, "a drain must not start containers"
    assert env.running() == []
    assert all(not a.enabled for a in env.org.agents(env.pool_id))
    # A job queued now waits: nothing serves the pool until resumed.
    later = env.org.queue_job(env.pool_id, duration=0.1)
    await sup.execute(Resume(None))
    await wait_until(lambda: env.org.job(later).result == "succeeded", what="job after resume")


@on_virtual_time
async def test_crash_looping_image_backs_off_then_parks(env: Env) -> None:
    sup = env.supervisor(image=BROKEN, count=1)
    task = asyncio.create_task(sup.run())
    try:
        await wait_until(lambda: states(sup) == [SlotState.PARKED], what="parked")
        slot = sup.snapshot().slots[0]
        assert slot.failures == 3
        assert slot.last_exit is not None and slot.last_exit.code == 1
        assert "parked after 3 failed starts" in slot.message
        assert len(env.runtime.history()) == 3
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 5)


@on_virtual_time
async def test_missing_image_parks_with_plain_reason(env: Env) -> None:
    sup = env.supervisor(image="nope/missing:1", count=1)
    task = asyncio.create_task(sup.run())
    try:
        await wait_until(lambda: states(sup) == [SlotState.PARKED])
        exit_info = sup.snapshot().slots[0].last_exit
        assert exit_info is not None and "not present" in exit_info.reason
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 5)


@on_virtual_time(supervised=True)
async def test_restart_replaces_idle_now_and_busy_after_job(
    running: tuple[Env, Supervisor],
) -> None:
    env, sup = running
    await wait_until(lambda: states(sup) == [SlotState.IDLE] * 2)
    job = env.org.queue_job(env.pool_id, duration=4.0)
    await wait_until(lambda: SlotState.BUSY in states(sup))
    before = {s.slot: s.container_id for s in sup.snapshot().slots}
    busy_slot = next(s.slot for s in sup.snapshot().slots if s.state == SlotState.BUSY)
    idle_slot = 1 - busy_slot
    await sup.execute(Restart(None))
    await wait_until(
        lambda: (
            (s := sup.snapshot().slot(idle_slot)) is not None
            and s.container_id not in (None, before[idle_slot])
            and s.state == SlotState.IDLE
            and s.agent_enabled is True
        ),
        what="idle agent replaced and enabled again",
    )
    busy = sup.snapshot().slot(busy_slot)
    assert busy is not None and busy.container_id == before[busy_slot], (
        "busy agent must be left alone"
    )
    assert busy.restart_pending
    await wait_until(lambda: env.org.job(job).result == "succeeded")
    await wait_until(
        lambda: (
            (s := sup.snapshot().slot(busy_slot)) is not None
            and s.container_id not in (None, before[busy_slot])
        ),
        what="busy agent replaced after its job",
    )
    assert env.org.job(job).assign_count == 1


@on_virtual_time(supervised=True)
async def test_scale_up_and_down(running: tuple[Env, Supervisor]) -> None:
    env, sup = running
    await wait_until(lambda: states(sup) == [SlotState.IDLE] * 2)
    assert (await sup.execute(Scale(3))).ok
    await wait_until(lambda: sorted(env.running()) == ["t-0", "t-1", "t-2"])
    assert (await sup.execute(Scale(1))).ok
    await wait_until(lambda: sorted(env.running()) == ["t-0"] and len(sup.snapshot().slots) == 1)
    assert not (await sup.execute(Scale(0))).ok


@on_virtual_time(supervised=True)
async def test_pause_stops_replenishing(running: tuple[Env, Supervisor]) -> None:
    env, sup = running
    await wait_until(lambda: states(sup) == [SlotState.IDLE] * 2)
    await sup.execute(Pause())
    job = env.org.queue_job(env.pool_id, duration=0.1)
    await wait_until(lambda: env.org.job(job).result == "succeeded")
    # Paused, the emptied slot stays empty: a state that lasts, waited for (the
    # supervisor learns of the exit a moment after the runtime shows it).
    await wait_until(lambda: SlotState.EMPTY in states(sup), what="the emptied slot")
    assert len(env.running()) == 1
    await sup.execute(Unpause())
    await wait_until(lambda: len(env.running()) == 2)


@on_virtual_time(supervised=True)
async def test_azure_unreachable_still_replenishes_and_reports(
    running: tuple[Env, Supervisor],
) -> None:
    env, sup = running
    await wait_until(lambda: states(sup) == [SlotState.IDLE] * 2)
    env.org.faults.unreachable(private=False)
    await wait_until(lambda: sup.snapshot().azure.state == "unreachable")
    victim = sup.snapshot().slots[0].container_id
    assert victim
    env.runtime.kill(victim, exit_code=0)
    await wait_until(
        lambda: sup.snapshot().slots[0].container_id not in (None, victim),
        what="local refill while Azure is down",
    )
    assert "still replenished" in sup.snapshot().azure.message
    env.org.faults.clear()
    await wait_until(lambda: sup.snapshot().azure.state == "ok")


@on_virtual_time(supervised=True)
async def test_drain_waits_while_azure_is_down(running: tuple[Env, Supervisor]) -> None:
    env, sup = running
    await wait_until(lambda: states(sup) == [SlotState.IDLE] * 2)
    env.org.faults.unreachable(private=False)
    await sup.execute(Drain((0,)))
    calls = env.api.request_count
    # Let several failing poll cycles pass: nothing may be stopped blind meanwhile.
    await wait_until(lambda: env.api.request_count >= calls + 3, what="three failed cycles")
    assert sorted(env.running()) == ["t-0", "t-1"]
    env.org.faults.clear()
    await wait_until(lambda: sup.snapshot().slots[0].state == SlotState.DRAINED)


@on_virtual_time(supervised=True)
async def test_oom_killed_job_is_reported_and_slot_refilled(
    running: tuple[Env, Supervisor],
) -> None:
    env, sup = running
    await wait_until(lambda: states(sup) == [SlotState.IDLE] * 2)
    job = env.org.queue_job(env.pool_id, kind="oom", duration=5)
    await wait_until(
        lambda: any(s.last_exit and s.last_exit.oom for s in sup.snapshot().slots), what="OOM exit"
    )
    await wait_until(lambda: len(env.running()) == 2)
    slot = next(s for s in sup.snapshot().slots if s.last_exit and s.last_exit.oom)
    assert "OOM" in slot.last_exit.reason  # type: ignore[union-attr]
    assert env.org.job(job).assign_count == 1


@on_virtual_time(supervised=True)
async def test_unknown_slot_is_refused(running: tuple[Env, Supervisor]) -> None:
    _env, sup = running
    result = await sup.execute(Drain((7,)))
    assert not result.ok
    assert result.message == "no such slot: 7 (slots are 0, 1)"


@on_virtual_time
async def test_stop_leaves_agents_but_stop_drain_waits_for_jobs(env: Env) -> None:
    from gpuci_tui.core.command_types import Stop

    sup = env.supervisor()
    task = asyncio.create_task(sup.run())
    await wait_until(lambda: states(sup) == [SlotState.IDLE] * 2)
    job = env.org.queue_job(env.pool_id, duration=1.0)
    await wait_until(lambda: SlotState.BUSY in states(sup))
    result = await sup.execute(Stop(drain=True))
    assert result.ok
    assert not task.done(), "stop --drain must wait for the busy agent's job"
    await asyncio.wait_for(task, 15)
    assert env.org.job(job).result == "succeeded"
    assert env.running() == []
