"""The intake drill: jobs keep coming while the organisation refuses every call of the daemon.

One scenario, two sizes: the drill (tests/drills/test_org_fault_drills.py) runs it
short; bench/bench_org_faults.py with the issue's figures (429 for 60 s, 500 for
30 s, 4 slots, agents that take 9 s to start, 3-s jobs).

The real daemon with hot standby runs against the simulated organisation, its
slots busy with a queue that never runs dry. Then every public call (the
daemon's; the agents' own calls go on) is answered 429 with ``Retry-After``, or
500, for ``window`` seconds. What is measured, from the organisation's own
records:

* jobs started in the window, against the cold path's rate (each lane one job
  per start-up + job: what a slot can do without the standby's hand-over);
* overlaps (two jobs at once on one slot's agents) and jobs lost (not succeeded,
  or handed out more than once);
* the requests of the daemon the refusing organisation saw in the window (what
  its probes and any in-call retries cost it);
* after the window: when the daemon's first call was answered, and for each slot
  how long its first job after that waited for the slot (from that answer, or
  from the slot's previous job's end if later): a hot standby takes it at once,
  a lane still starting would make it wait up to a start-up. The same from the
  window's end adds what the daemon's backoff takes to find the organisation back.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.real.rig import Rig, slot_of_agent, wait_for

Fault = Literal["429", "500"]


@dataclass(frozen=True)
class Intake:
    """What one run of the scenario measured."""

    fault: Fault
    window: float
    slots: int
    startup: float
    """The agents' start-up as the organisation simulates it (registration + session)."""
    job_seconds: float
    started: int
    """Jobs handed out in the window."""
    per_slot: tuple[int, ...]
    """Of those, per slot (a slot with none stopped taking jobs for the whole window)."""
    overlaps: int
    lost: int
    requests: int
    """The daemon's requests the organisation refused in the window (probes, retries)."""
    back_after: float | None
    """Seconds from the window's end to the first answered call of the daemon (None: not
    waited for)."""
    first_waits: tuple[float, ...]
    """Per slot, the wait of its first job after that answer (see the module docstring)."""
    after_window: tuple[float, ...]
    """Per slot, the same from the window's end: what the daemon's backoff adds."""
    jobs: tuple[int, ...] = field(repr=False)

    @property
    def per_minute(self) -> float:
        """Jobs started per minute in the window."""
        return self.started / self.window * 60.0

    @property
    def cold_per_minute(self) -> float:
        """The cold path's rate: every lane one job per start-up + job."""
        return self.slots * 60.0 / (self.startup + self.job_seconds)

    def line(self) -> str:
        """The figures in one line."""
        head = (
            f"{self.fault} for {self.window:.0f} s on {self.slots} slots: {self.started} jobs "
            f"started ({self.per_minute:.1f}/min; cold path {self.cold_per_minute:.1f}/min; "
            f"per slot {list(self.per_slot)}), {self.overlaps} overlaps, {self.lost} lost, "
            f"{self.requests} requests refused"
        )
        if self.back_after is None:
            return head
        waits = ", ".join(f"{w:.2f}" for w in self.first_waits)
        after = ", ".join(f"{w:.1f}" for w in self.after_window)
        return (
            f"{head}; answered {self.back_after:.1f} s after the window, first job per slot "
            f"then waited {waits} s ({after} s from the window's end)"
        )


class Feeder:
    """Keeps ``depth`` jobs queued in a thread, so the slots never run dry."""

    def __init__(self, rig: Rig, depth: int, job_seconds: float) -> None:
        self.rig, self.depth, self.job_seconds = rig, depth, job_seconds
        self.jobs: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="job-feeder", daemon=True)

    def start(self) -> None:
        """Begin feeding (once)."""
        if not self._thread.is_alive():
            self._thread.start()

    def __enter__(self) -> Feeder:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        org, pool = self.rig.org, self.rig.pool_id
        while not self._stop.is_set():
            queued = sum(1 for job in org.jobs(pool) if job.state == "queued")
            for _ in range(self.depth - queued):
                self.jobs.append(org.queue_job(pool, duration=self.job_seconds))
            self._stop.wait(0.1)  # a pacing interval for topping up, not synchronisation

    def finished(self) -> int:
        """Jobs of this feeder that have ended."""
        return sum(1 for job in self.rig.org.jobs(self.rig.pool_id) if job.result is not None)


def refused_intake(
    rig: Rig,
    fault: Fault,
    *,
    window: float,
    job_seconds: float,
    retry_after: float,
    startup: float,
    mid_flow: bool = True,
    recover: bool = True,
    settle: float = 60.0,
) -> Intake:
    """Run the scenario on ``rig`` (its daemon not started yet) and measure it.

    Args:
        rig: The organisation, configuration and Docker (tests/real/rig.py).
        fault: ``"429"`` (with ``Retry-After: retry_after``) or ``"500"``.
        window: Seconds every public call is refused.
        job_seconds: Length of each job.
        retry_after: The 429's ``Retry-After``.
        startup: The agents' start-up the organisation was made with (for the rate).
        mid_flow: The window begins while the slots are busy (the hot standby at work);
            else on idle slots with ready standbys, as the jobs begin to come.
        recover: Wait for the daemon's first answered call after the window and a job on
            every slot after it (after a 500 its backoff may take up to a minute).
        settle: Deadline for each wait outside the window (start, recovery, drain).
    """
    slots = rig.config.agents.count
    rig.start_daemon()
    wait_for(rig.all_idle, settle, "every slot idle with a ready standby")
    feeder = Feeder(rig, depth=slots + 2, job_seconds=job_seconds)
    if mid_flow:
        feeder.start()
        # Warm: the hot standby has handed over on every slot at least once.
        wait_for(lambda: feeder.finished() >= 2 * slots, settle, "the hot standby at work")
    t0 = time.time()
    if fault == "429":
        armed = rig.org.faults.rate_limit(retry_after=retry_after)
    else:
        armed = rig.org.faults.server_error(500)
    with feeder:
        wait_for(lambda: time.time() >= t0 + window, window + 5, "the end of the window")
        rig.org.faults.clear(armed)
        t_end = time.time()
        refused = [e for e in rig.org.request_log(t0) if not e.private and e.at < t_end]
        back = None
        if recover:
            back = wait_for(lambda: _first_answer(rig, t_end), settle, "the daemon's answer")
            wait_for(lambda: len(_first_jobs(rig, back)) == slots, settle, "a job on every slot")
    jobs = list(feeder.jobs)
    # Nothing more is queued: every job handed out or still queued runs to its end.
    wait_for(lambda: all(rig.org.job(j).result for j in jobs), settle, "the queue drained")
    records = [rig.org.job(j) for j in jobs]
    in_window = [r for r in records if r.assign_time and t0 <= r.assign_time < t_end]
    return Intake(
        fault=fault,
        window=window,
        slots=slots,
        startup=startup,
        job_seconds=job_seconds,
        started=len(in_window),
        per_slot=tuple(
            sum(1 for r in in_window if slot_of_agent(r.agent_name or "-x-0") == n)
            for n in range(slots)
        ),
        overlaps=overlaps(records),
        lost=sum(1 for r in records if r.result != "succeeded" or r.assign_count != 1),
        requests=len(refused),
        back_after=None if back is None else back - t_end,
        first_waits=() if back is None else _waits(rig, back),
        after_window=() if back is None else _waits(rig, t_end),
        jobs=tuple(jobs),
    )


def _waits(rig: Rig, since: float) -> tuple[float, ...]:
    """`_first_jobs`' waits in slot order."""
    return tuple(wait for _, wait in sorted(_first_jobs(rig, since).items()))


def _first_answer(rig: Rig, since: float) -> float | None:
    """When the organisation first answered a public call of the daemon at or after ``since``."""
    answered = [e.at for e in rig.org.request_log(since) if not e.private and e.status < 400]
    return min(answered, default=None)


def _first_jobs(rig: Rig, since: float) -> dict[int, float]:
    """Per slot that had one: the wait of its first job assigned at or after ``since``."""
    spans: dict[int, list[Any]] = defaultdict(list)
    for job in rig.org.jobs(rig.pool_id):
        if job.agent_name and job.assign_time is not None:
            spans[slot_of_agent(job.agent_name)].append(job)
    waits: dict[int, float] = {}
    for slot, jobs in spans.items():
        jobs.sort(key=lambda job: job.assign_time)
        ended = since
        for job in jobs:
            if job.assign_time >= since:
                waits[slot] = job.assign_time - ended
                break
            if job.finish_time is not None:
                ended = max(ended, job.finish_time)
    return waits


def overlaps(records: list[Any]) -> int:
    """Pairs of jobs that ran at the same time on the agents of one slot."""
    return len(overlapping(records))


def overlapping(records: Any) -> list[tuple[int, int]]:
    """The request ids of each pair of jobs that ran at once on the agents of one slot."""
    spans: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    for job in records:
        if job.agent_name and job.assign_time is not None:
            end = job.finish_time if job.finish_time is not None else float("inf")
            spans[slot_of_agent(job.agent_name)].append((job.assign_time, end, job.request_id))
    found: list[tuple[int, int]] = []
    for items in spans.values():
        items.sort()
        found += [
            (first, second)
            for (_, end, first), (start, _, second) in zip(items, items[1:], strict=False)
            if start < end
        ]
    return found
