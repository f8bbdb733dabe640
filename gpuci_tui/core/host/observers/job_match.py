"""Which finished job request a job the host saw was: by what was seen, never "the latest".

A job the host saw is one container of one lane (`RanJob`): each container takes
one job. It is tied to a finished request of the organisation only by what was
seen of it:

1. the request the lane was seen running (its assigned request in a read of the
   pool): that id, and nothing else;
2. else (the job started and ended between two reads; or only the agent's own
   ``Running job: NAME`` line told of it): a request of the same agent assigned
   while the container lived. The agent takes a job only with a session, which
   only a live container holds, so the assignment falls in the container's life
   (`SLACK` for the two clocks); the job's name breaks a tie (a hint: a job may
   print anything, so it never makes a match alone).

Never "the agent's latest finished request": by the time it is read, the agent
may have run newer jobs. `pair` matches several jobs and requests at once, one
to one, closest first. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from gpuci_tui.core.protocols import JobRequest

#: Seconds the organisation's clock may differ from the host's when times are compared. Less
#: than a lane's quickest next start-up (its next agent registers and opens a session before
#: it can be assigned a job), so the next container's job never fits this one.
SLACK = 2.0
_SLOT = re.compile(r"-(\d+)(?:-[a-z])?$")


@dataclass(frozen=True)
class RanJob:
    """What the host saw of a job: the lane's container that ran it."""

    agent: str
    """The lane's agent (registration) name."""
    started_at: float | None
    """When the container started (None: not known)."""
    ended_at: float
    """When it ended."""
    request_id: int | None = None
    """The request a read of the pool showed it running (None: never seen in a read)."""
    name: str | None = None
    """The job's name from the agent's ``Running job: NAME`` line (None: not seen)."""


@dataclass(frozen=True)
class Finished:
    """A finished request of one of our agents."""

    agent: str
    request: JobRequest

    @property
    def request_id(self) -> int:
        """The request's id."""
        return self.request.request_id

    @property
    def assigned_at(self) -> float | None:
        """When the organisation assigned it (Unix)."""
        return unix(self.request.assign_time)

    @property
    def finished_at(self) -> float | None:
        """When it finished (Unix)."""
        return unix(self.request.finish_time)


def unix(stamp: str | None) -> float | None:
    """An Azure DevOps timestamp as Unix seconds (None: missing or unreadable)."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def slot_of(agent: str) -> int | None:
    """The slot number in a lane's agent name (``PREFIX-3``, ``PREFIX-3-b``: 3)."""
    found = _SLOT.search(agent)
    return int(found[1]) if found else None


def distance(ran: RanJob, finished: Finished) -> float | None:
    """How far ``finished`` is from being ``ran``'s job: 0.0 fits, None cannot be.

    By id when a read saw the job; else by the assignment falling in the
    container's life (seconds outside it, up to `SLACK`).
    """
    if finished.agent != ran.agent:
        return None
    if ran.request_id:
        return 0.0 if finished.request_id == ran.request_id else None
    assigned = finished.assigned_at
    if assigned is None:
        return None
    start = ran.started_at if ran.started_at is not None else assigned
    outside = max(0.0, start - assigned, assigned - ran.ended_at)
    return outside if outside <= SLACK else None


def named(ran: RanJob, finished: Finished) -> bool:
    """Whether the agent's line named this request's job (its name, or the pipeline's)."""
    request = finished.request
    return ran.name is not None and ran.name in (request.job_name, request.definition_name)


def match(ran: RanJob, candidates: Iterable[Finished]) -> Finished | None:
    """The request that was ``ran``'s job among ``candidates`` (None: none can be)."""
    found = pair([ran], candidates)
    return found[0][1] if found else None


def pair(ran: Iterable[RanJob], candidates: Iterable[Finished]) -> list[tuple[RanJob, Finished]]:
    """Jobs and requests matched one to one: the closest fit first, a named one before
    another, then the earliest assigned (one job per container).
    """
    requests = list(candidates)
    scored: list[tuple[tuple[float, bool, float], int, RanJob, Finished]] = []
    for i, job in enumerate(ran):
        for request in requests:
            off = distance(job, request)
            if off is not None:
                rank = (off, not named(job, request), request.assigned_at or 0.0)
                scored.append((rank, i, job, request))
    scored.sort(key=lambda s: (s[0], s[1]))
    taken_jobs: set[int] = set()
    taken_requests: set[int] = set()
    pairs: list[tuple[RanJob, Finished]] = []
    for _, i, job, request in scored:
        if i in taken_jobs or request.request_id in taken_requests:
            continue
        taken_jobs.add(i)
        taken_requests.add(request.request_id)
        pairs.append((job, request))
    return pairs
