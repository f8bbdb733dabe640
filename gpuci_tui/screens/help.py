"""`?`: the keys as currently bound (keymap applied) and what each slot state means."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

from gpuci_tui.core.wording import DISABLED_WORDS
from gpuci_tui.widgets.format import (
    STANDBY_MEANINGS,
    STANDBY_STYLES,
    STATE_MEANINGS,
    STATE_STYLES,
)


@dataclass(frozen=True)
class KeyHelp:
    """One key line: the key as bound now, its description and tooltip."""

    key: str
    description: str
    tooltip: str


class HelpScreen(ModalScreen[None]):
    """Keys and the slot-state legend; Escape or ? closes it."""

    BINDINGS = [
        Binding("escape,question_mark,q", "close", "Close", id="help.close", tooltip="Close help"),
    ]

    def __init__(self, keys: Sequence[KeyHelp], *, readonly: bool) -> None:
        """Create the help for ``keys`` (resolved by the dashboard)."""
        super().__init__(classes="dialog-screen")
        self.keys = list(keys)
        self.readonly = readonly

    def compose(self) -> Iterable[Widget]:
        """Two tables in a scrollable dialog."""
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column(style="bold", no_wrap=True)
        keys.add_column()
        for item in self.keys:
            # Text, not markup: descriptions may quote config syntax such as [keys].
            keys.add_row(Text(item.key), Text(item.description), Text(item.tooltip or ""))
        states = Table.grid(padding=(0, 2))
        states.add_column(no_wrap=True)
        states.add_column()
        for state, meaning in STATE_MEANINGS.items():
            states.add_row(Text(str(state), style=STATE_STYLES[state]), Text(meaning))
        standby = Table.grid(padding=(0, 2))
        standby.add_column(no_wrap=True)
        standby.add_column()
        for label, meaning in STANDBY_MEANINGS.items():
            standby.add_row(Text(label, style=STANDBY_STYLES[label]), Text(meaning))
        disabled = Table.grid(padding=(0, 2))
        disabled.add_column(no_wrap=True)
        disabled.add_column()
        for word, meaning in DISABLED_WORDS.values():
            disabled.add_row(Text(word, style="bold"), Text(meaning))
        with VerticalScroll(classes="dialog", id="help-dialog"):
            yield Static("Keys", classes="dialog-title")
            if self.readonly:
                yield Static(
                    "READ-ONLY: actions that change agents are refused.",
                    classes="dialog-body muted",
                )
            yield Static(keys, classes="dialog-body")
            yield Static("Agent states", classes="dialog-title")
            yield Static(states, classes="dialog-body")
            yield Static("Standby", classes="dialog-title")
            yield Static(standby, classes="dialog-body")
            yield Static("Disabled agents (Pool panel, status)", classes="dialog-title")
            yield Static(disabled, classes="dialog-body")
            yield Static(
                "Drain, restart and scale-down never kill a running job: busy agents finish first. "
                "Keys can be changed in the [keys] table of the configuration file.",
                classes="dialog-body muted",
                markup=False,
            )

    def action_close(self) -> None:
        """Back to the dashboard."""
        self.dismiss(None)
