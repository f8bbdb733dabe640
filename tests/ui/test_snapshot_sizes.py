"""The main screens at the three sizes an operator uses: 80x24, 120x36 and 200x60.

Same deterministic fakes as `test_snapshots` (frozen clock, replayed GPU
frames, fixed events). What to look for in the SVGs: nothing cut without a
marker (``+N cols ›`` on the table, the detail line shows those columns), the
job and pipeline columns roomy, the events log growing with the height, every
footer key whole. Update with ``--snapshot-update`` and look at each one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from gpuci_tui.app import make_app
from gpuci_tui.core.fleet.link import LinkState
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.screens.fleet_host import HostDashboardScreen
from tests.fleet.fakes import three_hosts
from tests.ui.helpers import wait_for
from tests.ui.scenarios import events
from tests.ui.test_snapshots import dashboard_ready, history_app, loaded_app

Snap = Callable[..., bool]
SIZES = pytest.mark.parametrize(
    "size", [(80, 24), (120, 36), (200, 60)], ids=["80x24", "120x36", "200x60"]
)


@SIZES
def test_dashboard(snap_compare: Snap, size: tuple[int, int]) -> None:
    """Six slots in every state, four GPUs, events."""
    app, handle = loaded_app(demo=True)
    assert snap_compare(app, terminal_size=size, run_before=dashboard_ready(handle))


@SIZES
def test_drain_confirmation(snap_compare: Snap, size: tuple[int, int]) -> None:
    """The drain dialog over the dashboard."""
    app, handle = loaded_app()
    assert snap_compare(app, terminal_size=size, run_before=dashboard_ready(handle), press=["d"])


@SIZES
def test_help(snap_compare: Snap, size: tuple[int, int]) -> None:
    """The keys and the state legend."""
    app, handle = loaded_app()

    async def run_before(pilot: Pilot[Any]) -> None:
        await dashboard_ready(handle)(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "HelpScreen")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_history(snap_compare: Snap, size: tuple[int, int], tmp_path: Path) -> None:
    """Finished jobs: the pipeline column takes the room, no empty columns on the right."""
    app, run_before = history_app(tmp_path)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


async def _fleet_ready(pilot: Pilot[Any], handles: dict[str, Any]) -> FleetScreen:
    screen = pilot.app.screen
    assert isinstance(screen, FleetScreen)
    await wait_for(pilot, lambda: all(s.state is not LinkState.CONNECTING for s in screen.statuses))
    for event in events():
        handles["gpu2"].push(event)
    await wait_for(pilot, lambda: screen.event_log.count == len(events()))
    await pilot.press("down")  # gpu2, below the unreachable gpu4
    await pilot.pause()
    return screen


@SIZES
def test_fleet_overview(snap_compare: Snap, size: tuple[int, int]) -> None:
    """Hosts, problems first; the Problems column collapses first at 80 columns."""
    services, handles = three_hosts()

    async def run_before(pilot: Pilot[Any]) -> None:
        await _fleet_ready(pilot, handles)

    assert snap_compare(make_app(services), terminal_size=size, run_before=run_before)


@SIZES
def test_fleet_host(snap_compare: Snap, size: tuple[int, int]) -> None:
    """One host's dashboard in the fleet: its extra key fits the footer at 80 columns."""
    services, handles = three_hosts()

    async def run_before(pilot: Pilot[Any]) -> None:
        await _fleet_ready(pilot, handles)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, HostDashboardScreen))
        dash = pilot.app.screen
        assert isinstance(dash, HostDashboardScreen)
        await wait_for(pilot, lambda: dash.snapshot is not None)
        await pilot.pause()

    assert snap_compare(make_app(services), terminal_size=size, run_before=run_before)
