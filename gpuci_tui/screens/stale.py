"""`x`: the pool's stale registrations (ours, offline, backing no lane), and pruning them.

The list is the supervisor's (`SupervisorSnapshot.stale`, from its last read of
the pool with capabilities); opening the view asks for a fresh one with a dry
run. Pruning asks again (a dry run: the core's rule, in the core's words), shows
that answer in the confirmation, and removes only what it showed; the core reads
each one again right before its DELETE. Read-only consoles only look.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Static

from gpuci_tui.core.command_types import Prune
from gpuci_tui.core.formatting import duration
from gpuci_tui.core.registrations import StaleRegistration
from gpuci_tui.core.wording import plural
from gpuci_tui.screens.confirm import ConfirmScreen
from gpuci_tui.screens.help import navigation, show_help
from gpuci_tui.screens.prompts import Prompt

if TYPE_CHECKING:
    from gpuci_tui.core.host.handle import SupervisorHandle

NEVER = (
    "Never removed: an online or busy agent, another host's, or a current slot's "
    "registration. Each is read again right before its removal."
)


LABELS = ("Agent", "Id", "Offline for", "Since", "Why it is stale")
REASON_MIN = 24
"""Cells the reason keeps on the narrowest screen (the table scrolls sideways then)."""


def stale_cells(stale: StaleRegistration) -> tuple[str, ...]:
    """One registration's cells, in `LABELS` order (pure; the view and the tests)."""
    since = (stale.since or "")[:16].replace("T", " ")
    return (stale.name, str(stale.agent_id), duration(stale.offline_seconds), since, stale.reason)


def prune_prompt(listing: str, count: int) -> Prompt:
    """The confirmation of a prune: the dry run's own listing, and what is never touched."""
    title = f"Remove {plural(count, 'stale registration')}?"
    return Prompt(title, f"{listing}\n\n{NEVER}", "Remove")


class StaleScreen(Screen[None]):
    """The stale registrations, with a key to prune them (after a confirmation)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="stale.back", tooltip="Back to the dashboard"),
        # q goes back a step here, as Escape does: it never asks to quit from a sub-screen.
        Binding("q", "back", "Back", id="stale.q_back", show=False,
                tooltip="Back to the dashboard"),
        Binding("p", "prune", "Prune", id="stale.prune",
                tooltip="Remove the stale registrations listed (asks first)"),
        Binding("f5", "refresh", "Refresh", id="stale.refresh",
                tooltip="Read the pool again (with capabilities)"),
        Binding("question_mark", "help", "Help", id="stale.help",
                tooltip="The keys of the stale registrations"),
    ]  # fmt: skip
    NAVIGATION = (
        navigation("↑ ↓ pgup pgdn", "Select", "Move over the registrations", "up", "down",
                   "pageup", "pagedown"),
    )  # fmt: skip
    DEFAULT_CSS = """
    #stale { layout: vertical; }
    #stale-status { height: auto; padding: 0 1; background: $panel; }
    #stale-table { height: 1fr; }
    """

    def __init__(
        self,
        handle: SupervisorHandle | None,
        stale: tuple[StaleRegistration, ...],
        *,
        readonly: bool = False,
        host: str = "",
    ) -> None:
        """The view of ``stale`` (the last snapshot's), refreshed through ``handle``.

        ``host``: the fleet host they are of, named in the confirmation (empty: this one).
        """
        super().__init__(id="stale")
        self.handle = handle
        self.stale = stale
        self.readonly = readonly
        self.host = host

    def compose(self) -> Iterable[Widget]:
        """Status line, table, footer."""
        yield Static("", id="stale-status", markup=False)
        yield DataTable[Text](id="stale-table", cursor_type="row", zebra_stripes=True)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        """Show what the snapshot had, then ask for a fresh list (not in read-only)."""
        self._show(self.stale)
        if not self.readonly:
            self.action_refresh()

    def on_resize(self) -> None:
        """A new width: the reasons wrap anew."""
        self.call_after_refresh(self._show, self.stale)

    def _show(self, stale: tuple[StaleRegistration, ...]) -> None:
        self.stale = stale
        table: DataTable[Text] = self.query_one("#stale-table", DataTable)
        rows = [stale_cells(s) for s in stale]
        # The reason is the rest of the width, wrapped at whole words: it says why a
        # registration may go, and is never cut (a row grows a line instead).
        widths = [
            max([len(label), *(len(row[i]) for row in rows)]) for i, label in enumerate(LABELS)
        ]
        room = table.scrollable_content_region.width - 2 * table.cell_padding * len(LABELS)
        widths[-1] = max(REASON_MIN, room - sum(widths[:-1]))
        keep = table.cursor_row
        table.clear(columns=True)
        for label, width in zip(LABELS, widths, strict=True):
            table.add_column(label, width=width)
        for s, row in zip(stale, rows, strict=True):
            table.add_row(*(Text(cell) for cell in row), key=str(s.agent_id), height=None)
        if rows:
            table.move_cursor(row=min(keep, len(rows) - 1), animate=False)
        words = f"{plural(len(stale), 'stale registration')} in the pool"
        if stale and not self.readonly:
            words += " · p prunes them (asks first)"
        self.query_one("#stale-status", Static).update(f"{words}\n{NEVER}")

    def action_back(self) -> None:
        """Back to the dashboard."""
        self.app.pop_screen()

    def action_help(self) -> None:
        """The keys of this view, as bound now."""
        show_help(
            self,
            "Keys of the stale registrations",
            extra=self.NAVIGATION,
            note=NEVER,
            readonly=self.readonly,
        )

    def action_refresh(self) -> None:
        """Ask the supervisor for a fresh list (a dry run reads the pool with capabilities)."""
        self.run_worker(self._refresh(), group="stale", exclusive=True, exit_on_error=False)

    async def _refresh(self) -> None:
        if self.handle is None:
            return
        try:
            answer = await self.handle.send(Prune(dry_run=True))
            snapshot = await self.handle.snapshot()
        except Exception as exc:  # noqa: BLE001 - said, and the view keeps the last list
            self._say(f"Could not read the pool: {exc or type(exc).__name__}", error=True)
            return
        if not answer.ok:
            self._say(answer.message, error=True)
        self._show(snapshot.stale)

    def action_prune(self) -> None:
        """Dry run, confirmation with its words, then removal of what it listed."""
        if self.readonly:
            self._say("read-only: pruning is disabled (the console was started with --readonly).")
            return
        self.run_worker(self._prune(), group="stale", exclusive=True, exit_on_error=False)

    async def _prune(self) -> None:
        handle = self.handle
        if handle is None:
            self._say("No supervisor is connected: nothing was removed.", error=True)
            return
        try:
            listing = await handle.send(Prune(dry_run=True))
        except Exception as exc:  # noqa: BLE001
            self._say(f"The supervisor did not answer: {exc or type(exc).__name__}", error=True)
            return
        if not listing.ok or not listing.affected:
            self._say(listing.message, error=not listing.ok)
            return

        async def answered(ok: bool | None) -> None:
            if not ok:
                return
            result = await handle.send(Prune(agent_ids=listing.affected))
            self._say(result.message, error=not result.ok)
            await self._refresh()

        prompt = prune_prompt(listing.message, len(listing.affected))
        await self.app.push_screen(
            ConfirmScreen(prompt.on(self.host) if self.host else prompt), answered
        )

    def _say(self, message: str, *, error: bool = False) -> None:
        self.notify(message, severity="error" if error else "information", markup=False)
