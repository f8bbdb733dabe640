"""Local history of finished jobs and operator intent, kept across restarts.

`JobHistory` is a small SQLite table (one row per finished job: slot, agent,
pipeline/run, times, Azure result, exit code, OOM flag and the job's GPU
accounting; the rows are `job_record.JobRecord`) for the console, ``gpuci-tui
history`` and post-mortems; the file format and its migrations are in `schema`,
the rule that makes a job request one row in `job_rows`. `read_history` reads it
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
from pathlib import Path
from typing import Any

from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.store import job_rows, schema
from gpuci_tui.core.store.file import (
    FileIdentity,
    drop_stale_wal,
    move_aside,
    open_or_move_aside,
)
from gpuci_tui.core.store.job_record import (
    FAILED_RESULTS,
    JobQuery,
    JobRecord,
    from_row,
    to_sql,
)

__all__ = [
    "FAILED_RESULTS",
    "HistoryError",
    "JobHistory",
    "JobQuery",
    "JobRecord",
    "query_sql",
    "read_history",
]

log = logging.getLogger(__name__)

DEFAULT_QUERY = JobQuery()
"""The newest jobs of every instance (`JobQuery`'s defaults)."""

PRUNE_EVERY = 1000
"""Retention runs when the history is opened, then after this many inserts..."""
PRUNE_AFTER_S = 24 * 3600.0
"""...or on the first insert this long after the previous run, whichever comes first."""


class HistoryError(GpuciError):
    """The history file exists but cannot be read (not a database, no permission, …)."""


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

    def add(self, record: JobRecord) -> int | None:
        """Store what the host saw of one finished job (and, now and then, apply the retention).

        One row per job request (`job_rows`): a request that has a row already gets
        this record's container facts, and keeps the organisation's view if it has it.
        Returns the row's id when the record has no request id (`attach` takes it).

        Raises:
            sqlite3.Error: the disk is full or the file became unusable.
        """
        duration = record.duration_s
        if duration is None and record.started_at is not None:
            duration = max(0.0, record.ended_at - record.started_at)
        row = dataclasses.replace(record, duration_s=duration, reconciled=False)
        cursor = self._write(job_rows.EXIT, _values(row), counts=True)
        return cursor.lastrowid if record.request_id is None else None

    def add_request(self, record: JobRecord) -> None:
        """Store the organisation's view of one finished request (`job_rows.REQUEST`).

        A request without a row gets one, marked ``reconciled``; one with a row gets
        the view (result, times, pipeline) and keeps the host's facts.
        """
        row = dataclasses.replace(record, reconciled=True)
        self._write(job_rows.REQUEST, _values(row), counts=True)

    def attach(self, row_id: int, record: JobRecord) -> None:
        """Give the host's row ``row_id``, written without a request id, ``record``'s
        request and its view (`job_rows.attach`).
        """
        assert record.request_id is not None  # noqa: S101 - the caller matched a request
        server = [to_sql(c, getattr(record, c)) for c in job_rows.SERVER_COLUMNS]
        with self._lock:
            job_rows.attach(self._db, row_id, record.request_id, server)

    def _write(self, sql: str, values: list[Any], *, counts: bool = False) -> sqlite3.Cursor:
        """Run one write; a file damaged under us is moved aside and the write goes to a new one."""
        with self._lock:
            self._reopen_if_replaced()
            try:
                cursor = self._db.execute(sql, values)
            except sqlite3.DatabaseError as exc:
                if self._path is None or isinstance(exc, sqlite3.IntegrityError):
                    raise
                # Damaged under us (truncated, overwritten): keep this job in a new file.
                log.warning("the job history failed (%s): moving it aside", exc)
                self._db.close()
                self._db = schema.open_writer(self._reset())
                cursor = self._db.execute(sql, values)
            self._identity = FileIdentity.of(self._path) if self._path is not None else None
            self._inserts += counts
            due = self._inserts >= PRUNE_EVERY or self._clock() - self._pruned_at >= PRUNE_AFTER_S
        if due:
            self.prune()
        return cursor

    def row(self, row_id: int) -> JobRecord | None:
        """One row by its id (None: gone)."""
        with self._lock:
            found = self._db.execute(
                f"SELECT {', '.join(schema.COLUMNS)} FROM jobs WHERE id = ?", (row_id,)
            ).fetchone()
        return None if found is None else from_row(found)

    def request_row(self, instance: str, request_id: int) -> JobRecord | None:
        """The row of one job request of ``instance`` (None: none yet)."""
        with self._lock:
            found = self._db.execute(
                f"SELECT {', '.join(schema.COLUMNS)} FROM jobs "
                "WHERE instance = ? AND request_id = ?",
                (instance, request_id),
            ).fetchone()
        return None if found is None else from_row(found)

    def requests_since(self, instance: str, since: float) -> dict[int, tuple[bool, bool]]:
        """`job_rows.requests_since`: request ids with a row, whether it has the organisation's
        view and the host's facts.
        """
        with self._lock:
            return job_rows.requests_since(self._db, instance, since)

    def unmatched_since(self, instance: str, since: float) -> list[JobRecord]:
        """The host's rows of ``instance`` still without a request id, ended since ``since``."""
        with self._lock:
            ids = job_rows.unmatched_since(self._db, instance, since)
        return [r for r in (self.row(i) for i in ids) if r is not None]

    def mark(self, instance: str) -> tuple[float, tuple[int, ...]] | None:
        """`job_rows.read_mark`, or a start from the newest row (None: neither exists)."""
        with self._lock:
            found = job_rows.read_mark(self._db, instance)
            if found is None:
                newest = job_rows.newest_end(self._db, instance)
                return None if newest is None else (newest, ())
            return found

    def set_mark(self, instance: str, through: float, agents: Sequence[int]) -> None:
        """`job_rows.write_mark`."""
        with self._lock:
            job_rows.write_mark(self._db, instance, through, agents)

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

    def query(self, query: JobQuery = DEFAULT_QUERY) -> list[JobRecord]:
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


def read_history(path: Path, query: JobQuery = DEFAULT_QUERY) -> list[JobRecord] | None:
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
    return [from_row(row) for row in db.execute(sql, args)]


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


def _values(record: JobRecord) -> list[Any]:
    return [to_sql(name, getattr(record, name)) for name in job_rows.INSERT_COLUMNS]
