"""Every screen's help against its real bindings: each key told, no key told that is not bound.

The help is opened with ``?`` on each screen an operator reaches (the dashboard, its
sub-screens, the fleet's), and compared with what the App has bound at that moment
(`App.active_bindings`: the screen's, its focused widget's and the App's keys, the
keymap applied). A key added to a screen's BINDINGS without a description, or a help
line that names a key nothing binds, fails here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.screen import Screen

from gpuci_tui.app import GpuciApp, make_app
from gpuci_tui.screens.confirm import QuitScreen
from gpuci_tui.screens.dashboard import DashboardScreen
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.screens.fleet_host import HostDashboardScreen
from gpuci_tui.screens.help import HelpScreen, KeyHelp
from gpuci_tui.screens.history import HistoryScreen
from gpuci_tui.screens.logs import LogScreen
from gpuci_tui.screens.stale import StaleScreen
from tests.fleet.fakes import three_hosts
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import ready, wait_for
from tests.ui.scenarios import measured_snapshot

Opener = Callable[[Pilot[Any]], Awaitable[None]]


def dashboard_app() -> GpuciApp:
    return make_app(make_services(handle=FakeHandle(measured_snapshot())))


def fleet_app() -> GpuciApp:
    services, _ = three_hosts()
    return make_app(services)


async def on_top(pilot: Pilot[Any], kind: type[Screen[Any]]) -> None:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, kind), what=kind.__name__)
    await pilot.pause()


def from_dashboard(*keys: str, kind: type[Screen[Any]]) -> Opener:
    async def opener(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await pilot.press(*keys)
        await on_top(pilot, kind)

    return opener


async def fleet_overview(pilot: Pilot[Any]) -> None:
    await on_top(pilot, FleetScreen)


async def fleet_host(pilot: Pilot[Any]) -> None:
    await fleet_overview(pilot)
    await pilot.press("down", "enter")  # gpu2: the loaded host, below the unreachable gpu4
    await on_top(pilot, HostDashboardScreen)


async def fleet_host_history(pilot: Pilot[Any]) -> None:
    await fleet_host(pilot)
    await pilot.press("h")
    await on_top(pilot, HistoryScreen)


SCREENS: dict[str, tuple[Callable[[], GpuciApp], Opener]] = {
    "dashboard": (dashboard_app, from_dashboard(kind=DashboardScreen)),
    "history": (dashboard_app, from_dashboard("h", kind=HistoryScreen)),
    "stale": (dashboard_app, from_dashboard("x", kind=StaleScreen)),
    "logs": (dashboard_app, from_dashboard("l", kind=LogScreen)),
    "fleet": (fleet_app, fleet_overview),
    "fleet-host": (fleet_app, fleet_host),
    "fleet-host-history": (fleet_app, fleet_host_history),
}


def documented(binding_key: str, shown: str, lines: list[KeyHelp]) -> bool:
    """A line tells this key: by its name, or (a line without names) as the footer shows it."""
    return any(
        binding_key in line.keys if line.keys else shown in line.key.split(", ") for line in lines
    )


@pytest.mark.parametrize("name", list(SCREENS))
async def test_the_help_tells_every_bound_key_and_no_unbound_one(name: str) -> None:
    make, opener = SCREENS[name]
    app = make()
    async with app.run_test(size=(120, 36)) as pilot:
        await opener(pilot)
        below = app.screen
        bound = dict(app.active_bindings)
        lines = (await open_help(pilot)).keys
        for key, active in bound.items():
            binding = active.binding
            if binding.id and binding.description:
                shown = app.get_key_display(binding) or key
                assert documented(key, shown, lines), f"{name}: {key} ({binding.action}) not told"
        for line in lines:
            for key in line.keys:
                assert key in bound, f"{name}: the help tells {key!r} ({line.description}), unbound"
            if line.action:
                bindings = [bound[key].binding for key in line.keys]
                assert len({b.action for b in bindings}) == 1, f"{name}: {line.key} does two things"
                assert line.action in {b.id for b in bindings}, (
                    f"{name}: {line.key} is not {line.action}"
                )
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is below, what="Escape closes the help")


async def open_help(pilot: Pilot[Any]) -> HelpScreen:
    await pilot.press("question_mark")
    await on_top(pilot, HelpScreen)
    return _help(pilot.app)


async def test_the_legend_names_the_keys_as_bound() -> None:
    """Cleared with g (not c); with a keymap, with the key it has now."""
    app = dashboard_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        states = dict(_legend(await open_help(pilot), "Agent states"))
        assert states["quarantined"].endswith("no new job until cleared (g)")
        assert states["drained"].endswith("not replaced until resumed (u)")
        await pilot.press("escape")
        app.set_keymap({"gpu_clear": "k"})
        help_screen = await open_help(pilot)
        assert dict(_legend(help_screen, "Agent states"))["quarantined"].endswith("cleared (k)")
        assert any(line.key == "k" and line.action == "gpu_clear" for line in help_screen.keys)


async def test_the_helps_footer_offers_its_own_way_out() -> None:
    """Not the dashboard's keys under it: Escape, which closes the help."""
    app = dashboard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        footer = (await open_help(pilot)).query_one("Footer")
        keys = [(k.key_display, k.description) for k in footer.query("FooterKey")]  # type: ignore[attr-defined]
        assert keys == [("esc", "Close help")]


@pytest.mark.parametrize(
    ("key", "kind"), [("h", HistoryScreen), ("x", StaleScreen), ("l", LogScreen)]
)
async def test_q_on_a_sub_screen_goes_back_and_never_asks_to_quit(
    key: str, kind: type[Screen[Any]]
) -> None:
    app = dashboard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press(key)
        await on_top(pilot, kind)
        await pilot.press("q")
        await on_top(pilot, DashboardScreen)
        assert not any(isinstance(s, QuitScreen) for s in app.screen_stack)
        await pilot.press("q")  # on the dashboard q still asks how to quit
        await on_top(pilot, QuitScreen)


async def test_typing_q_in_the_history_filter_filters() -> None:
    app = dashboard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("h")
        await on_top(pilot, HistoryScreen)
        await pilot.press("slash", "q")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HistoryScreen) and screen.pipeline_filter == "q"


def _help(app: Any) -> HelpScreen:
    screen = app.screen
    assert isinstance(screen, HelpScreen)
    return screen


def _legend(screen: HelpScreen, title: str) -> list[tuple[str, str]]:
    rows = dict(screen.legends)[title]
    return [(label.plain, meaning.plain) for label, meaning in rows]
