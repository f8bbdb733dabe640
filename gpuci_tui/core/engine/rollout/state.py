"""A roll-out's state: which spec goes where, and how far it got (pure data).

The rules that start one, move it on and roll it back are in `engine.rollout`;
this module holds only the record, so `lifecycle.EngineState` can keep one
without importing the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Phase(StrEnum):
    """Where a roll-out is."""

    CANARY = "canary"
    """Only the canary slots take the new spec."""
    ROLLING = "rolling"
    """Every slot takes it."""
    DONE = "done"
    """Every slot runs it."""
    ROLLED_BACK = "rolled_back"
    """Every slot goes back to the old spec (see `Rollout.reason`)."""


@dataclass(frozen=True)
class Rollout:
    """One change of agent spec through a group's slots (pure data; the rules: `engine.rollout`)."""

    from_spec: str
    """The spec the slots ran before (the rollback target)."""
    to_spec: str
    image_from: str
    """The configured image of ``from_spec`` (for the operator's words only)."""
    image_to: str
    phase: Phase
    canary: frozenset[int] = frozenset()
    """The canary slots (empty: none, every slot changes at once)."""
    needed: int = 0
    """Successful jobs on the canary slots before the rest follow (0: no canary)."""
    successes: int = 0
    """Successful jobs on the new spec so far."""
    failures: tuple[tuple[int, int], ...] = ()
    """(slot, early failures on the new spec) for each trial slot that failed on it."""
    reason: str | None = None
    """Why it was rolled back."""
    started_at: float | None = None

    def target(self, number: int) -> str:
        """The spec slot ``number`` should run now."""
        if self.phase is Phase.ROLLED_BACK:
            return self.from_spec
        if self.phase is Phase.CANARY and number not in self.canary:
            return self.from_spec
        return self.to_spec

    @property
    def active(self) -> bool:
        """Still changing slots (canary or rolling)."""
        return self.phase in (Phase.CANARY, Phase.ROLLING)

    @property
    def base(self) -> str:
        """The spec known to work: what a further change rolls back to.

        The new spec once a job succeeded on it (or every slot runs it); until then the
        old one, so a change made over an unproven one still rolls back to a good spec.
        """
        if self.phase is Phase.DONE or (self.phase is Phase.ROLLING and self.successes):
            return self.to_spec
        return self.from_spec

    def failures_of(self, number: int) -> int:
        """Early failures of slot ``number`` on the new spec."""
        return dict(self.failures).get(number, 0)

    def trial(self, number: int) -> bool:
        """Slot ``number``'s failures on the new spec may roll the change back.

        A canary always; in a roll-out without canaries, any slot until a job has
        succeeded on the new spec (after that a failure is the slot's, not the spec's).
        """
        if self.phase is Phase.CANARY:
            return number in self.canary
        return self.phase is Phase.ROLLING and self.needed == 0 and self.successes == 0


def rollout_data(rollout: Rollout) -> dict[str, Any]:
    """The roll-out as JSON data, kept with the group's intent across a daemon restart."""
    return {
        "from_spec": rollout.from_spec,
        "to_spec": rollout.to_spec,
        "image_from": rollout.image_from,
        "image_to": rollout.image_to,
        "phase": rollout.phase.value,
        "canary": sorted(rollout.canary),
        "needed": rollout.needed,
        "successes": rollout.successes,
        "failures": [list(pair) for pair in rollout.failures],
        "reason": rollout.reason,
        "started_at": rollout.started_at,
    }


def rollout_from(data: object) -> Rollout | None:
    """What `rollout_data` saved; None when it is absent or malformed (never fatal)."""
    if not isinstance(data, dict):
        return None
    try:
        texts = [data[k] for k in ("from_spec", "to_spec", "image_from", "image_to")]
        canary, failures = data.get("canary", []), data.get("failures", [])
        counts = [data.get("needed", 0), data.get("successes", 0)]
        if not all(isinstance(t, str) and t for t in texts[:2]) or not all(
            isinstance(t, str) for t in texts
        ):
            return None
        if not all(_count(n) for n in [*counts, *canary, *(n for pair in failures for n in pair)]):
            return None
        reason, started = data.get("reason"), data.get("started_at")
        return Rollout(
            from_spec=texts[0],
            to_spec=texts[1],
            image_from=texts[2],
            image_to=texts[3],
            phase=Phase(data["phase"]),
            canary=frozenset(canary),
            needed=counts[0],
            successes=counts[1],
            failures=tuple((int(a), int(b)) for a, b in failures),
            reason=reason if isinstance(reason, str) else None,
            started_at=float(started) if isinstance(started, int | float) else None,
        )
    except (KeyError, TypeError, ValueError):
        return None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
