"""The history view (`h`) against a real SQLite history written through the core's API."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from gpuci_tui.app import make_app
from gpuci_tui.core.store.history import JobHistory, JobRecord
from gpuci_tui.screens.dashboard import DashboardScreen
from gpuci_tui.screens.history import HistoryScreen
from gpuci_tui.widgets.history_table import row_cells, sort_rows
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import ready, screen_text, wait_for
from tests.ui.scenarios import NOW, loaded_snapshot

GIB_MIB = 1024.0
IMAGE_IDS = ("sha256:3f2a1b9c0d4e" + "0" * 52, "sha256:8c41d07e2b95" + "1" * 52)


def job(n: int, pipeline: str | None, **kw: Any) -> JobRecord:
    """The ``n``-th job, ending ``n`` minutes before the frozen clock's hour."""
    values: dict[str, Any] = {
        "instance": "contoso/gpu-a100/gpuhost", "slot": n % 3, "agent": f"gpuhost-{n % 3}",
        "request_id": 9000 + n, "pipeline": pipeline, "run": f"20251122.{n}",
        "started_at": NOW - 3600 + n * 60 - 300, "ended_at": NOW - 3600 + n * 60,
        "exit_code": 0, "oom": False, "reason": "job finished", "result": "succeeded",
        "gpus": (n % 3,), "gpu_samples": 10,
        # The image changed under the pool after job 8: the Image column tells them apart.
        "image": "registry.lab:5000/gpu-agent:cuda12", "image_id": IMAGE_IDS[n >= 9],
    }  # fmt: skip
    values.update(kw)
    return JobRecord(**values)


def write_history(path: Path) -> None:
    """12 runs of 'train - main' (memory creeping up, run 11 OOM), 3 eval, 2 lint (1 failed)."""
    history = JobHistory(path, clock=lambda: NOW)
    for n in range(12):
        history.add(
            job(n, "train - main", peak_gpu_memory_mib=(20 + n) * GIB_MIB, mean_util_pct=80.0 + n,
                duration_s=600.0 + 10 * n,
                **({"oom": True, "exit_code": 137, "result": "failed"} if n == 11 else {}))
        )  # fmt: skip
    for n in (12, 13, 14):
        history.add(job(n, "eval nightly", peak_gpu_memory_mib=4 * GIB_MIB, duration_s=120.0))
    history.add(job(15, "lint", peak_gpu_memory_mib=None, duration_s=30.0, gpus=()))
    history.add(job(16, "lint", result="failed", exit_code=1, duration_s=45.0, gpus=()))
    history.close()


@pytest.fixture
def history_file(tmp_path: Path) -> Path:
    path = tmp_path / "state" / "history.sqlite3"
    write_history(path)
    return path


async def open_history(pilot: Pilot[Any]) -> HistoryScreen:
    await ready(pilot)
    await pilot.press("h")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, HistoryScreen), what="the view")
    screen = pilot.app.screen
    assert isinstance(screen, HistoryScreen)
    await wait_for(pilot, lambda: screen.loads >= 1, what="the first read")
    return screen


def app_for(path: Path | None, **services: Any) -> Any:
    services.setdefault("history_interval", 3600.0)  # tests drive reads themselves
    handle = FakeHandle(loaded_snapshot())
    return make_app(make_services(handle=handle, history_path=path, **services))


def pipelines(screen: HistoryScreen) -> list[str | None]:
    return [r.pipeline for r in screen.table.rows_shown]


async def test_newest_first_then_sorted_by_each_column(history_file: Path) -> None:
    app = app_for(history_file)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_history(pilot)
        rows = screen.table.rows_shown
        assert len(rows) == 17 and rows[0].run == "20251122.16"
        assert [r.ended_at for r in rows] == sorted((r.ended_at for r in rows), reverse=True)
        await pilot.press("s")  # → pipeline, A to Z
        assert pipelines(screen)[0] == "eval nightly" and pipelines(screen)[-1] == "train - main"
        assert "sorted by Pipeline ▲" in screen_text(app)
        screen.table.toggle_sort("duration")  # what a click on the header does
        await pilot.pause()
        durations = [r.duration_s for r in screen.table.rows_shown]
        assert durations[0] == 710.0 and durations[-1] == 30.0
        screen.table.toggle_sort("duration")  # clicked again: reversed
        await pilot.pause()
        assert screen.table.rows_shown[0].duration_s == 30.0


def test_rows_without_a_value_sort_last_both_ways() -> None:
    rows = [job(1, "a", peak_gpu_memory_mib=None), job(2, "b", peak_gpu_memory_mib=5.0),
            job(3, "c", peak_gpu_memory_mib=9.0)]  # fmt: skip
    assert [r.pipeline for r in sort_rows(rows, "memory", True)] == ["c", "b", "a"]
    assert [r.pipeline for r in sort_rows(rows, "memory", False)] == ["b", "c", "a"]


async def test_filter_by_pipeline_and_result(history_file: Path) -> None:
    app = app_for(history_file)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_history(pilot)
        await pilot.press("slash", *"LINT", "enter")
        await wait_for(pilot, lambda: set(pipelines(screen)) == {"lint"}, what="lint only")
        assert len(screen.table.rows_shown) == 2
        assert screen.focused is screen.table  # enter went back to the table
        await pilot.press("f")  # failed only
        await wait_for(pilot, lambda: len(screen.table.rows_shown) == 1, what="failed lint")
        assert screen.table.rows_shown[0].result == "failed"
        await pilot.press("f")  # succeeded only
        await wait_for(pilot, lambda: screen.result_filter == "succeeded" and
                       [r.run for r in screen.table.rows_shown] == ["20251122.15"])  # fmt: skip
        await pilot.press("slash", "ctrl+a", "ctrl+k", *"nothing like it")
        await wait_for(pilot, lambda: "No jobs match the filters." in screen_text(app))


async def test_the_selected_pipelines_trend_is_plotted_oldest_first(history_file: Path) -> None:
    app = app_for(history_file)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_history(pilot)
        await pilot.press("f")  # failed: lint 16 first, then the OOM-killed train run
        await wait_for(pilot, lambda: len(screen.table.rows_shown) == 2)
        await pilot.press("down")
        await wait_for(pilot, lambda: screen.trend.pipeline == "train - main", what="trend")
        # The trend is the pipeline's last runs whatever the table's filters.
        assert screen.trend.memory == [(20 + n) * GIB_MIB for n in range(12)]
        assert screen.trend.durations == [600.0 + 10 * n for n in range(12)]
        text = screen_text(app)
        assert "Trend of 'train - main': last 12 runs" in text
        assert "min 20G  max 31G  last 31G" in text
        await pilot.press("up")  # lint: no GPU figure at all
        await wait_for(pilot, lambda: screen.trend.pipeline == "lint")
        assert screen.trend.memory == [] and "not measured" in screen_text(app)


async def test_new_jobs_appear_without_a_key(history_file: Path) -> None:
    app = app_for(history_file, history_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_history(pilot)
        history = JobHistory(history_file, clock=lambda: NOW)
        history.add(job(30, "train - main", peak_gpu_memory_mib=60 * GIB_MIB, duration_s=900.0))
        history.close()
        await wait_for(pilot, lambda: len(screen.table.rows_shown) == 18, what="the new row")
        selected = screen.table.selected
        assert selected is not None and selected.run == "20251122.16", "the cursor stays put"
        await pilot.press("up")
        await wait_for(pilot, lambda: screen.trend.memory[-1:] == [60 * GIB_MIB], what="trend")


async def test_a_slow_read_is_not_overlapped_by_the_next_refresh(
    history_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads started on every tick of a 10 ms refresh while each takes 150 ms would pile up
    threads (seen at the end of a loaded CI run); the refresh waits for the last read."""
    import gpuci_tui.core.store.history_source as view

    lock, running, most = threading.Lock(), [0], [0]
    read = view.read_history

    def slow_read(path: Path, query: Any) -> Any:
        if query.pipeline is not None:  # the trend's read: one per table read
            return read(path, query)
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            threading.Event().wait(0.15)  # a slow disk, in the reader's thread
            return read(path, query)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(view, "read_history", slow_read)
    app = app_for(history_file, history_interval=0.01)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_history(pilot)
        await wait_for(pilot, lambda: screen.loads >= 4, what="four refreshes")
    assert most[0] == 1, f"{most[0]} reads ran at once"


async def test_no_history_yet_and_an_unreadable_file_are_explained(tmp_path: Path) -> None:
    missing = tmp_path / "none" / "history.sqlite3"
    async with app_for(missing).run_test(size=(80, 24)) as pilot:
        await open_history(pilot)
        assert "No jobs recorded yet" in screen_text(pilot.app)
        assert not missing.exists(), "the view never creates the file"
    broken = tmp_path / "broken.sqlite3"
    broken.write_bytes(b"this is not a database" * 100)
    async with app_for(broken).run_test(size=(80, 24)) as pilot:
        screen = await open_history(pilot)
        assert "cannot" in screen.problem and "job history" in screen.problem
        assert screen.table.rows_shown == []
    async with app_for(None).run_test(size=(80, 24)) as pilot:
        screen = await open_history(pilot)
        assert "no job history" in screen.problem


async def test_80x24_readonly_shows_the_columns_keys_and_trend(history_file: Path) -> None:
    app = app_for(history_file, readonly=True)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_history(pilot)
        await wait_for(pilot, lambda: screen.trend_loads >= 1)
        keys = ("Back", "Sort", "Result", "Filter")
        # The footer is drawn after the screen's first frame: wait for it, not for a repaint.
        await wait_for(
            pilot,
            lambda: all(key in screen_text(app).splitlines()[-1] for key in keys),
            what="the footer's keys",
        )
        text = screen_text(app)
        for label in ("Ended", "Pipeline", "Took", "Mem", "Util", "Result", "Peak mem", "Duration"):
            assert label in text, label
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, DashboardScreen))


async def test_the_palette_and_help_offer_the_history(history_file: Path) -> None:
    app = app_for(history_file)
    async with app.run_test(size=(100, 30)) as pilot:
        dashboard = await ready(pilot)
        titles = [c.title for c in app.get_system_commands(dashboard)]
        assert "History of finished jobs (GPU memory and duration trends)" in titles
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "HelpScreen")
        assert any(k.key == "h" and k.description == "History" for k in pilot.app.screen.keys)  # type: ignore[attr-defined]


def test_the_image_cell_is_the_short_id_the_job_ran_on_or_a_dash() -> None:
    assert row_cells(job(1, "lint")).get("image") is not None
    assert row_cells(job(1, "lint"))["image"].plain == "3f2a1b9c0d4e"
    assert row_cells(job(10, "lint"))["image"].plain == "8c41d07e2b95"
    assert row_cells(job(1, "lint", image=None, image_id=None))["image"].plain == "-"


def test_the_gpu_facts_cell_is_one_compact_line_red_when_the_gpu_failed() -> None:
    hot = job(1, "train", energy_j=412_000.0, throttle_s=(("sw_thermal", 12.0),), xid=(79,))
    cell = row_cells(hot)["facts"]
    assert cell.plain == "412 kJ · thermal 12 s · Xid 79"
    assert str(cell.style) == "red"
    assert row_cells(job(1, "lint", energy_j=None))["facts"].plain == "-"


async def test_at_80_columns_the_names_come_whole_and_the_collapsed_marker_too(
    history_file: Path,
) -> None:
    """A long pipeline name collapses lesser columns; the foot's values give way, not '+N cols ›'."""
    history = JobHistory(history_file, clock=lambda: NOW)
    history.add(job(30, "inference-bench - nightly long", duration_s=60.0))
    history.close()
    app = app_for(history_file)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_history(pilot)
        table = screen.table
        assert table.get_cell(str(table.rows_shown[0].id), "pipeline").plain == (
            "inference-bench - nightly long"
        )
        marker = str(table.border_subtitle)
        assert marker.endswith(f"+{len(table.layout_now.hidden)} cols ›"), marker
        assert len(marker) <= table.size.width - 6
