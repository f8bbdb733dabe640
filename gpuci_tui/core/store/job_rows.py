"""The job history's write-once rule: one row per job request, completed as its facts come.

A row's identity is its job request (``instance``, ``request_id``: the partial
UNIQUE index `schema.REQUEST_INDEX`). Its facts come from two sides, in any order:

* the host (`EXIT`): the container that ran the job ended: its exit, the GPU
  figures, the image. Written at once, with the request id when the lane was seen
  running that request; without one otherwise, until `attach` gives it one.
* the organisation (`REQUEST`): the finished request: result, times, pipeline. A
  request of ours that has no row yet gets one of its own, marked ``reconciled``
  (no live observation: no container, no GPU figures, "recorded after a restart").

Each side writes its own columns: a later write of one side never erases the
other's, and a job seen twice (by both, or twice by one) is one row. The
organisation's view wins for its columns (the result of a job the host guessed
``abandoned``); the host's for the rest. Plain SQL on a connection: `JobHistory`
holds the lock and the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from gpuci_tui.core.store import schema

SERVER_COLUMNS = (
    "pipeline", "run", "result", "queue_wait_s", "duration_s", "assigned_at", "finished_at",
)  # fmt: skip
"""What the organisation says of a request (`REQUEST` writes only these on a known row)."""
KEY_COLUMNS = ("id", "instance", "request_id", "reconciled")
HOST_COLUMNS = tuple(c for c in schema.COLUMNS if c not in (*KEY_COLUMNS, *SERVER_COLUMNS))
"""What the host saw of the job's container (`EXIT` writes these on a known row)."""
INSERT_COLUMNS = tuple(c for c in schema.COLUMNS if c != "id")

_INSERT = (
    f"INSERT INTO jobs ({', '.join(INSERT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in INSERT_COLUMNS)}) {schema.REQUEST_CONFLICT} DO UPDATE SET "
)
_SERVER_KEPT = ", ".join(
    # A row that has the organisation's view keeps it; else the host's guess (or nothing).
    f"{c} = CASE WHEN jobs.finished_at IS NULL THEN coalesce(excluded.{c}, jobs.{c}) "
    f"ELSE jobs.{c} END"
    for c in SERVER_COLUMNS
)
EXIT = (
    _INSERT
    + ", ".join(f"{c} = excluded.{c}" for c in HOST_COLUMNS)
    + (f", {_SERVER_KEPT}, reconciled = 0")
)
"""The host's row of a job (values: `INSERT_COLUMNS`); a known request keeps its view."""
REQUEST = _INSERT + ", ".join(f"{c} = coalesce(excluded.{c}, jobs.{c})" for c in SERVER_COLUMNS)
"""The organisation's row of a finished request: a new one, or the view of a known one."""


def attach(db: sqlite3.Connection, row_id: int, request_id: int, server: Sequence[Any]) -> None:
    """Give the host's row ``row_id`` (written without an id) its request and that view.

    ``server``: the `SERVER_COLUMNS` values. When the request has a row already (the
    organisation's, written while this one waited), the two become one: that row takes
    this one's host facts and this one goes.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        other = db.execute(
            "SELECT id FROM jobs WHERE instance = (SELECT instance FROM jobs WHERE id = ?) "
            "AND request_id = ?",
            (row_id, request_id),
        ).fetchone()
        if other is None:
            sets = ", ".join(f"{c} = coalesce(?, {c})" for c in SERVER_COLUMNS)
            db.execute(
                f"UPDATE jobs SET request_id = ?, {sets} WHERE id = ? AND request_id IS NULL",
                (request_id, *server, row_id),
            )
        else:
            host = ", ".join(f"{c} = (SELECT {c} FROM jobs WHERE id = ?)" for c in HOST_COLUMNS)
            db.execute(
                f"UPDATE jobs SET {host}, reconciled = 0 WHERE id = ?",
                (*(row_id for _ in HOST_COLUMNS), other[0]),
            )
            db.execute("DELETE FROM jobs WHERE id = ?", (row_id,))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def requests_since(
    db: sqlite3.Connection, instance: str, since: float
) -> dict[int, tuple[bool, bool]]:
    """The request ids of ``instance`` with a row that ended at or after ``since``: whether
    each row has the organisation's view (its finish time), and the host's facts.
    """
    rows = db.execute(
        "SELECT request_id, finished_at IS NOT NULL, reconciled = 0 FROM jobs "
        "WHERE instance = ? AND request_id IS NOT NULL AND ended_at >= ?",
        (instance, since),
    )
    return {int(r[0]): (bool(r[1]), bool(r[2])) for r in rows}


def unmatched_since(db: sqlite3.Connection, instance: str, since: float) -> list[int]:
    """Ids of the host's rows of ``instance`` still without a request, ended since ``since``."""
    rows = db.execute(
        "SELECT id FROM jobs WHERE instance = ? AND request_id IS NULL AND reconciled = 0 "
        "AND ended_at >= ? ORDER BY ended_at",
        (instance, since),
    )
    return [int(r[0]) for r in rows]


def read_mark(db: sqlite3.Connection, instance: str) -> tuple[float, tuple[int, ...]] | None:
    """Up to when ``instance``'s finished requests all have their rows, and its agents' ids."""
    row = db.execute(
        "SELECT through, agents FROM reconcile_marks WHERE instance = ?", (instance,)
    ).fetchone()
    if row is None:
        return None
    ids = tuple(int(i) for i in str(row[1]).split(",") if i.strip().isdigit())
    return float(row[0]), ids


def write_mark(
    db: sqlite3.Connection, instance: str, through: float, agents: Sequence[int]
) -> None:
    """Keep `read_mark`'s answer for the next start."""
    db.execute(
        "INSERT INTO reconcile_marks (instance, through, agents) VALUES (?, ?, ?) "
        "ON CONFLICT (instance) DO UPDATE SET through = excluded.through, agents = excluded.agents",
        (instance, through, ",".join(str(i) for i in sorted(set(agents)))),
    )


def newest_end(db: sqlite3.Connection, instance: str) -> float | None:
    """When the newest row of ``instance`` ended (None: it has none)."""
    row = db.execute("SELECT max(ended_at) FROM jobs WHERE instance = ?", (instance,)).fetchone()
    return None if row is None or row[0] is None else float(row[0])
