"""Words for counts, one rule for the CLI and the console ("1 job", "2 jobs", why disabled)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuci_tui.core.models import DisabledAgents


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word`` agreeing: ``1 job``, ``0 jobs``, ``2 jobs`` (``many`` if irregular)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


#: `DisabledAgents` field → the words after its count ("4 standby") and what they mean.
DISABLED_WORDS = {
    "busy": (
        "busy",
        "ours, running a job: disabled so the next agent of its slot starts as a standby",
    ),
    "leaving": ("leaving", "ours, being drained, restarted or retired"),
    "held": ("held", "ours, held back from jobs by GPU admission or health"),
    "standby": ("standby", "ours, a hot standby: disabled on purpose until its slot needs it"),
    "idle": (
        "stopped",
        "ours, a registration whose container has stopped (its slot starts one when needed)",
    ),
    "others": ("not ours", "disabled by a person in Azure DevOps, or another host's agents"),
}


def disabled_reasons(why: DisabledAgents) -> list[str]:
    """The non-zero reasons of ``why``, in `DisabledAgents` order: ``["4 standby", "1 not ours"]``."""
    return [
        f"{count} {word}"
        for name, (word, _) in DISABLED_WORDS.items()
        if (count := getattr(why, name))
    ]
