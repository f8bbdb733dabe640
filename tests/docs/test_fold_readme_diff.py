"""scripts/fold_readme_diff.py puts a branch's README hunk where the split moved its lines."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.scripts_loader import load_script


def fold() -> ModuleType:
    return load_script("fold_readme_diff")


#: A branch's README diff, made before the split: a line added in Daemon, one at the end of Why.
DIFF = "\n".join(
    [
        "@@ -7,6 +7,7 @@ Why text.",
        " ## Daemon",
        " ",
        " Line one.",
        "+Line added.",
        " See [x](docs/x.md).",
        "@@ -4,5 +4,6 @@",
        " Why text.",
        "+More why.",
        " ",
        " ## Daemon",
    ]
)


def test_each_hunk_lands_where_its_lines_moved() -> None:
    module = fold()
    texts = {
        Path("README.md"): "# t\n\n## Why\n\nWhy text.\n\n",
        Path("docs/daemon.md"): "# D\n\n## Daemon\n\nLine one.\nSee [x](x.md).\n\n",
    }
    placed = [module.place(lines, texts) for lines in module.hunks(DIFF)]
    assert [[str(page) for page, _, _ in found] for found in placed] == [
        ["docs/daemon.md"],
        ["README.md"],  # added at the end of Why: stays there, not before Daemon's heading
    ]
    (_, before, after) = placed[0][0]
    assert before == "## Daemon\n\nLine one.\nSee [x](x.md).\n"  # links as docs/ writes them
    assert after == "## Daemon\n\nLine one.\nLine added.\nSee [x](x.md).\n"


def test_a_hunk_whose_lines_are_nowhere_is_not_folded() -> None:
    module = fold()
    lines = module.hunks("@@ -1,2 +1,2 @@\n-gone line\n+new line\n context nowhere\n")[0]
    assert module.place(lines, {Path("README.md"): "other text\n"}) == []
