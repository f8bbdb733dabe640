"""`?`: the keys of the screen it was opened on, as bound now, and what the states mean.

The key lines are made from the bindings themselves (`keys_as_bound`: the
screen's, its focused widget's and the App's, the keymap applied), never from a
hand-written list, so a rebound or new key shows here as it works. Each screen
adds only the keys of its widgets it wants told (`Navigation`), and those name
the real keys, so a test can hold every line to a binding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import App
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Footer, Static

from gpuci_tui.core.wording import DISABLED_WORDS
from gpuci_tui.widgets.format import (
    STANDBY_MEANINGS,
    STANDBY_STYLES,
    STATE_MEANINGS,
    STATE_STYLES,
)


@dataclass(frozen=True)
class KeyHelp:
    """One key line: the keys as shown, the description and tooltip of what they do.

    ``keys``: the key names it tells of (``question_mark``, ``ctrl+p``), for the test that
    holds each line to a binding; empty for a line that tells no key (a column's meaning).
    ``action``: the binding's id, so the legends can name the key that does something.
    """

    key: str
    description: str
    tooltip: str
    keys: tuple[str, ...] = ()
    action: str = ""


def navigation(shown: str, description: str, tooltip: str, *keys: str) -> KeyHelp:
    """A key line for keys of a widget or of Textual (the cursor, tab, the palette)."""
    return KeyHelp(shown, description, tooltip, keys)


#: Keys every screen has: Textual's focus cycling, the command palette, the way out.
EVERYWHERE = (
    navigation("tab", "Next panel", "Move the focus to the next panel", "tab"),
    navigation("^p", "Palette", "Search every action by name (command palette)", "ctrl+p"),
    navigation("^q", "Quit anywhere", "Quit the console from any screen (asks first)", "ctrl+q"),
)


def keys_as_bound(app: App[Any], extra: Sequence[KeyHelp] = ()) -> list[KeyHelp]:
    """The keys of the screen on top, as bound now (keymap applied), one line per action.

    gpuci-tui's own bindings (they have an id) come first, in the order the screen
    declares them; a binding the footer shows gives the line its first key. ``extra``
    (the screen's `navigation` lines) and `EVERYWHERE` follow.
    """
    by_action: dict[str, list[tuple[bool, str, str, Binding]]] = {}
    for key, active in app.active_bindings.items():
        binding = active.binding
        if binding.id and binding.description:
            shown = app.get_key_display(binding) or key
            by_action.setdefault(binding.action, []).append((not binding.show, shown, key, binding))
    lines = []
    for entries in by_action.values():
        entries.sort(key=lambda entry: entry[0])  # the key the footer shows comes first
        binding = entries[0][3]
        shown = ", ".join(dict.fromkeys(entry[1] for entry in entries))
        keys = tuple(entry[2] for entry in entries)
        lines.append(KeyHelp(shown, binding.description, binding.tooltip, keys, binding.id or ""))
    return [*lines, *extra, *EVERYWHERE]


#: What a legend says when the key that does it is not bound on the screen.
_UNBOUND = {"resume": "gpuci-tui resume", "gpu_clear": "gpuci-tui gpu clear"}


def legend_keys(keys: Sequence[KeyHelp]) -> dict[str, str]:
    """``{binding id: key as shown}`` for the legends (`STATE_MEANINGS` say ``{resume}``)."""
    named = {item.action: item.key.split(", ")[0] for item in keys if item.action}
    return {action: named.get(action, fallback) for action, fallback in _UNBOUND.items()}


def agent_legends(keys: Sequence[KeyHelp]) -> list[tuple[str, list[tuple[Text, Text]]]]:
    """The dashboard's legends: agent states, standby, why agents are disabled."""
    with_keys = legend_keys(keys)
    states = [
        (Text(str(state), style=STATE_STYLES[state]), Text(meaning.format_map(with_keys)))
        for state, meaning in STATE_MEANINGS.items()
    ]
    standby = [
        (Text(label, style=STANDBY_STYLES[label]), Text(meaning))
        for label, meaning in STANDBY_MEANINGS.items()
    ]
    disabled = [
        (Text(word, style="bold"), Text(meaning)) for word, meaning in DISABLED_WORDS.values()
    ]
    return [
        ("Agent states", states),
        ("Standby", standby),
        ("Disabled agents (Pool panel, status)", disabled),
    ]


class HelpScreen(ModalScreen[None]):
    """The keys of one screen and its legends; Escape (or ``?``, ``q``) closes it."""

    BINDINGS = [
        Binding("escape,question_mark,q", "close", "Close help", id="help.close",
                tooltip="Back to the screen this help was opened on"),
    ]  # fmt: skip

    def __init__(
        self,
        keys: Sequence[KeyHelp],
        *,
        readonly: bool,
        title: str = "Keys",
        legends: Sequence[tuple[str, Sequence[tuple[Text, Text]]]] | None = None,
        note: str = "",
    ) -> None:
        """Create the help for ``keys`` (`keys_as_bound` of the screen below).

        ``legends``: ``(title, rows)`` sections after the keys; None: the agents'
        (`agent_legends`). ``note``: a closing line.
        """
        super().__init__(classes="dialog-screen")
        self.keys = list(keys)
        self.readonly = readonly
        self.title_text = title
        self.legends = agent_legends(self.keys) if legends is None else list(legends)
        self.note = note

    def compose(self) -> Iterable[Widget]:
        """The keys, the legends, and a footer that says how to close."""
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column(style="bold", no_wrap=True)
        keys.add_column()
        for item in self.keys:
            # Text, not markup: descriptions may quote config syntax such as [keys].
            keys.add_row(Text(item.key), Text(item.description), Text(item.tooltip or ""))
        with VerticalScroll(classes="dialog", id="help-dialog"):
            yield Static(self.title_text, classes="dialog-title", markup=False)
            if self.readonly:
                yield Static(
                    "READ-ONLY: actions that change agents are refused.",
                    classes="dialog-body muted",
                )
            yield Static(keys, classes="dialog-body")
            for title, rows in self.legends:
                legend = Table.grid(padding=(0, 2))
                legend.add_column(no_wrap=True)
                legend.add_column()
                for label, meaning in rows:
                    legend.add_row(label, meaning)
                yield Static(title, classes="dialog-title", markup=False)
                yield Static(legend, classes="dialog-body")
            if self.note:
                yield Static(self.note, classes="dialog-body muted", markup=False)
        # This help's own keys, not those of the screen below: Escape closes it.
        yield Footer(compact=True, show_command_palette=False)

    def action_close(self) -> None:
        """Back to the screen the help was opened on."""
        self.dismiss(None)


def show_help(
    screen: Any,
    title: str,
    *,
    extra: Sequence[KeyHelp] = (),
    legends: Sequence[tuple[str, Sequence[tuple[Text, Text]]]] = (),
    note: str = "",
    readonly: bool = False,
) -> HelpScreen:
    """Open the help of ``screen`` (the one on top): its keys as bound, then ``legends``."""
    help_screen = HelpScreen(
        keys_as_bound(screen.app, extra), readonly=readonly, title=title, legends=legends, note=note
    )
    screen.app.push_screen(help_screen)
    return help_screen
