"""The job history's SQLite file: schema versions, migration, and how it is opened.

One file (``$XDG_STATE_HOME/gpuci-tui/history.sqlite3``) is shared by every
daemon on the host (the ``instance`` column tells them apart) and read by
``gpuci-tui history`` and the console while a daemon writes. Hence:

- WAL journal: readers never block the writer and never see half a commit.
- ``synchronous=NORMAL``: in WAL mode a commit is not fsynced; a power cut can
  lose the last few jobs but never corrupts the file. A history row is not
  worth an fsync per job.
- A busy timeout instead of "database is locked" when two writers (two
  daemons, or a migration) meet.
- The version is ``PRAGMA user_version``. Version 1 is the table of the
  first release (which never set it: 0 with a ``jobs`` table means 1);
  migrations only ever add columns, indexes and tables, so no row is lost and
  an older reader still finds the columns it knows.
- Version 7 makes a job request one row (`REQUEST_INDEX`, the write-once rule of
  `job_rows`). Older releases could give several rows one request id (each
  delayed row took the agent's *latest* request): the migration keeps every row,
  the id (and the result and queue wait read with it) only on the newest of them;
  the others keep their container's facts, their duration becomes the container's
  life, and they are matched again if their request comes back (`job_match`).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

SCHEMA_VERSION = 7
BUSY_TIMEOUT_S = 5.0

_V1_TABLE = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    instance TEXT NOT NULL,
    slot INTEGER NOT NULL,
    agent TEXT NOT NULL,
    request_id INTEGER,
    pipeline TEXT,
    run TEXT,
    started_at REAL,
    ended_at REAL NOT NULL,
    exit_code INTEGER,
    oom INTEGER NOT NULL DEFAULT 0,
    reason TEXT
)
"""

V1_COLUMNS = (
    "id", "instance", "slot", "agent", "request_id", "pipeline", "run",
    "started_at", "ended_at", "exit_code", "oom", "reason",
)  # fmt: skip

V2_COLUMNS: tuple[tuple[str, str], ...] = (
    ("result", "TEXT"),
    ("queue_wait_s", "REAL"),
    ("duration_s", "REAL"),
    ("gpus", "TEXT"),
    ("gpu_samples", "INTEGER NOT NULL DEFAULT 0"),
    ("peak_gpu_memory_mib", "REAL"),
    ("mean_util_pct", "REAL"),
    ("peak_util_pct", "REAL"),
    ("energy_j", "REAL"),
    ("energy_note", "TEXT NOT NULL DEFAULT ''"),
)
"""Added by version 2: the Azure job result, timings and the job's GPU accounting."""

V3_COLUMNS: tuple[tuple[str, str], ...] = (("xid", "TEXT"),)
"""Added by version 3: the critical Xids the job's GPU raised while it ran ("79,48")."""

V4_COLUMNS: tuple[tuple[str, str], ...] = (
    ("image", "TEXT"),
    ("image_id", "TEXT"),
    ("repo_digest", "TEXT"),
)
"""Added by version 4: the image the job ran on (reference, image id, repo digest);
NULL in older rows: not recorded then."""

V5_COLUMNS: tuple[tuple[str, str], ...] = (
    ("throttle_s", "TEXT"),
    ("ecc_corrected", "INTEGER"),
    ("ecc_uncorrected", "INTEGER"),
    ("peak_temp_c", "REAL"),
)
"""Added by version 5: what the job's GPUs went through (`gpu.job_facts`): seconds per
throttle reason (a JSON object), ECC errors during the job and the peak temperature;
NULL: not known (older rows, or the board does not say), never 0."""

V6_COLUMNS: tuple[tuple[str, str], ...] = (("startup_s", "REAL"),)
"""Added by version 6: the start-up of the agent that ran the job (its container's start
to its agent online), which a restarted daemon's ``standby = "auto"`` starts from; NULL:
not measured (older rows, an adopted agent)."""

V7_COLUMNS: tuple[tuple[str, str], ...] = (
    ("reconciled", "INTEGER NOT NULL DEFAULT 0"),
    ("assigned_at", "REAL"),
    ("finished_at", "REAL"),
)
"""Added by version 7: ``reconciled`` (1: recorded from the organisation's finished
requests, without a live observation of the job: after a restart, no GPU figures) and
the request's assignment and finish as the organisation timed them (Unix; NULL: its
view was not read, yet or ever)."""

_ADDED = (V2_COLUMNS, V3_COLUMNS, V4_COLUMNS, V5_COLUMNS, V6_COLUMNS, V7_COLUMNS)
COLUMNS = V1_COLUMNS + tuple(name for added in _ADDED for name, _ in added)

_V2_INDEXES = (
    # "the last N jobs", "since 2d" and retention by age all walk ended_at.
    "CREATE INDEX IF NOT EXISTS jobs_ended ON jobs (ended_at)",
    "CREATE INDEX IF NOT EXISTS jobs_pipeline_ended ON jobs (pipeline, ended_at)",
)
REQUEST_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS jobs_request ON jobs (instance, request_id) "
    "WHERE request_id IS NOT NULL"
)
"""One row per job request of an instance (rows without a request id are not bound)."""
REQUEST_CONFLICT = "ON CONFLICT (instance, request_id) WHERE request_id IS NOT NULL"
"""The upsert's target: `REQUEST_INDEX`."""
_MARKS_TABLE = """
CREATE TABLE IF NOT EXISTS reconcile_marks (
    instance TEXT PRIMARY KEY,
    through REAL NOT NULL,
    agents TEXT NOT NULL DEFAULT ''
)
"""
"""Per instance: every finished request of its agents up to ``through`` has its row;
``agents``: the registration ids ("12,13") whose requests the next reconciliation reads."""
_V7_DEDUPLICATE = """
UPDATE jobs SET request_id = NULL, result = NULL, queue_wait_s = NULL,
    duration_s = CASE WHEN started_at IS NOT NULL AND ended_at >= started_at
                      THEN ended_at - started_at END
WHERE request_id IS NOT NULL AND id NOT IN (
    SELECT id FROM (
        SELECT id, row_number() OVER (
            PARTITION BY instance, request_id ORDER BY ended_at DESC, id DESC
        ) AS n FROM jobs WHERE request_id IS NOT NULL
    ) WHERE n = 1
)
"""


def open_writer(path: Path | str) -> sqlite3.Connection:
    """Open (create, migrate) the history for writing.

    ``":memory:"`` gives a private in-memory database (tests).

    Raises:
        sqlite3.Error: the file cannot be opened or is not a database.
    """
    if str(path) != ":memory:":
        _private_file(Path(path))
    db = sqlite3.connect(
        str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        if str(path) != ":memory:":
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # The writer only appends and prunes: 256 KiB of page cache, not the 2 MiB
            # default that would otherwise fill up as the history grows (a daemon's RSS).
            db.execute("PRAGMA cache_size=-256")
        migrate(db)
    except BaseException:
        db.close()
        raise
    return db


def _private_file(path: Path) -> None:
    """Create the history 0600 (SQLite gives its -wal and -shm files the same mode).

    An existing file of ours that is open to others is tightened: which pipelines
    ran here, when and on which GPUs is the lab's business, not every login's.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return  # sqlite3.connect reports it in its own words
    try:
        info = os.fstat(fd)
        if info.st_uid == os.geteuid() and info.st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def open_reader(path: Path) -> sqlite3.Connection:
    """Open an existing history read-only; never creates, migrates or writes it.

    Raises:
        sqlite3.Error: the file cannot be opened or is not a database.
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)


def migrate(db: sqlite3.Connection) -> int:
    """Bring the schema to `SCHEMA_VERSION`, keeping every row; returns the version found.

    Runs in one IMMEDIATE transaction, so two daemons opening an old file at
    the same time migrate it once (the second sees the new version). A file
    from a newer release (higher version) is left alone: it only added columns.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        found = int(db.execute("PRAGMA user_version").fetchone()[0])
        version = found
        if version == 0:
            db.execute(_V1_TABLE)
            version = 1
        if version == 1:
            have = table_columns(db)
            for name, decl in V2_COLUMNS:
                if name not in have:  # robust against a hand-repaired file
                    db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {decl}")
            # Version 1 knew only the container's life; it is the best
            # duration there is for the old rows.
            db.execute(
                "UPDATE jobs SET duration_s = ended_at - started_at "
                "WHERE duration_s IS NULL AND started_at IS NOT NULL AND ended_at >= started_at"
            )
            for ddl in _V2_INDEXES:
                db.execute(ddl)
            version = 2
        if version == 2:
            have = table_columns(db)
            for name, decl in V3_COLUMNS:
                if name not in have:
                    db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {decl}")
            version = 3
        if version == 3:
            have = table_columns(db)
            for name, decl in V4_COLUMNS:
                if name not in have:
                    db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {decl}")
            version = 4
        if version == 4:
            _add_columns(db, V5_COLUMNS)
            version = 5
        if version == 5:
            _add_columns(db, V6_COLUMNS)
            version = 6
        if version == 6:
            _add_columns(db, V7_COLUMNS)
            db.execute(_V7_DEDUPLICATE)
            db.execute(REQUEST_INDEX)
            db.execute(_MARKS_TABLE)
            version = 7
        if version != found:
            db.execute(f"PRAGMA user_version = {version}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return found


def _add_columns(db: sqlite3.Connection, columns: tuple[tuple[str, str], ...]) -> None:
    have = table_columns(db)
    for name, decl in columns:
        if name not in have:  # robust against a hand-repaired file
            db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {decl}")


def table_columns(db: sqlite3.Connection) -> set[str]:
    """The columns of the ``jobs`` table (empty when there is no such table)."""
    return {str(row[1]) for row in db.execute("PRAGMA table_info(jobs)")}
