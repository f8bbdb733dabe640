"""A damaged or replaced history never stops the daemon and never swallows later jobs."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.store.file import damage_notice, moved_aside
from gpuci_tui.core.store.history import JobHistory, JobRecord, read_history
from tests.real.rig import Rig, make_rig, wait_for

GARBAGE = b"this is not a database\x00" * 200
JOB = JobRecord(
    instance="i1", slot=0, agent="gpu01-0", request_id=1, pipeline="train", run="r1",
    started_at=None, ended_at=0.0, exit_code=0, oom=False, reason="job finished",
    result="succeeded",
)  # fmt: skip


def job(request_id: int) -> JobRecord:
    return dataclasses.replace(JOB, request_id=request_id, ended_at=time.time())


def ids(path: Path) -> list[int]:
    return sorted(r.request_id for r in read_history(path) or [])


def test_garbage_is_moved_aside_whole_and_a_new_history_started(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    path.write_bytes(GARBAGE)
    history = JobHistory(path)
    assert history.moved_to is not None and history.moved_to.read_bytes() == GARBAGE
    assert moved_aside(path) == [history.moved_to]
    history.add(job(7))
    assert ids(path) == [7]
    notice = damage_notice(path)
    assert notice is not None and f"rm {history.moved_to}" in notice
    history.moved_to.unlink()
    assert damage_notice(path) is None


def test_a_history_replaced_under_the_writer_is_reopened(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    history = JobHistory(path)
    history.add(job(1))
    other = tmp_path / "other.sqlite3"
    JobHistory(other).close()
    os.replace(other, path)  # e.g. a backup restored over it
    history.add(job(2))
    assert ids(path) == [2], "the job went into the file the path names now"


def test_a_history_deleted_under_the_writer_is_recreated(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    history = JobHistory(path)
    history.add(job(1))
    for name in ("history.sqlite3", "history.sqlite3-wal", "history.sqlite3-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    history.add(job(2))
    assert ids(path) == [2]


def test_a_history_truncated_under_the_writer_keeps_later_jobs(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    history = JobHistory(path)
    for n in range(1, 4):
        history.add(job(n))
    history.close()  # checkpoint: the rows are in the main file
    history = JobHistory(path)
    history.add(job(4))
    with path.open("r+b") as handle:
        handle.truncate(100)
    history.add(job(5))
    history.add(job(6))
    assert ids(path) == [5, 6]
    assert history.moved_to is not None and history.moved_to.exists()


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image, count=1)


@pytest.mark.daemon
@pytest.mark.docker
def test_run_starts_on_a_damaged_history_and_status_says_so(rig: Rig) -> None:
    state = Path(os.environ["XDG_STATE_HOME"]) / "gpuci-tui"
    state.mkdir(parents=True, exist_ok=True)
    (state / "history.sqlite3").write_bytes(GARBAGE)
    rig.start_daemon()
    wait_for(rig.all_idle, 60, "the agent idle")
    assert "Traceback" not in rig.daemon_log()
    text = rig.cli("status")
    assert "warning: the job history was damaged and moved to" in text.stdout, text.stdout
    data = json.loads(rig.cli("status", "--json").stdout)
    assert data["warnings"] and "history.sqlite3.corrupt-" in data["warnings"][0]
    job_id = rig.org.queue_job(rig.pool_id, duration=0.3)
    wait_for(lambda: rig.org.job(job_id).result, 30, "a job")
    wait_for(lambda: job_id in ids(state / "history.sqlite3"), 30, "the job in the new history")
