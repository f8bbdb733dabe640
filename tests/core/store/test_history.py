"""JobHistory: migration of the first release's file, the new columns, queries, retention."""

from __future__ import annotations

import dataclasses
import itertools
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.gpu.accounting import JobGpuStats, JobKey
from gpuci_tui.core.store import history
from gpuci_tui.core.store.history import HistoryError, JobHistory, JobQuery, JobRecord, read_history
from gpuci_tui.core.store.schema import SCHEMA_VERSION, open_reader

# The table exactly as the first release created it (gpuci_tui/core/store/history.py @19350dc),
# written here literally so that later schema edits cannot change what "old" means.
V1_SCHEMA = """
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
V1_ROWS = [
    ("i1", 0, "gpu01-0", 11, "train", "20260901.1", 1000.0, 1600.0, 0, 0, "job finished"),
    ("i1", 1, "gpu01-1", 12, "lint", "20260901.2", None, 1700.0, 143, 0, "stopped"),
    ("i2", 0, "other-0", None, None, None, 1500.0, 1800.0, 137, 1, "OOM-killed"),
]


def make_v1_file(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute(V1_SCHEMA)
    db.executemany(
        "INSERT INTO jobs (instance, slot, agent, request_id, pipeline, run, started_at,"
        " ended_at, exit_code, oom, reason) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        V1_ROWS,
    )
    db.commit()
    db.close()


BASE = JobRecord(
    instance="i1", slot=0, agent="gpu01-0", request_id=1, pipeline="train", run="r1",
    started_at=None, ended_at=0.0, exit_code=0, oom=False, reason="job finished",
    result="succeeded",
)  # fmt: skip


_REQUEST_IDS = itertools.count(1000)


def rec(ended: float, **kw: Any) -> JobRecord:
    """A job ending at ``ended``: its own request (one row per request id)."""
    kw.setdefault("started_at", ended - 100)
    kw.setdefault("request_id", next(_REQUEST_IDS))
    return dataclasses.replace(BASE, ended_at=ended, **kw)


def test_v1_file_keeps_every_row_after_migration(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    make_v1_file(path)
    # Read-only reading of the old file works and does not migrate it.
    old = read_history(path, JobQuery(limit=None))
    assert old is not None and len(old) == 3
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 0

    h = JobHistory(path, clock=lambda: 2000.0)
    rows = sorted(h.query(JobQuery(limit=None)), key=lambda r: r.id or 0)
    h.close()
    got = [
        (r.instance, r.slot, r.agent, r.request_id, r.pipeline, r.run, r.started_at,
         r.ended_at, r.exit_code, int(r.oom), r.reason)
        for r in rows
    ]  # fmt: skip
    assert got == V1_ROWS
    assert [r.id for r in rows] == [1, 2, 3]
    # Old rows get the container's life as duration, and no GPU figures.
    assert [r.duration_s for r in rows] == [600.0, None, 300.0]
    assert all(r.result is None and r.gpus == () and r.peak_gpu_memory_mib is None for r in rows)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    # Opening again is a no-op: same rows, same version.
    again = JobHistory(path, clock=lambda: 2000.0)
    assert len(again.query(JobQuery(limit=None))) == 3
    again.close()


def test_new_fields_round_trip(tmp_path: Path) -> None:
    stats = JobGpuStats(
        key=JobKey("i1", 0, "gpu01-0", 7),
        gpu_indexes=(0, 3),
        samples=42,
        peak_memory_mib=18000.5,
        mean_util_pct=63.2,
        peak_util_pct=99.0,
        energy_j=None,
        energy_note="GPU shared with another process during the job",
    )
    record = rec(5000.0, queue_wait_s=12.5, duration_s=80.0).with_gpu(stats)
    h = JobHistory(tmp_path / "h.sqlite3", clock=lambda: 5000.0)
    h.add(record)
    (back,) = h.recent("i1")
    h.close()
    assert back == dataclasses.replace(record, id=1)
    assert back.gpus == (0, 3)


def test_duration_defaults_to_the_container_life(tmp_path: Path) -> None:
    h = JobHistory(":memory:", clock=lambda: 5000.0)
    h.add(rec(5000.0, started_at=4000.0))
    h.add(rec(5001.0, started_at=None))
    assert [r.duration_s for r in h.query()] == [None, 1000.0]


def test_query_filters(tmp_path: Path) -> None:
    h = JobHistory(tmp_path / "h.sqlite3", clock=lambda: 10_000.0)
    h.add(rec(9000, pipeline="train", slot=0))
    h.add(rec(9100, pipeline="lint", slot=1, result="failed"))
    h.add(rec(9200, pipeline="train", slot=1, oom=True, exit_code=137))
    h.add(rec(9300, pipeline="train", slot=0, result=None, exit_code=143))
    h.add(rec(9400, pipeline="train", slot=0, result="canceled"))
    h.add(rec(9500, pipeline="train", slot=0, result="succeededWithIssues"))
    h.add(rec(9600, pipeline="train", slot=2, instance="i2", result=None, exit_code=0))

    def ends(**kw: Any) -> list[float]:
        return [r.ended_at for r in h.query(JobQuery(**kw))]

    assert ends() == [9600, 9500, 9400, 9300, 9200, 9100, 9000]
    assert ends(limit=2) == [9600, 9500]
    assert ends(pipeline="lint") == [9100]
    assert ends(since=9350) == [9600, 9500, 9400]
    assert ends(slot=1) == [9200, 9100]
    assert ends(failed_only=True) == [9400, 9300, 9200, 9100]
    assert ends(failed_only=True, pipeline="train", since=9250) == [9400, 9300]
    assert ends(instance="i2") == [9600]
    assert all(r.failed for r in h.query(JobQuery(failed_only=True)))
    assert not any(r.failed for r in h.query(JobQuery(since=9450)))
    h.close()


def test_succeeded_only_is_exactly_the_rows_that_did_not_fail(tmp_path: Path) -> None:
    """The console's result toggle: the complement of ``failed_only``, unknowns included."""
    h = JobHistory(tmp_path / "h.sqlite3", clock=lambda: 10_000.0)
    h.add(rec(9000, result="succeeded"))
    h.add(rec(9100, result="failed"))
    h.add(rec(9200, result=None, exit_code=None))  # nothing known: not a failure
    h.add(rec(9300, result=None, exit_code=1))
    h.add(rec(9400, oom=True))
    rows = h.query(JobQuery(limit=None))
    ok = h.query(JobQuery(succeeded_only=True, limit=None))
    assert [r.ended_at for r in ok] == [r.ended_at for r in rows if not r.failed] == [9200, 9000]
    h.close()


def test_pipeline_contains_ignores_case_and_takes_wildcards_literally(tmp_path: Path) -> None:
    h = JobHistory(tmp_path / "h.sqlite3", clock=lambda: 10_000.0)
    for at, name in ((9000, "Train - main"), (9100, "eval 100%"), (9200, "lint_x"), (9300, None)):
        h.add(rec(at, pipeline=name))

    def names(text: str) -> list[str | None]:
        return [r.pipeline for r in h.query(JobQuery(pipeline_contains=text))]

    assert names("TRAIN") == ["Train - main"]
    assert names("%") == ["eval 100%"]
    assert names("_") == ["lint_x"]
    assert len(names("")) == 4  # an empty box filters nothing
    h.close()


def test_retention_by_age_and_rows_is_not_run_on_every_insert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history, "PRUNE_EVERY", 5)
    now = [100 * 86400.0]
    path = tmp_path / "h.sqlite3"
    h = JobHistory(path, keep_days=10, max_rows=3, clock=lambda: now[0])
    for i in range(4):
        h.add(rec(now[0] - 20 * 86400 + i))  # already too old
    # Four inserts: no retention yet (cheap inserts), everything is still there.
    assert len(h.query(JobQuery(limit=None))) == 4
    h.add(rec(now[0]))  # the fifth insert runs it: the old four go
    assert [r.ended_at for r in h.query(JobQuery(limit=None))] == [now[0]]
    for i in range(1, 6):
        h.add(rec(now[0] + i))
    # 6 rows were left before the run at the 5th insert after the last one → newest 3.
    assert [r.ended_at for r in h.query(JobQuery(limit=None))] == [now[0] + i for i in (5, 4, 3)]
    h.close()
    # Retention also runs at open.
    now[0] += 11 * 86400
    JobHistory(path, keep_days=10, max_rows=3, clock=lambda: now[0]).close()
    assert read_history(path, JobQuery(limit=None)) == []


def test_retention_after_a_day_without_many_inserts(tmp_path: Path) -> None:
    now = [1_000_000.0]
    h = JobHistory(":memory:", keep_days=1, max_rows=1000, clock=lambda: now[0])
    h.add(rec(now[0]))
    now[0] += history.PRUNE_AFTER_S + 1
    h.add(rec(now[0]))
    assert [r.ended_at for r in h.query()] == [now[0]]


def test_read_history_without_a_file_or_on_a_bad_one(tmp_path: Path) -> None:
    assert read_history(tmp_path / "absent.sqlite3") is None
    assert not (tmp_path / "absent.sqlite3").exists()
    empty = tmp_path / "empty.sqlite3"
    sqlite3.connect(empty).close()
    assert read_history(empty) == []
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(HistoryError, match="cannot read the job history .*junk.sqlite3.*move it"):
        read_history(junk)


def test_reader_is_read_only(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    h = JobHistory(path)
    h.add(rec(1000.0))
    h.close()
    before = path.read_bytes()
    assert len(read_history(path) or []) == 1
    assert path.read_bytes() == before
    reader = open_reader(path)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.execute("DELETE FROM jobs")
    reader.close()


def test_v2_file_gains_the_xid_column_and_the_xids_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    h = JobHistory(path, clock=lambda: 2000.0)
    h.add(rec(1500.0, xid=(79, 48)))
    h.add(rec(1600.0))
    rows = sorted(h.query(JobQuery(limit=None)), key=lambda r: r.ended_at)
    h.close()
    assert [r.xid for r in rows] == [(79, 48), ()]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.execute("ALTER TABLE jobs DROP COLUMN xid")
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    # An older (v2) file read before any daemon migrated it: no Xid, nothing lost.
    old = read_history(path, JobQuery(limit=None))
    assert old is not None and [r.xid for r in old] == [(), ()]
    again = JobHistory(path, clock=lambda: 2000.0)
    assert len(again.query(JobQuery(limit=None))) == 2
    again.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_v3_file_gains_the_image_columns_and_the_image_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    image_id, digest = "sha256:" + "1" * 64, "reg:5000/agent@sha256:" + "2" * 64
    h = JobHistory(path, clock=lambda: 2000.0)
    h.add(rec(1500.0, image="reg:5000/agent:1", image_id=image_id, repo_digest=digest))
    h.close()
    db = sqlite3.connect(path)
    for column in ("image", "image_id", "repo_digest"):
        db.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    # A version-3 file read before any daemon migrated it: no image, nothing lost.
    old = read_history(path, JobQuery(limit=None))
    assert old is not None and [(r.image, r.image_id) for r in old] == [(None, None)]
    again = JobHistory(path, clock=lambda: 2000.0)
    again.add(rec(1600.0, image="reg:5000/agent:1", image_id=image_id, repo_digest=digest))
    rows = sorted(again.query(JobQuery(limit=None)), key=lambda r: r.ended_at)
    again.close()
    assert [(r.image, r.image_id, r.repo_digest) for r in rows] == [
        (None, None, None),
        ("reg:5000/agent:1", image_id, digest),
    ]
    # At least version 4 (version 5 added the GPU facts: test_history_gpu_facts).
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 4
