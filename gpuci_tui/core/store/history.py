"""Local history of finished jobs and operator intent, kept across restarts.

`JobHistory` is a small SQLite table (one row per finished job: slot, agent,
pipeline/run, times, Azure result, exit code, OOM flag and the job's GPU
accounting) for the console, ``gpuci-tui history`` and post-mortems; the file
format and its migrations are in `schema`. `read_history` reads it
without a daemon. `IntentFile` keeps what the operator asked for (slot
count, paused, drained slots) so a restarted daemon does not silently undo a
drain.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuci_tui.core.config.file import is_ascii_number
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.gpu.job_facts import summary, throttle_from_json, throttle_to_json
from gpuci_tui.core.secrets.redaction import redact
from gpuci_tui.core.store import schema
from gpuci_tui.core.store.file import (
    FileIdentity,
    drop_stale_wal,
    move_aside,
    open_or_move_aside,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from gpuci_tui.core.gpu.accounting import JobGpuStats

FAILED_RESULTS = ("failed", "canceled", "abandoned")
"""Azure DevOps job results that count as failed (besides an OOM kill or a non-zero exit)."""
PRUNE_EVERY = 1000
"""Retention runs when the history is opened, then after this many inserts..."""
PRUNE_AFTER_S = 24 * 3600.0
"""...or on the first insert this long after the previous run, whichever comes first."""


@dataclass(frozen=True)
class JobRecord:
    """One finished job. None means "not known" (e.g. no GPU process was seen)."""

    instance: str
    slot: int
    agent: str
    request_id: int | None
    pipeline: str | None
    run: str | None
    started_at: float | None
    """Unix time the agent container started."""
    ended_at: float
    exit_code: int | None
    oom: bool
    reason: str
    result: str | None = None
    """Azure DevOps job result: succeeded, succeededWithIssues, failed, canceled, …"""
    queue_wait_s: float | None = None
    """Seconds from queueing to assignment to an agent."""
    duration_s: float | None = None
    """Seconds the job ran; when not given, the container's life (``ended_at - started_at``)."""
    gpus: tuple[int, ...] = ()
    """Indexes of the GPUs the job's processes used."""
    gpu_samples: int = 0
    peak_gpu_memory_mib: float | None = None
    mean_util_pct: float | None = None
    peak_util_pct: float | None = None
    energy_j: float | None = None
    energy_note: str = ""
    """Why ``energy_j`` is None (e.g. the GPU was shared); empty when measured."""
    xid: tuple[int, ...] = ()
    """Critical Xids the job's GPU raised while it ran (its failure may be the GPU's)."""
    image: str | None = None
    """The image reference the job's container was created from (None: not recorded)."""
    image_id: str | None = None
    """The id of the image the job ran on (``sha256:…``; None: not known)."""
    repo_digest: str | None = None
    """That image's registry digest (``REPO@sha256:…``; None: none or not known)."""
    throttle_s: tuple[tuple[str, float], ...] | None = None
    """Seconds per clocks-event (throttle) reason during the job (`gpu.job_facts`)."""
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    """ECC errors the job's GPUs counted while it ran."""
    peak_temp_c: float | None = None
    startup_s: float | None = None
    """Seconds its agent took to start: container start to online (None: not measured)."""
    id: int | None = None
    """The row id, set on records read back from the history."""

    @property
    def failed(self) -> bool:
        """OOM-killed, a failed/canceled/abandoned result, or no result and a non-zero exit."""
        if self.oom or (self.result or "").lower() in FAILED_RESULTS:
            return True
        return self.result is None and self.exit_code not in (None, 0)

    def with_gpu(self, stats: JobGpuStats) -> JobRecord:
        """This record with the GPU fields taken from `JobAccountant.finish`'s statistics."""
        return dataclasses.replace(
            self,
            gpus=stats.gpu_indexes,
            gpu_samples=stats.samples,
            peak_gpu_memory_mib=stats.peak_memory_mib,
            mean_util_pct=stats.mean_util_pct,
            peak_util_pct=stats.peak_util_pct,
            energy_j=stats.energy_j,
            energy_note=stats.energy_note,
            throttle_s=stats.facts.throttle_s,
            ecc_corrected=stats.facts.ecc_corrected,
            ecc_uncorrected=stats.facts.ecc_uncorrected,
            peak_temp_c=stats.facts.peak_temp_c,
        )

    @property
    def gpu_facts(self) -> str:
        """The job's GPU facts in one compact line ("412 kJ · thermal 12 s · Xid 79 · 83 °C")."""
        ecc = (self.ecc_corrected, self.ecc_uncorrected)
        return summary(self.energy_j, self.throttle_s, ecc, self.xid, self.peak_temp_c)


@dataclass(frozen=True)
class JobQuery:
    """Filters for `JobHistory.query` / `read_history`; results are newest first."""

    instance: str | None = None
    pipeline: str | None = None
    """Exact pipeline (definition) name."""
    since: float | None = None
    """Only jobs that ended at or after this Unix time."""
    slot: int | None = None
    failed_only: bool = False
    """See `JobRecord.failed`."""
    succeeded_only: bool = False
    """Only jobs that did not fail (the opposite of ``failed_only``)."""
    pipeline_contains: str | None = None
    """Pipeline names containing this text, in any case (the console's filter box)."""
    limit: int | None = 50
    """At most this many rows; None for all."""


class HistoryError(GpuciError):
    """The history file exists but cannot be read (not a database, no permission, …)."""


_INSERT_COLUMNS = tuple(c for c in schema.COLUMNS if c != "id")
_INSERT = (
    f"INSERT INTO jobs ({', '.join(_INSERT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _INSERT_COLUMNS)})"
)
_FAILED_SQL = (
    "(oom = 1 OR lower(result) IN ({}) OR (result IS NULL AND exit_code IS NOT NULL "
    "AND exit_code != 0))".format(", ".join(f"'{r}'" for r in FAILED_RESULTS))
)


class JobHistory:
    """The job history for writing and querying (thread-safe; one connection guarded by a lock)."""

    def __init__(
        self,
        path: Path | str,
        *,
        keep_days: int = 90,
        max_rows: int = 100_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Open (create, migrate) the history at ``path`` and apply the retention once.

        Args:
            path: The SQLite file (``":memory:"`` for tests).
            keep_days: Jobs that ended longer ago are deleted (``[history] keep_days``).
            max_rows: Only the newest this many rows are kept (``[history] max_rows``).
            clock: Wall clock for the retention by age.

        Raises:
            sqlite3.Error: the file cannot be opened or is not a database.
        """
        self._path = None if str(path) == ":memory:" else Path(path)
        self.moved_to: Path | None = None
        """Where a damaged history was moved when this one was started (None: it opened)."""
        if self._path is not None:
            self._path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._db, self.moved_to = open_or_move_aside(self._path)
        else:
            self._db = schema.open_writer(path)
        self._identity = FileIdentity.of(self._path) if self._path is not None else None
        self._lock = threading.Lock()
        self._keep_days = keep_days
        self._max_rows = max_rows
        self._clock = clock
        self._inserts = 0
        self._pruned_at = 0.0
        self.prune()

    def add(self, record: JobRecord) -> None:
        """Store one finished job (and, now and then, apply the retention).

        Raises:
            sqlite3.Error: the disk is full or the file became unusable.
        """
        duration = record.duration_s
        if duration is None and record.started_at is not None:
            duration = max(0.0, record.ended_at - record.started_at)
        row = dataclasses.replace(record, duration_s=duration, oom=bool(record.oom))
        values = [_to_sql(name, getattr(row, name)) for name in _INSERT_COLUMNS]
        with self._lock:
            self._reopen_if_replaced()
            try:
                self._db.execute(_INSERT, values)
            except sqlite3.DatabaseError as exc:
                if self._path is None:
                    raise
                # Damaged under us (truncated, overwritten): keep this job in a new file.
                log.warning("the job history failed (%s): moving it aside", exc)
                self._db.close()
                self._db = schema.open_writer(self._reset())
                self._db.execute(_INSERT, values)
            self._identity = FileIdentity.of(self._path) if self._path is not None else None
            self._inserts += 1
            due = self._inserts >= PRUNE_EVERY or self._clock() - self._pruned_at >= PRUNE_AFTER_S
        if due:
            self.prune()

    def _reopen_if_replaced(self) -> None:
        """Reopen when the file was replaced, deleted or truncated since the last write."""
        if self._path is None or self._identity is None:
            return
        now = FileIdentity.of(self._path)
        if not self._identity.replaced_by(now):
            return
        log.warning("the job history %s was replaced under the daemon: reopening it", self._path)
        same_file = now is not None and (now.device, now.inode) == (
            self._identity.device,
            self._identity.inode,
        )
        with contextlib.suppress(sqlite3.Error):
            # Our pending rows go into the file we had open (wherever it is now)...
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.close()
        if same_file:
            self._reset()  # the same file, truncated: what is left is no database
        else:
            drop_stale_wal(self._path)  # ...and its WAL must not be replayed into the new one
        self._db, moved = open_or_move_aside(self._path)
        self.moved_to = moved or self.moved_to

    def _reset(self) -> Path:
        """Move the damaged file aside (remembered in `moved_to`); return the history's path."""
        assert self._path is not None  # noqa: S101 - only called for a file
        if self._path.exists():
            self.moved_to = move_aside(self._path)
        return self._path

    def prune(self) -> int:
        """Delete jobs older than ``keep_days`` and all but the newest ``max_rows``; returns how many."""
        cutoff = self._clock() - self._keep_days * 86400.0
        with self._lock:
            deleted = self._db.execute("DELETE FROM jobs WHERE ended_at < ?", (cutoff,)).rowcount
            # The id of the newest row beyond max_rows; nothing when there are fewer.
            deleted += self._db.execute(
                "DELETE FROM jobs WHERE id <= "
                "(SELECT id FROM jobs ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (self._max_rows,),
            ).rowcount
            self._inserts = 0
            self._pruned_at = self._clock()
        return max(deleted, 0)

    def query(self, query: JobQuery = JobQuery()) -> list[JobRecord]:
        """The jobs matching ``query``, newest first."""
        with self._lock:
            return _select(self._db, query)

    def recent(self, instance: str, limit: int = 50) -> list[JobRecord]:
        """The newest ``limit`` jobs of ``instance``, newest first."""
        return self.query(JobQuery(instance=instance, limit=limit))

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


def read_history(path: Path, query: JobQuery = JobQuery()) -> list[JobRecord] | None:
    """Query a history file read-only, with no daemon needed; None when there is no file yet.

    Works on files of every schema version (columns an older file lacks read as None).

    Raises:
        HistoryError: the file exists but cannot be read, with what to do.
    """
    if not path.exists():
        return None
    try:
        db = schema.open_reader(path)
    except sqlite3.Error as exc:
        raise HistoryError(f"cannot open the job history {path}: {exc}") from None
    try:
        return _select(db, query)
    except sqlite3.DatabaseError as exc:
        raise HistoryError(
            f"cannot read the job history {path}: {exc}. If the file is damaged, move it "
            "away; the daemon starts a new one."
        ) from None
    finally:
        db.close()


def _select(db: sqlite3.Connection, query: JobQuery) -> list[JobRecord]:
    have = schema.table_columns(db)
    if not have:
        return []
    source = "jobs"
    missing = [c for c in schema.COLUMNS if c not in have]
    if missing:
        # An older file that no daemon of this release has migrated yet.
        source = f"(SELECT *, {', '.join(f'NULL AS {c}' for c in missing)} FROM jobs)"
    sql, args = query_sql(query, source)
    return [_record(row) for row in db.execute(sql, args)]


def query_sql(query: JobQuery, source: str = "jobs") -> tuple[str, list[Any]]:
    """The SELECT (and its parameters) that `JobHistory.query` runs for ``query``.

    Public so the benchmark can show SQLite's plan for exactly this statement.
    """
    where: list[str] = []
    args: list[Any] = []
    for column, value in (
        ("instance", query.instance),
        ("pipeline", query.pipeline),
        ("slot", query.slot),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if query.since is not None:
        where.append("ended_at >= ?")
        args.append(query.since)
    if query.failed_only:
        where.append(_FAILED_SQL)
    if query.succeeded_only:
        # NULL (no result, no exit code) is "not failed": coalesce before negating.
        where.append(f"NOT coalesce({_FAILED_SQL}, 0)")
    if query.pipeline_contains:
        # instr, not LIKE: the operator's text may hold % or _.
        where.append("instr(lower(pipeline), lower(?)) > 0")
        args.append(query.pipeline_contains)
    sql = f"SELECT {', '.join(schema.COLUMNS)} FROM {source}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY ended_at DESC, id DESC"
    if query.limit is not None:
        sql += " LIMIT ?"
        args.append(query.limit)
    return sql, args


def _to_sql(name: str, value: Any) -> Any:
    if name in ("gpus", "xid"):
        return ",".join(str(i) for i in value) if value else None
    if name == "oom":
        return int(value)
    if name == "throttle_s":
        return throttle_to_json(value)
    if isinstance(value, str):
        return redact(value)  # names and results come from the server and images: never a PAT
    return value


def _record(row: Sequence[Any]) -> JobRecord:
    values = dict(zip(schema.COLUMNS, row, strict=True))
    gpus = values.pop("gpus") or ""
    values["gpus"] = tuple(int(i) for i in str(gpus).split(",") if is_ascii_number(i.strip()))
    xid = values.pop("xid") or ""
    values["xid"] = tuple(int(i) for i in str(xid).split(",") if is_ascii_number(i.strip()))
    values["oom"] = bool(values["oom"])
    values["reason"] = values["reason"] or ""
    values["gpu_samples"] = int(values["gpu_samples"] or 0)
    values["energy_note"] = values["energy_note"] or ""
    values["throttle_s"] = throttle_from_json(values["throttle_s"])
    return JobRecord(**values)
