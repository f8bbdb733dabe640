"""One rule for counts in words ("1 jobs done" was on screen)."""

from __future__ import annotations

import pytest

from gpuci_tui.core.wording import indefinite, plural


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


@pytest.mark.parametrize(
    ("word", "said"),
    [("[azure]", "an [azure]"), ("[agents]", "an [agents]"), ("[docker]", "a [docker]"),
     ("image", "an image"), ("slot", "a slot"), ("`idle`", "an `idle`")],
)  # fmt: skip
def test_indefinite_article(word: str, said: str) -> None:
    assert indefinite(word) == said


def test_no_user_facing_string_counts_with_a_bracketed_plural() -> None:
    """'2 slot(s)', '1 busy agent(s) are replaced': counts go through `plural`, and no
    table is 'a [azure]'.

    Every string in the package's code is read with `ast`; strings that stand as
    statements (docstrings, attribute docstrings) are not shown to anyone.
    """
    import ast
    import re
    from pathlib import Path

    import gpuci_tui

    root = Path(gpuci_tui.__file__).parent
    # "2 slot(s)"; "add a [azure] section" (an f-string's pieces are read one by one).
    bracketed = re.compile(r"[a-z]\(s\)|\ba \[[aeiou]")
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        found += [
            f"{path.relative_to(root)}:{node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and bracketed.search(node.value.replace("http(s)", ""))
        ]
    assert found == []
