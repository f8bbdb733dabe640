"""Words for counts, one rule for the CLI and the console ("1 job", "2 jobs", why disabled)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuci_tui.core.models import DisabledAgents, RolloutSnapshot


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word`` agreeing: ``1 job``, ``0 jobs``, ``2 jobs`` (``many`` if irregular)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


#: `DisabledAgents` field → the words after its count ("4 standby") and what they mean.
DISABLED_WORDS = {
    "busy": (
        "busy",
        "ours, running its last job here: its slot is drained, restarted, retired or held",
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


def rollout_words(rollout: RolloutSnapshot, *, short: bool = False) -> str:
    """A roll-out in one line, the same in ``status``, the console and the events.

    e.g. ``cuda12: image …:v2 on 3/8 slots, 1 busy on v1 (canary on slot 0: 2/3 jobs)``
    or ``image …:v2 rolled back to …:v1: canary slot 0 parked``. ``short`` (a narrow
    panel): images by their tag only (``…:v2``), without the word "image".
    """
    group = f"{rollout.group}: " if rollout.group else ""

    def shown(image: str) -> str:
        return f"…:{_tag(image)}" if short else image

    if rollout.image_to == rollout.image_from:
        change = "new spec" if short else "new agent spec"
    else:
        change = shown(rollout.image_to) if short else f"image {rollout.image_to}"
    if rollout.state == "rolled_back":
        why = f": {rollout.reason}" if rollout.reason else ""
        return f"{group}{change} rolled back to {shown(rollout.image_from)}{why}"
    text = f"{group}{change} on {rollout.slots_new}/{rollout.slots_total} slots"
    if rollout.busy_old:
        text += f", {rollout.busy_old} busy on {_tag(rollout.image_from)}"
    if rollout.state == "canary":
        slots = ",".join(str(n) for n in rollout.canary_slots)
        text += f" (canary on slot {slots}: {rollout.successes}/{rollout.needed} jobs)"
    elif rollout.state == "done":
        text += " (done)"
    return text


def _tag(image: str) -> str:
    """The part of an image reference that tells versions apart (``v1`` of ``repo/a:v1``)."""
    name = image.rsplit("/", 1)[-1]
    for mark in ("@", ":"):
        if mark in name:
            return name.split(mark, 1)[1][:19]
    return name
