"""The fleet console's commands: drain, restart and resume of a host or the fleet, confirmed with
each daemon's preview; unreachable and failing hosts."""

from __future__ import annotations

from gpuci_tui.app import make_app
from gpuci_tui.core.command_types import Drain, Restart, Resume
from gpuci_tui.core.host.control.client import ControlError
from gpuci_tui.screens.confirm import ConfirmScreen
from gpuci_tui.screens.fleet import FleetScreen
from tests.fleet.fakes import (
    FAST,
    SwitchHandle,
    fleet_services,
    healthy_snapshot,
    member,
)
from tests.fleet.screen_helpers import confirm_text, fleet_console, overview, select
from tests.ui.helpers import notes, wait_for


async def test_drain_one_host_confirms_with_its_daemons_preview() -> None:
    async with fleet_console() as (app, pilot, screen, handles):
        await select(pilot, screen, "gpu3")
        await pilot.press("d")
        title, body = await confirm_text(pilot)
        assert title == "Drain all 4 agents on gpu3?"
        assert body == (
            "2 busy agents finish their job, then stay stopped; 2 idle agents stop now. "
            "No job is killed. Nothing replaces them until you resume (u)."
        )
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is screen, what="dialog closed")
        assert handles["gpu3"].sent == []
        await pilot.press("d")
        await confirm_text(pilot)
        await pilot.press("y")
        await wait_for(pilot, lambda: handles["gpu3"].sent == [Drain(slots=None)], what="sent")
        await wait_for(pilot, lambda: any(n.startswith("gpu3: done:") for n in notes(app)))
        assert handles["gpu2"].sent == []


async def test_fleet_wide_drain_lists_every_host_and_leaves_the_dead_one_out() -> None:
    async with fleet_console() as (app, pilot, screen, handles):
        await pilot.press("D")
        title, body = await confirm_text(pilot)
        assert title == "Drain on 2 hosts?"
        assert body.splitlines() == [
            "gpu2: 3 busy agents finish their job, then stay stopped; 1 idle agent stops now; "
            "2 slots without a container are not started again.",
            "gpu3: 2 busy agents finish their job, then stay stopped; 2 idle agents stop now.",
            "gpu4: unreachable (ssh: connect to host gpu4 port 22: Connection refused); "
            "left as it is.",
            "No job is killed. Nothing replaces them until you resume (u).",
        ]
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: handles["gpu2"].sent == handles["gpu3"].sent == [Drain(slots=None)],
            what="both drained",
        )
        assert handles["gpu4"].sent == []
        await wait_for(pilot, lambda: any("gpu2: done:" in n and "gpu3: done:" in n
                                          for n in notes(app)))  # fmt: skip


async def test_restart_and_resume_of_the_fleet() -> None:
    async with fleet_console() as (app, pilot, screen, handles):
        await pilot.press("R")
        title, body = await confirm_text(pilot)
        assert title == "Restart on 2 hosts?"
        assert (
            "gpu3: 2 idle agents are replaced now; 2 busy agents are replaced after their job."
            in body
        )
        await pilot.press("y")
        await wait_for(pilot, lambda: handles["gpu3"].sent == [Restart(slots=None)], what="sent")
        # Only gpu2 has anything to resume (a draining, a backing-off and a parked slot).
        await pilot.press("U")
        title, body = await confirm_text(pilot)
        assert title == "Resume on 1 host?"
        assert body.splitlines()[:2] == [
            "gpu2: 3 drained, parked or backing-off slots start again.",
            "gpu3: nothing to resume; left as it is.",
        ]
        await pilot.press("y")
        await wait_for(pilot, lambda: Resume(slots=None) in handles["gpu2"].sent, what="resumed")
        assert Resume(slots=None) not in handles["gpu3"].sent


async def test_resume_of_a_host_with_nothing_to_resume_sends_nothing() -> None:
    async with fleet_console() as (app, pilot, screen, handles):
        await select(pilot, screen, "gpu3")
        await pilot.press("u")
        await wait_for(
            pilot, lambda: "gpu3: nothing to resume (no agent would change)." in notes(app)
        )
        await select(pilot, screen, "gpu2")
        await pilot.press("u")  # confirmed, as the README promises for d/r/u
        title, body = await confirm_text(pilot)
        assert title == "Resume all 6 agents on gpu2?"
        assert body == "3 drained, parked or backing-off slots start again."
        assert handles["gpu2"].sent == []
        await pilot.press("y")
        await wait_for(pilot, lambda: handles["gpu2"].sent == [Resume(slots=None)], what="sent")
        assert handles["gpu3"].sent == []


async def test_commands_to_an_unreachable_host_are_refused_plainly() -> None:
    async with fleet_console() as (app, pilot, screen, handles):
        await select(pilot, screen, "gpu4")
        await pilot.press("d")
        await wait_for(pilot, lambda: bool(notes(app)))
        assert notes(app) == [
            "gpu4 is unreachable (ssh: connect to host gpu4 port 22: Connection refused): "
            "nothing was sent."
        ]
        assert not isinstance(app.screen, ConfirmScreen)
        assert handles["gpu4"].sent == []


async def test_a_host_that_fails_between_preview_and_command_is_reported() -> None:
    async with fleet_console() as (app, pilot, screen, handles):
        await select(pilot, screen, "gpu2")
        await pilot.press("r")
        await confirm_text(pilot)
        handles["gpu2"].fail_with = ControlError("no answer from the host within 10 s")
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: (
                "gpu2: not sent or not answered: no answer from the host within 10 s" in notes(app)
            ),
        )
        assert isinstance(app.screen, FleetScreen)


async def test_a_host_with_one_agent_is_asked_about_it_in_the_singular() -> None:
    one = SwitchHandle(healthy_snapshot(slots=healthy_snapshot().slots[2:3], desired_count=1))
    services = fleet_services([member("solo", "ci@solo", one)], backoff=FAST)
    app = make_app(services)
    async with app.run_test(size=(100, 30)) as pilot:
        await overview(pilot)
        await pilot.press("d")
        title, body = await confirm_text(pilot)
        assert title == "Drain the only agent on solo?"
        assert (
            body
            == "1 idle agent stops now. No job is killed. Nothing replaces it until you resume (u)."
        )
