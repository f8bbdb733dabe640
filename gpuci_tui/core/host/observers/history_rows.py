"""A job's history row from each side: what the host saw (`exit_record`) and what the
organisation says of its request (`with_request`, `request_record`).

The host's row is written at once when the job's container ends (its GPU figures are
taken then); the organisation's view completes it when it comes (`store.job_rows`).
A request of ours whose end the host never saw (the daemon was not running) gets a
row from the organisation alone: `request_record`, marked ``reconciled``. Also the
seed of ``standby = "auto"`` from the history (`history_seed`). Pure but for the seed.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3

from gpuci_tui.core.engine.standby.state import AutoSeed
from gpuci_tui.core.engine.steps import JobEnded
from gpuci_tui.core.gpu.accounting import JobGpuStats
from gpuci_tui.core.host.observers.job_match import RanJob, unix
from gpuci_tui.core.protocols import JobRequest
from gpuci_tui.core.store.history import JobHistory, JobRecord

log = logging.getLogger("gpuci_tui.history")

#: The newest rows of an instance a restarted daemon's ``standby = "auto"`` starts from.
SEED_ROWS = 20
#: The reason of a row the organisation's finished requests gave (no exit was seen).
RECONCILED_REASON = "recorded after a restart (the daemon did not see the job end)"


def seconds_between(start: str | None, end: str | None) -> float | None:
    """Seconds between two Azure DevOps timestamps (None when either is missing or bad)."""
    first, last = unix(start), unix(end)
    if first is None or last is None:
        return None
    return max(0.0, last - first)


def ran_job(ended: JobEnded) -> RanJob:
    """What the host saw of ``ended``'s job, for `job_match`."""
    job = ended.job
    return RanJob(
        agent=ended.agent,
        started_at=ended.started_at,
        ended_at=ended.exit.at,
        request_id=(job.request_id or None) if job is not None else None,
        name=job.name if job is not None else None,
    )


def exit_record(instance: str, ended: JobEnded, gpu: JobGpuStats | None) -> JobRecord:
    """The host's row of ``ended``: its container, image and GPU figures, the job as seen.

    The request id is the one the lane was seen running (None: not seen in a read).
    """
    job, info = ended.job, ended.exit
    record = JobRecord(
        instance=instance,
        slot=ended.slot,
        agent=ended.agent,
        request_id=ran_job(ended).request_id,
        pipeline=(job.pipeline or job.name) if job is not None else None,
        run=job.run if job is not None else None,
        started_at=ended.started_at,
        ended_at=info.at,
        exit_code=info.code,
        oom=info.oom,
        reason=info.reason,
        # A job its container died under: the organisation abandons it, later.
        result="abandoned" if info.lost_job else None,
        xid=ended.xids,
        image=ended.image.reference or None,
        image_id=ended.image.image_id or None,
        repo_digest=ended.image.repo_digest or None,
        startup_s=ended.startup_s,
    )
    return record.with_gpu(gpu) if gpu is not None else record


def with_request(record: JobRecord, request: JobRequest) -> JobRecord:
    """``record`` with the organisation's view of its request (which wins for its fields)."""
    return dataclasses.replace(
        record,
        request_id=request.request_id,
        pipeline=request.definition_name or record.pipeline,
        run=request.owner_name or record.run,
        result=request.result or record.result,
        queue_wait_s=seconds_between(request.queue_time, request.assign_time),
        duration_s=seconds_between(
            request.receive_time or request.assign_time, request.finish_time
        ),
        assigned_at=unix(request.assign_time),
        finished_at=unix(request.finish_time),
    )


def request_record(instance: str, slot: int, agent: str, request: JobRequest) -> JobRecord:
    """The row of a finished request whose end the host did not see (`RECONCILED_REASON`)."""
    ended = unix(request.finish_time) or unix(request.assign_time) or 0.0
    bare = JobRecord(
        instance=instance,
        slot=slot,
        agent=agent,
        request_id=request.request_id,
        pipeline=None,
        run=None,
        started_at=None,
        ended_at=ended,
        exit_code=None,
        oom=False,
        reason=RECONCILED_REASON,
        reconciled=True,
    )
    return with_request(bare, request)


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
