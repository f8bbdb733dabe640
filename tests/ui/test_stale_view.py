"""Stale registrations in the console: the count in the pool panel, the view (x), prune with a question."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import DataTable

from gpuci_tui.app import make_app
from gpuci_tui.core.command_types import Command, CommandResult, Prune
from gpuci_tui.core.models import SupervisorSnapshot
from gpuci_tui.core.registrations import StaleRegistration
from gpuci_tui.screens.confirm import ConfirmScreen
from gpuci_tui.screens.stale import NEVER, StaleScreen
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.helpers import notes, ready, screen_text, wait_for
from tests.ui.scenarios import loaded_snapshot

STALE = (
    StaleRegistration(
        1001, "old-0", "offline", "2026-11-18T12:00:00Z",
        "registered on this host by instance 0123456789ab (an earlier name prefix)",
        "0123456789ab", 8 * 86400.0,
    ),
    StaleRegistration(
        1002, "gpuhost-5", "offline", "2026-11-25T12:00:00Z",
        "registered by this instance; no lane uses the name any more", "abc", 86400.0,
    ),
)  # fmt: skip
LISTING = "2 stale registrations would be removed:\nold-0  id 1001  ...\ngpuhost-5  id 1002  ..."


def with_stale() -> SupervisorSnapshot:
    return replace(loaded_snapshot(), stale=STALE)


def respond(command: Command) -> CommandResult:
    if isinstance(command, Prune) and command.dry_run:
        return CommandResult(True, LISTING, (1001, 1002))
    if isinstance(command, Prune):
        return CommandResult(True, "removed 2 stale registrations", command.agent_ids or ())
    return CommandResult(True, f"done: {command}")


async def test_the_count_the_view_and_prune_after_asking() -> None:
    handle = FakeHandle(with_stale(), respond=respond)
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(140, 45)) as pilot:
        await ready(pilot)
        await pilot.pause()
        assert "stale 2" in screen_text(app)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, StaleScreen), what="the view")
        view = app.screen
        # Opening it asks for a fresh list (a dry run).
        await wait_for(pilot, lambda: handle.sent == [Prune(dry_run=True)], what="the refresh")
        table = view.query_one("#stale-table", DataTable)
        assert table.row_count == 2
        assert [table.get_row_at(i)[0].plain for i in range(2)] == ["old-0", "gpuhost-5"]
        assert table.get_row_at(0)[2].plain == "8d00h"
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        question = app.screen
        assert isinstance(question, ConfirmScreen)
        assert question.prompt.title == "Remove 2 stale registrations?"
        assert question.prompt.body == f"{LISTING}\n\n{NEVER}"
        assert handle.sent[-1] == Prune(dry_run=True), "nothing removed before the answer"
        await pilot.press("y")
        await wait_for(
            pilot, lambda: Prune(agent_ids=(1001, 1002)) in handle.sent, what="the removal"
        )
        await wait_for(
            pilot,
            lambda: any("removed 2 stale registrations" in n for n in notes(app)),
            what="the result",
        )


async def test_no_is_no_and_read_only_only_looks() -> None:
    handle = FakeHandle(with_stale(), respond=respond)
    app = make_app(make_services(handle=handle, readonly=True))
    async with app.run_test(size=(140, 45)) as pilot:
        await ready(pilot)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, StaleScreen), what="the view")
        assert app.screen.query_one("#stale-table", DataTable).row_count == 2
        await pilot.press("p")
        await wait_for(pilot, lambda: any("read-only" in n for n in notes(app)), what="refusal")
        assert handle.sent == [], "a read-only console sends nothing, not even a dry run"
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, StaleScreen), what="back")

    handle = FakeHandle(with_stale(), respond=respond)
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(140, 45)) as pilot:
        await ready(pilot)
        await pilot.press("x")
        await wait_for(pilot, lambda: len(handle.sent) == 1, what="the refresh")
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, StaleScreen), what="back")
        await pilot.pause()
        assert all(isinstance(c, Prune) and c.dry_run for c in handle.sent)


async def test_at_80_columns_why_it_is_stale_wraps_at_whole_words_and_is_never_cut() -> None:
    handle = FakeHandle(with_stale(), respond=respond)
    app = make_app(make_services(handle=handle, readonly=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, StaleScreen), what="the view")
        await pilot.pause()
        text = screen_text(app)
        assert "…" not in text
        lines = text.splitlines()
        column = next(line.index("Why it is stale") for line in lines if "Why it is" in line)
        for stale in STALE:
            # The reason's words, in order, across the row's lines: every word whole.
            row = next(i for i, line in enumerate(lines) if f" {stale.name} " in line)
            shown = " ".join(line[column:].strip() for line in lines[row : row + 3])
            assert stale.reason in shown, shown
