"""SVG snapshot of the fleet overview (frozen clock, fake hosts, one of them unreachable).

Update the baseline with ``pytest tests/fleet/test_fleet_snapshot.py --snapshot-update``
and look at it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

from gpuci_tui.app import make_app
from gpuci_tui.core.fleet.link import LinkState
from gpuci_tui.screens.fleet import FleetScreen
from tests.fleet.fakes import three_hosts
from tests.ui.helpers import wait_for
from tests.ui.scenarios import events

Snap = Callable[..., bool]


def test_fleet_overview(snap_compare: Snap) -> None:
    """Problems first (unreachable, then a parked agent), counts per host, events by host."""
    services, handles = three_hosts()

    async def run_before(pilot: Pilot[Any]) -> None:
        screen = pilot.app.screen
        assert isinstance(screen, FleetScreen)
        await wait_for(
            pilot, lambda: all(s.state is not LinkState.CONNECTING for s in screen.statuses)
        )
        for event in events():
            handles["gpu2"].push(event)
        await wait_for(pilot, lambda: screen.event_log.count == len(events()))
        await pilot.press("down")  # gpu2, below the unreachable gpu4: its problems in full
        await pilot.pause()

    assert snap_compare(make_app(services), terminal_size=(100, 30), run_before=run_before)
