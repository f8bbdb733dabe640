"""Every place the code sends a reader to the docs names a file and a heading that exist.

The README was split into docs/ guides; a message that still said `see README, "Keyring"` sent a
newcomer to a section that had moved. A reference is `docs/NAME.md`, optionally followed by
`, "Heading"` (a heading of that file, at any level, or its part before a colon). README section references are refused
unless the README still has that heading.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "gpuci_tui").rglob("*.py"))

#: ``docs/identity.md, "Keyring"`` or ``README, "GPU capabilities"`` (the heading may wrap).
REFERENCE = re.compile(
    r'(?P<file>docs/[\w-]+\.md|README(?:\.md)?)(?:(?:,|\'s)?\s+"(?P<heading>[^"]+)")?'
)


def headings(path: Path) -> set[str]:
    """The file's headings, without their #s."""
    return {
        line.lstrip("#").strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }


def problems(text: str, where: str) -> list[str]:
    """What in ``text`` points at a docs file or heading that does not exist."""
    found = []
    for match in REFERENCE.finditer(text):
        name = match["file"]
        target = ROOT / ("README.md" if name.startswith("README") else name)
        if not target.is_file():
            found.append(f"{where}: {name} does not exist")
            continue
        heading = match["heading"]
        if heading is not None:
            heading = " ".join(heading.split())
            # A heading may be named by its part before a colon ("GPU capabilities").
            if not any(h == heading or h.startswith(heading + ":") for h in headings(target)):
                found.append(f'{where}: {name} has no heading "{heading}"')
    return found


def test_every_docs_reference_in_the_code_resolves() -> None:
    found = [
        problem
        for source in SOURCES
        for problem in problems(source.read_text(encoding="utf-8"), str(source.relative_to(ROOT)))
    ]
    assert found == []


def test_the_check_refuses_a_moved_section_and_a_missing_file() -> None:
    assert problems('see README, "Keyring"', "x") == ['x: README has no heading "Keyring"']
    assert problems("see docs/nowhere.md", "x") == ["x: docs/nowhere.md does not exist"]
    assert problems('see docs/identity.md, "No such"', "x") == [
        'x: docs/identity.md has no heading "No such"'
    ]
    assert problems('see docs/gpus.md,\n"Shared and failing GPUs"', "x") == []
