"""``gpuci-tui history``: table, JSON, filters, bad input and the absent file.

The autouse ``_isolated_home`` fixture points XDG_STATE_HOME at a temporary
directory, so the history file is the test's own.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.history_cmd import parse_since
from gpuci_tui.cli.main import main
from gpuci_tui.core.config import paths
from gpuci_tui.core.store.history import JobHistory, JobRecord

JSON_KEYS = [
    "id", "instance", "slot", "agent", "request_id", "pipeline", "run", "started_at",
    "ended_at", "duration_s", "queue_wait_s", "result", "exit_code", "oom", "failed", "reason",
    "gpus", "gpu_samples", "peak_gpu_memory_mib", "mean_util_pct", "peak_util_pct", "energy_j",
    "energy_note", "xid", "image", "image_id", "repo_digest",
    "throttle_s", "ecc_corrected", "ecc_uncorrected", "peak_temp_c", "startup_s",
    "reconciled", "assigned_at", "finished_at",
]  # fmt: skip


_REQUEST_IDS = itertools.count(100)


def job(ago_s: float, pipeline: str, run: str, slot: int, **kw: Any) -> JobRecord:
    return dataclasses.replace(
        JobRecord(
            instance="i1",
            slot=slot,
            agent=f"gpu01-{slot}",
            request_id=next(_REQUEST_IDS),
            pipeline=pipeline,
            run=run,
            # Relative to when the row is written, not when this module was imported: in a
            # full run the module is imported minutes before its tests (--since 90s).
            started_at=time.time() - ago_s - 65,
            ended_at=time.time() - ago_s,
            exit_code=0,
            oom=False,
            reason="job finished",
            result="succeeded",
        ),  # fmt: skip
        **kw,
    )


@pytest.fixture
def history() -> Path:
    h = JobHistory(paths.history_db_path())
    h.add(job(3 * 86400, "nightly", "20260925.1", 0, duration_s=3725.0, queue_wait_s=3.0))
    h.add(
        job(
            3600,
            "train-resnet",
            "20260928.4",
            1,
            gpus=(0, 1),
            peak_gpu_memory_mib=18_022.0,
            mean_util_pct=63.4,
            queue_wait_s=12.0,
            result="failed",
            xid=(79,),
        )  # fmt: skip
    )
    h.add(job(60, "train-resnet", "20260928.5", 0, oom=True, exit_code=137, result=None))
    h.add(job(30, "lint", "20260928.6", 2, peak_gpu_memory_mib=512.0, mean_util_pct=3.0))
    h.close()
    return paths.history_db_path()


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.rstrip("\n").splitlines()


def test_table_one_aligned_line_per_job(history: Path, capsys) -> None:
    assert main(["history"]) == exitcodes.OK
    header, *rows = lines(capsys)
    assert header.split() == [
        "ENDED", "PIPELINE", "RUN", "SLOT", "GPU", "DURATION", "WAIT", "PEAK", "MEM", "UTIL",
        "RESULT",
    ]  # fmt: skip
    assert len(rows) == 4
    # Columns line up: every row's run starts where the header's RUN does.
    col = header.index("RUN")
    assert [r[col:].split()[0] for r in rows] == [
        "20260928.6",
        "20260928.5",
        "20260928.4",
        "20260925.1",
    ]
    lint, oom, failed, nightly = rows
    assert "512 MiB" in lint and "3%" in lint and lint.endswith("succeeded")
    assert oom.endswith("exit 137 (OOM)")
    assert "0,1" in failed and "17.6 GiB" in failed and "63%" in failed and "12s" in failed
    # The job that ran while its GPU raised a critical Xid says so.
    assert failed.endswith("failed (GPU Xid 79)")
    assert "1h02m" in nightly and "3s" in nightly


def test_filters(history: Path, capsys) -> None:
    def runs(*argv: str) -> list[str]:
        assert main(["history", "--json", *argv]) == exitcodes.OK
        return [j["run"] for j in json.loads(capsys.readouterr().out)]

    assert runs("--pipeline", "train-resnet") == ["20260928.5", "20260928.4"]
    assert runs("--since", "2d") == ["20260928.6", "20260928.5", "20260928.4"]
    assert runs("--since", "90s") == ["20260928.6", "20260928.5"]
    assert runs("--slot", "0") == ["20260928.5", "20260925.1"]
    assert runs("--failed") == ["20260928.5", "20260928.4"]
    assert runs("--failed", "--since", "2d", "--pipeline", "train-resnet") == [
        "20260928.5",
        "20260928.4",
    ]
    assert runs("--limit", "1") == ["20260928.6"]
    assert len(runs("--limit", "0")) == 4


def test_json_is_a_stable_list_of_objects(history: Path, capsys) -> None:
    assert main(["history", "--json", "--limit", "2"]) == exitcodes.OK
    data = json.loads(capsys.readouterr().out)
    assert [list(item) for item in data] == [JSON_KEYS, JSON_KEYS]
    oom = data[1]
    assert oom["oom"] is True and oom["failed"] is True and oom["exit_code"] == 137
    assert oom["result"] is None
    assert oom["gpus"] == []
    assert (oom["image"], oom["image_id"], oom["repo_digest"]) == (None, None, None)
    assert oom["ended_at"].endswith("Z")
    assert oom["duration_s"] == pytest.approx(65.0)


def test_a_row_recorded_after_a_restart_says_so(capsys) -> None:
    h = JobHistory(paths.history_db_path())
    h.add_request(job(20, "nightly", "20260928.7", 1, reconciled=True, finished_at=time.time()))
    h.close()
    assert main(["history"]) == exitcodes.OK
    assert "succeeded, recorded after a restart" in capsys.readouterr().out
    assert main(["history", "--json"]) == exitcodes.OK
    (row,) = json.loads(capsys.readouterr().out)
    assert row["reconciled"] is True and row["finished_at"].endswith("Z")


def test_absent_history_is_not_an_error(capsys) -> None:
    assert main(["history"]) == exitcodes.OK
    out = capsys.readouterr().out
    assert out.startswith("no jobs recorded yet")
    assert str(paths.history_db_path()) in out
    assert main(["history", "--json"]) == exitcodes.OK
    assert json.loads(capsys.readouterr().out) == []
    assert not paths.history_db_path().exists()  # reading never creates it


def test_no_match_says_so(history: Path, capsys) -> None:
    assert main(["history", "--pipeline", "nope"]) == exitcodes.OK
    assert lines(capsys) == ["no jobs match"]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--since", "yesterday"], "--since must be a duration back from now like 30m, 12h, 2d"),
        (["--since", "2 days"], "or a local date or time like 2026-09-28"),
        (["--slot", "one"], "--slot must be a slot number"),
        (["--limit", "-5"], "--limit must be a whole number of jobs (0 for all); got '-5'"),
    ],
)
def test_bad_input_is_a_usage_error(history: Path, capsys, argv: list[str], words: str) -> None:
    assert main(["history", *argv]) == exitcodes.USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("gpuci-tui: ")
    assert words in captured.err


def test_damaged_file_fails_with_advice(capsys) -> None:
    paths.history_db_path().write_bytes(b"garbage" * 1000)
    assert main(["history"]) == exitcodes.FAILED
    assert "move it away" in capsys.readouterr().err


def test_parse_since_forms() -> None:
    assert parse_since("30m", 10_000.0) == 8_200.0
    assert parse_since("1.5h", 10_000.0) == 4_600.0
    assert parse_since("1W", 1e6) == 1e6 - 7 * 86400
    assert parse_since("2026-09-28T14:00:00Z", 0) == 1790604000.0
    local = parse_since("2026-09-28", 0)
    assert time.localtime(local)[:6] == (2026, 9, 28, 0, 0, 0)


def test_real_binary_reads_beside_an_open_writer(tmp_path: Path) -> None:
    # A daemon holds the file open for writing; the command must still read it
    # (no lock errors) without touching it.
    writer = JobHistory(paths.history_db_path())
    writer.add(job(10, "train", "20260928.9", 3, result="canceled"))
    try:
        out = subprocess.run(
            [sys.executable, "-m", "gpuci_tui.cli.main", "history", "--failed"],
            env=dict(os.environ),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        writer.close()
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].endswith("canceled")
    assert "20260928.9" in out.stdout


def test_help(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["history", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: gpuci-tui history" in out
    assert "2d" in out
