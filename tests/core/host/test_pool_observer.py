"""The pool observer's one backoff: wakes do not cut it short, writes and reads wait for it."""

from __future__ import annotations

import asyncio
import time

from gpuci_tui.core.errors import AzureRateLimitError
from gpuci_tui.core.host.pool_observer import PoolObserver
from gpuci_tui.core.models import HealthState
from gpuci_tui.core.protocols import Agent, JobRequest, Pool
from tests.core.supervisor_env import wait_until

RETRY_AFTER = 1.5


class LimitedApi:
    """Answers every pool read with 429 + Retry-After, recording when it was called."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def resolve_pool(self, name: str) -> Pool:
        return Pool(id=42, name=name)

    def list_agents(self, pool_id: int) -> list[Agent]:
        self.calls.append(time.monotonic())
        raise AzureRateLimitError("rate limited", retry_after=RETRY_AFTER)

    def list_job_requests(self, pool_id: int) -> list[JobRequest]:
        return []


async def test_a_wake_during_a_rate_limit_waits_for_retry_after() -> None:
    api = LimitedApi()
    observer = PoolObserver(
        api,  # type: ignore[arg-type]
        "gpu",
        clock=time.time,
        interval=10.0,
        report=lambda kind, message: None,
    )
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
