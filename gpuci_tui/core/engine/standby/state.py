"""What ``standby = "auto"`` keeps between two plans: its bounds and what it learnt.

Its own module so that `lifecycle.EngineState` can hold it without importing
the rules (`standby_auto`), which are built on `lifecycle`. `AutoSeed` is what a
restarted daemon tells it from the local job history (`standby_auto.seeded`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Seconds without demand before "auto" retires its extra lanes (the default).
HOLD_DOWN = 120.0


@dataclass(frozen=True)
class AutoStandby:
    """``standby = "auto"``: its bounds and what it has learnt so far."""

    least: int = 1
    """Standby lanes per slot kept even when idle (``standby_min``)."""
    most: int = 3
    """Standby lanes per slot at the most (``standby_max``)."""
    cap: int | None = None
    """Registered agents of the group at the most (``max_agents``; None: no cap)."""
    hold_down: float = HOLD_DOWN
    """Seconds without demand before the extra lanes are retired."""
    demand_at: float | None = None
    """The last time the queue asked for the current depth (the hold-down starts there)."""
    startup_s: float = 0.0
    """The latest measured agent start-up: container start to online (0: none yet)."""
    job_s: float = 0.0
    """The latest measured job length, as the engine saw it (0: none yet)."""
    booting: frozenset[tuple[str, float]] = frozenset()
    """(lane name, container start) of agents not seen online yet."""
    running: frozenset[tuple[str, str, float]] = frozenset()
    """(lane name, container id, first seen) of jobs not seen ended yet."""


@dataclass(frozen=True)
class AutoSeed:
    """The recent job lengths and agent start-ups of the local job history, in seconds.

    Read by the host once at start, so that "auto" starts from what this host's
    jobs and agents are like instead of from nothing (`standby_auto.seeded`).
    """

    jobs: tuple[float, ...] = ()
    startups: tuple[float, ...] = ()
