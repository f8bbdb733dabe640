"""The decisions of one planning round for one slot (`Draft`), shared by the planning rules.

`planner.decide` makes one per slot; the rules (`planning.run`, `planning.hold`,
`planning.gate`) plan actions through it, which keeps one operation per lane in
flight and every write behind the organisation's backoff.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuci_tui.core.engine.lifecycle import EngineState, Intent, Lane, LaneRecord, SlotRecord
from gpuci_tui.core.engine.server_steps import CheckAgent, SetEnabled
from gpuci_tui.core.engine.steps import Action, FetchLogs, RemoveContainer, StartAgent


@dataclass
class Draft:
    """The decisions being made for one slot in one planning round."""

    state: EngineState
    slot: SlotRecord
    now: float
    actions: list[Action] = field(default_factory=list)
    by_lane: list[tuple[Lane, Action]] = field(default_factory=list)
    wakes: list[float] = field(default_factory=list)
    message: str | None = None

    def claimed(self, lane: LaneRecord) -> bool:
        """The lane has an operation in flight or one planned this round.

        Removing a dead container is not one: it concerns no live container and
        not the registration (see `LaneRecord.removing`).
        """
        return lane.op is not None or any(
            lane_id is lane.lane and not isinstance(action, RemoveContainer)
            for lane_id, action in self.by_lane
        )

    def act(self, lane: LaneRecord, action: Action) -> bool:
        """Plan ``action`` unless the lane is already busy with another operation."""
        if isinstance(action, FetchLogs | RemoveContainer):
            self.actions.append(action)
            self.by_lane.append((lane.lane, action))
            return True
        if self.claimed(lane):
            return False
        self.actions.append(action)
        self.by_lane.append((lane.lane, action))
        return True

    def say(self, message: str) -> None:
        """Set the slot's message (the first one said in a round wins)."""
        if self.message is None:
            self.message = message

    @property
    def can_write(self) -> bool:
        """Server writes may go ahead (the pool is known and not backing off)."""
        return self.state.pool is not None and self.state.server_retry_at <= self.now

    def can_start(self, lane: LaneRecord) -> bool:
        """A container may be started in ``lane`` now."""
        state, slot, now = self.state, self.slot, self.now
        return (
            not state.paused
            and not state.stopping
            and slot.intent in (Intent.RUN, Intent.RESTART)
            and not slot.parked
            and (slot.backoff_until is None or slot.backoff_until <= now)
            and state.start_retry_at <= now
            and not state.org_refused
            and lane.name_free
            and not self.claimed(lane)
            and (lane.retry_at is None or lane.retry_at <= now)
        )

    def set_enabled(self, lane: LaneRecord, enabled: bool) -> bool:
        """Plan a PATCH of the lane's flag when the server can be written to."""
        if lane.agent_id is None or not self.can_write:
            return False
        return self.act(lane, SetEnabled(self.slot.number, lane.lane, lane.agent_id, enabled))

    def check(self, lane: LaneRecord) -> bool:
        """Plan a re-read of the lane's agent."""
        if lane.agent_id is None or not self.can_write:
            return False
        return self.act(lane, CheckAgent(self.slot.number, lane.lane, lane.agent_id))

    @property
    def gated(self) -> bool:
        """The slot's new containers wait for our go (their image has the start gate)."""
        return self.state.gated(self.state.target_spec(self.slot.number))

    def start(self, lane: LaneRecord) -> bool:
        """Plan a container start in ``lane``."""
        spec = self.state.target_spec(self.slot.number)
        return self.act(lane, StartAgent(self.slot.number, lane.lane, spec, self.gated))
