"""The pool observer's one backoff: wakes do not cut it short, writes and reads wait for it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from gpuci_tui.core.errors import AzureError, AzureRateLimitError
from gpuci_tui.core.host.observers.pool import PROBE_WAIT, PoolObserver
from gpuci_tui.core.models import HealthState
from gpuci_tui.core.protocols import Agent, JobRequest, Pool
from tests.core.supervisor_env import wait_until

RETRY_AFTER = 1.5


def observer_on(api: object, clock: Callable[[], float]) -> PoolObserver:
    """An observer of pool ``gpu`` on ``api`` (a stand-in client), polling every 10 s."""
    return PoolObserver(
        api,  # type: ignore[arg-type]
        "gpu",
        clock=clock,
        interval=10.0,
        report=lambda kind, message: None,
    )


class LimitedApi:
    """Answers every pool read with 429 + Retry-After, recording when it was called."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def resolve_pool(self, name: str) -> Pool:
        return Pool(id=42, name=name)

    def list_agents(
        self, pool_id: int, *, include_capabilities: bool = False, **filters: object
    ) -> list[Agent]:
        self.calls.append(time.monotonic())
        raise AzureRateLimitError("rate limited", retry_after=RETRY_AFTER)

    def list_job_requests(self, pool_id: int) -> list[JobRequest]:
        return []


async def test_a_wake_during_a_rate_limit_waits_for_retry_after() -> None:
    api = LimitedApi()
    observer = observer_on(api, time.time)
    task = asyncio.create_task(observer.run(lambda observation: None))
    try:
        await wait_until(lambda: len(api.calls) == 1, what="the first read")
        await wait_until(lambda: observer.health.state is HealthState.RATE_LIMITED)
        assert observer.blocked_until() > time.time()
        # A command and a lane wanting the fast cycle, both during the backoff.
        observer.poll_soon()
        observer.set_fast(True, client="lane")
        await wait_until(lambda: len(api.calls) == 2, timeout=RETRY_AFTER + 5, what="the retry")
    finally:
        task.cancel()
    assert api.calls[1] - api.calls[0] >= RETRY_AFTER - 0.05


class CountingApi:
    """A healthy pool: one queued job; counts each kind of read."""

    def __init__(self) -> None:
        self.agent_reads = 0
        self.request_reads = 0

    def resolve_pool(self, name: str) -> Pool:
        return Pool(id=42, name=name)

    def list_agents(
        self, pool_id: int, *, include_capabilities: bool = False, **filters: object
    ) -> list[Agent]:
        self.agent_reads += 1
        return []

    def list_job_requests(self, pool_id: int) -> list[JobRequest]:
        self.request_reads += 1
        return [JobRequest(request_id=1)]


async def test_a_job_change_brings_the_queue_read_forward_but_not_closer_than_the_gap() -> None:
    """The queue is read every 30 s, and again soon after a job starts or ends here."""
    from gpuci_tui.core.engine.steps import PoolRead
    from gpuci_tui.core.host.observers.pool import JOBREQUESTS_INTERVAL, JOBREQUESTS_MIN_GAP

    now = [1000.0]
    api = CountingApi()
    observer = observer_on(api, lambda: now[0])
    views: list[PoolRead] = []

    async def cycle() -> float:
        return await observer.cycle(lambda obs: views.append(obs))  # type: ignore[arg-type]

    assert await cycle() == 10.0
    assert (api.request_reads, views[-1].view.jobs_read_at) == (1, 1000.0)
    assert views[-1].view.queued_jobs == 1
    now[0] += 10.0
    await cycle()
    assert api.request_reads == 1, "no job changed: the queue waits for its 30 s"
    assert views[-1].view.jobs_read_at == 1000.0, "the view says how old its queue is"
    observer.jobs_changed()
    await cycle()
    assert (api.request_reads, views[-1].view.jobs_read_at) == (2, 1010.0)
    # A second change right after that read: not read again yet; the cycle comes back
    # when the gap has passed instead of after the full interval.
    now[0] += 0.5
    observer.jobs_changed()
    assert await cycle() == JOBREQUESTS_MIN_GAP - 0.5
    assert api.request_reads == 2
    now[0] += JOBREQUESTS_MIN_GAP - 0.5
    await cycle()
    assert api.request_reads == 3
    now[0] += 10.0
    assert await cycle() == 10.0 and api.request_reads == 3
    now[0] += JOBREQUESTS_INTERVAL
    await cycle()
    assert api.request_reads == 4


def test_a_job_change_during_a_backoff_changes_nothing() -> None:
    """The backoff alone decides when the organisation is called again."""
    observer = observer_on(CountingApi(), lambda: 1000.0)
    observer.failed(AzureRateLimitError("rate limited", retry_after=30.0))
    observer.jobs_changed()
    assert not observer._wake.is_set()


def test_after_a_backoff_only_the_observers_read_probes_the_organisation() -> None:
    """Writes and history reads wait past the retry time until a read has succeeded.

    Otherwise every waiting part calls at the retry time, each with its own retries.
    """
    now = [1000.0]
    observer = observer_on(CountingApi(), lambda: now[0])
    assert observer.blocked_until() == 0.0, "nothing failed yet: anyone may call"
    delay = observer.failed(AzureError("HTTP 500"))
    assert observer.blocked_until() == now[0] + delay
    now[0] += delay + 5.0
    assert observer.blocked_until() == now[0] + PROBE_WAIT, "the probe has not answered yet"
    observer.answered()
    assert observer.blocked_until() == 0.0


async def test_a_failed_read_tells_the_engine_the_organisation_refuses_us() -> None:
    """`PoolUnread` with the observer's own retry time: the engine keeps slots going in place."""
    from gpuci_tui.core.engine.steps import PoolUnread

    observer = observer_on(LimitedApi(), lambda: 1000.0)
    seen: list[object] = []
    assert await observer.cycle(seen.append) == RETRY_AFTER
    assert seen == [PoolUnread(1000.0, 1000.0 + RETRY_AFTER, "rate limited")]
