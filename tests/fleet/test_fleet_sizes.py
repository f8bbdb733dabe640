"""The fleet console with long FQDN hosts at 80x24, 120x36 and 200x60: hosts told apart
everywhere (table, events, detail line), reasons whole, nothing said twice.

SVG snapshots: update with ``pytest tests/fleet/test_fleet_sizes.py --snapshot-update``
and look at them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from textual.pilot import Pilot

from gpuci_tui.app import make_app
from gpuci_tui.core.fleet.link import LinkState
from gpuci_tui.core.fleet.rows import FleetTotals
from gpuci_tui.core.models import SlotState
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.screens.fleet_host import HostDashboardScreen
from gpuci_tui.widgets.fleet_table import FleetDetail, totals_line
from tests.fleet.fakes import (
    FAST,
    FQDN,
    FQDN_REFUSED,
    SwitchHandle,
    fleet_services,
    fqdn_hosts,
    healthy_snapshot,
    member,
)
from tests.fleet.screen_helpers import overview
from tests.ui.helpers import screen_text, wait_for
from tests.ui.scenarios import events

Snap = Callable[..., bool]
SIZES = [(80, 24), (120, 36), (200, 60)]


async def _settle(pilot: Pilot[Any], handles: dict[str, Any]) -> FleetScreen:
    screen = await overview(pilot)
    for event in events():
        handles[FQDN[0]].push(event)
    await wait_for(pilot, lambda: screen.event_log.count == len(events()), what="events")
    await pilot.pause()
    return screen


def _host_cells(screen: FleetScreen) -> list[str]:
    table = screen.table
    return [table.get_row_at(row)[0].plain for row in range(table.row_count)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_fqdn_hosts_are_told_apart_and_reasons_are_whole(size: tuple[int, int]) -> None:
    services, handles = fqdn_hosts()
    app = make_app(services)
    async with app.run_test(size=size) as pilot:
        screen = await _settle(pilot, handles)
        cells = _host_cells(screen)
        assert len(set(cells)) == 3, f"hosts read alike: {cells}"
        for cell, name in zip(cells, ["c", "a", "b"], strict=True):
            assert f"-{name}" in cell, cells  # the letter that differs is always shown
        text = screen_text(app)
        event_hosts = {line[1:].split()[0] for line in text.splitlines() if "gpuhost-" in line
                       and ":" in line[:40] and "│" in line[:1]}  # fmt: skip
        assert len(event_hosts) == 1 and "-a" in next(iter(event_hosts)), event_hosts
        # The unreachable host is on top and selected: its reason whole, its name once.
        detail = screen.query_one(FleetDetail).render().plain
        assert detail.startswith(f"{FQDN[2]} · down since"), detail
        assert detail.count(FQDN[2]) == 2, "the name, then the reason naming it; no repeat"
        flat = " ".join(text.split())
        assert FQDN_REFUSED.split(": ", 1)[1] in flat.replace("│", ""), text


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_fqdn_fleet_snapshot(snap_compare: Snap, size: tuple[int, int]) -> None:
    services, handles = fqdn_hosts()

    async def run_before(pilot: Pilot[Any]) -> None:
        await _settle(pilot, handles)

    assert snap_compare(make_app(services), terminal_size=size, run_before=run_before)


async def test_a_host_whose_agents_all_start_is_not_an_empty_host() -> None:
    """Its agents are counted as starting (a column while there are any), not as nothing."""
    base = healthy_snapshot()
    starting = tuple(
        replace(s, state=SlotState.STARTING, job=None, agent_status="", agent_enabled=None)
        for s in base.slots[:3]
    )
    handle = SwitchHandle(replace(base, slots=starting, desired_count=3))
    empty = SwitchHandle(replace(base, slots=(), desired_count=0))
    services = fleet_services(
        [member(FQDN[0], FQDN[0], handle), member(FQDN[1], FQDN[1], empty)], backoff=FAST
    )
    app = make_app(services)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = pilot.app.screen
        assert isinstance(screen, FleetScreen)
        await wait_for(pilot, lambda: all(s.state is LinkState.UP for s in screen.statuses))
        await pilot.pause()
        text = screen_text(app)
        assert "0 busy · 0 idle · 3 starting" in text.splitlines()[0]
        header = next(line for line in text.splitlines() if "Host" in line and "Link" in line)
        assert "Start" in header
        cells = screen.table.natural_rows
        assert cells["0"]["starting"].plain == "3" and cells["1"]["starting"].plain == "0"
        handle.push(replace(base, desired_count=4))  # all online: the column goes
        await wait_for(pilot, lambda: "Start" not in screen_text(app), what="settled")


def _two_slot_host() -> tuple[Any, SwitchHandle]:
    """One FQDN host with two idle-ish slots and no GPU, as a small CI box has."""
    base = healthy_snapshot()
    one = replace(base.slots[2], slot=1, name="ceo-fl1-1", gpus=("none",), standby="off",
                  agent_enabled=False, message="waiting for a job")  # fmt: skip
    two = replace(base.slots[3], slot=2, name="ceo-fl1-2", state=SlotState.DRAINED,
                  gpus=("none",), standby="off", message="drained", container_id=None)  # fmt: skip
    handle = SwitchHandle(replace(base, slots=(one, two), desired_count=2))
    return fleet_services([member(FQDN[0], FQDN[0], handle)], backoff=FAST), handle


async def _open_host(pilot: Pilot[Any]) -> None:
    screen = pilot.app.screen
    assert isinstance(screen, FleetScreen)
    await wait_for(pilot, lambda: screen.statuses[0].state is LinkState.UP, what="up")
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, HostDashboardScreen))
    dash = pilot.app.screen
    assert isinstance(dash, HostDashboardScreen)
    await wait_for(pilot, lambda: dash.snapshot is not None, what="the host's snapshot")
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_hosts_dashboard_keeps_its_slot_names_whole(size: tuple[int, int]) -> None:
    services, _ = _two_slot_host()
    app = make_app(services)
    async with app.run_test(size=size) as pilot:
        await _open_host(pilot)
        rows = [line for line in screen_text(app).splitlines() if "ceo-fl1" in line]
        assert any("ceo-fl1-1" in line for line in rows) and any(
            "ceo-fl1-2" in line for line in rows
        )
        table = [line for line in rows if line.startswith("│")]
        assert all("ceo-fl1…" not in line and "no…" not in line for line in table), table


def test_a_hosts_dashboard_at_80x24(snap_compare: Snap) -> None:
    services, _ = _two_slot_host()
    assert snap_compare(make_app(services), terminal_size=(80, 24), run_before=_open_host)


@pytest.mark.parametrize("width", [80, 64, 50, 40, 30])
def test_the_fleet_line_drops_whole_parts_never_cuts_one(width: int) -> None:
    totals = FleetTotals(hosts=3, up=2, busy=5, idle=3, standby=6, parked=1, starting=2)
    line = totals_line(totals, readonly=True, width=width).plain
    assert line.rstrip().endswith("READ-ONLY") and len(line) <= width
    assert "…" not in line, line
    assert line.lstrip().startswith(("gpuci-tui fleet  2/3 hosts up", "2/3 hosts up")), line


def test_a_readonly_fleet_at_80x24(snap_compare: Snap) -> None:
    """The badge and every count whole; the footer offers only what works."""
    services, handles = fqdn_hosts(readonly=True)

    async def run_before(pilot: Pilot[Any]) -> None:
        await _settle(pilot, handles)

    assert snap_compare(make_app(services), terminal_size=(80, 24), run_before=run_before)
