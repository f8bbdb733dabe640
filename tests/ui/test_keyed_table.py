"""The column sizing rules of the shared keyed table (pure, no screen)."""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.app import make_app
from gpuci_tui.screens.dashboard import DashboardScreen
from gpuci_tui.widgets.agents_table import COLUMNS as AGENT_COLUMNS
from gpuci_tui.widgets.keyed_table import Column, plan_layout
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import ready, wait_for
from tests.ui.scenarios import measured_snapshot

COLS = (
    Column("name", "Name", 4, priority=90),
    Column("job", "Job", 10, priority=70, grow=True, ideal=20),
    Column("up", "Up", 6, priority=50),
    Column("box", "Container", 12, priority=10),
)
NATURAL = {"name": 9, "job": 30, "up": 6, "box": 12}


def test_everything_fits_and_the_job_takes_the_spare_room() -> None:
    layout = plan_layout(COLS, NATURAL, room=120)
    widths = dict(layout.widths)
    assert layout.hidden == ()
    assert widths["name"] == 9 and widths["up"] == 6 and widths["box"] == 12
    assert sum(w + 2 for w in widths.values()) == 120, "no empty columns on the right"


def test_narrow_collapses_the_least_important_column_first() -> None:
    layout = plan_layout(COLS, NATURAL, room=50)
    assert layout.hidden == ("box",)
    assert dict(layout.widths)["job"] >= 20, "the job stays roomy"
    assert dict(layout.widths)["up"] == 6, "a kept column is never cut below its minimum"


def test_a_roomy_wish_collapses_only_the_columns_below_its_priority() -> None:
    roomy = (
        Column("name", "Name", 4, priority=90),
        Column("job", "Job", 10, priority=70, grow=True, ideal=20, roomy=(30, 35)),
        Column("up", "Up", 6, priority=50),
        Column("box", "Container", 12, priority=10),
    )
    wide = dict(plan_layout(roomy, NATURAL, room=60).widths)
    assert "box" not in wide and wide["job"] >= 30, "the container gives its room"
    narrow = plan_layout(roomy, NATURAL, room=44)
    assert dict(narrow.widths)["up"] == 6, "the uptime stays: it is above the roomy priority"
    assert dict(narrow.widths)["job"] >= 20


def test_without_a_size_every_column_has_its_natural_width() -> None:
    assert dict(plan_layout(COLS, NATURAL, room=None).widths)["job"] == 30


def test_agents_at_80_columns_keep_up_whole_and_the_job_roomy() -> None:
    natural = {c.key: c.min_width for c in AGENT_COLUMNS} | {"agent": 9, "state": 15, "job": 40}
    # The job's ideal is its widest label (`fitted_columns`): 'train - main' 20261122.3.
    columns = [replace(c, ideal=25) if c.key == "job" else c for c in AGENT_COLUMNS]
    layout = plan_layout(columns, natural, room=78)
    widths = dict(layout.widths)
    assert widths["uptime"] == 6, "12m05s keeps its unit"
    assert widths["job"] >= 25
    assert {"container", "message"} <= set(layout.hidden)


async def test_columns_follow_a_resize_and_the_detail_line_tells_the_collapsed_ones() -> None:
    app = make_app(make_services(handle=FakeHandle(measured_snapshot())))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(pilot)
        table = screen.agents_table
        await wait_for(pilot, lambda: "container" in table.layout_now.hidden, what="80 cols")
        assert table.border_subtitle.endswith("cols ›")
        await wait_for(pilot, lambda: "GPUs 0" in detail_text(screen))
        await pilot.resize_terminal(200, 60)
        await wait_for(pilot, lambda: table.layout_now.hidden == (), what="all columns at 200")
        assert table.border_subtitle == ""
        assert screen.selected_slot_number() == 1, "the cursor stays on its slot"
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: "container" in table.layout_now.hidden, what="back to 80")


def detail_text(screen: DashboardScreen) -> str:
    return screen.slot_detail.render().plain
