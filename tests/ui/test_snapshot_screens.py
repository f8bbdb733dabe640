"""The other screens at the three sizes an operator uses: 80x24 first, 120x36 and 200x60.

The stale registrations, the logs, the quit dialog and every page of the setup wizard,
from the same deterministic fakes as `test_snapshot_sizes` (frozen clock, fixed data,
no cursor blink). What to look for in the SVGs: every reason and name whole (wrapped at
a word, never cut mid-word), each screen's own keys in its footer, nothing off-screen
at 80x24. Update with ``--snapshot-update`` and look at each one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from gpuci_tui.app import make_app
from gpuci_tui.core.command_types import Prune
from gpuci_tui.screens.confirm import QuitScreen
from gpuci_tui.screens.stale import StaleScreen
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import ready, wait_for
from tests.ui.test_snapshots import dashboard_ready, loaded_app, log_app, no_blink
from tests.ui.test_stale_view import respond, with_stale
from tests.ui.wizard_harness import Setup, wizard_app

Snap = Callable[..., bool]
SIZES = pytest.mark.parametrize(
    "size", [(80, 24), (120, 36), (200, 60)], ids=["80x24", "120x36", "200x60"]
)


@SIZES
def test_stale(snap_compare: Snap, size: tuple[int, int]) -> None:
    """Two stale registrations; why each is stale wraps at whole words."""
    handle = FakeHandle(with_stale(), respond=respond)
    app = make_app(make_services(handle=handle))

    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, StaleScreen), what="the view")
        await wait_for(pilot, lambda: Prune(dry_run=True) in handle.sent, what="the refresh")
        table = pilot.app.screen.query_one("#stale-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 2, what="the rows")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_logs(snap_compare: Snap, size: tuple[int, int]) -> None:
    """gpuhost-1's container output, followed."""
    app, run_before = log_app()
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_quit_dialog(snap_compare: Snap, size: tuple[int, int]) -> None:
    """Quit of an in-process supervisor: leave running (default), drain first, cancel."""
    app, handle = loaded_app()

    async def run_before(pilot: Pilot[Any]) -> None:
        await dashboard_ready(handle)(pilot)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, QuitScreen), what="dialog")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


#: The wizard's pages, by the step they show.
PAGES = {0: "url", 1: "pat", 2: "pool", 3: "image", 4: "agents", 5: "volumes", 6: "review"}


@SIZES
@pytest.mark.parametrize("step", list(PAGES), ids=list(PAGES.values()))
def test_wizard_page(snap_compare: Snap, size: tuple[int, int], step: int, tmp_path: Path) -> None:
    """Each setup page, reached with valid answers to the ones before it."""
    app, azure, tokens, config_path, started = wizard_app(
        tmp_path, config_path=Path("/home/ops/.config/gpuci-tui/config.toml")
    )

    async def run_before(pilot: Pilot[Any]) -> None:
        setup = Setup(app, pilot, azure, tokens, config_path, started)
        await wait_for(pilot, lambda: type(app.screen).__name__ == "WizardScreen")
        await setup.through(step)
        await setup.at(step)
        # The page's own checks (the driver, the image's CUDA, whether Docker has it)
        # answer in workers: the page is shown once they all have.
        await app.workers.wait_for_complete()
        no_blink(app)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)
