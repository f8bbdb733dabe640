"""Runtime overrides: the operator's commands that outlast the file (a scale, a pause, drains).

A ``scale`` wins over the file's ``count`` until a reload changes that count (or
the overrides are reset); a ``pause`` and a drained slot hold until undone. So
that nothing wins silently, each is recorded with when it was made (`Overrides`,
kept with the group's intent across restarts) and shown beside the file's value
(`RuntimeOverride`: "count 1, scaled at 10:02; the file says 3") in ``status``,
the console and ``reload --dry-run``; ``reload --reset-overrides`` drops them
(`commands.reset_overrides`). Pure data and pure functions: the time of a command
comes with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuci_tui.core.command_types import Command, Drain, Pause, Resume, Scale, Stop, Unpause
from gpuci_tui.core.models import RuntimeOverride

__all__ = ["Overrides", "override_data", "restored_overrides", "runtime_overrides", "stamped"]


@dataclass(frozen=True)
class Overrides:
    """When the operator's overrides in force were made (None / absent: none)."""

    scaled_at: float | None = None
    """When a ``scale`` set the count the group runs (None: it runs the file's count)."""
    paused_at: float | None = None
    """When replenishing was paused (None: not paused, or not known)."""
    drained_at: tuple[tuple[int, float], ...] = ()
    """Slot number and when it was drained, for the slots drained by a ``drain``."""

    def drained(self, number: int) -> float | None:
        """When slot ``number`` was drained (None: not known)."""
        return next((at for slot, at in self.drained_at if slot == number), None)


def stamped(overrides: Overrides, command: Command, at: float, targets: Iterable[int]) -> Overrides:
    """``overrides`` after ``command`` was carried out at ``at`` on the slots ``targets``."""
    if isinstance(command, Scale):
        return replace(overrides, scaled_at=at)
    if isinstance(command, Pause):
        return replace(overrides, paused_at=at)
    if isinstance(command, Unpause):
        return replace(overrides, paused_at=None)
    touched = set(targets)
    kept = tuple((n, t) for n, t in overrides.drained_at if n not in touched)
    if isinstance(command, Drain) or (isinstance(command, Stop) and command.drain):
        return replace(overrides, drained_at=tuple(sorted([*kept, *((n, at) for n in touched)])))
    if isinstance(command, Resume):
        return replace(overrides, drained_at=kept)
    return overrides


def runtime_overrides(
    overrides: Overrides,
    *,
    desired: int,
    paused: bool,
    drained: Sequence[int],
    file_count: int,
    group: str = "",
) -> tuple[RuntimeOverride, ...]:
    """The overrides in force, each beside the file's value (for the snapshot).

    Args:
        overrides: When they were made.
        desired: The count the group runs now.
        paused: Whether replenishing is paused.
        drained: The slots drained by the operator (not those a scale-down retires).
        file_count: The count of the configuration the daemon runs on.
        group: The agent group ("" for the only one).
    """
    found = []
    if overrides.scaled_at is not None:
        found.append(
            RuntimeOverride("scale", group, overrides.scaled_at, str(desired), str(file_count))
        )
    if paused:
        found.append(RuntimeOverride("pause", group, overrides.paused_at))
    for number in drained:
        key = f"{group}/{number}" if group else str(number)
        found.append(RuntimeOverride("drain", group, overrides.drained(number), key))
    return tuple(found)


def override_data(overrides: Overrides) -> dict[str, Any]:
    """``overrides`` as the intent file keeps them."""
    return {
        "scaled_at": overrides.scaled_at,
        "paused_at": overrides.paused_at,
        "drained_at": {str(n): at for n, at in overrides.drained_at},
    }


def restored_overrides(data: Mapping[str, Any], *, drained: Sequence[int]) -> Overrides:
    """What `override_data` saved; an older file's overrides date from when it was saved.

    ``drained``: the slots restored as drained (an entry for another slot is dropped).
    """
    saved_at = _time(data.get("saved_at"))
    raw = data.get("drained_at")
    times = raw if isinstance(raw, Mapping) else {}
    return Overrides(
        scaled_at=_time(data.get("scaled_at")) if "scaled_at" in data else saved_at,
        paused_at=(_time(data.get("paused_at")) if "paused_at" in data else saved_at)
        if data.get("paused")
        else None,
        drained_at=tuple((n, _time(times.get(str(n))) or saved_at or 0.0) for n in drained),
    )


def _time(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
