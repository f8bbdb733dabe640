""" "Reconnect now" from the keyboard: the overview's selected host, and a host's own dashboard.

Every backoff here is 10 minutes, so a host that comes back is seen at once
only because the key cut the wait; the waits themselves are tested on a fake
clock in test_reconnect_now.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuci_tui.app import make_app
from gpuci_tui.core.fleet.link import LinkState
from gpuci_tui.core.host.control.client import ControlError
from gpuci_tui.core.models import SupervisorSnapshot
from gpuci_tui.screens import dashboard
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.screens.fleet_host import HostDashboardScreen
from gpuci_tui.screens.help import HelpScreen
from tests.fleet.fakes import SLOW, SwitchHandle, fleet_services, healthy_snapshot, member
from tests.ui.helpers import notes, screen_text, wait_for


class DownHandle(SwitchHandle):
    """A host that is down from the start: every call fails until `restore`."""

    def __init__(self) -> None:
        super().__init__(healthy_snapshot())
        self.down = True

    async def snapshot(self) -> SupervisorSnapshot:
        if self.down:
            raise ControlError("ssh: connect to host gpu3 port 22: Connection refused")
        return await super().snapshot()


@pytest.fixture(autouse=True)
def slow_dashboard_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host's dashboard waits 10 minutes between attempts too."""
    monkeypatch.setattr(dashboard, "RECONNECT_BACKOFF", SLOW)


def two_hosts(**options: Any) -> tuple[Any, DownHandle, SwitchHandle]:
    gpu3, gpu5 = DownHandle(), SwitchHandle(healthy_snapshot(pid=777))
    services = fleet_services(
        [member("gpu3", "ci@gpu3", gpu3), member("gpu5", "ci@gpu5", gpu5)], backoff=SLOW, **options
    )
    return make_app(services), gpu3, gpu5


async def waiting_out_backoff(pilot: Any) -> FleetScreen:
    screen = pilot.app.screen
    assert isinstance(screen, FleetScreen)
    await wait_for(pilot, lambda: screen.statuses[0].retry_at is not None, what="gpu3 waiting")
    await wait_for(pilot, lambda: screen.statuses[1].state is LinkState.UP, what="gpu5 up")
    return screen


async def test_the_overview_reconnects_the_selected_host_now() -> None:
    app, gpu3, gpu5 = two_hosts(readonly=True)  # reconnecting changes nothing on a host
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await waiting_out_backoff(pilot)
        assert screen.table.selected == 0, "gpu3, down, is on top and selected"
        await wait_for(pilot, lambda: "q Quit" in screen_text(app).splitlines()[-1], what="keys")
        footer = screen_text(app).splitlines()[-1]
        assert "c Reconnect" in footer and "⏎ Open" in footer and "? Help" in footer
        gpu3.restore()
        await pilot.press("c")
        await wait_for(pilot, lambda: screen.statuses[0].state is LinkState.UP, what="gpu3 up")
        assert "gpu3: reconnecting now instead of waiting out the backoff." in notes(app)
        assert "daemon pid 4321 up 1h00m · link up" in screen_text(app)

        await pilot.press("c")  # a connected host: said so, its link kept
        await wait_for(pilot, lambda: any("gpu3 is connected" in n for n in notes(app)))
        assert gpu3.streams == 1 and screen.statuses[0].state is LinkState.UP
        await pilot.press("down", "c")
        await wait_for(pilot, lambda: any("gpu5 is connected" in n for n in notes(app)))
        assert gpu5.streams == 1

        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        assert "Reconnect" in screen_text(app)


async def test_a_hosts_dashboard_reconnects_its_stream_and_the_overviews_link() -> None:
    app, gpu3, _ = two_hosts()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await waiting_out_backoff(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HostDashboardScreen), what="drill")
        dash = app.screen
        assert isinstance(dash, HostDashboardScreen)
        await wait_for(pilot, lambda: dash.reconnector.waiting, what="its own backoff")
        assert "connection lost" in screen_text(app)
        # The host view's footer is drawn after its first frames: wait for it.
        await wait_for(pilot, lambda: "q Fleet" in screen_text(app).splitlines()[-1], what="keys")
        footer = screen_text(app).splitlines()[-1]
        assert "c Reconnect" in footer and footer.rstrip().endswith("q Fleet")

        gpu3.restore()
        await pilot.press("c")
        await wait_for(pilot, lambda: dash.snapshot is not None, what="the host's snapshot")
        await wait_for(pilot, lambda: screen.statuses[0].state is LinkState.UP, what="overview")
        assert "gpu3: reconnecting now instead of waiting out the backoff." in notes(app)
        assert "connection lost" not in screen_text(app)

        await pilot.press("c")
        await wait_for(pilot, lambda: any("gpu3 is connected" in n for n in notes(app)))
        assert dash.reconnector.connected and not dash.reconnector.waiting
