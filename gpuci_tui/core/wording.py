"""Words for counts, one rule for the CLI and the console ("1 job", "2 jobs")."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word`` agreeing: ``1 job``, ``0 jobs``, ``2 jobs`` (``many`` if irregular)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"
