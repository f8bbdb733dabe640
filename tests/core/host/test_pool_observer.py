"""The pool observer: when it reads (periodic, once after job ends, the queue), and its one backoff.

Wakes do not cut the backoff short; writes and reads wait for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from gpuci_tui.core.engine.server_steps import PoolRead, QueueRead
from gpuci_tui.core.errors import (
    AzureAuthError,
    AzureError,
    AzureRateLimitError,
    AzureServerError,
    AzureUnreachableError,
)
from gpuci_tui.core.host.observers.pool import PROBE_WAIT, PoolObserver
from gpuci_tui.core.host.observers.read_times import (
    JOB_END_READ_DELAY,
    MIN_READ_GAP,
    QUEUE_AFTER_START,
    QUEUE_AFTER_START_GAP,
)
from gpuci_tui.core.models import HealthState
from gpuci_tui.core.protocols import Agent, JobRequest, Pool
from tests.core.supervisor_env import wait_until
from tests.virtual_time import VirtualTimeLoop, run_virtual

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
    """Answers every pool read with 429 + Retry-After, recording when (``clock``) it was called."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.calls: list[float] = []

    def resolve_pool(self, name: str) -> Pool:
        return Pool(id=42, name=name)

    def list_agents(
        self, pool_id: int, *, include_capabilities: bool = False, **filters: object
    ) -> list[Agent]:
        self.calls.append(self.clock())
        raise AzureRateLimitError("rate limited", retry_after=RETRY_AFTER)

    def list_job_requests(self, pool_id: int) -> list[JobRequest]:
        return []


def test_a_wake_during_a_rate_limit_waits_for_retry_after() -> None:
    """On virtual time (tests/virtual_time.py): the retry comes at Retry-After, not before."""

    async def main(loop: VirtualTimeLoop) -> list[float]:
        api = LimitedApi(loop.clock)
        observer = observer_on(api, loop.clock)
        task = asyncio.create_task(observer.run(lambda observation: None))
        try:
            await wait_until(lambda: len(api.calls) == 1, what="the first read")
            await wait_until(lambda: observer.health.state is HealthState.RATE_LIMITED)
            assert observer.blocked_until() > loop.clock()
            # A command and a job end, both during the backoff.
            observer.poll_soon()
            observer.job_ended()
            await wait_until(lambda: len(api.calls) == 2, timeout=RETRY_AFTER + 5, what="the retry")
        finally:
            task.cancel()
        return api.calls

    calls = run_virtual(main)
    assert calls[1] - calls[0] >= RETRY_AFTER


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


async def test_reads_are_periodic_plus_one_after_job_ends_and_the_queue_every_30_s() -> None:
    """A busy host reads its agents every interval plus once per burst of job ends."""
    now = [1000.0]
    api = CountingApi()
    observer = observer_on(api, lambda: now[0])
    seen: list[object] = []

    async def cycle() -> float:
        return await observer.cycle(seen.append)

    def advance(seconds: float) -> None:
        now[0] += seconds

    assert await cycle() == 10.0  # the first: agents and queue
    assert (api.agent_reads, api.request_reads) == (1, 1)
    read = seen[-1]
    assert isinstance(read, PoolRead) and read.view.queued_jobs == 1
    advance(10.0)
    await cycle()
    assert (api.agent_reads, api.request_reads) == (2, 1), "the queue waits for its 30 s"
    assert isinstance(seen[-1], PoolRead) and seen[-1].view.jobs_read_at == 1000.0
    # Three jobs end within a second: one read of the agents, JOB_END_READ_DELAY later.
    advance(3.0)
    observer.job_ended()
    advance(0.4)
    observer.job_ended()
    observer.job_ended()
    assert not observer.due()
    assert observer.until_due() == pytest.approx(JOB_END_READ_DELAY - 0.4)
    advance(JOB_END_READ_DELAY - 0.4)
    await cycle()
    assert (api.agent_reads, api.request_reads) == (3, 1), "one read for the three ends"
    # The next job end comes soon after: its read keeps MIN_READ_GAP from the last one.
    observer.job_ended()
    assert observer.until_due() == pytest.approx(MIN_READ_GAP)
    advance(MIN_READ_GAP)
    await cycle()
    assert api.agent_reads == 4
    # The periodic read counts from the last read of the agents.
    assert observer.until_due() == pytest.approx(10.0)


async def test_an_idle_host_makes_one_call_per_cycle() -> None:
    """The queue's read takes the periodic agents read's turn: 6 calls a minute at 10 s."""
    now = [1000.0]
    api = CountingApi()
    observer = observer_on(api, lambda: now[0])
    seen: list[object] = []
    while now[0] < 1000.0 + 3 * 60.0:
        if observer.due():
            await observer.cycle(seen.append)
        now[0] += observer.until_due() or 0.5
    calls = api.agent_reads + api.request_reads
    assert calls <= 3 * 6 + 1, (api.agent_reads, api.request_reads)  # the first read is both
    assert api.request_reads >= 6  # every 30 s
    queue_only = [obs for obs in seen if isinstance(obs, QueueRead)]
    assert queue_only and all(obs.queued_jobs == 1 for obs in queue_only)


def test_a_job_change_during_a_backoff_changes_nothing() -> None:
    """The backoff alone decides when the organisation is called again."""
    observer = observer_on(CountingApi(), lambda: 1000.0)
    observer.failed(AzureRateLimitError("rate limited", retry_after=30.0))
    observer.job_ended()
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
    from gpuci_tui.core.engine.server_steps import PoolUnread

    observer = observer_on(LimitedApi(), lambda: 1000.0)
    seen: list[object] = []
    assert await observer.cycle(seen.append) == RETRY_AFTER
    assert seen == [PoolUnread(1000.0, 1000.0 + RETRY_AFTER, "rate limited")]


async def test_a_job_start_brings_the_queue_read_forward_once_per_10_s() -> None:
    """A burst shows a second after its first job; a busy host reads its queue ~6 times/min."""
    now = [1000.0]
    api = CountingApi()
    observer = observer_on(api, lambda: now[0])
    await observer.cycle(lambda obs: None)  # agents and queue
    assert api.request_reads == 1
    now[0] += 2.0
    observer.job_started()  # the first job of a burst: the queue a moment later
    assert observer.until_due() == pytest.approx(QUEUE_AFTER_START)
    now[0] += QUEUE_AFTER_START
    await observer.cycle(lambda obs: None)
    assert api.request_reads == 2
    now[0] += 1.0
    observer.job_started()  # the burst's next jobs: no read of their own
    # The queue's read took the periodic agents read's place: that comes an interval later.
    assert observer.until_due() == pytest.approx(10.0 - 1.0)
    now[0] += QUEUE_AFTER_START_GAP
    observer.job_started()  # ten seconds on, still busy: the queue again
    assert observer.until_due() == pytest.approx(0.0)
    await observer.cycle(lambda obs: None)
    now[0] += QUEUE_AFTER_START
    await observer.cycle(lambda obs: None)
    assert api.request_reads == 3


DOWN = HealthState.ERROR


@pytest.mark.parametrize(
    ("error", "failures", "delay", "state"),
    [
        # The organisation is down: one probe per poll interval (10 s), however long.
        (AzureServerError("HTTP 500"), 1, 10.0, DOWN),
        (AzureServerError("HTTP 500"), 9, 10.0, DOWN),
        (AzureUnreachableError("connection refused"), 9, 10.0, HealthState.UNREACHABLE),
        # It said when to come back: as told, longer or shorter than the interval.
        (AzureServerError("HTTP 503", retry_after=45.0), 1, 45.0, DOWN),
        (AzureServerError("HTTP 503", retry_after=3.0), 4, 3.0, DOWN),
        (AzureRateLimitError("HTTP 429", retry_after=60.0), 1, 60.0, HealthState.RATE_LIMITED),
        # Not a matter of time: a rejected PAT, or an answer we cannot use, waits longer.
        (AzureAuthError("HTTP 401"), 1, 60.0, HealthState.AUTH_FAILED),
        (AzureError("not JSON"), 3, 8.0, DOWN),
    ],
)
def test_the_backoff_after_a_failure(
    error: AzureError, failures: int, delay: float, state: HealthState
) -> None:
    observer = observer_on(CountingApi(), lambda: 1000.0)
    delays = [observer.failed(error) for _ in range(failures)]
    assert delays[-1] == delay and observer.health.state is state
    assert observer.health.retry_at == 1000.0 + delay


class OutageApi(CountingApi):
    """Answers HTTP 500 until ``back_at`` on the fake clock.

    A call retries for ``CLIENT_RETRIES`` seconds, as the client does, before it raises;
    a retry after ``back_at`` is answered. ``probes``: each call's start and its answer
    (None: it failed).
    """

    CLIENT_RETRIES = 7.5

    def __init__(self, now: list[float], back_at: float) -> None:
        super().__init__()
        self.now, self.back_at = now, back_at
        self.probes: list[tuple[float, float | None]] = []

    def list_agents(
        self, pool_id: int, *, include_capabilities: bool = False, **filters: object
    ) -> list[Agent]:
        began = self.now[0]
        if began + self.CLIENT_RETRIES < self.back_at:
            self.now[0] += self.CLIENT_RETRIES
            self.probes.append((began, None))
            raise AzureServerError("HTTP 500")
        self.now[0] = max(began, self.back_at)
        self.probes.append((began, self.now[0]))
        return super().list_agents(pool_id, include_capabilities=include_capabilities)


@pytest.mark.parametrize("window", [30.0, 60.0, 300.0])
async def test_after_an_outage_the_next_read_comes_within_one_poll_interval(window: float) -> None:
    """A 500 window, the engine's writes failing too: probed once per interval, back at once.

    Each failed write adds to the failures in a row (`executor` reports them through
    `failed`); a backoff that grew with them read again up to a minute after the window.
    """
    now = [1000.0]
    api = OutageApi(now, back_at=1000.0 + window)
    observer = observer_on(api, lambda: now[0])
    seen: list[object] = []
    while not any(isinstance(obs, PoolRead) for obs in seen):
        if observer.due():
            delay = await observer.cycle(seen.append)
            if observer.health.state is DOWN:
                observer.failed(AzureServerError("HTTP 500"))  # a write of the engine's
        else:
            delay = observer.until_due()
        now[0] += delay
        assert now[0] < 1000.0 + window + 120.0, api.probes
    starts = [began for began, _ in api.probes]
    assert all(b - a >= observer.interval for a, b in zip(starts, starts[1:], strict=False))
    answered = api.probes[-1][1]
    assert answered is not None and answered <= api.back_at + observer.interval, api.probes
