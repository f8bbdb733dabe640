"""The recorder's book: which of our jobs have their row, and what waits for its other side.

A job's row has two sides (`history_rows`): what the host saw of its container,
and the organisation's view of its request. Either may come first, late, twice,
or (the daemon was not running) never. The book keeps what it knows so that each
job request is one row:

* rows written, by request id: with the organisation's view or not, with the
  host's facts or not (`_Row`);
* the host's rows still without a request (a job seen only by its agent's line),
  and the ends of containers where no job was seen at all (a job may have run
  between two reads): both matched to requests by `job_match`; a container where
  no job was seen gets a row only when a request matches it;
* finished requests without a row: they get one of their own (``reconciled``)
  once `GRACE` passed without their container's end (at once when they ended
  before this daemon started);
* the look-back mark (`JobHistory.mark`): every finished request up to it has
  its row; a restarted daemon reads from there.

Synchronous, one step at a time (`JobRecorder` runs each in a thread, in order);
the clock is given. Records to report (`on_record`: once per job, when its row has
the organisation's view or stopped waiting for it) are collected in `reports`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpuci_tui.core.host.observers.history_rows import request_record, with_request
from gpuci_tui.core.host.observers.job_match import SLACK, Finished, RanJob, pair, slot_of
from gpuci_tui.core.protocols import JobRequest
from gpuci_tui.core.store.history import JobHistory, JobRecord

#: A finished request whose container's end was not seen this long after it gets its own row.
GRACE = 30.0
#: How long a row waits for its other side before it is reported as it is (a container
#: where no job was seen: before it is forgotten); a request matched later still completes it.
MAX_WAIT = 300.0
#: The look-back reads this far before the mark (jobs in flight at it, the two clocks).
MARGIN = 120.0
#: Finished requests are kept this long for the ends of containers that come late.
RECENT = 900.0
#: The mark is written when it moved this far (or our agents changed).
MARK_STEP = 30.0


@dataclass
class _Row:
    """A job request's row: which sides it has."""

    view: bool
    exit: bool
    at: float
    """When this daemon learned of the request (its clock): rows are forgotten by it."""


@dataclass(frozen=True)
class _Unseen:
    """The end of a container where no job was seen: a row only if a request matches it."""

    ran: RanJob
    record: JobRecord
    at: float


class HistoryBook:
    """One instance's jobs in the history, and what each still waits for."""

    def __init__(
        self,
        history: JobHistory,
        instance: str,
        clock: Callable[[], float],
        *,
        grace: float | None = None,
    ) -> None:
        """Keep ``instance``'s rows in ``history``; ``grace``: see `GRACE` (None: that, read
        when the book is made, like the other windows, so a harness can scale them).
        """
        self.history = history
        self.instance = instance
        self.clock = clock
        self.grace = GRACE if grace is None else grace
        self.born = clock()
        """When this daemon began: a job that ended before cannot be seen ending by it."""
        self.started = False
        self.reports: list[JobRecord] = []
        """Rows to report (`on_record`), taken by the recorder after each step."""
        self._through = self.born
        self._written: tuple[float, tuple[int, ...]] | None = None
        self._agents: dict[int, str] = {}
        self._rows: dict[int, _Row] = {}
        self._exits: dict[int, tuple[RanJob, float]] = {}
        self._unseen: list[_Unseen] = []
        self._open: dict[int, tuple[Finished, float]] = {}
        self._recent: dict[int, Finished] = {}
        self._unreported: dict[tuple[str, int], float] = {}
        self._running: set[int] = set()
        self._gone: dict[int, float] = {}
        """Requests a read saw our agents run, gone from the next without their row yet
        (since then): one whose end the list's last finished request skipped (its agent
        ended it and took another between two reads) waits for a read of them all."""

    # ------------------------------------------------------------------ what it knows

    def start(self) -> None:
        """Read the mark and the rows since it (once): what a restarted daemon continues."""
        if self.started:
            return
        self.started = True
        mark = self.history.mark(self.instance)
        if mark is not None:
            self._through, ids = mark
            self._written = (self._through, ids)
            for agent_id in ids:
                self._agents.setdefault(agent_id, "")
        since = self._through - MARGIN
        now = self.clock()
        for request_id, (view, host) in self.history.requests_since(self.instance, since).items():
            self._rows[request_id] = _Row(view, host, now)
        for row in self.history.unmatched_since(self.instance, since):
            if row.id is not None:
                self._exits[row.id] = (RanJob(row.agent, row.started_at, row.ended_at), now)

    def agents_seen(self, agents: dict[int, str], running: set[int]) -> None:
        """Our agents' registrations (id: name) as a read of the pool gave them, and the
        requests they were running.
        """
        self._agents.update(agents)
        now = self.clock()
        for request_id in self._running - running:
            if request_id not in self._rows and request_id not in self._open:
                self._gone.setdefault(request_id, now)
        self._running = set(running)

    def agent_ids(self) -> set[int]:
        """Every registration of ours whose finished requests a reconciliation reads."""
        return set(self._agents)

    def agent_name(self, agent_id: int | None) -> str:
        """The name of one of our registrations (empty: not known by name)."""
        return self._agents.get(agent_id, "") if agent_id is not None else ""

    def waiting_since(self) -> float | None:
        """Since when the oldest row has waited for its request or its view (None: none)."""
        now = self.clock()
        times = [t for key, t in self._unreported.items() if key[0] == "req"]
        times += [t for _, t in self._exits.values()]
        times += [t for k, t in self._gone.items() if k not in self._rows and k not in self._open]
        fresh = [t for t in times if now - t < MAX_WAIT]
        return min(fresh, default=None)

    # ------------------------------------------------------------------ the host's side

    def exited(self, record: JobRecord, ran: RanJob, *, seen: bool) -> None:
        """A container that took a job ended (``seen``: a job was seen on it)."""
        self.start()
        now = self.clock()
        if ran.request_id is not None:
            self._write_exit(record, ran.request_id, now)
            return
        if not seen:
            self._unseen.append(_Unseen(ran, record, now))
        else:
            row_id = self.history.add(record)
            if row_id is not None:
                self._exits[row_id] = (ran, now)
                self._unreported[("row", row_id)] = now
        self._settle(now)  # its request may be known already

    def _claimable(self) -> list[Finished]:
        """Finished requests a container's end may still claim (no host facts in their row)."""
        return [
            f
            for f in self._recent.values()
            if (row := self._rows.get(f.request_id)) is None or not row.exit
        ]

    def _write_exit(self, record: JobRecord, request_id: int, now: float) -> None:
        finished = self._recent.get(request_id)
        before = self._rows.get(request_id)
        if finished is not None:
            record = with_request(record, finished.request)
        else:
            record = dataclasses.replace(record, request_id=request_id)
        self.history.add(record)
        view = finished is not None or (before is not None and before.view)
        self._rows[request_id] = _Row(view, True, before.at if before else now)
        self._open.pop(request_id, None)
        if before is None and view:
            self.reports.append(record)
        elif before is None:
            self._unreported[("req", request_id)] = now

    # ------------------------------------------------------------------ the organisation's side

    def learned(self, finished: Iterable[tuple[str, JobRequest]]) -> None:
        """Finished requests of our agents (agent name, request): match, complete, write."""
        self.start()
        now = self.clock()
        for agent, request in finished:
            job = Finished(agent, request)
            row = self._rows.get(job.request_id)
            end = job.finished_at
            if request.result is None:
                continue
            if row is not None:
                if not row.view:  # the view a row waited for
                    self.history.add_request(self._request_record(job))
                    row.view = True
                    self._report(("req", job.request_id))
                if not row.exit:
                    self._recent[job.request_id] = job  # a late container's end may claim it
                continue
            if end is not None and end < self._through - MARGIN:
                continue  # older than the look-back: settled before
            self._recent[job.request_id] = job
            self._open.setdefault(job.request_id, (job, now))
        self._settle(now)

    def _settle(self, now: float) -> None:
        """Pair waiting ends and requests; write what waited long enough; move the mark."""
        exits = [(ran, row_id) for row_id, (ran, _) in self._exits.items()]
        ran = [r for r, _ in exits] + [u.ran for u in self._unseen]
        matched: set[int] = set()
        for ended, request in pair(ran, self._claimable()):
            at = next(i for i, r in enumerate(ran) if r is ended)
            matched.add(at)
            if at >= len(exits):
                self._write_exit(self._unseen[at - len(exits)].record, request.request_id, now)
                continue
            row_id = exits[at][1]
            before = self._rows.get(request.request_id)
            self.history.attach(row_id, self._request_record(request))
            del self._exits[row_id]
            self._rows[request.request_id] = _Row(True, True, before.at if before else now)
            self._open.pop(request.request_id, None)
            if self._unreported.pop(("row", row_id), None) is not None and before is None:
                self._report_request(request.request_id)
        self._unseen = [
            u
            for i, u in enumerate(self._unseen, start=len(exits))
            if i not in matched and now - u.at < MAX_WAIT
        ]
        for request_id, (job, seen) in list(self._open.items()):
            end = job.finished_at if job.finished_at is not None else seen
            if end < self.born - SLACK or now - end >= self.grace:
                record = self._request_record(job)
                self.history.add_request(record)
                self._rows[request_id] = _Row(True, False, now)
                del self._open[request_id]
                self.reports.append(record)
        for key, since in list(self._unreported.items()):
            if now - since >= MAX_WAIT:
                self._report(key)
        self._exits = {k: v for k, v in self._exits.items() if now - v[1] < RECENT}
        # A row is remembered only to write each request once. Once the mark has passed it
        # (with the look-back's margin), a read that lists the request again skips it as
        # settled anyway: forget it, or a daemon that runs for months holds one per job.
        settled = min(now - RECENT, self._through - MARGIN)
        self._rows = {k: r for k, r in self._rows.items() if r.at >= settled}
        self._recent = {
            k: f for k, f in self._recent.items() if now - (f.finished_at or now) < RECENT
        }
        self._gone = {
            k: t
            for k, t in self._gone.items()
            if k not in self._rows and k not in self._open and now - t < RECENT
        }
        self._move_mark(now)

    def _move_mark(self, now: float) -> None:
        """Every finished request before the mark has its row; keep it for the next start."""
        pending = [job.finished_at or seen for job, seen in self._open.values()]
        pending += [ran.ended_at - SLACK for ran, _ in self._exits.values()]
        pending += [u.ran.ended_at - SLACK for u in self._unseen]
        pending += [t for key, t in self._unreported.items() if key[0] == "req"]
        pending += [t - SLACK for t in self._gone.values()]
        self._through = max(self._through, min([now - self.grace, *pending]))
        ids = tuple(sorted(self._agents))
        written = self._written
        if written is None or self._through - written[0] >= MARK_STEP or written[1] != ids:
            self.history.set_mark(self.instance, self._through, ids)
            self._written = (self._through, ids)

    def _request_record(self, job: Finished) -> JobRecord:
        return request_record(self.instance, slot_of(job.agent) or 0, job.agent, job.request)

    # ------------------------------------------------------------------ reporting

    def _report(self, key: tuple[str, int]) -> None:
        if self._unreported.pop(key, None) is None:
            return
        kind, number = key
        row = self.history.request_row(self.instance, number) if kind == "req" else None
        row = row or (self.history.row(number) if kind == "row" else None)
        if row is not None:
            self.reports.append(row)

    def _report_request(self, request_id: int) -> None:
        row = self.history.request_row(self.instance, request_id)
        if row is not None:
            self.reports.append(row)

    def report_all(self) -> None:
        """Report every row still waiting for its other side (at shutdown)."""
        for key in list(self._unreported):
            self._report(key)
