"""One history row per finished job: what the server says of it and what its GPUs saw.

Called by the supervisor when a container that took a job exits. The GPU
figures are taken from the accountant at once (before the next sweep can
forget the job); the job's result, pipeline and times come from one read of
the agent's last finished job request, because a short job may start and end
between two reads of the pool. A failed read or write is logged, never fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime

from gpuci_tui.core.engine.standby.state import AutoSeed
from gpuci_tui.core.engine.steps import JobEnded
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.gpu.accounting import JobAccountant, JobGpuStats, key_of
from gpuci_tui.core.models import JobInfo
from gpuci_tui.core.protocols import AgentPoolApi, JobRequest
from gpuci_tui.core.store.history import JobHistory, JobRecord

log = logging.getLogger("gpuci_tui.history")

#: Seconds the organisation's clock may be behind ours when a job's times are compared.
CLOCK_SLACK = 5.0
#: How long a row waits for an organisation in backoff before it is written without
#: the server's view of the job (result, pipeline, queue wait).
MAX_WAIT_FOR_SERVER = 300.0
#: The newest rows of an instance a restarted daemon's ``standby = "auto"`` starts from.
SEED_ROWS = 20


def history_seed(history: JobHistory, instance: str, rows: int = SEED_ROWS) -> AutoSeed:
    """The recent job lengths and agent start-ups of ``instance`` in the history.

    A job's length counts only as the organisation timed it (a row without its
    result holds the container's life, start-up included). A history that cannot
    be read gives no seed: "auto" then starts from nothing, as before.
    """
    try:
        recent = history.recent(instance, rows)
    except sqlite3.Error as exc:
        log.warning('could not read the job history for standby "auto": %s', exc)
        return AutoSeed()
    jobs = tuple(r.duration_s for r in recent if r.result is not None and r.duration_s)
    return AutoSeed(jobs, tuple(r.startup_s for r in recent if r.startup_s is not None))


def seconds_between(start: str | None, end: str | None) -> float | None:
    """Seconds between two Azure DevOps timestamps (None when either is missing or bad)."""
    if not start or not end:
        return None
    try:
        delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    except ValueError:
        return None
    return max(0.0, delta.total_seconds())


def job_record(
    instance: str, ended: JobEnded, request: JobRequest | None, gpu: JobGpuStats | None
) -> JobRecord:
    """The history row of ``ended`` (``request``: its job request as the server has it)."""
    job, info = ended.job, ended.exit
    if request is not None and not _same_job(request, job, ended.started_at):
        request = None  # the agent's last job is not this one: trust what we saw
    record = JobRecord(
        instance=instance,
        slot=ended.slot,
        agent=ended.agent,
        # 0: only the agent's line told of the job (no id).
        request_id=request.request_id if request else (job.request_id or None) if job else None,
        pipeline=(request.definition_name if request else None) or (job.pipeline if job else None),
        run=(request.owner_name if request else None) or (job.run if job else None),
        started_at=ended.started_at,
        ended_at=info.at,
        exit_code=info.code,
        oom=info.oom,
        reason=info.reason,
        # A job its container died under: the organisation abandons it, later.
        result=(request.result if request else None) or ("abandoned" if info.lost_job else None),
        queue_wait_s=seconds_between(request.queue_time, request.assign_time) if request else None,
        duration_s=(
            seconds_between(request.receive_time or request.assign_time, request.finish_time)
            if request
            else None
        ),
        xid=ended.xids,
        image=ended.image.reference or None,
        image_id=ended.image.image_id or None,
        repo_digest=ended.image.repo_digest or None,
        startup_s=ended.startup_s,
    )
    return record.with_gpu(gpu) if gpu is not None else record


def _same_job(request: JobRequest, job: JobInfo | None, started_at: float | None) -> bool:
    """Whether the agent's last finished request is the job its container ran.

    By id when a read saw the job; when only the agent's line told of it (no id
    yet), by time: assigned after the container started (one job per container).
    """
    if job is not None and job.request_id:
        return request.request_id == job.request_id
    if started_at is None or not request.assign_time:
        return True
    try:
        assigned = datetime.fromisoformat(request.assign_time).timestamp()
    except ValueError:
        return True
    return assigned >= started_at - CLOCK_SLACK


class JobRecorder:
    """The supervisor's ``on_job_finished``: writes the history row in the background."""

    def __init__(
        self,
        history: JobHistory,
        api: AgentPoolApi,
        instance: str,
        *,
        pool_id: Callable[[], int | None],
        accountant: JobAccountant | None = None,
        on_record: Callable[[JobRecord], None] | None = None,
        blocked_until: Callable[[], float] = lambda: 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Record into ``history``; ``pool_id`` gives the resolved pool (None: not yet).

        ``blocked_until`` is the organisation's shared backoff (`PoolObserver.blocked_until`):
        the read of a finished job waits for it rather than adding calls to an outage.
        """
        self.history = history
        self.api = api
        self.instance = instance
        self.pool_id = pool_id
        self.accountant = accountant
        self.on_record = on_record
        self.blocked_until = blocked_until
        self.clock = clock
        self._tasks: set[asyncio.Task[JobRecord]] = set()
        self._closing = asyncio.Event()

    def __call__(self, ended: JobEnded) -> None:
        """Take the GPU figures now; read the job and write the row in a task."""
        gpu = None
        if self.accountant is not None:
            key = key_of(self.instance, ended.slot, ended.agent)
            if key in self.accountant.jobs():
                gpu = self.accountant.finish(key)
        task = asyncio.get_running_loop().create_task(self.record(ended, gpu))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def record(self, ended: JobEnded, gpu: JobGpuStats | None) -> JobRecord:
        """Read the job's request, write the row; returns what was written."""
        request = None
        may_call = await self._wait_for_server()
        pool_id = self.pool_id()
        if may_call and pool_id is not None and ended.agent_id is not None:
            try:
                request = await asyncio.to_thread(self.api.last_job, pool_id, ended.agent_id)
            except GpuciError as exc:
                log.info("job of %s: no result from Azure DevOps (%s)", ended.agent, exc)
        record = job_record(self.instance, ended, request, gpu)
        try:
            await asyncio.to_thread(self.history.add, record)
        except (sqlite3.Error, OSError) as exc:
            log.error("could not write the job of %s to the history: %s", ended.agent, exc)
        if self.on_record is not None:
            self.on_record(record)
        return record

    async def _wait_for_server(self) -> bool:
        """Wait while the organisation backs off; False: shutting down, still backing off."""
        deadline = self.clock() + MAX_WAIT_FOR_SERVER
        while True:
            now = self.clock()
            until = min(self.blocked_until(), deadline)
            if until <= now:
                return True
            if self._closing.is_set():
                return False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(until - now, 5.0)):
                    await self._closing.wait()

    async def drain(self) -> None:
        """Wait for the rows being written (at shutdown: rows waiting for a backoff go now)."""
        self._closing.set()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=10.0)
