"""The console's reload: the supervisor's dry run is confirmed first; the roll-out is shown."""

from __future__ import annotations

from typing import Any

import pytest

from gpuci_tui.app import make_app
from gpuci_tui.core.command_types import Command, Reload
from gpuci_tui.core.engine.preview import CommandPreview
from gpuci_tui.core.models import RolloutSnapshot, RuntimeOverride
from gpuci_tui.screens.confirm import ConfirmScreen
from gpuci_tui.screens.dashboard import DashboardScreen
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import notes, ready, screen_text, wait_for
from tests.ui.scenarios import loaded_snapshot

DRY_RUN = (
    "reload /etc/gpuci-tui/config.toml:\n"
    '  agents.image: "reg/agent:v1" -> "reg/agent:v2": the slots change image one by one '
    "(standby first, busy ones after their job)\n"
    "    slots 0-5: 2 idle lanes replaced now, 3 busy after their job"
)


class ReloadHandle(FakeHandle):
    """Answers a reload's preview as a daemon does (the dry run in words)."""

    def __init__(self, answer: CommandPreview, **kw: Any) -> None:
        super().__init__(loaded_snapshot(), **kw)
        self.answer = answer

    async def preview(self, command: Command) -> CommandPreview:
        if isinstance(command, Reload):
            return self.answer
        return await super().preview(command)


RESET_DRY_RUN = (
    "reload /etc/gpuci-tui/config.toml:\n"
    "  the configuration file has no change\n"
    "  overrides dropped (--reset-overrides): the groups run the file\n"
    "    count 1, scaled at 10:02; the file says 3"
)


@pytest.mark.parametrize(
    ("key", "dry_run", "title", "body", "sent"),
    [
        (
            "ctrl+r",
            DRY_RUN,
            "Reload the configuration?",
            [
                'agents.image: "reg/agent:v1" -> "reg/agent:v2": the slots change image one by '
                "one (standby first, busy ones after their job)",
                "slots 0-5: 2 idle lanes replaced now, 3 busy after their job",
            ],
            Reload(),
        ),
        (
            # Where reload is: the same dry run, naming the overrides the reset drops.
            "ctrl+o",
            RESET_DRY_RUN,
            "Reload and drop the overrides?",
            [
                "the configuration file has no change",
                "overrides dropped (--reset-overrides): the groups run the file",
                "count 1, scaled at 10:02; the file says 3",
            ],
            Reload(reset_overrides=True),
        ),
    ],
)
async def test_reload_shows_the_dry_run_then_sends_on_yes(
    key: str, dry_run: str, title: str, body: list[str], sent: Reload
) -> None:
    handle = ReloadHandle(CommandPreview("reload", True, dry_run))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(110, 32)) as pilot:
        await ready(pilot)
        await pilot.press(key)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the dry run")
        assert isinstance(app.screen, ConfirmScreen)
        prompt = app.screen.prompt
        assert prompt.title == title
        assert prompt.body.splitlines() == [*body, "No job is killed."]
        assert handle.sent == []
        await pilot.press("y")
        await wait_for(pilot, lambda: handle.sent == [sent], what=f"{sent} sent")


async def test_a_file_with_problems_is_said_and_nothing_is_sent() -> None:
    problem = "reload: the file has problems, nothing changed:\nconfig.toml: agents.count: ..."
    handle = ReloadHandle(CommandPreview("reload", False, problem))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(110, 32)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: problem in notes(app), what="the problem")
        assert isinstance(app.screen, DashboardScreen) and handle.sent == []


async def test_read_only_refuses_reload() -> None:
    handle = ReloadHandle(CommandPreview("reload", True, DRY_RUN))
    app = make_app(make_services(handle=handle, readonly=True))
    async with app.run_test(size=(110, 32)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: any("read-only" in n for n in notes(app)), what="refusal")
        assert handle.sent == []


async def test_the_rollout_shows_in_the_pool_panel() -> None:
    rollout = RolloutSnapshot("", "reg/agent:v1", "reg/agent:v2", "rolling", 8, 3, busy_old=1)
    back = RolloutSnapshot(
        "cuda13", "reg/agent:v1", "reg/agent:v3", "rolled_back", 2, 0,
        reason="canary slot 0 parked",
    )  # fmt: skip
    handle = FakeHandle(loaded_snapshot(rollouts=(rollout, back)))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await wait_for(
            pilot,
            lambda: "…:v2 on 3/8 slots, 1 busy on v1" in screen_text(app),
            what="the roll-out line",
        )
        assert "cuda13: …:v3 rolled back to …:v1:" in screen_text(app)  # the reason wraps


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        ({"pulls": ("pulling reg/agent:v2: 3/7 layers, 1.2 GB of 4.8 GB",)}, "3/7 layers, 1.2 GB"),
        # What runs over the file, beside the file's value (issue 28).
        (
            {"overrides": (RuntimeOverride("scale", "", None, "1", "3"),)},
            "override: count 1, scaled; the file says 3",
        ),
    ],
)
async def test_a_pull_in_flight_and_the_overrides_show_in_the_pool_panel(
    changes: dict[str, Any], line: str
) -> None:
    handle = FakeHandle(loaded_snapshot(**changes))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: line in screen_text(app), what=line)
