"""The fleet console with fake hosts: overview, drill-down, confirmations, read-only, dead hosts."""

from __future__ import annotations

import re

from gpuci_tui.app import make_app
from gpuci_tui.core.command_types import Drain, Restart
from gpuci_tui.core.fleet.link import LinkState
from gpuci_tui.core.models import SupervisorEvent
from gpuci_tui.screens.confirm import ConfirmScreen, QuitChoice
from gpuci_tui.screens.dashboard import DashboardScreen
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.screens.fleet_host import HostDashboardScreen
from gpuci_tui.screens.help import HelpScreen
from gpuci_tui.widgets.fleet_table import FleetDetail
from tests.fleet.fakes import (
    FAST,
    SwitchHandle,
    fleet_services,
    healthy_snapshot,
    member,
    three_hosts,
)
from tests.fleet.screen_helpers import confirm_text, fleet_console, host_order, overview, select
from tests.ui.helpers import notes, screen_text, text_of, wait_for
from tests.ui.scenarios import NOW


async def test_overview_rows_problems_first_then_by_name() -> None:
    services, _ = three_hosts()
    app = make_app(services)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await overview(pilot)
        assert host_order(screen) == ["gpu4", "gpu2", "gpu3"]
        text = screen_text(app)
        assert "2/3 hosts up · 5 busy · 3 idle · 6 standby · 1 parked" in text
        lines = {line.split()[1]: line for line in text.splitlines() if "gpu" in line[:8]}
        assert lines["gpu3"].split()[1:12] == [
            "gpu3", "●", "up", "2", "2", "4", "0", "0", "3", "2", "✓",
        ]  # fmt: skip
        assert lines["gpu2"].split()[1:12] == [
            "gpu2", "●", "up", "3", "1", "2", "1", "1", "3", "3", "✓",
        ]  # fmt: skip
        assert lines["gpu4"].split()[1:4] == ["gpu4", "✗", "down"]
        assert re.search(r"│ gpu2 +● up", text) and "parked after repeated" in text


async def test_an_unreachable_host_says_why_and_when_it_is_tried_again() -> None:
    async with fleet_console() as (app, pilot, screen, handles):
        await select(pilot, screen, "gpu4")
        detail = screen.query_one(FleetDetail).render().plain
        assert detail == (
            "ci@gpu4 · down since just now, retry in 10 min · unreachable: ssh: connect to "
            "host gpu4 port 22: Connection refused"
        )
        assert "ci@gpu4 · down since just now, retry in 10 min" in screen_text(app)
        assert handles["gpu4"].attempts == 1


async def test_a_host_that_drops_shows_down_while_the_others_update_and_then_returns() -> None:
    gpu3 = SwitchHandle(healthy_snapshot())
    other = SwitchHandle(healthy_snapshot(pid=777))
    services = fleet_services(
        [member("gpu3", "ci@gpu3", gpu3), member("gpu5", "ci@gpu5", other)], backoff=FAST
    )
    app = make_app(services)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await overview(pilot)
        gpu3.drop()
        await wait_for(pilot, lambda: screen.statuses[0].state is LinkState.DOWN, what="gpu3 down")
        assert host_order(screen) == ["gpu3", "gpu5"]
        other.push(healthy_snapshot(pid=777, paused=True))
        await wait_for(pilot, lambda: screen.rows[1].paused, what="gpu5 still updating")
        other.push(SupervisorEvent(at=NOW, kind="job_assigned", message="'eval' 7", slot=1))
        await wait_for(pilot, lambda: screen.event_log.count == 1, what="gpu5's event")
        await select(pilot, screen, "gpu5")
        await pilot.press("r")
        await confirm_text(pilot)
        await pilot.press("y")
        await wait_for(pilot, lambda: other.sent == [Restart(slots=None)], what="gpu5 restarted")
        gpu3.restore()
        await wait_for(pilot, lambda: screen.statuses[0].state is LinkState.UP, what="gpu3 back")
        assert gpu3.streams >= 2
        assert "1 busy" not in screen_text(app)  # both hosts counted again: 2 + 2 busy
        assert "2/2 hosts up · 4 busy" in screen_text(app)


async def test_enter_opens_the_hosts_own_dashboard_and_q_or_escape_come_back() -> None:
    async with fleet_console() as (app, pilot, screen, handles):
        await select(pilot, screen, "gpu3")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HostDashboardScreen), what="drill")
        dash = app.screen
        assert isinstance(dash, DashboardScreen) and dash.handle is handles["gpu3"]
        await wait_for(pilot, lambda: dash.snapshot is not None, what="the host's snapshot")
        text = screen_text(app)
        # Named once, and third as the overview lists them (gpu4, down, first), not as configured.
        assert host_order(screen) == ["gpu4", "gpu2", "gpu3"]
        assert "⇄ ci@gpu3:2222 over ssh · host 3 of 3  q/Esc: back to the fleet" in text
        assert "gpu3-0" in text and "gpu3-3" in text
        assert text_of(dash, "#gpu-none") == (
            "No GPU visible: GPU cards are sampled on gpu3 itself, not over ssh (open the "
            "console there to see them)"
        )
        await pilot.press("q")
        await wait_for(pilot, lambda: app.screen is screen, what="back with q")
        assert app.return_value is None, "q in a host's dashboard must not quit the console"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HostDashboardScreen), what="again")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, what="back with escape")


async def test_the_hosts_dashboard_acts_on_that_host_only() -> None:
    async with fleet_console() as (app, pilot, screen, handles):
        await select(pilot, screen, "gpu3")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HostDashboardScreen), what="drill")
        await wait_for(pilot, lambda: app.screen.snapshot is not None, what="snapshot")
        await pilot.press("D")
        title, _ = await confirm_text(pilot)
        assert title == "Drain all 4 agents on gpu3?", "a fleet host's confirmation names it"
        await pilot.press("y")
        await wait_for(pilot, lambda: handles["gpu3"].sent == [Drain(slots=None)], what="sent")
        assert handles["gpu2"].sent == []
        await wait_for(pilot, lambda: any(n.title == "gpu3" for n in app._notifications))


async def test_readonly_refuses_every_action_but_still_opens_hosts() -> None:
    async with fleet_console(readonly=True) as (app, pilot, screen, handles):
        assert "READ-ONLY" in screen_text(app)
        await select(pilot, screen, "gpu3")
        for key in ("d", "D", "r", "R", "u", "U"):
            await pilot.press(key)
            assert not isinstance(app.screen, ConfirmScreen)
        await wait_for(pilot, lambda: len(notes(app)) >= 6)
        assert set(notes(app)) == {
            f"read-only: {word} is disabled (the console was started with --readonly)."
            for word in ("draining", "restarting", "resuming")
        }
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HostDashboardScreen), what="drill")
        await wait_for(pilot, lambda: app.screen.snapshot is not None, what="snapshot")
        await pilot.press("D")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, ConfirmScreen)
        assert all(not h.sent for h in handles.values())


async def test_quit_asks_and_changes_nothing_on_any_host() -> None:
    async with fleet_console() as (app, pilot, screen, handles):
        await pilot.press("q")
        title, body = await confirm_text(pilot)
        assert title == "Quit the fleet console?"
        assert "The daemons on all 3 hosts keep running" in body
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), what="still open")
        await pilot.press("q")
        await confirm_text(pilot)
        await pilot.press("y")
        await pilot.pause(0.1)
    assert app.return_value is QuitChoice.LEAVE_RUNNING
    assert all(not h.sent for h in handles.values())


async def test_80x24_shows_every_count_column_and_the_keys() -> None:
    services, _ = three_hosts()
    app = make_app(services)
    async with app.run_test(size=(80, 24)) as pilot:
        await overview(pilot)
        await wait_for(pilot, lambda: "q Quit" in screen_text(app).splitlines()[-1], what="keys")
        lines = screen_text(app).splitlines()
        header = next(line for line in lines if "Host" in line and "Link" in line)
        for column in ("Busy", "Idle", "Stby", "Park", "Drain", "Queue", "GPU", "Azure"):
            assert column in header
        assert sum(1 for line in lines if "● up" in line or "✗ down" in line) == 3
        assert "⏎ Open" in lines[-1] and "d Drain" in lines[-1] and "q Quit" in lines[-1]
        assert "2/3 hosts up" in lines[0]
        # A host's dashboard has one key more: the least used ones hide, the way back stays.
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HostDashboardScreen), what="drill")
        await wait_for(
            pilot, lambda: screen_text(app).splitlines()[-1].rstrip().endswith("q Fleet")
        )
        footer = screen_text(app).splitlines()[-1]
        assert "d Drain" in footer and "? Help" in footer and "p Pause" not in footer


async def test_a_narrow_fleet_tells_its_collapsed_columns_in_the_detail_line() -> None:
    services, _ = three_hosts()
    app = make_app(services)
    async with app.run_test(size=(64, 24)) as pilot:
        screen = await overview(pilot)
        await wait_for(pilot, lambda: "gpus" in screen.table.layout_now.hidden, what="collapse")
        assert screen.table.border_subtitle.endswith("cols ›")
        await pilot.press("down")  # gpu2, a host that is up
        detail = screen.query_one(FleetDetail)
        await wait_for(pilot, lambda: "GPU 3" in detail.render().plain, what="detail")


async def test_keys_are_rebound_from_the_configuration_and_help_lists_them() -> None:
    async with fleet_console(keys={"drain": "x"}) as (app, pilot, screen, handles):
        await select(pilot, screen, "gpu3")
        await pilot.press("x")
        title, _ = await confirm_text(pilot)
        assert title == "Drain all 4 agents on gpu3?"
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        text = screen_text(app)
        assert "x" in text and "Drain" in text and "Hot standby" in text


async def test_the_cursor_starts_on_the_worst_host_then_stays_on_the_one_chosen() -> None:
    a, b = SwitchHandle(healthy_snapshot()), SwitchHandle(healthy_snapshot())
    services = fleet_services([member("a", "a", a), member("b", "b", b)], backoff=FAST)
    app = make_app(services)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await overview(pilot)
        assert screen.table.selected == 0  # "a": top row, nobody chose yet
        b.drop()
        await wait_for(pilot, lambda: host_order(screen) == ["b", "a"], what="b on top")
        assert screen.table.selected == 1, "until a host is chosen, the top row is selected"
        await pilot.press("down")
        assert screen.table.selected == 0
        b.restore()
        await wait_for(pilot, lambda: host_order(screen) == ["a", "b"], what="b back")
        a.drop()
        await wait_for(pilot, lambda: host_order(screen) == ["a", "b"] and
                       screen.statuses[0].state is LinkState.DOWN, what="a down")  # fmt: skip
        assert screen.table.selected == 0, "the chosen host stays selected"
        a.restore()
        await wait_for(pilot, lambda: screen.statuses[0].state is LinkState.UP, what="a back")
        b.drop()
        await wait_for(pilot, lambda: host_order(screen) == ["b", "a"], what="b down")
        assert screen.table.selected == 0, "still a, now on the second row"


async def test_a_readonly_footer_offers_only_what_works() -> None:
    async with fleet_console(readonly=True) as (app, pilot, screen, handles):
        await wait_for(pilot, lambda: "q Quit" in screen_text(app).splitlines()[-1], what="keys")
        footer = screen_text(app).splitlines()[-1]
        assert "⏎ Open" in footer and "c Reconnect" in footer
        for word in ("Drain", "Restart", "Resume"):
            assert word not in footer, footer
        await pilot.press("d")  # still bound: it says why nothing happens
        await wait_for(pilot, lambda: any("read-only: draining" in n for n in notes(app)))
        await select(pilot, screen, "gpu3")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HostDashboardScreen), what="drill")
        await wait_for(
            pilot, lambda: screen_text(app).splitlines()[-1].rstrip().endswith("q Fleet")
        )
        footer = screen_text(app).splitlines()[-1]
        for word in ("Drain", "Restart", "Resume", "More", "Fewer", "Pause"):
            assert word not in footer, footer
        assert "h History" in footer


async def test_q_goes_back_from_every_screen_of_a_host() -> None:
    async with fleet_console() as (app, pilot, screen, handles):
        await select(pilot, screen, "gpu3")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HostDashboardScreen), what="drill")
        host = app.screen
        await pilot.press("h")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "HostHistoryScreen")
        await pilot.press("q")
        await wait_for(pilot, lambda: app.screen is host, what="back to the host")
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("q")
        await wait_for(pilot, lambda: app.screen is screen, what="back to the fleet")
