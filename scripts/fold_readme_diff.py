"""Fold a branch's README.md changes, made before the README was split into docs/, into docs/.

The split moved README sections into docs/*.md line for line (relative links rewritten), so
each hunk of ``git diff main...BRANCH -- README.md`` still finds its old lines in one file:
this replaces them there with the branch's lines. A hunk whose old lines are in no file (or
in several) is printed for a person to place.

Usage (in the docs worktree, or on main once docs is merged):
    git diff MERGE_BASE BRANCH -- README.md | python scripts/fold_readme_diff.py [--dry-run]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HUNK = re.compile(r"^@@ .* @@.*$", re.M)


def relink(text: str) -> str:
    """A README line as its docs/ copy writes it (links relative to docs/)."""
    text = text.replace("](docs/", "](")
    return re.sub(r"\]\((?!https?:|#|[a-z]+\.md)([^)]+)\)", r"](../\1)", text)


def hunks(diff: str) -> list[list[tuple[str, str]]]:
    """Each hunk's lines as (tag, text): ``" "`` context, ``-`` removed, ``+`` added."""
    out = []
    for body in HUNK.split(diff)[1:]:
        lines = body.splitlines()[1:]
        out.append([(line[:1], line[1:]) for line in lines if line[:1] in (" ", "-", "+")])
    return out


def sides(lines: list[tuple[str, str]]) -> tuple[str, str]:
    """The old and the new text of some hunk lines."""
    old = [text for tag, text in lines if tag in (" ", "-")]
    new = [text for tag, text in lines if tag in (" ", "+")]
    return "\n".join(old) + "\n", "\n".join(new) + "\n"


def trimmed(lines: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The hunk, then with fewer context lines at its ends (a section boundary may cut it).

    Trailing context goes first: lines added at a section's end belong to that section,
    not before the next one's heading (which the split may have put in another file).
    """
    first = next((i for i, (tag, _) in enumerate(lines) if tag != " "), 0)
    last = max((i for i, (tag, _) in enumerate(lines) if tag != " "), default=len(lines) - 1)
    tries = []
    for head in range(first + 1):
        for tail in range(len(lines), last, -1):
            tries.append(lines[head:tail])
    return tries


def place(lines: list[tuple[str, str]], texts: dict[Path, str]) -> list[tuple[Path, str, str]]:
    """Where the hunk's old lines are: each place of the longest form of it found."""
    for form in trimmed(lines):
        old, new = sides(form)
        if not old.strip():
            continue
        found = []
        for page, text in texts.items():
            for before, after in ((old, new), (relink(old), relink(new))):
                found += [(page, before, after)] * text.count(before)
                if before in text:
                    break
        if found:  # one place only: a short context line may be in several
            return found
    return []


def main() -> int:
    dry = "--dry-run" in sys.argv
    pages = [Path("README.md"), *sorted(Path("docs").glob("*.md"))]
    # A blank line after each file's end: a hunk at the end of a moved section has the blank
    # line that came before the next section as context.
    texts = {page: page.read_text(encoding="utf-8") + "\n" for page in pages}
    left = 0
    for lines in hunks(sys.stdin.read()):
        found = place(lines, texts)
        if len(found) != 1:
            old, new = sides(lines)
            left += 1
            where = ", ".join(str(f[0]) for f in found) or "no file"
            print(f"--- not folded (old lines in {where}):\n{old}+++ new:\n{new}")
            continue
        page, before, after = found[0]
        texts[page] = texts[page].replace(before, after, 1)
        print(f"folded into {page}")
    if not dry:
        for page, text in texts.items():
            page.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    return 1 if left else 0


if __name__ == "__main__":
    raise SystemExit(main())
