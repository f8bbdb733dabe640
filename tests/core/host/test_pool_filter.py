"""The pool observer reads only what is ours: the service filters our lanes, the whole pool
comes once an hour (or when asked), a refused filter costs one warning and never a crash.

Against the simulated organisation with 5,000 agents of other hosts in the pool, on a
fake clock (each `PoolObserver.cycle` is one read).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from gpuci_tui.core.engine.server_steps import PoolRead, QueueRead
from gpuci_tui.core.engine.steps import Observation
from gpuci_tui.core.errors import AzureBadRequestError, AzureHeldBackError
from gpuci_tui.core.host.observers.pool import PoolObserver
from gpuci_tui.core.host.observers.pool_reads import (
    FILTER_RETRY,
    NAMES_INTERVAL,
    UNMARKED_RECHECK,
)
from gpuci_tui.core.host.observers.pool_scope import ReadScope
from gpuci_tui.core.host.observers.read_times import CAPABILITIES_INTERVAL
from gpuci_tui.core.models import HealthState
from gpuci_tui.core.protocols import Agent, JobRequest, JobRequests, Pool
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.foreign import add_foreign_agents
from gpuci_tui.sim.org import SimOrg

PAT = "filter-pat-0123456789abcdefghijklmnopqrstuvwxyz0123"
INSTANCE = "0a1b2c3d4e5f"
HOST = "gpu-01"
SCOPE = ReadScope(frozenset({INSTANCE}), HOST, frozenset({"gpu01"}))
MARK = {"GPUCI_INSTANCE": INSTANCE, "GPUCI_HOST": HOST}


class Recording:
    """The simulated organisation's client, recording what each agents read asked for."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.reads: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    def list_agents(self, pool_id: int, **asked: Any) -> list[Agent]:
        self.reads.append(asked)
        return list(self.api.list_agents(pool_id, **asked))


class RefusingApi:
    """An organisation that refuses every ``demands`` filter with HTTP 400."""

    def __init__(self, agents: Sequence[Agent]) -> None:
        self.agents = list(agents)
        self.reads: list[dict[str, Any]] = []

    def resolve_pool(self, name: str) -> Pool:
        return Pool(42, name)

    def list_agents(self, pool_id: int, **asked: Any) -> list[Agent]:
        self.reads.append(asked)
        if asked.get("demands"):
            raise AzureBadRequestError("Azure DevOps refused GET … with HTTP 400: bad demand")
        return list(self.agents)

    def list_job_requests(self, pool_id: int) -> list[JobRequest]:
        return JobRequests([JobRequest(i) for i in range(200)], capped=True)


@pytest.fixture
def org() -> SimOrg:
    o = SimOrg("acme")
    o.add_pat(PAT)
    pool = o.add_pool("gpu")
    add_foreign_agents(o, pool, 5000)
    o.add_elsewhere(pool, "gpu01-0", MARK, online=True)
    o.add_elsewhere(pool, "gpu01-0-b", MARK, online=True, enabled=False)
    return o


def observer_on(
    api: Any, now: list[float], events: list[tuple[str, str]], scope: ReadScope = SCOPE
) -> PoolObserver:
    return PoolObserver(
        api,
        "gpu",
        clock=lambda: now[0],
        interval=10.0,
        report=lambda kind, message: events.append((kind, message)),
        scope=lambda: scope,
    )


async def read(observer: PoolObserver, now: list[float]) -> PoolRead:
    """The next cycle that reads the agents.

    On an idle host every third cycle reads the queue in place of the agents
    (`read_times`); such a cycle is passed, and the clock moved on to the next.
    """
    for _ in range(3):
        seen: list[Observation] = []
        await observer.cycle(seen.append)
        reads = [obs for obs in seen if isinstance(obs, PoolRead)]
        if reads:
            return reads[0]
        assert [type(obs) for obs in seen] == [QueueRead]
        now[0] += observer.until_due()
    raise AssertionError("no read of the agents in three cycles")


FILTERED = {"demands": (f"GPUCI_INSTANCE -equals {INSTANCE}",), "include_last_completed": True}
HOURLY = [
    {
        "demands": ("GPUCI_HOST -equals gpu-01",),
        "include_capabilities": True,
        "include_last_completed": True,
    },
    FILTERED,
    {},  # the whole pool's names, without capabilities: a third of the bytes
]


async def test_the_service_is_asked_for_our_lanes_and_the_whole_pool_comes_hourly(
    org: SimOrg,
) -> None:
    org.add_elsewhere(42, "gpu00-3", {**MARK, "GPUCI_INSTANCE": "e" * 12}, online=False)
    api = Recording(SimPoolApi(org, PAT))
    now, events, judged = [1000.0], [], []
    observer = observer_on(api, now, events)
    observer.on_capabilities = lambda agents, began: judged.append(sorted(a.name for a in agents))
    first = await read(observer, now)  # at start: this host's agents, and every name of the pool
    assert api.reads == HOURLY
    # The stale watch judges this host's agents, an earlier prefix's leftover included.
    assert judged == [["gpu00-3", "gpu01-0", "gpu01-0-b"]]
    assert sorted(a.name for a in first.view.agents) == ["gpu01-0", "gpu01-0-b"]
    assert first.view.ours_only
    for _ in range(3):
        now[0] += 10.0
        later = await read(observer, now)
        assert api.reads[-1] == FILTERED
        assert later.view.agents == first.view.agents  # the same view, a 2 KB answer
    assert len(judged) == 1 and events == []
    now[0] += CAPABILITIES_INTERVAL
    await read(observer, now)  # the hourly check: the names only every six hours
    assert api.reads[-2:] == HOURLY[:2] and len(judged) == 2
    observer.want_capabilities()  # a prune's dry run: at once
    now[0] += 10.0
    await read(observer, now)
    assert api.reads[-2:] == HOURLY[:2] and len(judged) == 3
    now[0] += NAMES_INTERVAL
    await read(observer, now)
    assert api.reads[-3:] == HOURLY


async def test_a_refused_filter_warns_once_reads_the_whole_pool_and_tries_again_later(
    org: SimOrg,
) -> None:
    agents = SimPoolApi(org, PAT).list_agents(42)
    api = RefusingApi(agents)
    now, events = [1000.0], []
    observer = observer_on(api, now, events)
    await read(observer, now)  # the start's: this host's agents refused, the whole pool instead
    views = []
    for _ in range(4):
        now[0] += 10.0
        views.append(await read(observer, now))
    asked = [bool(r.get("demands")) for r in api.reads]
    # Refused once; the whole pool in the same cycle; then the whole pool, not asking again.
    assert asked == [True, False, False, False, False, False]
    assert api.reads[1]["include_capabilities"] is True
    assert [kind for kind, _ in events] == ["pool_filter_refused"]
    assert "refused the agent filter 'GPUCI_HOST -equals gpu-01'" in events[0][1]
    assert observer.health.state is HealthState.OK, "a refused filter is no outage"
    assert all(sorted(a.name for a in v.view.agents) == ["gpu01-0", "gpu01-0-b"] for v in views)
    assert views[-1].view.queued_capped and views[-1].view.queued_jobs == 200
    now[0] += FILTER_RETRY
    await read(observer, now)  # tried again, with the hourly read that falls due at the same time
    assert api.reads[-2].get("demands") and not api.reads[-1].get("demands")
    assert len(events) == 1, "one warning, however often it is refused"


@pytest.mark.parametrize(
    "marker",
    [{"GPUCI_HOST": "gpu-07", "GPUCI_INSTANCE": "f" * 12}, {}],
    ids=["another-host", "no-marker"],
)
async def test_an_agent_on_our_names_not_this_hosts_turns_the_filter_off(
    org: SimOrg, marker: dict[str, str]
) -> None:
    """Registered by another host given our names (or before markers): the filter hides it."""
    org.add_elsewhere(42, "gpu01-1", marker, online=True)
    api = Recording(SimPoolApi(org, PAT))
    now, events = [1000.0], []
    observer = observer_on(api, now, events)
    first = await read(observer, now)
    assert "gpu01-1" in {a.name for a in first.view.agents}
    assert [kind for kind, _ in events] == ["pool_foreign_names"]
    # (The in-process client always sends capabilities; over HTTP the names come without.)
    assert "lane names without its marker: gpu01-1 (" in events[0][1]
    now[0] += 10.0
    second = await read(observer, now)
    assert "demands" not in api.reads[-1], "the whole pool while it is there"
    assert "gpu01-1" in {a.name for a in second.view.agents}
    # Re-registered by this host (its marker now), seen on the next check: while such
    # agents are there it comes every 10 minutes, not every hour.
    org.delete_agent(42, next(a.id for a in org.agents(42) if a.name == "gpu01-1"))
    org.add_elsewhere(42, "gpu01-1", MARK, online=True)
    now[0] += UNMARKED_RECHECK
    await read(observer, now)
    assert api.reads[-3:] == HOURLY
    now[0] += 10.0
    await read(observer, now)
    assert api.reads[-1].get("demands"), "filtered again"
    assert len(events) == 1


async def test_a_read_our_cap_holds_back_leaves_the_health_alone() -> None:
    class Capped(RefusingApi):
        def list_agents(self, pool_id: int, **asked: Any) -> list[Agent]:
            raise AzureHeldBackError("held back", retry_after=12.0)

    now, events = [1000.0], []
    observer = observer_on(Capped([]), now, events)
    seen: list[Observation] = []
    assert await observer.cycle(seen.append) == 12.0
    assert seen == [] and events == []
    assert observer.health.state is HealthState.UNKNOWN and observer.blocked_until() == 0.0


def test_the_scope_asks_for_one_instance_or_this_hosts_agents() -> None:
    assert SCOPE.demands() == ("GPUCI_INSTANCE -equals 0a1b2c3d4e5f",)
    two = ReadScope(frozenset({"a" * 12, "b" * 12}), HOST, frozenset({"x", "y"}))
    assert two.demands() == ("GPUCI_HOST -equals gpu-01",), "demands all hold: one host, not 2 ids"
    assert ReadScope(frozenset(), HOST, frozenset()).demands() == ()
    assert [SCOPE.holds(n) for n in ("gpu01-0", "gpu01-12-c", "gpu01-0-z", "gpu01", "xgpu01-0")] == [
        True, True, False, False, False
    ]  # fmt: skip
    marked = Agent(1, "gpu01-0", system_capabilities=MARK)
    foreign = Agent(2, "gpu01-1", system_capabilities={**MARK, "GPUCI_INSTANCE": "f" * 12})
    other = Agent(3, "theirs-0")
    assert SCOPE.narrow([marked, foreign, other]) == (marked, foreign)
    assert SCOPE.unmarked([marked, foreign, other]) == (foreign,)


async def test_a_lane_registered_between_the_reads_is_not_taken_for_a_hidden_one(
    org: SimOrg,
) -> None:
    """A lane of ours that registers (with its marker) after the filtered read and before
    the names read is in the names only: a second filtered look finds it, no warning, and
    the next read is filtered (the demo read the whole pool for ten minutes after one)."""

    class RegisteringMeanwhile(Recording):
        def list_agents(self, pool_id: int, **asked: Any) -> list[Agent]:
            if asked == {} and "gpu01-1" not in {a.name for a in org.agents(42)}:
                org.add_elsewhere(42, "gpu01-1", MARK, online=True)  # just before this read
            return super().list_agents(pool_id, **asked)

    api = RegisteringMeanwhile(SimPoolApi(org, PAT))
    now, events = [1000.0], []
    observer = observer_on(api, now, events)
    first = await read(observer, now)
    assert api.reads == [*HOURLY, FILTERED], "the names, then one more filtered look"
    assert "gpu01-1" in {a.name for a in first.view.agents}
    assert events == []
    now[0] += 10.0
    await read(observer, now)
    assert api.reads[-1] == FILTERED, "filtered, not the whole pool"
