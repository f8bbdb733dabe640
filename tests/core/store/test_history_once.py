"""Schema version 7: one row per job request, completed by either side, and the migration."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

from gpuci_tui.core.store.history import JobHistory, JobQuery, JobRecord, read_history
from gpuci_tui.core.store.schema import SCHEMA_VERSION, migrate

HOST = JobRecord(
    instance="i1", slot=0, agent="gpu01-0", request_id=7, pipeline="train", run=None,
    started_at=1000.0, ended_at=1100.0, exit_code=0, oom=False, reason="job finished",
    gpus=(0,), peak_gpu_memory_mib=512.0,
)  # fmt: skip
"""What the host saw: the container, its GPU figures; no result yet."""
SERVER = JobRecord(
    instance="i1", slot=0, agent="gpu01-0", request_id=7, pipeline="train - main",
    run="20261123.1", started_at=None, ended_at=1099.0, exit_code=None, oom=False,
    reason="recorded after a restart", result="failed", queue_wait_s=4.0, duration_s=90.0,
    assigned_at=1005.0, finished_at=1099.0,
)  # fmt: skip
"""What the organisation says of request 7."""


def rows(h: JobHistory) -> list[JobRecord]:
    return h.query(JobQuery(limit=None))


def test_a_job_seen_twice_by_the_host_is_one_row() -> None:
    h = JobHistory(":memory:")
    h.add(HOST)
    h.add(dataclasses.replace(HOST, exit_code=1, reason="again"))
    (row,) = rows(h)
    assert (row.exit_code, row.reason, row.duration_s) == (1, "again", 100.0)


def test_the_organisations_view_completes_the_hosts_row() -> None:
    h = JobHistory(":memory:")
    h.add(dataclasses.replace(HOST, result="abandoned"))  # the host's guess of a lost job
    h.add_request(SERVER)
    (row,) = rows(h)
    # The organisation's columns are its own: result, times, names...
    assert (row.result, row.pipeline, row.run, row.queue_wait_s, row.duration_s) == (
        "failed", "train - main", "20261123.1", 4.0, 90.0,
    )  # fmt: skip
    # ...the host's stay: the container's end, exit, GPU figures; observed live.
    assert (row.ended_at, row.exit_code, row.gpus, row.peak_gpu_memory_mib) == (
        1100.0, 0, (0,), 512.0,
    )  # fmt: skip
    assert not row.reconciled and row.finished_at == 1099.0


def test_a_request_first_is_its_own_row_and_the_hosts_facts_join_it() -> None:
    h = JobHistory(":memory:")
    h.add_request(SERVER)
    (row,) = rows(h)
    assert row.reconciled and row.gpus == () and row.result == "failed"
    h.add(HOST)  # its container's end, seen late: the same job
    (row,) = rows(h)
    assert not row.reconciled and row.gpus == (0,) and row.ended_at == 1100.0
    # The organisation's view is kept: the host's record has no result, its duration is
    # the container's life (start-up included), not the job's.
    assert (row.result, row.duration_s, row.pipeline) == ("failed", 90.0, "train - main")
    h.add_request(SERVER)  # read again after a reconnect: still one row
    assert len(rows(h)) == 1


def test_rows_without_a_request_are_never_merged_and_attach_gives_them_theirs() -> None:
    h = JobHistory(":memory:")
    first = h.add(dataclasses.replace(HOST, request_id=None))
    second = h.add(dataclasses.replace(HOST, request_id=None, ended_at=1200.0))
    assert first is not None and second is not None and len(rows(h)) == 2
    h.attach(first, SERVER)
    attached = h.row(first)
    assert attached is not None
    assert (attached.request_id, attached.result, attached.gpus) == (7, "failed", (0,))
    # The request came to a row of its own meanwhile: the two become one.
    h.add_request(dataclasses.replace(SERVER, request_id=8))
    h.attach(second, dataclasses.replace(SERVER, request_id=8))
    eight = h.request_row("i1", 8)
    assert eight is not None and not eight.reconciled and eight.ended_at == 1200.0
    assert sorted(r.request_id or 0 for r in rows(h)) == [7, 8]


def test_the_same_request_id_of_two_instances_is_two_rows() -> None:
    h = JobHistory(":memory:")
    h.add(HOST)
    h.add(dataclasses.replace(HOST, instance="i2"))
    assert len(rows(h)) == 2


def test_the_mark_and_the_rows_a_restart_continues_from(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    h = JobHistory(path, clock=lambda: 2000.0)
    assert h.mark("i1") is None  # a new history: nothing to continue from
    h.add(HOST)
    assert h.mark("i1") == (1100.0, ())  # an older daemon's history: from its newest row
    h.set_mark("i1", 1500.0, [13, 12])
    h.add(dataclasses.replace(HOST, request_id=None, ended_at=1600.0))
    h.add_request(dataclasses.replace(SERVER, request_id=9, ended_at=1700.0))
    h.close()
    again = JobHistory(path, clock=lambda: 2000.0)
    assert again.mark("i1") == (1500.0, (12, 13))
    assert again.requests_since("i1", 1000.0) == {7: (False, True), 9: (True, False)}
    assert [r.ended_at for r in again.unmatched_since("i1", 1000.0)] == [1600.0]


V6_DUPLICATES = [
    # An older daemon's delayed reads tagged three jobs of one agent with its latest request.
    (1, 66, 1000.0, 1030.0, "succeeded", 3.0, 20.0),
    (2, 66, 1040.0, 1070.0, "succeeded", 3.0, 20.0),
    (3, 66, 1080.0, 1100.0, "succeeded", 3.0, 20.0),
    (4, 67, 1100.0, 1130.0, "failed", 1.0, 25.0),
    (5, None, 1140.0, 1150.0, None, None, None),
]


def make_v6_file(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA user_version = 0")
    db.execute("BEGIN")
    db.execute("COMMIT")
    migrate(db)  # up to this release, then back to what version 6 looked like
    db.execute("DROP INDEX jobs_request")
    db.execute("DROP TABLE reconcile_marks")
    for column in ("reconciled", "assigned_at", "finished_at"):
        db.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
    db.execute("PRAGMA user_version = 6")
    db.executemany(
        "INSERT INTO jobs (id, instance, slot, agent, request_id, started_at, ended_at, result, "
        "queue_wait_s, duration_s) VALUES (?, 'i1', 0, 'gpu01-0', ?, ?, ?, ?, ?, ?)",
        V6_DUPLICATES,
    )
    db.close()


def test_a_version_6_file_keeps_every_row_and_one_request_id_per_job(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    make_v6_file(path)
    before = read_history(path, JobQuery(limit=None))
    assert before is not None and len(before) == 5  # readable before the migration
    h = JobHistory(path, clock=lambda: 2000.0)
    after = {r.id: r for r in rows(h)}
    h.close()
    assert sorted(after) == [1, 2, 3, 4, 5]
    # The newest of the rows that claimed 66 keeps it; the others keep their container's
    # facts, not the result and queue wait that were request 66's.
    assert [after[i].request_id for i in (1, 2, 3, 4, 5)] == [None, None, 66, 67, None]
    assert [after[i].result for i in (1, 2, 3)] == [None, None, "succeeded"]
    assert (after[1].duration_s, after[1].queue_wait_s) == (30.0, None)
    assert after[4].duration_s == 25.0 and not any(r.reconciled for r in after.values())
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    assert version == SCHEMA_VERSION == 7
