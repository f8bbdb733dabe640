"""Job generators: a steady feed for the demo, a batch for benchmarks."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import JobKind

PIPELINES = (
    "train - main",
    "train - nightly",
    "cuda-kernels - PR",
    "inference-bench - main",
    "base - main",
)


def queue_batch(
    org: SimOrg,
    pool_id: int,
    n: int,
    duration: float | tuple[float, float] = 1.0,
    *,
    kind: JobKind = "normal",
    pipelines: Sequence[str] = PIPELINES,
    seed: int | None = 0,
) -> list[int]:
    """Queue ``n`` jobs at once (benchmarks) and return their request ids.

    Args:
        org: The organisation.
        pool_id: Target pool.
        n: Number of jobs.
        duration: Seconds per job, or a ``(min, max)`` range drawn uniformly.
        kind: Kind of every job.
        pipelines: Pipeline names used in turn.
        seed: Seed for the durations (None: not reproducible).
    """
    rng = random.Random(seed)
    ids = []
    for i in range(n):
        secs = rng.uniform(*duration) if isinstance(duration, tuple) else duration
        ids.append(org.queue_job(pool_id, pipelines[i % len(pipelines)], duration=secs, kind=kind))
    return ids


class JobFeeder:
    """A daemon thread that queues jobs at a steady average rate (Poisson arrivals).

    Args:
        org: The organisation.
        pool_id: Target pool.
        rate_per_min: Average jobs per minute.
        duration: ``(min, max)`` job length in seconds, drawn uniformly.
        seed: Random seed (None: not reproducible).
        fail_share: Fraction of jobs that fail (kind ``fail``).
        oom_share: Fraction of jobs that run out of memory (kind ``oom``).
        max_queued: Do not let more than this many jobs wait unassigned (the queue stays
            bounded whatever the agents can take).

    Use as a context manager, or call `start` and `stop`.
    """

    def __init__(
        self,
        org: SimOrg,
        pool_id: int,
        rate_per_min: float,
        duration: tuple[float, float] = (20.0, 90.0),
        seed: int | None = None,
        *,
        fail_share: float = 0.0,
        oom_share: float = 0.0,
        max_queued: int = 50,
    ) -> None:
        if rate_per_min <= 0:
            raise ValueError("rate_per_min must be positive")
        self.org = org
        self.pool_id = pool_id
        self.rate_per_min = rate_per_min
        self.duration = duration
        self.fail_share = fail_share
        self.oom_share = oom_share
        self.max_queued = max_queued
        self.queued: list[int] = []
        self.skipped = 0
        """Arrivals dropped because ``max_queued`` jobs were already waiting."""
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim-job-feeder", daemon=True)

    def start(self) -> JobFeeder:
        """Start queueing."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop queueing (jobs already queued stay)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2)

    def __enter__(self) -> JobFeeder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def queue_batch(
        self, n: int, duration: float | tuple[float, float] = 1.0, kind: JobKind = "normal"
    ) -> list[int]:
        """Queue ``n`` jobs at once into this feeder's pool (see the module's `queue_batch`)."""
        ids = queue_batch(
            self.org, self.pool_id, n, duration, kind=kind, seed=self._rng.randrange(2**31)
        )
        self.queued.extend(ids)
        return ids

    def _next_kind(self) -> JobKind:
        roll = self._rng.random()
        if roll < self.oom_share:
            return "oom"
        if roll < self.oom_share + self.fail_share:
            return "fail"
        return "normal"

    def _run(self) -> None:
        while not self._stop.wait(self._rng.expovariate(self.rate_per_min / 60.0)):
            # Only jobs no agent has taken yet wait; running ones are the agents' work.
            unfinished = self.org.job_requests(self.pool_id, completed_request_count=0)
            waiting = sum(1 for job in unfinished if job.state == "queued")
            if waiting >= self.max_queued:
                self.skipped += 1
                continue
            rid = self.org.queue_job(
                self.pool_id,
                self._rng.choice(PIPELINES),
                duration=self._rng.uniform(*self.duration),
                kind=self._next_kind(),
            )
            self.queued.append(rid)


__all__ = ["PIPELINES", "JobFeeder", "queue_batch"]
