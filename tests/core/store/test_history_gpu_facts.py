"""Schema version 5: the per-job GPU facts columns, the migration from version 4, the CLI."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

from gpuci_tui.cli.history_cmd import _json, render_history
from gpuci_tui.core.gpu.accounting import JobGpuStats, JobKey
from gpuci_tui.core.gpu.job_facts import JobFacts
from gpuci_tui.core.store.history import JobHistory, JobQuery, JobRecord, read_history
from gpuci_tui.core.store.schema import SCHEMA_VERSION, V5_COLUMNS, V6_COLUMNS

BASE = JobRecord(
    instance="i1", slot=0, agent="gpu01-0", request_id=1, pipeline="train", run="r1",
    started_at=1000.0, ended_at=1500.0, exit_code=0, oom=False, reason="job finished",
    result="succeeded",
)  # fmt: skip
FACTS = JobFacts(
    throttle_s=(("sw_power_cap", 3.0), ("sw_thermal", 12.0)),
    ecc_corrected=2,
    ecc_uncorrected=1,
    peak_temp_c=83.0,
)
STATS = JobGpuStats(JobKey("i1", 0, "gpu01-0"), (0,), samples=9, energy_j=412_000.0, facts=FACTS)


def test_the_facts_round_trip_and_unknown_stays_null(tmp_path: Path) -> None:
    h = JobHistory(tmp_path / "h.sqlite3", clock=lambda: 2000.0)
    h.add(dataclasses.replace(BASE, xid=(79,)).with_gpu(STATS))
    h.add(dataclasses.replace(BASE, ended_at=1600.0, request_id=2))  # no GPU figures at all
    quiet = dataclasses.replace(STATS, facts=JobFacts(throttle_s=(), ecc_corrected=0))
    h.add(dataclasses.replace(BASE, ended_at=1700.0, request_id=3).with_gpu(quiet))
    known, unknown, hot = sorted(h.query(JobQuery(limit=None)), key=lambda r: r.ended_at)
    h.close()
    assert known.throttle_s == (("sw_power_cap", 3.0), ("sw_thermal", 12.0))
    assert (known.ecc_corrected, known.ecc_uncorrected, known.peak_temp_c) == (2, 1, 83.0)
    assert known.gpu_facts == (
        "412 kJ · power 3 s · thermal 12 s · ECC 1 uncorrected · ECC 2 corrected · Xid 79 · 83 °C"
    )
    # Not known is NULL, never 0; read and never throttled is an empty mapping.
    assert (unknown.throttle_s, unknown.ecc_corrected, unknown.peak_temp_c) == (None, None, None)
    assert unknown.gpu_facts == ""
    assert (hot.throttle_s, hot.ecc_corrected, hot.ecc_uncorrected) == ((), 0, None)
    db = sqlite3.connect(tmp_path / "h.sqlite3")
    stored = db.execute("SELECT throttle_s, ecc_uncorrected FROM jobs ORDER BY ended_at").fetchall()
    assert stored == [('{"sw_power_cap": 3.0, "sw_thermal": 12.0}', 1), (None, None), ("{}", None)]


def test_a_version_4_file_keeps_its_rows_and_gains_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    h = JobHistory(path, clock=lambda: 2000.0)
    h.add(dataclasses.replace(BASE, xid=(48,), energy_j=10.0, image="reg:5000/agent:1"))
    h.add(dataclasses.replace(BASE, ended_at=1600.0, exit_code=1, request_id=2))
    h.close()
    db = sqlite3.connect(path)
    for name, _ in V5_COLUMNS + V6_COLUMNS:  # a version-4 file: the table without them
        db.execute(f"ALTER TABLE jobs DROP COLUMN {name}")
    db.execute("PRAGMA user_version = 4")
    db.commit()
    db.close()
    # Read before any daemon migrated it: the facts are not known, the rows are all there.
    old = read_history(path, JobQuery(limit=None))
    assert old is not None and len(old) == 2
    assert {(r.throttle_s, r.ecc_corrected, r.peak_temp_c) for r in old} == {(None, None, None)}
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 4
    again = JobHistory(path, clock=lambda: 2000.0)
    again.add(dataclasses.replace(BASE, ended_at=1700.0, request_id=3).with_gpu(STATS))
    rows = sorted(again.query(JobQuery(limit=None)), key=lambda r: r.ended_at)
    again.close()
    assert [(r.xid, r.energy_j, r.image, r.exit_code) for r in rows[:2]] == [
        ((48,), 10.0, "reg:5000/agent:1", 0),
        ((), None, None, 1),
    ]
    assert [r.peak_temp_c for r in rows] == [None, None, 83.0]
    assert rows[2].throttle_s == FACTS.throttle_s
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    assert version == SCHEMA_VERSION >= 5


def test_history_cli_shows_the_facts_in_json_and_with_gpu() -> None:
    row = dataclasses.replace(BASE, xid=(79,)).with_gpu(STATS)
    data = json.loads(json.dumps(_json(row)))
    assert data["throttle_s"] == {"sw_power_cap": 3.0, "sw_thermal": 12.0}
    assert (data["ecc_corrected"], data["ecc_uncorrected"], data["peak_temp_c"]) == (2, 1, 83.0)
    assert _json(BASE)["throttle_s"] is None
    header, line = render_history([row], gpu_facts=True).splitlines()
    assert header.split()[-3:] == ["RESULT", "GPU", "FACTS"]
    assert line.endswith("412 kJ · power 3 s · thermal 12 s · ECC 1 uncorrected · "
                         "ECC 2 corrected · Xid 79 · 83 °C")  # fmt: skip
    assert "GPU FACTS" not in render_history([row])  # the default table keeps its columns
