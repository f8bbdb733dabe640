"""A compact footer that hides its least important keys rather than cut the last one off.

Textual's footer scrolls sideways when the keys do not fit, so at 80 columns
the last key read ``q Flee``. This one hides keys in the screen's
``drop_order`` until the rest fit; the help screen (``?``) still lists them
all, and the keys themselves keep working.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual import events
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


def key_width(key_display: str, description: str) -> int:
    """Cells one compact footer key takes: ``q Quit`` and the gap after it."""
    return len(key_display) + (1 + len(description) if description else 0) + 1


class FitFooter(Footer):
    """A compact footer without the palette hint that drops keys to fit the width."""

    def __init__(self, *, drop_order: Sequence[str] = ()) -> None:
        """``drop_order``: binding actions to hide first, in order, when the keys do not fit."""
        super().__init__(compact=True, show_command_palette=False)
        self.drop_order = tuple(drop_order)
        self.dropped: list[str] = []

    async def recompose(self) -> None:
        """Build the keys, then fit them."""
        await super().recompose()
        self.fit()

    def on_resize(self, event: events.Resize) -> None:
        """A new width: show what fits."""
        self.fit()

    def fit(self) -> None:
        """Show every key, then hide keys by ``drop_order`` until the rest fit."""
        keys = list(self.query(FooterKey))
        for key in keys:
            key.display = True
        self.dropped = []
        width = self.size.width
        if width <= 0:
            return

        def needed() -> int:
            return sum(key_width(k.key_display, k.description) for k in keys if k.display) - 1

        for action in self.drop_order:
            if needed() <= width:
                break
            for key in keys:
                if key.action == action and key.display:
                    key.display = False
                    self.dropped.append(action)
