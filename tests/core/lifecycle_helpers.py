"""Builders for lifecycle tables: engine states in one line, lanes from named presets.

Times are small numbers on a fake clock: containers started at 10, the pool
read at 20, the planner asked at `NOW` (30).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuci_tui.core.engine.lifecycle import (
    EngineState,
    Intent,
    Lane,
    LanePhase,
    SlotRecord,
    new_slot,
)
from gpuci_tui.core.engine.planning.planner import Plan, decide
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.steps import Action, Died, Observation, Started
from gpuci_tui.core.engine.transitions.apply import apply
from gpuci_tui.core.models import JobInfo

RULES = SupervisorConfig()
NOW = 30.0
READ = PoolView(pool_id=42, began_at=20.0)
JOB = JobInfo(request_id=7, pipeline="train", run="20261123.1")

# Lane presets: keyword arguments of `LaneRecord`.
ACTIVE: dict[str, Any] = {
    "phase": LanePhase.READY, "container_id": "ca", "started_at": 10.0, "agent_id": 1,
    "enabled": True, "status": "online", "online": True, "known_at": 20.0,
}  # fmt: skip
BUSY: dict[str, Any] = {**ACTIVE, "phase": LanePhase.BUSY, "job": JOB, "took_job": True}
BOOTING_NEW: dict[str, Any] = {
    "phase": LanePhase.BOOTING, "container_id": "ca", "started_at": 25.0,
}  # fmt: skip
STANDBY: dict[str, Any] = {
    "phase": LanePhase.READY, "container_id": "cb", "started_at": 10.0, "agent_id": 2,
    "enabled": False, "status": "online", "online": True, "idle_verified": True, "known_at": 20.0,
}  # fmt: skip
STANDBY_BOOTING: dict[str, Any] = {**STANDBY, "phase": LanePhase.BOOTING, "online": False,
                                   "status": "offline", "started_at": 25.0}  # fmt: skip
ABSENT: dict[str, Any] = {"known_at": 20.0}
"""Never registered: a read (at 20) found no agent of that name."""
UNKNOWN: dict[str, Any] = {}
"""Nothing known yet: no read since the lane's last container."""
PARKED_DISABLED: dict[str, Any] = {
    "agent_id": 2, "enabled": False, "idle_verified": True, "known_at": 20.0,
}  # fmt: skip
"""Registered, disabled, no container."""
OFF_ENABLED: dict[str, Any] = {
    "agent_id": 1, "enabled": True, "known_at": 20.0, "ended_at": 15.0,
}  # fmt: skip
"""Registered and enabled, no container (its last one exited)."""


def dying(container: str, **registration: Any) -> dict[str, Any]:
    """A lane whose container just died (its name is taken until ``destroy``)."""
    return {
        "phase": LanePhase.EXITED, "dying_id": container, "died_at": 29.0, "ended_at": 29.0,
        **registration,
    }  # fmt: skip


def engine(
    a: dict[str, Any] | None = None,
    b: dict[str, Any] | None = None,
    *,
    standby: bool = True,
    intent: Intent = Intent.RUN,
    read: PoolView | None = READ,
    **state: Any,
) -> EngineState:
    """One slot (number 0) with lanes built from presets."""
    slot = new_slot("h", 0, intent)
    slot = slot.with_lane(replace(slot.lane(Lane.A), **(a or {})))
    slot = slot.with_lane(replace(slot.lane(Lane.B), **(b or {})))
    return EngineState(prefix="h", desired=1, slots=(slot,), standby=standby, pool=read, **state)


def plan(state: EngineState, now: float = NOW) -> tuple[EngineState, Plan]:
    """The planner's answer."""
    return decide(state, now)


def actions(state: EngineState, now: float = NOW) -> list[Action]:
    """The planner's actions, FetchLogs left out."""
    return [a for a in decide(state, now)[1].actions if type(a).__name__ != "FetchLogs"]


def observe(state: EngineState, *observations: Observation) -> EngineState:
    """Fold observations in."""
    for obs in observations:
        state = apply(state, obs, RULES).state
    return state


def slot0(state: EngineState) -> SlotRecord:
    """Slot 0."""
    slot = state.slot(0)
    assert slot is not None
    return slot


def starts_per_minute_with(rules: SupervisorConfig, minute: float = 60.0) -> int:
    """Starts of a crash-looping slot in its first ``minute`` by the real transitions.

    Each container is taken to die 0.1 s after its start with exit code 1.
    """
    state = engine(UNKNOWN, UNKNOWN, standby=False)
    at, starts = 0.0, 0
    while at < minute and not slot0(state).parked:
        starts += 1
        state = apply(state, Started(0, Lane.A, f"c{starts}", at), rules).state
        state = apply(state, Died(0, Lane.A, f"c{starts}", 1, at + 0.1), rules).state
        slot = slot0(state)
        if slot.backoff_until is not None:
            at = slot.backoff_until
    return starts


def plan_safely(state: EngineState, now: float) -> tuple[EngineState, list[Action]]:
    """The planner's answer at ``now`` (log tails left out), with the safety rule checked:
    never two lanes of a slot that could take a job."""
    after, decided = decide(state, now)
    for slot in after.slots:
        capable = [lane.name for lane in slot.lanes if lane.capable]
        assert len(capable) <= 1, f"t={now}: two lanes could take a job: {capable}"
    return after, [a for a in decided.actions if type(a).__name__ != "FetchLogs"]
