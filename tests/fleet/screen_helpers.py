"""Driving the fleet console with fake hosts in Pilot tests (shared by the fleet screen tests)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from gpuci_tui.app import make_app
from gpuci_tui.core.fleet.link import LinkState
from gpuci_tui.screens.confirm import ConfirmScreen
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.screens.fleet_host import HostDashboardScreen
from tests.fleet.fakes import (
    three_hosts,
)
from tests.ui.helpers import wait_for


@contextlib.asynccontextmanager
async def fleet_console(
    size: tuple[int, int] = (100, 30), **options: Any
) -> AsyncIterator[tuple[Any, Any, FleetScreen, dict[str, Any]]]:
    """The console over `three_hosts`, every host tried: (app, pilot, overview, handles)."""
    services, handles = three_hosts(**options)
    app = make_app(services)
    async with app.run_test(size=size) as pilot:
        yield app, pilot, await overview(pilot), handles


async def overview(pilot: Any) -> FleetScreen:
    """Wait until every host has been tried (two up, one down)."""
    screen = pilot.app.screen
    assert isinstance(screen, FleetScreen), f"expected the fleet overview, got {screen!r}"
    await wait_for(
        pilot,
        lambda: all(s.state is not LinkState.CONNECTING for s in screen.statuses),
        what="every host tried",
    )
    await pilot.pause()
    return screen


def host_order(screen: FleetScreen) -> list[str]:
    table = screen.table
    return [str(table.get_row_at(row)[0]) for row in range(table.row_count)]


async def select(pilot: Any, screen: FleetScreen, label: str) -> None:
    """Move the cursor to ``label``'s row with the arrow keys."""
    await pilot.press(*["up"] * screen.table.row_count)
    for _ in range(screen.table.row_count):
        if screen.members[screen.table.selected or 0].label == label:
            return
        await pilot.press("down")
    if screen.members[screen.table.selected or 0].label == label:
        return
    raise AssertionError(f"no row for {label}")


async def confirm_text(pilot: Any) -> tuple[str, str]:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="a confirmation")
    prompt = app.screen.prompt
    return prompt.title, prompt.body


async def open_host(pilot: Any, label: str | None = None) -> HostDashboardScreen:
    """Open the dashboard of host ``label`` (None: the selected one) once it is up.

    Returns once the host's dashboard shows its first snapshot.
    """
    screen = pilot.app.screen
    assert isinstance(screen, FleetScreen), f"expected the fleet overview, got {screen!r}"
    index = next((i for i, m in enumerate(screen.members) if m.label == label), None)
    await wait_for(
        pilot,
        lambda: (
            screen.statuses[index if index is not None else screen.table.selected or 0].state
            is LinkState.UP
        ),
        what=f"{label or 'the selected host'} up",
    )
    if label is not None:
        await select(pilot, screen, label)
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, HostDashboardScreen), what="open")
    dash = pilot.app.screen
    assert isinstance(dash, HostDashboardScreen)
    await wait_for(pilot, lambda: dash.snapshot is not None, what="the host's snapshot")
    return dash
