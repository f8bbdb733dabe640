"""A fleet host's job history: served by its daemon read-only, bounded and redacted, and shown
by ``h`` in the host's dashboard through the same history view as on the host itself."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.app import make_app
from gpuci_tui.cli.bridge_cmd import vet
from gpuci_tui.core.host.control import history_serving
from gpuci_tui.core.host.control.client import ControlError
from gpuci_tui.core.host.control.history_serving import (
    MAX_ROWS,
    history_answer,
    history_reply,
    history_request,
    query_of,
    record_from_dict,
    record_to_dict,
)
from gpuci_tui.core.host.control.server import ControlServer
from gpuci_tui.core.secrets.redaction import register_secret
from gpuci_tui.core.store.history import JobHistory, JobQuery, JobRecord
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.screens.history import HistoryScreen
from tests.fleet.fakes import FAST, SwitchHandle, fleet_services, healthy_snapshot, member
from tests.fleet.screen_helpers import open_host
from tests.ui.fakes import FakeHandle
from tests.ui.helpers import screen_text, wait_for
from tests.ui.scenarios import NOW

HOST = "gpu-node-17.lab.example.org"


def job(n: int, pipeline: str = "train - main", **changes: Any) -> JobRecord:
    record = JobRecord(
        instance="contoso/gpu/gpu17", slot=n % 2, agent=f"gpu17-{n % 2}", request_id=100 + n,
        pipeline=pipeline, run=f"2026.{n}", started_at=NOW - 900 + n, ended_at=NOW - 300 + n,
        exit_code=0, oom=False, reason="job finished", result="succeeded", gpus=(n % 2,),
        throttle_s=(("thermal", 12.5),), xid=(79,) if n == 3 else (),
    )  # fmt: skip
    return replace(record, **changes)


def history_file(tmp_path: Path, jobs: list[JobRecord]) -> Path:
    path = tmp_path / "state" / "history.sqlite3"
    history = JobHistory(path, clock=lambda: NOW)
    for record in jobs:
        history.add(record)
    history.close()
    return path


def test_a_row_crosses_the_wire_whole() -> None:
    record = job(3, oom=True, result=None, exit_code=137, peak_gpu_memory_mib=61_440.0, id=7)
    back = record_from_dict(json.loads(json.dumps(record_to_dict(record))))
    assert back == record


def test_the_filters_are_checked_and_the_rows_capped() -> None:
    query = JobQuery(pipeline_contains="train", failed_only=True, limit=50)
    assert history_request(query) == {
        "op": "history", "query": {"pipeline_contains": "train", "failed_only": True, "limit": 50},
    }  # fmt: skip
    assert query_of(history_request(query)) == query
    assert query_of({"query": {"limit": 10**9}}).limit == MAX_ROWS
    assert query_of({}).limit == MAX_ROWS, "no limit asked: never more than the cap"
    assert query_of({"query": {"since": 5}}).since == 5.0
    for bad, words in (
        ({"query": {"instance": "x"}}, "unknown filter 'instance'"),
        ({"query": {"slot": True}}, '"slot" must be a number'),
        ({"query": {"pipeline": 3}}, '"pipeline" must be text'),
        ({"query": {"limit": 0}}, '"limit" must be a whole number from 1'),
        ({"query": []}, '"query" must be an object'),
    ):
        with pytest.raises(ValueError, match=words):
            query_of(bad)


async def test_the_answer_is_read_only_redacted_and_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "histpat" + uuid.uuid4().hex
    path = history_file(
        tmp_path, [job(n, f"leak {secret}" if n == 2 else "train") for n in range(6)]
    )
    register_secret(secret)  # learnt after the row was written: redacted on the way out
    answer = await history_answer({"query": {"limit": 4}}, path)
    assert answer["ok"] and answer["recorded"] and answer["truncated"] is False
    assert [row["run"] for row in answer["rows"]] == ["2026.5", "2026.4", "2026.3", "2026.2"]
    assert secret not in json.dumps(answer) and answer["rows"][3]["pipeline"] == "leak ***"
    failed = await history_answer({"query": {"failed_only": True}}, path)
    assert failed["rows"] == []
    # The byte cap: the oldest rows are left out, and the answer says so.
    size = len(json.dumps(answer["rows"][0], separators=(",", ":"))) + 1
    monkeypatch.setattr(history_serving, "MAX_BYTES", 2 * size + 10)
    capped = await history_answer({}, path)
    assert len(capped["rows"]) == 2 and capped["truncated"] is True
    assert [row["run"] for row in capped["rows"]] == ["2026.5", "2026.4"]
    # No file yet, no history at all, a damaged file: each said, nothing created.
    missing = tmp_path / "none" / "history.sqlite3"
    assert await history_answer({}, missing) == {"ok": True, "rows": [], "recorded": False}
    assert not missing.exists()
    assert (await history_answer({}, None))["recorded"] is False
    broken = tmp_path / "broken.sqlite3"
    broken.write_bytes(b"not a database" * 100)
    damaged = await history_answer({}, broken)
    assert not damaged["ok"] and "cannot" in damaged["error"]
    assert not (await history_answer({"query": {"bogus": 1}}, path))["ok"]


def test_a_reply_is_rows_none_or_the_reason() -> None:
    assert history_reply({"ok": True, "rows": [], "recorded": False}) is None
    assert history_reply({"ok": True, "rows": [record_to_dict(job(1))]}) == [job(1)]
    with pytest.raises(ControlError, match="older than this console's"):
        history_reply({"ok": False, "error": "unknown op 'history'; expected hello, status"})
    with pytest.raises(ControlError, match="malformed history"):
        history_reply({"ok": True, "rows": [{"slot": "x"}]})


def test_a_readonly_bridge_passes_history_on() -> None:
    forward, refusal = vet(b'{"op": "history", "query": {"limit": 5}}', readonly=True)
    assert refusal == b"" and json.loads(forward) == {"op": "history", "query": {"limit": 5}}


class _Stub:
    instance = "stub"


async def test_the_daemon_serves_its_history_on_its_socket(tmp_path: Path) -> None:
    path = history_file(tmp_path, [job(1), job(2)])
    server = ControlServer(
        _Stub(),  # type: ignore[arg-type]
        Path(tempfile.mkdtemp(prefix="gpuci-hs-", dir="/tmp")) / "c.sock",
        history_path=path,
    )
    await server.start()
    try:
        reader, writer = await asyncio.open_unix_connection(str(server.path))
        writer.write(json.dumps(history_request(JobQuery(limit=1))).encode() + b"\n")
        await writer.drain()
        reply = json.loads(await reader.readline())
        writer.close()
        # As the history stores it: its row id, and the container's life as its duration.
        assert history_reply(reply) == [replace(job(2), id=2, duration_s=600.0)]
    finally:
        await server.close()
        shutil.rmtree(server.path.parent, ignore_errors=True)


def one_host(handle: SwitchHandle) -> Any:
    return make_app(fleet_services([member(HOST, f"ci@{HOST}", handle)], backoff=FAST))


async def remote_history(pilot: Any) -> HistoryScreen:
    """``h`` in the only host's dashboard: its history view."""
    await open_host(pilot)
    await pilot.press("h")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, HistoryScreen), what="history")
    view = pilot.app.screen
    assert isinstance(view, HistoryScreen)
    return view


async def test_h_in_a_hosts_dashboard_shows_that_hosts_history() -> None:
    handle = SwitchHandle(healthy_snapshot())
    handle.jobs = [job(5, "eval", result="failed", exit_code=1), job(4), job(3)]
    app = one_host(handle)
    async with app.run_test(size=(120, 36)) as pilot:
        view = await remote_history(pilot)
        await wait_for(pilot, lambda: view.loads >= 1 and view.trend_loads >= 1, what="read")
        assert [row.run for row in view.rows] == ["2026.5", "2026.4", "2026.3"]
        assert view.table.border_title == f"Finished jobs on {HOST}"
        assert "3 jobs" in screen_text(app) and "not on the daemon's host" not in screen_text(app)
        await pilot.press("f")  # failed only: the filter goes to the host's daemon
        await wait_for(pilot, lambda: len(view.rows) == 1, what="failed only")
        assert any(q.failed_only for q in handle.queries)
        assert any(q.pipeline == "eval" for q in handle.queries), "the trend asked there too"
        await pilot.press("q")
        await wait_for(pilot, lambda: not isinstance(app.screen, HistoryScreen), what="back")


async def test_a_host_without_history_or_out_of_reach_says_so() -> None:
    handle = SwitchHandle(healthy_snapshot())
    app = one_host(handle)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await remote_history(pilot)
        await wait_for(pilot, lambda: view.loads >= 1, what="read")
        assert view.problem.startswith(f"No jobs recorded yet on {HOST}"), view.problem
        handle.down = True
        view._load()
        await wait_for(pilot, lambda: "no gpuci-tui daemon" in view.problem, what="why")
        assert isinstance(app.screen, HistoryScreen) and not isinstance(app.screen, FleetScreen)


async def test_a_link_without_the_history_op_still_opens_the_view_and_says_why() -> None:
    handle = FakeHandle(healthy_snapshot(), mode="daemon")
    handle.push(handle.current)
    app = make_app(fleet_services([member(HOST, HOST, handle)], backoff=FAST))
    async with app.run_test(size=(80, 24)) as pilot:
        view = await remote_history(pilot)
        await wait_for(pilot, lambda: view.loads >= 1, what="read")
        assert view.problem == f"History is not available: {HOST}'s link carries none."
