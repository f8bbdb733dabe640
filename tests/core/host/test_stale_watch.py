"""Stale registrations against the simulated organisation: found, listed, removed, and what is kept.

The daemon's tests run on virtual time (tests/core/virtual_env.py): the organisation's
clock is the loop's, set back eight days while the leftovers register.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from gpuci_tui.core.command_types import Prune
from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config
from gpuci_tui.core.docker.agentspec import host_marker
from gpuci_tui.core.engine.stale import MARKER_HOST, MARKER_INSTANCE
from gpuci_tui.core.host.observers.stale_watch import own_instances
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.core.protocols import Agent, JobRequest, Pool
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import DEFAULT_IMAGE
from tests.core.supervisor_env import PAT, StaticTokens, wait_until
from tests.core.virtual_runtime import VirtualRuntime
from tests.virtual_time import VirtualTimeLoop, run_virtual

DAY = 86400.0
OLD_INSTANCE = "0123456789ab"


@dataclass
class World:
    org: SimOrg
    sup: GroupSupervisor
    runtime: VirtualRuntime
    ids: dict[str, int]
    keys: dict[str, str]

    def names(self) -> set[str]:
        pool = self.org.pools()[0].id
        return {a.name for a in self.org.agents(pool)}


def config(remove_after: float | None = None) -> Config:
    return Config(
        azure=AzureConfig(url="http://127.0.0.1:9", pool="gpu", remove_offline_after=remove_after),
        agents=AgentsConfig(count=1, image=DEFAULT_IMAGE, name_prefix="box", gpus="none"),
    )


def seed(org: SimOrg, cfg: Config, ago: list[float]) -> tuple[dict[str, int], dict[str, str]]:
    """The pool before the daemon starts: leftovers of ours and of others, 8 days old."""
    (ours,) = own_instances(cfg, "gpu")
    here = host_marker()
    marks = {
        "box-5": {MARKER_INSTANCE: ours, MARKER_HOST: here},  # a scaled-away slot
        "old-0": {MARKER_INSTANCE: OLD_INSTANCE, MARKER_HOST: here},  # an earlier prefix
        "other-0": {MARKER_INSTANCE: "fedcba987654", MARKER_HOST: "other-host"},
        "box-6": {MARKER_INSTANCE: ours, MARKER_HOST: "other-host"},  # one prefix, two hosts
        "legacy-0": {},  # registered before markers
    }
    ids, keys = {}, {}
    ago[0] = 8 * DAY  # registered (and offline since) eight days ago
    for name, caps in marks.items():
        ids[name], keys[name] = org.register(
            "gpu", name, PAT, name, capabilities=caps, open_session=False
        )
    ago[0] = 0.0
    # Online and ours, no lane uses the name: still never removed.
    mark = {MARKER_INSTANCE: ours, MARKER_HOST: here}
    ids["box-7"], _ = org.register("gpu", "box-7", PAT, "h7", capabilities=mark)
    return ids, keys


def in_world(
    remove_after: float | None = None,
) -> Callable[[Callable[[World], Awaitable[None]]], Callable[[], None]]:
    """Run ``test(world)`` on virtual time: the seeded pool, a daemon of one slot running."""

    def wrap(test: Callable[[World], Awaitable[None]]) -> Callable[[], None]:
        async def main(loop: VirtualTimeLoop) -> None:
            ago = [0.0]
            org = SimOrg(heartbeat_timeout=600.0, clock=lambda: loop.clock() - ago[0])
            org.add_pat(PAT)
            org.add_pool("gpu")
            cfg = config(remove_after)
            ids, keys = seed(org, cfg, ago)
            cfg = replace(cfg, supervisor=replace(cfg.supervisor, poll_interval=0.5))
            runtime = VirtualRuntime(org, loop, destroy_delay=0.05)
            api = SimPoolApi(org, PAT)
            sup = GroupSupervisor(
                cfg, api=api, runtime=runtime, tokens=StaticTokens(), clock=loop.clock
            )
            task = asyncio.create_task(sup.run())
            try:
                await test(World(org, sup, runtime, ids, keys))
            finally:
                sup.request_stop(drain=False)
                await asyncio.wait_for(task, 10)
                for c in runtime.list_containers({}):
                    runtime.remove(c.id)
                runtime.close()

        def run() -> None:
            run_virtual(main)

        run.__name__, run.__doc__ = test.__name__, test.__doc__
        return run

    return wrap


@in_world()
async def test_our_offline_leftovers_are_listed_then_removed(world: World) -> None:
    sup = world.sup
    await wait_until(
        lambda: sup.snapshot().slots and sup.snapshot().slots[0].state == SlotState.IDLE,
        what="the lane idle",
    )
    # The lane's own registration carries the marker (the agent reports its environment).
    lane = world.org.find_agent("box-0")
    assert lane is not None and lane.capabilities[MARKER_HOST] == host_marker()
    await wait_until(lambda: len(sup.snapshot().stale) == 2, what="the first read's count")

    dry = await sup.execute(Prune(dry_run=True))
    assert dry.ok and set(dry.affected) == {world.ids["box-5"], world.ids["old-0"]}
    lines = dry.message.splitlines()
    assert lines[0] == "2 stale registrations would be removed:"
    assert any(line.startswith(f"old-0  id {world.ids['old-0']}  offline") for line in lines)
    assert "earlier name prefix" in dry.message and "offline 8d00h (since " in dry.message
    assert world.names() >= {"box-5", "old-0"}, "a dry run removes nothing"

    from gpuci_tui.core.host.metrics.registry import Metrics, follow

    metrics = Metrics()
    counting = asyncio.create_task(follow(sup, metrics))
    result = await sup.execute(Prune())
    assert result.ok, result.message
    assert result.message == "removed 2 stale registrations"
    # Each removal's event reaches Prometheus as the daemon feeds it (issue 21).
    name = "gpuci_registrations_removed_total"
    await wait_until(lambda: metrics.registry.get_sample_value(name) == 2, what=name)
    counting.cancel()
    assert world.names() == {"box-0", "box-0-b", "other-0", "box-6", "legacy-0", "box-7"}
    removed = [e for e in sup.events if e.kind == "registration_removed"]
    assert sorted(e.agent for e in removed) == ["box-5", "old-0"]
    assert sup.snapshot().stale == ()


@in_world()
async def test_one_that_came_online_since_the_dry_run_is_kept(world: World) -> None:
    sup = world.sup
    dry = await sup.execute(Prune(dry_run=True))
    assert world.ids["box-5"] in dry.affected
    world.org.open_session(
        world.ids["box-5"], world.keys["box-5"]
    )  # the registration is in use again
    result = await sup.execute(Prune(agent_ids=(world.ids["box-5"],)))
    assert result.ok and result.affected == ()
    assert "box-5" in world.names()


@in_world(7 * DAY)
async def test_remove_offline_after_removes_them_by_itself(world: World) -> None:
    await wait_until(lambda: "old-0" not in world.names(), what="the automatic removal")
    await wait_until(lambda: "box-5" not in world.names(), what="the automatic removal")
    assert {"other-0", "box-6", "legacy-0", "box-7"} <= world.names()

    def removed() -> list[str | None]:
        return sorted(e.agent for e in world.sup.events if e.kind == "registration_removed")

    # The event follows the DELETE's answer: under load it came after the name was gone.
    await wait_until(lambda: len(removed()) >= 2, what="both removals reported")
    assert removed() == ["box-5", "old-0"]


@in_world(9 * DAY)
async def test_remove_offline_after_waits_for_the_age(world: World) -> None:
    await wait_until(lambda: len(world.sup.snapshot().stale) == 2, what="the first read")
    await asyncio.sleep(0.5)  # a window for a wrong removal to show, not a synchronisation
    assert {"old-0", "box-5"} <= world.names()


def test_each_is_read_again_right_before_its_delete() -> None:
    """Judged stale, then back online (or busy) before the DELETE: kept, and said why."""
    from gpuci_tui.core.engine.stale import Ownership, stale_registrations
    from gpuci_tui.core.host.observers.stale_watch import remove_stale

    org = SimOrg(heartbeat_timeout=600.0)
    org.add_pat(PAT)
    pool = org.add_pool("gpu")
    api = SimPoolApi(org, PAT)
    owner = Ownership(frozenset({"aaaaaaaaaaaa"}), "here")
    mark = {MARKER_INSTANCE: "aaaaaaaaaaaa", MARKER_HOST: "here"}
    keys = {}
    for name in ("box-3", "box-4"):
        _, keys[name] = org.register("gpu", name, PAT, name, capabilities=mark, open_session=False)
    listed = api.list_agents(pool, include_capabilities=True)
    stale = stale_registrations(listed, owner, frozenset(), time.time())
    assert [s.name for s in stale] == ["box-3", "box-4"]
    box4 = next(s for s in stale if s.name == "box-4")
    org.open_session(box4.agent_id, keys["box-4"])  # box-4 is in use again
    events: list[tuple[str, str]] = []
    done = remove_stale(
        api, pool, stale, owner, frozenset(), lambda kind, msg, **_: events.append((kind, msg))
    )
    assert [s.name for s in done.removed] == ["box-3"] and done.error is None
    assert done.kept == ["box-4: kept, online: an online agent is never removed"]
    assert [a.name for a in org.agents(pool)] == ["box-4"]
    assert [kind for kind, _ in events] == ["registration_removed"]


class FlagApi:
    """Records whether each agents read asked for capabilities."""

    def __init__(self) -> None:
        self.reads: list[bool] = []

    def resolve_pool(self, name: str) -> Pool:
        return Pool(id=42, name=name)

    def list_agents(
        self, pool_id: int, *, include_capabilities: bool = False, **filters: object
    ) -> list[Agent]:
        self.reads.append(include_capabilities)
        return []

    def list_job_requests(self, pool_id: int) -> list[JobRequest]:
        return []


async def test_capabilities_come_with_one_cycle_per_interval_or_when_asked() -> None:
    """The agents are read every cycle: capabilities (a larger answer) only now and then."""
    from gpuci_tui.core.host.observers.pool import PoolObserver
    from gpuci_tui.core.host.observers.read_times import CAPABILITIES_INTERVAL

    api, now, full = FlagApi(), [1000.0], []
    observer = PoolObserver(
        api,  # type: ignore[arg-type]
        "gpu",
        clock=lambda: now[0],
        interval=1.0,
        report=lambda kind, message: None,
    )
    await observer.cycle(lambda obs: None)
    assert api.reads == [False], "nobody listens: never with capabilities"
    observer.on_capabilities = lambda agents, began: full.append(began)
    for _ in range(5):
        await observer.cycle(lambda obs: None)
        now[0] += 1.0
    assert api.reads[1] is True and True not in api.reads[2:] and full == [1000.0]
    assert len(api.reads) >= 4, "the other cycles read the agents without them"
    now[0] = 1000.0 + CAPABILITIES_INTERVAL
    before = len(api.reads)
    await observer.cycle(lambda obs: None)
    observer.want_capabilities()  # a dry run asks: the next cycle brings them
    await observer.cycle(lambda obs: None)
    now[0] += 1.0
    await observer.cycle(lambda obs: None)
    assert api.reads[before:] == [True, True, False]
