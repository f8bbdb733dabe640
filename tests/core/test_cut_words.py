"""A fleet host's reason cut at every width, and a styled line cut with its styles (the rule's
table is in test_formatting.py)."""

from __future__ import annotations

import pytest
from rich.text import Text

from gpuci_tui.core.formatting import cut_words
from gpuci_tui.widgets.format import cut_text

REASON = "unreachable: ssh: connect to host gpu-node-c.example.com port 22: Connection refused"


@pytest.mark.parametrize("width", range(1, len(REASON) + 2))
def test_no_width_cuts_a_word_of_the_reason_in_two(width: int) -> None:
    shown = cut_words(REASON, width)
    assert len(shown) <= width
    if shown != REASON:
        assert shown.endswith("…")
        kept = shown[:-1]
        assert REASON.startswith(kept)
        # It ends where a word ends (a separator or a space follows), unless the words
        # would have filled less than half the room: then the long word is cut.
        assert not kept or REASON[len(kept)] in " :" or len(kept) * 2 >= width - 2, shown
        assert not kept.endswith((" ", ":")), shown


def test_a_styled_line_is_cut_at_a_word_and_keeps_its_styles() -> None:
    line = Text.assemble(("gpu3-2", "bold"), " ", ("parked after 3 failures", "red"))
    cut = cut_text(line, 20)
    assert cut.plain == "gpu3-2 parked after…"
    assert cut.cell_len <= 20
    assert any(span.style == "bold" for span in cut.spans)
    assert cut_text(line, 80) is line, "one that fits is left as it is"
    assert line.plain == "gpu3-2 parked after 3 failures", "the original is left alone"
