"""Every dashboard key: what is asked, what is sent (exact Command objects), what is refused."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from gpuci_tui.app import GpuciApp, make_app
from gpuci_tui.core.command_types import (
    Command,
    CommandResult,
    Drain,
    Pause,
    Restart,
    Resume,
    Scale,
    Unpause,
)
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.models import SlotState
from gpuci_tui.screens.confirm import ConfirmScreen
from gpuci_tui.screens.dashboard import DashboardScreen
from gpuci_tui.screens.help import HelpScreen
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import notes, ready, screen_text, wait_for
from tests.ui.scenarios import loaded_snapshot, sample_config


async def select(pilot: Pilot[Any], slot: int) -> None:
    """Move the table cursor to ``slot`` with the arrow keys (rows start at slot 1)."""
    screen = pilot.app.screen
    assert isinstance(screen, DashboardScreen)
    await pilot.press("home")
    for _ in range(slot - 1):
        await pilot.press("down")
    assert screen.selected_slot_number() == slot


def dialog_text(app: GpuciApp) -> str:
    """Title and body of the dialog on top."""
    screen = app.screen
    assert isinstance(screen, ConfirmScreen), f"expected a confirmation, got {screen!r}"
    return f"{screen.prompt.title} {screen.prompt.body}"


CONFIRMED_ACTIONS = [
    pytest.param(
        "d",
        1,
        Drain(slots=(1,)),
        "Drain gpuhost-1? It is busy with 'train - main' 20261122.3: it finishes that job, "
        "then stays stopped. Its standby agent is stopped now. No job is killed. Nothing "
        "replaces it until you resume it (u).",
        id="drain-busy",
    ),
    pytest.param(
        "d",
        2,
        Drain(slots=(2,)),
        "Drain gpuhost-2? It is idle: it and its standby agent are disabled on the server and "
        "stopped now, so neither takes a new job. Nothing replaces it until you resume it (u).",
        id="drain-idle",
    ),
    pytest.param(
        "D",
        1,
        Drain(slots=None),
        "Drain all 6 agents? All 6 agents are drained: 3 busy agents finish their current job, "
        "then stay stopped; 1 idle agent stops now; 3 standby agents stop now. Nothing replaces "
        "them until you resume them (u on each agent). No job is killed.",
        id="drain-all",
    ),
    pytest.param(
        "r",
        3,
        Restart(slots=(3,)),
        "Restart gpuhost-3? It is busy with 'eval nightly' 20261121.9: a fresh agent replaces it "
        "after that job finishes. No job is killed.",
        id="restart-busy",
    ),
    pytest.param(
        "r",
        2,
        Restart(slots=(2,)),
        "Restart gpuhost-2? It is idle: a fresh standby agent is started first, then it hands "
        "over and is replaced, so the slot keeps taking jobs.",
        id="restart-idle",
    ),
    pytest.param(
        "R",
        1,
        Restart(slots=None),
        "Restart all 6 agents? 1 idle agent is replaced now; 3 busy agents are replaced after "
        "their current job; 2 slots without a container start a fresh agent now. "
        "No job is killed. Slots with a ready standby hand over to a fresh one first and keep "
        "taking jobs.",
        id="restart-all",
    ),
    pytest.param(
        "minus",
        1,
        Scale(count=5),
        # The engine retires slot numbers >= the new count (this scene numbers slots from 1).
        "Scale down to 5 agents? gpuhost-5 (backoff), gpuhost-6 (parked) will be drained and "
        "removed. Busy agents finish their current job first. No job is killed.",
        id="scale-down",
    ),
]


@pytest.mark.parametrize(("key", "slot", "command", "text"), CONFIRMED_ACTIONS)
@pytest.mark.parametrize("answer", ["y", "enter"])
async def test_confirmed_action_sends_exactly_one_command(
    handle: FakeHandle, key: str, slot: int, command: Command, text: str, answer: str
) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await select(pilot, slot)
        await pilot.press(key)
        await wait_for(
            pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation"
        )
        assert dialog_text(app) == text
        assert handle.sent == [], "nothing may be sent before the answer"
        await pilot.press(answer)
        await wait_for(pilot, lambda: handle.sent == [command], what=f"{command} to be sent")
        await wait_for(
            pilot, lambda: f"done: {command}" in notes(app), what="the result notification"
        )
        assert isinstance(app.screen, DashboardScreen)


@pytest.mark.parametrize(("key", "slot", "command", "text"), CONFIRMED_ACTIONS)
@pytest.mark.parametrize("answer", ["n", "escape"])
async def test_cancelled_action_sends_nothing(
    handle: FakeHandle, key: str, slot: int, command: Command, text: str, answer: str
) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await select(pilot, slot)
        await pilot.press(key)
        await wait_for(
            pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation"
        )
        await pilot.press(answer)
        await wait_for(
            pilot, lambda: isinstance(app.screen, DashboardScreen), what="the dialog to close"
        )
        await pilot.pause(0.05)
        assert handle.sent == []


async def test_confirm_button_can_be_chosen_with_tab_and_enter(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("d", "tab", "enter")  # focus moves to Cancel: Enter presses it
        await wait_for(
            pilot, lambda: isinstance(app.screen, DashboardScreen), what="the dialog to close"
        )
        await pilot.pause(0.05)
        assert handle.sent == []


@pytest.mark.parametrize(
    ("key", "slot", "command"),
    [
        pytest.param("plus", 1, Scale(count=7), id="scale-up"),
        pytest.param("u", 6, Resume(slots=(6,)), id="resume-parked"),
        pytest.param("u", 4, Resume(slots=(4,)), id="resume-draining"),
        pytest.param("u", 5, Resume(slots=(5,)), id="resume-backoff"),
        pytest.param("p", 1, Pause(), id="pause"),
    ],
)
async def test_unconfirmed_actions_send_at_once(
    handle: FakeHandle, key: str, slot: int, command: Command
) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await select(pilot, slot)
        await pilot.press(key)
        await wait_for(pilot, lambda: handle.sent == [command], what=f"{command}")
        assert isinstance(app.screen, DashboardScreen), "no confirmation for reversible actions"


async def test_pause_key_unpauses_a_paused_supervisor() -> None:
    handle = FakeHandle(loaded_snapshot(paused=True))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("p")
        await wait_for(pilot, lambda: handle.sent == [Unpause()], what="Unpause()")


async def test_scale_up_twice_before_a_snapshot_asks_for_two_more(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("plus")
        await wait_for(pilot, lambda: len(handle.sent) == 1, what="the first Scale")
        await pilot.press("plus")
        await wait_for(pilot, lambda: len(handle.sent) == 2, what="the second Scale")
        assert handle.sent == [Scale(count=7), Scale(count=8)]


async def test_resume_on_a_running_agent_explains_and_sends_nothing(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await select(pilot, 2)
        await pilot.press("u")
        await wait_for(
            pilot, lambda: "gpuhost-2 is idle: there is nothing to resume." in notes(app)
        )
        assert handle.sent == []


async def test_drain_on_a_drained_agent_says_so() -> None:
    snapshot = loaded_snapshot()
    slots = tuple(replace(s, state=SlotState.DRAINED) if s.slot == 2 else s for s in snapshot.slots)
    handle = FakeHandle(replace(snapshot, slots=slots))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await select(pilot, 2)
        await pilot.press("d")
        await wait_for(
            pilot, lambda: "gpuhost-2 is already drained. Press u to resume it." in notes(app)
        )
        assert isinstance(app.screen, DashboardScreen)
        assert handle.sent == []


async def test_scale_down_at_zero_is_refused() -> None:
    handle = FakeHandle(loaded_snapshot(desired_count=0, slots=()))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("minus")
        await wait_for(pilot, lambda: "No agent is wanted already (desired count 0)." in notes(app))
        assert handle.sent == []


READONLY_KEYS = ["d", "D", "r", "R", "u", "plus", "minus", "p"]


@pytest.mark.parametrize("key", READONLY_KEYS)
async def test_readonly_refuses_every_action(handle: FakeHandle, key: str) -> None:
    app = make_app(make_services(handle=handle, readonly=True))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await select(pilot, 6)
        await pilot.press(key)
        await wait_for(
            pilot, lambda: any(n.startswith("read-only: ") for n in notes(app)), what="the refusal"
        )
        await pilot.pause(0.05)
        assert app.screen is screen, "no confirmation dialog in read-only mode"
        assert handle.sent == []
        assert "READ-ONLY" in screen.status_bar.render().plain


async def test_readonly_still_allows_logs_and_help(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle, readonly=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        help_text = " ".join(str(w.render()) for w in app.screen.query(Static))
        assert "READ-ONLY" in help_text
        await pilot.press("escape")
        await pilot.press("l")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "LogScreen", what="the log view")
        assert handle.sent == []


async def test_help_lists_the_keys_as_bound_by_the_keymap(handle: FakeHandle) -> None:
    config = replace(sample_config(), keys={"drain": "x", "restart": "ctrl+r"})
    app = make_app(make_services(handle=handle, config=config))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        keys = {item.description: item.key for item in help_screen.keys}
        assert keys["Drain"] == "x"
        assert keys["Restart"] == "^r"
        assert keys["More"] == "+"
        assert keys["Quit"] == "q"
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen), what="help to close")


async def test_keymap_rebinds_and_frees_the_old_key(handle: FakeHandle) -> None:
    config = replace(sample_config(), keys={"drain": "x"})
    app = make_app(make_services(handle=handle, config=config))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("d")
        await pilot.pause(0.05)
        assert isinstance(app.screen, DashboardScreen), "d is no longer drain"
        await pilot.press("x")
        await wait_for(
            pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the drain confirmation"
        )
        await pilot.press("y")
        await wait_for(pilot, lambda: handle.sent == [Drain(slots=(1,))])


async def test_unknown_keymap_ids_are_reported(handle: FakeHandle) -> None:
    config = replace(sample_config(), keys={"drian": "x"})
    app = make_app(make_services(handle=handle, config=config))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: any("unknown actions: drian" in n for n in notes(app)))


async def test_failed_command_is_reported_plainly(handle: FakeHandle) -> None:
    handle.fail_with = GpuciError("the control socket closed; is the daemon still running?")
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("p")
        await wait_for(
            pilot,
            lambda: (
                "The supervisor did not take the command: the control socket closed; "
                "is the daemon still running?" in notes(app)
            ),
        )


async def test_refused_command_result_is_shown_as_an_error() -> None:
    handle = FakeHandle(
        loaded_snapshot(), respond=lambda c: CommandResult(False, "[slot 9] does not exist")
    )
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("p")
        await wait_for(
            pilot, lambda: "[slot 9] does not exist" in notes(app), what="the literal message"
        )
        severities = [
            n.severity for n in app._notifications if n.message == "[slot 9] does not exist"
        ]
        assert severities == ["error"]


async def test_actions_without_a_supervisor_explain_instead_of_failing() -> None:
    app = make_app(make_services(handle=None))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("d")
        await wait_for(
            pilot, lambda: any("No supervisor is connected yet" in n for n in notes(app))
        )
        assert isinstance(app.screen, DashboardScreen)


async def test_command_palette_offers_the_agent_actions(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        titles = {command.title: command for command in app.get_system_commands(screen)}
        assert "Drain the selected agent" in titles
        assert "Scale up: one more agent" in titles
        await titles["Pause / resume replenishing"].callback()
        await wait_for(pilot, lambda: handle.sent == [Pause()])


async def test_help_shows_config_syntax_as_text_not_markup(handle: FakeHandle) -> None:
    """'hot standby is off ([agents] standby = false)' lost '[agents]' to Rich markup."""
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(120, 64)) as pilot:
        await ready(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        await wait_for(
            pilot,
            lambda: "hot standby is off ([agents] standby = false)" in screen_text(app),
            what="the standby legend with its config syntax",
        )
