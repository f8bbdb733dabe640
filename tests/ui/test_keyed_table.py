"""The column sizing rules of the shared keyed table (pure, no screen)."""

from __future__ import annotations

from gpuci_tui.widgets.agents_table import COLUMNS as AGENT_COLUMNS
from gpuci_tui.widgets.keyed_table import Column, plan_layout

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


def test_without_a_size_every_column_has_its_natural_width() -> None:
    assert dict(plan_layout(COLS, NATURAL, room=None).widths)["job"] == 30


def test_agents_at_80_columns_keep_up_whole_and_the_job_roomy() -> None:
    natural = {c.key: c.min_width for c in AGENT_COLUMNS} | {"agent": 9, "state": 15, "job": 40}
    layout = plan_layout(AGENT_COLUMNS, natural, room=78)
    widths = dict(layout.widths)
    assert widths["uptime"] == 6, "12m05s keeps its unit"
    assert widths["job"] >= 25
    assert {"container", "message"} <= set(layout.hidden)
