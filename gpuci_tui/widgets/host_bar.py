"""The line on top of a fleet host's dashboard: which host, how it is reached, the way back.

The host is named once (``ci@gpu3:2222`` with ``gpu3`` in bold), then "over ssh", its
place in the overview as sorted there ("host 2 of 3") and the key back. On a
narrow screen whole parts go from the end (the key back is in the footer
too); a name that still does not fit is cut after a whole word, with "…".
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from gpuci_tui.widgets.fleet_table import host_name
from gpuci_tui.widgets.format import cut_text


def host_bar(label: str, target: str, number: int, total: int, width: int) -> Text:
    """The bar's line in at most ``width`` cells (pure; used by the widget and the tests)."""
    parts = [
        Text.assemble(("⇄ ", "cyan"), host_name(label, target)),
        Text(" over ssh", style="bright_black"),
        Text(f" · host {number} of {total}", style="bright_black"),
        Text("  q/Esc: back to the fleet", style="cyan"),
    ]
    while len(parts) > 1 and sum(part.cell_len for part in parts) > width:
        parts.pop()
    return cut_text(Text.assemble(*parts, no_wrap=True), width)


class HostBar(Widget):
    """One line naming the fleet host whose dashboard this is."""

    def __init__(
        self, label: str, target: str, number: int, total: int, *, id: str | None = None
    ) -> None:
        """Name host ``label`` (reached as ``target``), ``number`` of ``total`` in the overview."""
        super().__init__(id=id)
        self.label = label
        self.target = target
        self.number = number
        self.total = total

    def render(self) -> Text:
        """The line, fitted to the width."""
        return host_bar(self.label, self.target, self.number, self.total, self.size.width)
