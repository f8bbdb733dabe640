"""Every job that ran on our agents has exactly one history row, whatever happened meanwhile.

Two sides feed the history (`history_rows`, the write-once rule `store.job_rows`):

* The host: the supervisor calls the recorder (``on_job_finished``) when a
  container that took a job exits. The GPU figures are taken from the accountant
  at once and the row is written at once, tied to the request the lane was seen
  running, or to none yet.
* The organisation: the finished requests of our agents, from every read of the
  pool (each agent's ``lastCompletedRequest`` comes with the list: no call of its
  own) and, at start, after the organisation comes back from a failure, and when
  a row waits too long for its view, from one read of our agents' finished
  requests (``jobrequests?agentIds=…``, `AgentPoolApi.finished_jobs`).

A request is tied to a row by id, or to a row written without one by its agent and
times (`job_match`: never "the agent's latest"). A request whose end the host did
not see (the daemon was not running) gets a row of its own, marked ``reconciled``,
once `GRACE` has passed without its container's end (at once for a job that ended
before this daemon started). How far back to look is kept in the history
(`JobHistory.mark`): every finished request up to then has its row. A failed read
or write is logged, never fatal.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Coroutine
from typing import Any

from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.steps import JobEnded
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.gpu.accounting import JobAccountant, key_of
from gpuci_tui.core.host.observers.history_book import HistoryBook
from gpuci_tui.core.host.observers.history_rows import exit_record, ran_job
from gpuci_tui.core.protocols import AgentPoolApi, JobRequest
from gpuci_tui.core.store.history import JobHistory, JobRecord

log = logging.getLogger("gpuci_tui.history")

#: The finished requests one reconciliation reads (the service's cap on one answer).
FINISHED_READ = 200
#: A row waiting this long for its view (or for its request) asks for a read of our
#: agents' finished requests...
PENDING_READ = 15.0
#: ...at most this often.
FULL_READ_GAP = 30.0


class JobRecorder:
    """The supervisor's ``on_job_finished`` and the pool observer's reader of finished requests."""

    def __init__(
        self,
        history: JobHistory,
        api: AgentPoolApi,
        instance: str,
        *,
        pool_id: Callable[[], int | None],
        accountant: JobAccountant | None = None,
        on_record: Callable[[JobRecord], None] | None = None,
        holds: Callable[[str], bool] = lambda name: True,
        clock: Callable[[], float] = time.time,
        grace: float | None = None,
        pending_read: float = PENDING_READ,
        full_read_gap: float = FULL_READ_GAP,
    ) -> None:
        """Record into ``history``; ``pool_id`` gives the resolved pool (None: not yet).

        ``holds``: whether an agent name is one of this recorder's lanes (another
        group's, or another instance's, is never ours). ``on_record`` is told of
        each job once, when its row has the organisation's view (or stopped waiting).
        ``grace``: see `history_book.GRACE` (None: that); ``pending_read``, ``full_read_gap``: see
        `PENDING_READ`, `FULL_READ_GAP` (short in tests).
        """
        self.history = history
        self.api = api
        self.instance = instance
        self.pool_id = pool_id
        self.accountant = accountant
        self.on_record = on_record
        self.holds = holds
        self.clock = clock
        self.pending_read = pending_read
        self.full_read_gap = full_read_gap
        self.book = HistoryBook(history, instance, clock, grace=grace)
        """What is written and what waits for its other side."""
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_full = float("-inf")
        self._full_running = False

    # ------------------------------------------------------------------ the host's side

    def __call__(self, ended: JobEnded) -> None:
        """Take the GPU figures now; write the row in a task."""
        gpu = None
        if self.accountant is not None:
            key = key_of(self.instance, ended.slot, ended.agent)
            if key in self.accountant.jobs():
                gpu = self.accountant.finish(key)
        record = exit_record(self.instance, ended, gpu)
        ran = ran_job(ended)
        seen = ended.job is not None
        self._spawn(self._step(lambda: self.book.exited(record, ran, seen=seen)))

    # ------------------------------------------------------------------ the organisation's side

    def pool_read(self, view: PoolView, recovered: bool) -> None:
        """A read of the pool (``recovered``: the first answer after failures).

        Its agents' last finished requests are matched at once; the first read,
        one after failures, and rows that waited too long also bring one read of
        our agents' finished requests.
        """
        ours = [a for a in view.agents if self.holds(a.name)]
        ids = {a.id: a.name for a in ours}
        running = {a.assigned_request.request_id for a in ours if a.assigned_request}
        finished = [(a.name, a.last_completed_request) for a in ours if a.last_completed_request]

        def learn() -> None:
            self.book.agents_seen(ids, running)
            self.book.learned(finished)

        self._spawn(self._step(learn))
        if self._full_due(recovered):
            self._last_full = self.clock()
            self._full_running = True
            self._spawn(self._full_read())

    def _full_due(self, recovered: bool) -> bool:
        if self._full_running or self.pool_id() is None:
            return False
        if self._last_full == float("-inf") or recovered:
            return True
        waiting = self.book.waiting_since()
        now = self.clock()
        return (
            waiting is not None
            and now - waiting >= self.pending_read
            and now - self._last_full >= self.full_read_gap
        )

    async def _full_read(self) -> None:
        """Read our agents' finished requests (one call) and match them."""
        try:
            await self._step(self.book.start)
            pool_id, ids = self.pool_id(), self.book.agent_ids()
            if pool_id is None or not ids:
                return
            try:
                found = await asyncio.to_thread(
                    self.api.finished_jobs, pool_id, sorted(ids), FINISHED_READ
                )
            except GpuciError as exc:
                log.info("could not read our agents' finished jobs: %s", exc)
                return
            if len(found) >= FINISHED_READ:
                log.warning(
                    "our agents finished %d jobs or more since the history's last look: "
                    "older ones may have no row",
                    FINISHED_READ,
                )
            finished = [(name, r) for r in found if (name := self._agent_of(r))]
            await self._step(lambda: self.book.learned(finished))
        finally:
            self._full_running = False

    def _agent_of(self, request: JobRequest) -> str:
        """Which of our agents ran ``request`` (empty: none of ours)."""
        name = self.book.agent_name(request.reserved_agent_id) or request.reserved_agent_name
        return name if name and self.holds(name) else ""

    # ------------------------------------------------------------------ plumbing

    async def _step(self, step: Callable[[], None]) -> None:
        """Run one step of the book in a thread, one at a time in the order asked; then
        report the rows it completed (on the loop).
        """
        async with self._lock:
            try:
                await asyncio.to_thread(step)
            except (sqlite3.Error, OSError) as exc:
                log.error("could not write the job history: %s", exc)
            self._report()

    def _report(self) -> None:
        reports, self.book.reports = self.book.reports, []
        if self.on_record is not None:
            for record in reports:
                self.on_record(record)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the rows being written; report the jobs still waiting for their view."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=10.0)
        async with self._lock:
            self.book.report_all()
            self._report()
