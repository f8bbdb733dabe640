"""Busy rows of the agents table show their job's GPU memory and utilisation now."""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.app import make_app
from gpuci_tui.widgets.agents_table import job_cell, row_cells
from gpuci_tui.widgets.format import gpu_use_text
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import ready, screen_text
from tests.ui.scenarios import NOW, loaded_snapshot, measured_snapshot


def test_figures_are_compact_and_dashed_when_not_known() -> None:
    assert gpu_use_text(58_000 * 2**20, 92.4).plain == "57G 92%"
    assert gpu_use_text(8 * 2**30 - 2**28, 7.0).plain == "7.8G 7%"
    assert gpu_use_text(80 * 2**30, 100.0).plain == "80G 100%"
    assert gpu_use_text(None, 40.0).plain == "— 40%"
    assert gpu_use_text(2**30, None).plain == "1.0G —"
    assert gpu_use_text(None, None).plain == "—"


def test_the_job_cell_lays_out_its_figures_at_the_end_of_its_width() -> None:
    slots = {s.slot: s for s in measured_snapshot().slots}
    job = job_cell(slots[1], 36, figures=True).plain
    assert job.startswith("'train - main' 20261122.3 ") and job.endswith(" 57G 92%")
    assert len(job) == 36
    assert job_cell(slots[1], 26, figures=False).plain == "'train - main' 20261122.3"
    natural = row_cells(slots[1], NOW, measured=True)["job"].plain
    assert natural.startswith("'train - main' 20261122.3") and natural.endswith(" 57G 92%")
    assert row_cells(slots[4], NOW, measured=True)["job"].plain.endswith(" —")
    # Idle rows, and a supervisor that does not measure, keep the plain job label.
    assert row_cells(slots[2], NOW, measured=True)["job"].plain == "-"
    unmeasured = replace(slots[1], gpu_memory_bytes=None, gpu_util_percent=None)
    assert row_cells(unmeasured, NOW)["job"].plain == "'train - main' 20261122.3"


async def test_a_busy_row_shows_its_jobs_gpu_use_where_the_job_fits_whole_beside_it() -> None:
    handle = FakeHandle(measured_snapshot())
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await ready(pilot)
        cells = [c.plain for c in screen.agents_table.get_row("1")]
        assert cells[4].startswith("'train - main' 20261122.3") and cells[4].endswith("57G 92%")
        text = screen_text(app)
        assert "57G 92%" in text and "19G 60%" in text
        # The selected (busy) slot's detail line repeats it next to the full job.
        assert "GPU 57G 92%" in screen.slot_detail.render().plain
        handle.push(loaded_snapshot())  # a daemon without GPU sampling
        await pilot.pause()
        await pilot.pause()
        assert screen.agents_table.get_row("1")[4].plain == "'train - main' 20261122.3"


async def test_at_80x24_the_job_names_come_before_their_gpu_figures() -> None:
    """The figures give way first: every job label whole, the figures in the detail line."""
    handle = FakeHandle(measured_snapshot())
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(pilot)
        jobs = {key: screen.agents_table.get_cell(key, "job").plain for key in ("1", "3", "4")}
        assert jobs == {
            "1": "'train - main' 20261122.3",
            "3": "'eval nightly' 20261121.9",
            "4": "'bench - pr 4411' 20261122.1",
        }
        assert "GPU 57G 92%" in screen.slot_detail.render().plain
        handle.push(loaded_snapshot())  # a daemon without GPU sampling
        await pilot.pause()
        await pilot.pause()
        assert screen.agents_table.get_row("1")[4].plain == "'train - main' 20261122.3"
