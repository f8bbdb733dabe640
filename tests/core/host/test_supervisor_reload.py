"""`Supervisor.reconfigure` end to end: the in-process supervisor, the simulated organisation
and runtime; a new image rolls through the slots without a killed job, a crash-looping
canary is rolled back.

On virtual time (tests/core/virtual_env.py): the agents are tasks on the test's loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import replace

from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.engine.steps import JobEnded
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.sim.records import AgentStartup
from tests.core.supervisor_env import BROKEN, Env, StaticTokens, wait_until
from tests.core.virtual_env import VirtualEnv, on_virtual_time, running

V2 = "gpuci-sim/agent:2"


def prepared(env: VirtualEnv) -> VirtualEnv:
    """Three slots with a standby each, a second image, agents up in 0.3 s."""
    env.org.startup = AgentStartup(register=0.2, session=0.1)
    env.runtime.images.add(V2)
    config = replace(env.config, agents=replace(env.config.agents, standby=True, count=3))
    config = replace(config, supervisor=replace(config.supervisor, poll_interval=0.5))
    return replace(env, config=config)


Supervised = tuple[Supervisor, list[JobEnded]]


def reloading(
    test: Callable[[VirtualEnv, Supervised], Awaitable[None]],
) -> Callable[..., None]:
    """Run ``test(env, (supervisor, jobs ended))`` on virtual time, the supervisor running."""

    @on_virtual_time
    @functools.wraps(test)
    async def run(env: VirtualEnv) -> None:
        reload_env = prepared(env)
        ended: list[JobEnded] = []
        supervisor = Supervisor(
            reload_env.config,
            api=reload_env.api,
            runtime=reload_env.runtime,
            tokens=StaticTokens(),
            on_job_finished=ended.append,
            clock=env.clock,
        )
        async with running(supervisor):
            await test(reload_env, (supervisor, ended))

    return run


def with_image(config: Config, image: str) -> Config:
    return replace(config, agents=replace(config.agents, image=image))


def images(env: Env) -> dict[str, str]:
    return {c.name: c.image for c in env.runtime.list_containers({}) if c.status == "running"}


def steady(sup: Supervisor) -> bool:
    return all(s.standby == "ready" and s.state.value == "idle" for s in sup.snapshot().slots)


@reloading
async def test_a_new_image_rolls_through_and_the_running_job_finishes_on_the_old_one(
    reload_env: Env, sup: Supervised
) -> None:
    supervisor, ended = sup
    await wait_until(lambda: steady(supervisor), timeout=20, what="steady")
    job = reload_env.org.queue_job(reload_env.pool_id, duration=3.0)
    await wait_until(
        lambda: any(s.state.value == "busy" for s in supervisor.snapshot().slots),
        timeout=10,
        what="the supervisor sees the job",
    )
    lines = supervisor.preview_reconfigure(with_image(reload_env.config, V2))
    assert lines[0] == "image gpuci-sim/agent:1 -> gpuci-sim/agent:2"
    assert "1 busy lane after its job" in lines[1]
    result = supervisor.reconfigure(with_image(reload_env.config, V2))
    assert result.ok, result.message
    (rollout,) = supervisor.snapshot().rollouts
    assert rollout.state == "rolling" and rollout.image_to == V2
    kinds = [e.kind for e in supervisor.events]
    assert "rollout_started" in kinds
    await wait_until(
        lambda: supervisor.snapshot().rollouts[0].state == "done", timeout=30, what="done"
    )
    assert set(images(reload_env).values()) == {V2}
    assert reload_env.org.job(job).result == "succeeded"
    (row,) = [e for e in ended if e.job is not None and e.job.request_id == job]
    assert row.image.reference == "gpuci-sim/agent:1"
    assert "rollout_done" in [e.kind for e in supervisor.events]
    assert not [e for e in supervisor.events if e.kind == "slot_parked"]


@reloading
async def test_a_canary_that_crash_loops_is_rolled_back_and_the_others_never_change(
    reload_env: Env, sup: Supervised
) -> None:
    supervisor, _ = sup
    await wait_until(lambda: steady(supervisor), timeout=20, what="steady")
    before = {c.name: c.id for c in reload_env.runtime.list_containers({})}
    result = supervisor.reconfigure(with_image(reload_env.config, BROKEN), canary=1)
    assert result.ok and "canary slots 0 first" in result.message, result.message
    await wait_until(
        lambda: supervisor.snapshot().rollouts[0].state == "rolled_back",
        timeout=30,
        what="rolled back",
    )
    (rollout,) = supervisor.snapshot().rollouts
    assert rollout.reason is not None and "slot 0 crash-looped" in rollout.reason
    await wait_until(lambda: steady(supervisor), timeout=20, what="steady again")
    assert set(images(reload_env).values()) == {"gpuci-sim/agent:1"}
    now = {c.name: c.id for c in reload_env.runtime.list_containers({}) if c.status == "running"}
    for name in ("t-1", "t-1-b", "t-2", "t-2-b"):
        assert now[name] == before[name], f"{name} was replaced"
    started_broken = {c.name for c in reload_env.runtime.history() if c.image == BROKEN}
    assert started_broken <= {"t-0", "t-0-b"}
    assert "rollout_rolled_back" in [e.kind for e in supervisor.events]


@reloading
async def test_count_changes_and_a_changed_prefix_is_refused(
    reload_env: Env, sup: Supervised
) -> None:
    supervisor, _ = sup
    await wait_until(lambda: steady(supervisor), timeout=20, what="steady")
    fewer = replace(reload_env.config, agents=replace(reload_env.config.agents, count=2))
    assert supervisor.preview_reconfigure(fewer) == ("count: 3 -> 2 slots",)
    assert supervisor.snapshot().desired_count == 3
    result = supervisor.reconfigure(fewer)
    assert result.ok and supervisor.snapshot().desired_count == 2
    await wait_until(lambda: len(supervisor.snapshot().slots) == 2, timeout=20, what="retired")
    other = replace(reload_env.config, agents=replace(reload_env.config.agents, name_prefix="x"))
    refused = supervisor.reconfigure(other)
    assert not refused.ok and "restart of the daemon" in refused.message
    assert supervisor.preview_reconfigure(fewer) == ("nothing to change",)


@on_virtual_time
async def test_a_daemon_restarted_on_a_changed_image_replaces_the_adopted_outdated_lanes(
    env: VirtualEnv,
) -> None:
    reload_env = prepared(env)
    first = reload_env.supervisor()
    task = asyncio.create_task(first.run())
    await wait_until(lambda: steady(first), timeout=20, what="steady on v1")
    job = reload_env.org.queue_job(reload_env.pool_id, duration=2.0)
    await wait_until(
        lambda: any(s.state.value == "busy" for s in first.snapshot().slots), timeout=10
    )
    first.request_stop()  # agents (and the job) left running
    await asyncio.wait_for(task, 10)
    second = Supervisor(
        with_image(reload_env.config, V2),
        api=reload_env.api,
        runtime=reload_env.runtime,
        tokens=StaticTokens(),
        clock=env.clock,
    )
    task = asyncio.create_task(second.run())
    try:
        await wait_until(
            lambda: set(images(reload_env).values()) == {V2} and steady(second),
            timeout=30,
            what="every adopted lane replaced by one on the new image",
        )
        assert reload_env.org.job(job).result == "succeeded"
        assert reload_env.org.job(job).assign_count == 1
    finally:
        second.request_stop()
        await asyncio.wait_for(task, 10)
