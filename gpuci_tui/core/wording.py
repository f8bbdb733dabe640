"""Words for counts, one rule for the CLI and the console ("1 job", "2 jobs", why disabled,
an override beside the file's value; what the daemon's calls cost the organisation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuci_tui.core.formatting import byte_size, clock_time, until

if TYPE_CHECKING:
    from gpuci_tui.core.models import AzureUsage, DisabledAgents, RolloutSnapshot, RuntimeOverride


NOT_READ_YET = "not read yet"
"""What a figure that has not been read yet shows (never a zero that looks like a fact)."""


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word`` agreeing: ``1 job``, ``0 jobs``, ``2 jobs`` (``many`` if irregular)."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def indefinite(word: str) -> str:
    """``word`` after its article: ``a [docker] section`` but ``an [azure] section``.

    By the first letter (brackets aside), which is right for the words this tool
    names: section and key names, states, image tags.
    """
    first = word.lstrip("[`'\"")[:1].lower()
    return f"{'an' if first and first in 'aeiou' else 'a'} {word}"


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


#: How an override is undone by hand (the reset drops them all: ``reload --reset-overrides``).
UNDO = {"scale": "scale", "pause": "unpause", "drain": "resume"}


def override_words(override: RuntimeOverride, now: float) -> str:
    """An override beside the file's value: ``count 1, scaled at 10:02; the file says 3``.

    ``group a: count 1, …`` with groups; ``slot 2 drained at 10:07; the file runs it``;
    ``replenishing paused at 10:05; the file keeps every slot filled``.
    """
    group = f"group {override.group}: " if override.group else ""
    at = f" at {clock_time(override.at, now)}" if override.at else ""
    if override.kind == "scale":
        return f"{group}count {override.value}, scaled{at}; the file says {override.file_value}"
    if override.kind == "pause":
        return f"{group}replenishing paused{at}; the file keeps every slot filled"
    return f"slot {override.value} drained{at}; the file runs it"


def usage_words(usage: AzureUsage, now: float) -> str:
    """What the daemon's calls cost, for ``status`` and the console's pool panel.

    ``12 requests/min, 38 KiB/min received; identity's budget 184/200 left (resets in
    3 min); cap 60/min, 2 held back in the last minute``: the service's figures only when
    it sent them, the cap only when one is set.
    """
    parts = [
        f"{usage.requests_last_minute} requests/min, "
        f"{byte_size(usage.bytes_last_minute)}/min received"
    ]
    if usage.rate_limit_remaining is not None:
        of = f"/{usage.rate_limit_limit:g}" if usage.rate_limit_limit is not None else ""
        reset = until(usage.rate_limit_reset_at, now)
        when = f" (resets {reset})" if reset and reset != "now" else ""
        parts.append(f"identity's budget {usage.rate_limit_remaining:g}{of} left{when}")
    if usage.retry_after_until is not None and usage.retry_after_until > now:
        parts.append(f"the service asks to wait, {until(usage.retry_after_until, now)}")
    if usage.cap_per_minute is not None:
        held = usage.held_last_minute
        parts.append(
            f"cap {usage.cap_per_minute}/min"
            + (f", {held} held back in the last minute" if held else "")
        )
    return "; ".join(parts)
