"""Local history of finished jobs and operator intent, kept across restarts.

`JobHistory` is a small SQLite table (one row per finished job: slot, agent,
pipeline/run, times, exit code, OOM flag) for the console and post-mortems.
`IntentStore` keeps what the operator asked for (slot count, paused, drained
slots) so a restarted daemon does not silently undo a drain.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
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


@dataclass(frozen=True)
class JobRecord:
    """One finished job."""

    instance: str
    slot: int
    agent: str
    request_id: int | None
    pipeline: str | None
    run: str | None
    started_at: float | None
    ended_at: float
    exit_code: int | None
    oom: bool
    reason: str


class JobHistory:
    """Append-only job log in SQLite (thread-safe; one connection guarded by a lock)."""

    def __init__(self, path: Path | str) -> None:
        """Open (and create) the database at ``path`` (``":memory:"`` for tests)."""
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute(SCHEMA)
            self._db.commit()

    def add(self, record: JobRecord) -> None:
        """Store one finished job."""
        with self._lock:
            self._db.execute(
                "INSERT INTO jobs (instance, slot, agent, request_id, pipeline, run, started_at,"
                " ended_at, exit_code, oom, reason) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    record.instance,
                    record.slot,
                    record.agent,
                    record.request_id,
                    record.pipeline,
                    record.run,
                    record.started_at,
                    record.ended_at,
                    record.exit_code,
                    int(record.oom),
                    record.reason,
                ),
            )
            self._db.commit()

    def recent(self, instance: str, limit: int = 50) -> list[JobRecord]:
        """The newest ``limit`` jobs of ``instance``, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT instance, slot, agent, request_id, pipeline, run, started_at, ended_at,"
                " exit_code, oom, reason FROM jobs WHERE instance = ? ORDER BY id DESC LIMIT ?",
                (instance, limit),
            ).fetchall()
        return [
            JobRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], bool(r[9]), r[10])
            for r in rows
        ]

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


class IntentStore:
    """Operator intent as a small JSON file, written atomically."""

    def __init__(self, path: Path) -> None:
        """Keep the intent at ``path``."""
        self.path = path

    def load(self) -> dict[str, Any]:
        """The saved intent, or {} when there is none or it is unreadable."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, data: dict[str, Any]) -> None:
        """Replace the saved intent atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".intent-")
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump({**data, "saved_at": time.time()}, handle)
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
