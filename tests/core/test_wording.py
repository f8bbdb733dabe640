"""One rule for counts in words ("1 jobs done" was on screen)."""

from __future__ import annotations

import pytest

from gpuci_tui.core.wording import plural


@pytest.mark.parametrize(
    ("count", "word", "many", "said"),
    [(0, "job", None, "0 jobs"), (1, "job", None, "1 job"), (2, "job", None, "2 jobs"),
     (1, "GPU", None, "1 GPU"), (3, "process", "processes", "3 processes")],
)  # fmt: skip
def test_plural(count: int, word: str, many: str | None, said: str) -> None:
    assert plural(count, word, many) == said


def test_scaling_to_one_slot_says_one_slot() -> None:
    from gpuci_tui.core.command_types import Scale
    from gpuci_tui.core.engine.commands import apply_command, restore_intent
    from gpuci_tui.core.engine.lifecycle import EngineState

    state = restore_intent(EngineState(prefix="gpu", desired=2), {"count": 2})
    _, result = apply_command(state, Scale(1))
    assert result.message.endswith("to 1 slot")
