"""GPU admission and health end to end in process: frames in, agents held, released, cleared.

The in-process supervisor runs against the simulated organisation; the
`GpuGatekeeper` is fed frames built here (the daemon feeds it from NVML), stamped
with the time of the test's world. On virtual time (tests/core/virtual_env.py).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from gpuci_tui.core.command_types import GpuClear
from gpuci_tui.core.engine.gpu_health import HealthBook
from gpuci_tui.core.gpu_readings import (
    GpuFrame,
    GpuHealthReading,
    GpuHostInfo,
    GpuProcess,
    GpuSample,
    XidEvent,
)
from gpuci_tui.core.host.gpus.gates import GpuGatekeeper
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.sim.records import AgentStartup
from tests.core.supervisor_env import Env, StaticTokens, wait_until
from tests.core.virtual_env import VirtualEnv, on_virtual_time, running
from tests.virtual_time import world_time

FOREIGN = GpuProcess(4242, 61 * 1024.0, "python")


def frame(foreign_on: tuple[int, ...] = (), xid_on: tuple[int, ...] = ()) -> GpuFrame:
    gpus = tuple(
        GpuSample(
            i,
            "H100",
            uuid=f"GPU-{i}",
            processes=(FOREIGN,) if i in foreign_on else (),
            health=GpuHealthReading(
                xid_events=(XidEvent(79, world_time()),) if i in xid_on else ()
            ),
        )
        for i in range(2)
    )
    return GpuFrame(world_time(), GpuHostInfo(True, gpu_count=2), gpus)


Gated = tuple[Env, Supervisor, GpuGatekeeper, list[str]]


def gated(test: Callable[[Gated], Awaitable[None]]) -> Callable[..., None]:
    """Run ``test((env, supervisor, gatekeeper, its events))`` on virtual time."""

    @on_virtual_time
    @functools.wraps(test)
    async def run(env: VirtualEnv) -> None:
        env.org.startup = AgentStartup(register=0.3, session=0.2)
        agents = replace(env.config.agents, standby=True, gpus="per-agent", gpu_hold_down=5.0)
        config = replace(env.config, agents=agents)
        config = replace(config, supervisor=replace(config.supervisor, poll_interval=10.0))
        events: list[str] = []
        keeper = GpuGatekeeper(
            lambda: [sup], lambda kind, message: events.append(f"{kind}: {message}")
        )
        sup = Supervisor(
            config, api=env.api, runtime=env.runtime, tokens=StaticTokens(), gatekeeper=keeper,
            clock=env.clock,
        )  # fmt: skip
        async with running(sup):
            await test((env, sup, keeper, events))

    return run


def slot(sup: Supervisor, number: int) -> object:
    found = sup.snapshot().slot(number)
    assert found is not None
    return found


def enabled(sup: Supervisor, number: int) -> bool:
    snap = sup.snapshot().slot(number)
    return snap is not None and any(a.agent_enabled for a in snap.agents)


def steady(sup: Supervisor) -> bool:
    return all(s.state == SlotState.IDLE and s.standby == "ready" for s in sup.snapshot().slots)


@gated
async def test_foreign_process_holds_the_slot_and_its_exit_releases_it_fast(gated: Gated) -> None:
    env, sup, keeper, events = gated
    await wait_until(lambda: steady(sup), timeout=20, what="steady state")
    keeper.observe(frame(foreign_on=(0,)), {})
    await wait_until(
        lambda: sup.snapshot().slots[0].state == SlotState.HELD and not enabled(sup, 0),
        timeout=5,
        what="slot 0 held and disabled",
    )
    held = sup.snapshot().slots[0]
    assert held.gate_reason == "GPU 0 used by pid 4242 python, 61 GB, not ours"
    assert held.message == f"held: {held.gate_reason}"
    assert all(a.container_id for a in held.agents), "held agents stay running"
    assert [g.state for g in sup.snapshot().gpu_gates] == ["held", "ok"]
    # Jobs go to slot 1 only while GPU 0 is taken.
    jobs = [env.org.queue_job(env.pool_id, duration=0.3) for _ in range(3)]
    await wait_until(lambda: all(env.org.job(j).result for j in jobs), timeout=20, what="jobs")
    assert {env.org.job(j).agent_name.removesuffix("-b") for j in jobs} == {"t-1"}  # type: ignore[union-attr]
    # The process exits: the next frame releases the slot, its standby is enabled at once.
    loop = asyncio.get_running_loop()
    freed = loop.time()
    keeper.observe(frame(), {})
    await wait_until(lambda: enabled(sup, 0), timeout=5, what="slot 0 enabled again")
    assert loop.time() - freed < 2.0
    await wait_until(lambda: sup.snapshot().slots[0].state == SlotState.IDLE, timeout=5)
    kinds = [e.kind for e in sup.events]
    assert "gpu_held" in kinds and "gpu_released" in kinds


@gated
async def test_xid_during_a_job_quarantines_until_cleared(gated: Gated) -> None:
    env, sup, keeper, events = gated
    await wait_until(lambda: steady(sup), timeout=20, what="steady state")
    keeper.observe(frame(), {})
    job = env.org.queue_job(env.pool_id, duration=1.5)
    await wait_until(lambda: env.org.job(job).agent_name is not None, timeout=10, what="assigned")
    on = int(env.org.job(job).agent_name.removesuffix("-b").rsplit("-", 1)[1])  # type: ignore[union-attr]
    keeper.observe(frame(xid_on=(on,)), {})
    await wait_until(lambda: env.org.job(job).result is not None, timeout=10, what="job ends")
    assert env.org.job(job).result == "succeeded", "the running job is never touched"
    await wait_until(
        lambda: sup.snapshot().slots[on].state == SlotState.QUARANTINED and not enabled(sup, on),
        timeout=10,
        what="quarantined",
    )
    assert events == [f"gpu_fault: GPU {on}: GPU {on}: Xid 79 (GPU fell off the bus)"]
    other = 1 - on
    assert sup.snapshot().slots[other].state == SlotState.IDLE, "nothing else is lost"
    # Not replenished: the lane whose container ran the job stays empty.
    snap = sup.snapshot().slots[on]
    assert len([a for a in snap.agents if a.container_id]) == 1
    assert sup.preview(GpuClear(str(on))).effects[0].effect == "release"
    result = await sup.execute(GpuClear(f"GPU-{on}"))
    assert result.ok, result.message
    await wait_until(lambda: enabled(sup, on), timeout=2, what="released at once by the clear")
    assert (await sup.execute(GpuClear("7"))).ok is False


def test_a_quarantine_is_kept_across_a_restart_of_the_daemon(tmp_path: Path) -> None:
    store = tmp_path / "i.gpu-health.json"
    events: list[str] = []
    first = GpuGatekeeper(lambda: [], lambda kind, message: events.append(kind), store=store)
    first.observe(frame(xid_on=(1,)), {})
    assert [g.state for g in first.gates] == ["ok", "quarantined"]
    again = GpuGatekeeper(lambda: [], lambda kind, message: events.append(message), store=store)
    assert [f.reason for f in again.book.faults_of(1)] == ["GPU 1: Xid 79 (GPU fell off the bus)"]
    assert events[-1] == "GPU 1: still quarantined: GPU 1: Xid 79 (GPU fell off the bus)"
    assert again.clear("1").ok
    assert (
        GpuGatekeeper(lambda: [], lambda kind, message: None, store=store).book.faults_of(1) == ()
    )
    store.write_text("{not json")
    assert GpuGatekeeper(lambda: [], lambda kind, message: None, store=store).book.gpus == ()


@gated
async def test_a_clear_releases_a_flapping_quarantine_at_once(gated: Gated) -> None:
    """Held, released, then quarantined within the hold-down (5 s): the clear does not wait it."""
    _env, sup, keeper, _events = gated
    await wait_until(lambda: steady(sup), timeout=20, what="steady state")
    keeper.observe(frame(foreign_on=(0,)), {})
    await wait_until(lambda: not enabled(sup, 0), timeout=5, what="slot 0 held")
    keeper.observe(frame(), {})
    await wait_until(lambda: enabled(sup, 0), timeout=5, what="slot 0 released")
    keeper.observe(frame(xid_on=(0,)), {})
    await wait_until(
        lambda: sup.snapshot().slots[0].state == SlotState.QUARANTINED and not enabled(sup, 0),
        timeout=5,
        what="slot 0 quarantined again within the hold-down",
    )
    loop = asyncio.get_running_loop()
    cleared = loop.time()
    assert (await sup.execute(GpuClear("0"))).ok
    await wait_until(lambda: enabled(sup, 0), timeout=2, what="released at once by the clear")
    assert loop.time() - cleared < 2.0


@pytest.mark.parametrize("gpus", ["none", "all"])
def test_slots_of_none_or_all_gpus_are_never_held_for_a_gpu_named_none_or_all(
    env: Env, gpus: str
) -> None:
    """``gpus = "none"``/``"all"`` are policies, not GPU ids: the gates read them as such
    (the supervisor once passed ``("none",)``, and the docker demo's slots were held with
    "GPU none is not seen by the driver")."""
    agents = replace(env.config.agents, gpus=gpus)
    sup = Supervisor(replace(env.config, agents=agents), api=env.api, runtime=env.runtime,
                     tokens=StaticTokens())  # fmt: skip
    sup.observe_gpus(frame(), HealthBook(), (), lambda pid: False)
    readings = dict(sup.gpus.readings)  # what the gates said, before any loop
    assert readings and all(r.kind.value == "open" for r in readings.values()), readings
