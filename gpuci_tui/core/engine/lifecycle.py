"""The slot lifecycle's state: operator intent, lane phases, and what the server said.

A *slot* owns a share of the host (its GPUs). It runs one agent container at a
time that may take a job, plus, with hot standby, one or more that are ready
but disabled on the server (the standby *depth*, `standby_depth`). These are the
slot's *lanes*: lane ``a`` is ``{name_prefix}-{slot}``, lane ``b`` is
``{name_prefix}-{slot}-b``, then ``-c``, ``-d``, ... Each lane is one fixed agent
registration, so a slot never has more registrations than lanes.

Everything here is frozen: the planner (`planner.decide`) and the transitions
(`transitions.apply`) are pure functions from one `EngineState` to the next,
which is what lets the lifecycle be tested as tables on a fake clock.

The safety rule the whole engine is built around: a lane is *capable* (could
run a job now or take one) unless it has no container, or its registration is
known to be disabled *and* known to hold no job, or its container waits at the
start gate (registered at most, no session: see `GoState`). At most one lane of
a slot is ever allowed to be capable, so two jobs never share a slot's GPUs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum
from itertools import pairwise
from typing import TYPE_CHECKING

from gpuci_tui.core.engine.agent.start_gate import GoState
from gpuci_tui.core.engine.gpu_admission import GateKind
from gpuci_tui.core.engine.overrides import Overrides
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.slot_gate import Gate
from gpuci_tui.core.models import ExitInfo, HealthSnapshot, ImageUsed, JobInfo

if TYPE_CHECKING:
    from gpuci_tui.core.engine.rollout.state import Rollout
    from gpuci_tui.core.engine.standby.schedule import Scheduled, StandbySchedule
    from gpuci_tui.core.engine.standby.state import AutoStandby


class Intent(StrEnum):
    """What the operator wants from a slot."""

    RUN = "run"
    """Keep an agent ready for jobs."""
    DRAIN = "drain"
    """Disable, stop idle agents, let busy ones finish; start nothing."""
    RESTART = "restart"
    """Replace the agents that were there when asked (busy ones after their job)."""
    RETIRE = "retire"
    """Above the desired count: drain, then forget the slot."""


class Lane(StrEnum):
    """One of a slot's agent registrations (``a``: active at first, then standbys)."""

    A = "a"
    B = "b"
    C = "c"
    D = "d"
    E = "e"
    F = "f"
    G = "g"
    H = "h"


#: Every lane, in order: a slot with ``n`` lanes uses the first ``n``.
LANES: tuple[Lane, ...] = tuple(Lane)
_LANE_RANK = {lane: index for index, lane in enumerate(LANES)}


class LanePhase(StrEnum):
    """Where one lane's container is in its life."""

    EMPTY = "empty"
    """No container."""
    STARTING = "starting"
    """Create/copy-token/start in flight."""
    BOOTING = "booting"
    """Container running; its agent not yet seen online since the container started."""
    READY = "ready"
    """Agent online, no job (enabled: active; disabled: standby)."""
    BUSY = "busy"
    """Agent has a job."""
    STOPPING = "stopping"
    """We asked the container to stop (only ever after a confirmed 'no job')."""
    EXITED = "exited"
    """Died; its name stays taken until it is removed (after its log tail is read)."""


class Op(StrEnum):
    """The one I/O operation in flight for a lane."""

    START = "start"
    STOP = "stop"
    ENABLE = "enable"
    DISABLE = "disable"
    CHECK = "check"
    GO = "go"


@dataclass(frozen=True)
class LaneRecord:
    """One lane: its container and its agent registration as last seen."""

    lane: Lane
    name: str
    """Agent and container name."""
    phase: LanePhase = LanePhase.EMPTY
    container_id: str | None = None
    started_at: float | None = None
    op: Op | None = None
    dying_id: str | None = None
    """A container that died and whose name is taken until we remove it (``destroy``)."""
    died_at: float | None = None
    ended_at: float | None = None
    """When the lane's last container ended (a registration seen absent later is really gone)."""
    extra_ids: frozenset[str] = frozenset()
    """Further running containers found for this lane at adoption (left alone, block starts)."""
    stale_ids: frozenset[str] = frozenset()
    """Created/exited leftovers of this lane to remove (they hold the name)."""
    retry_at: float | None = None
    """Name still taken by a container being removed: retry the start then."""
    removing: str | None = None
    """A dead container whose removal is in flight. Not an `op`: the registration may be
    written meanwhile (enabling the standby, disabling the exited one) without waiting."""
    remove_retry_at: float | None = None
    """Our removal of the dying or a stale container failed: try it again then."""
    conflict_retries: int = 0
    conflict_since: float | None = None
    """When the lane's starts began to find its name taken (None: not waiting for it)."""
    name_holder: str | None = None
    """A container not ours that holds the lane's name, as last reported (said once)."""
    oom: bool = False
    took_job: bool = False
    job: JobInfo | None = None
    seen_job: JobInfo | None = None
    """The job this container was last seen running, kept after a read says it ended."""
    stop_requested: bool = False
    early_exit: tuple[str, int | None, float] | None = None
    """A ``die`` of a container whose start has not returned yet: (id, code, at)."""
    early_destroyed: str | None = None
    """A ``destroy`` of a container whose start has not returned yet."""
    logs_of: str | None = None
    """A failed container whose log tail is still to be fetched."""
    reading_logs: str | None = None
    """The container whose tail is being read: it is not removed before the read answers."""
    xids: tuple[int, ...] = ()
    """Critical Xids the slot's GPUs raised while this container's job ran (the history)."""
    image: ImageUsed = field(default_factory=ImageUsed)
    """The image the current container runs (empty: none, or not known yet)."""
    spec: str = ""
    """The agent spec (`config_hash`) its container was made from, set when its start is
    planned and read back from its label at adoption; empty: none, or not known."""
    package: str = ""
    """The cached agent package version mounted into its container (empty: the image's)."""
    startup_s: float | None = None
    """Seconds from its container's start to its agent first seen online (`timings`); None:
    not measured. The finished job's history row keeps it (what "auto" starts from)."""
    in_place: bool = False
    """Its container was started in place, enabled, while the organisation refused our
    calls (`planning.refused`): handed back to a ready standby once writes work."""
    go: GoState = GoState.NONE
    """The container's place at the start gate (`GoState`)."""
    said_registered: float | None = None
    """When the current container first said its agent is registered (start.sh's line,
    or the agent's own): a read by name after that finds it (`planning.gate.identify`)."""
    job_seen_at: float = 0.0
    """When the lane's job was last seen (a line or a read): an older read cannot undo it."""
    # -------------------------------------------------- the registration, as the server said
    agent_id: int | None = None
    enabled: bool | None = None
    """The server's ``enabled`` flag (None: unknown or not registered)."""
    status: str | None = None
    online: bool = False
    """Seen online in a read that began after the current container started."""
    idle_verified: bool = False
    """A read after our last write showed the registration disabled and without a job."""
    known_at: float = 0.0
    """When the newest fact about the registration was true (a read's start, a write's end)."""

    # ------------------------------------------------------------------ derived

    @property
    def live(self) -> bool:
        """A container occupies the lane (or its start is in flight)."""
        return self.container_id is not None or self.op is Op.START

    @property
    def name_free(self) -> bool:
        """A new container may be created under the lane's name."""
        return not (self.live or self.dying_id or self.extra_ids or self.stale_ids)

    @property
    def busy(self) -> bool:
        """The lane's agent has a job (as last read)."""
        return self.job is not None

    @property
    def disabled_idle(self) -> bool:
        """The registration is known disabled and known to hold no job: it takes none."""
        return self.enabled is False and self.idle_verified and self.job is None

    @property
    def held(self) -> bool:
        """The container waits at the start gate: registered at most, no session, no job."""
        return self.live and self.go in (GoState.HELD, GoState.REFUSED)

    @property
    def may_be_registered(self) -> bool:
        """Its name may be in the pool: seen there, a container up, or one ran since the last read.

        An agent registers seconds after its start and the registration outlives its
        container: one that registered, ran a short job and ended between two reads of
        the pool is in neither read, yet counts against ``max_agents``.
        """
        ran_unseen = self.ended_at is not None and self.known_at <= self.ended_at
        return self.agent_id is not None or self.live or ran_unseen

    @property
    def capable(self) -> bool:
        """The lane could run a job now or be handed one (see the module docstring).

        A lane whose enabling is in flight counts as capable already: the other
        lane must not be enabled in the meantime.
        """
        return self.op is Op.ENABLE or (self.live and not self.disabled_idle and not self.held)


@dataclass(frozen=True)
class SlotRecord:
    """Everything the engine knows about one slot."""

    number: int
    lanes: tuple[LaneRecord, ...]
    """In lane order; at least ``a`` and ``b`` (more once a deeper standby widened it)."""
    intent: Intent = Intent.RUN
    restart_ids: frozenset[str] = frozenset()
    """With intent RESTART: the containers to replace."""
    spec_ids: frozenset[str] = frozenset()
    """The part of ``restart_ids`` put there because the container runs another spec than
    the slot's target (`rollout.mark_outdated`), not by an operator's restart."""
    failures: int = 0
    """Consecutive early failures (reset by a container that took a job or lived long)."""
    backoff_until: float | None = None
    parked: bool = False
    last_exit: ExitInfo | None = None
    message: str = ""
    jobs_done: int = 0
    gate: Gate = field(default_factory=Gate)
    job_gap_from: float | None = None
    """When the slot's last job ended, until its next job is assigned (`timings`)."""
    update_exit_at: float | None = None
    """When an agent of this slot last left to update itself (exit 12); None after a job."""

    def lane(self, lane: Lane) -> LaneRecord:
        """The record of ``lane`` (the slot must have it: see `standby_depth.widened`)."""
        return next(record for record in self.lanes if record.lane is lane)

    def has(self, lane: Lane) -> bool:
        """The slot has a record for ``lane``."""
        return any(record.lane is lane for record in self.lanes)

    def with_lane(self, record: LaneRecord) -> SlotRecord:
        """A copy with ``record`` replacing its lane (or added, in lane order)."""
        lanes = self.lanes
        # Called for every planned step: lanes kept in lane order (each once) take the
        # record in its place without a sort, and an unchanged one costs no copy.
        ranks = [_LANE_RANK[lane.lane] for lane in lanes]
        if _LANE_RANK[record.lane] in ranks and all(a < b for a, b in pairwise(ranks)):
            index = ranks.index(_LANE_RANK[record.lane])
            if lanes[index] is record:
                return self
            return replace(self, lanes=(*lanes[:index], record, *lanes[index + 1 :]))
        others = [lane for lane in lanes if lane.lane is not record.lane]
        return replace(
            self, lanes=tuple(sorted([*others, record], key=lambda r: _LANE_RANK[r.lane]))
        )

    def find(self, container_id: str) -> LaneRecord | None:
        """The lane whose current, dying, extra or stale container is ``container_id``."""
        for record in self.lanes:
            if container_id in (record.container_id, record.dying_id):
                return record
            if container_id in record.extra_ids or container_id in record.stale_ids:
                return record
        return None

    @property
    def live(self) -> bool:
        """Some lane has a container (or a start in flight)."""
        return any(record.live for record in self.lanes)

    @property
    def settled(self) -> bool:
        """No container, no start in flight and no name still held by a dead one."""
        return all(record.name_free and record.op is None for record in self.lanes)


def gate_of(state: EngineState, slot: SlotRecord) -> Gate:
    """The gate ``slot`` is planned and shown with: the worst of its GPUs' and its image's.

    A failing GPU (quarantined) comes first, then an image the driver cannot run,
    then a GPU someone else uses: that is the order in which each must be fixed.
    """
    if slot.gate.kind is GateKind.QUARANTINED or not state.cuda.closed:
        return slot.gate
    return state.cuda


def lane_name(prefix: str, slot: int, lane: Lane) -> str:
    """Agent and container name of ``lane`` of ``slot``."""
    base = f"{prefix}-{slot}"
    return base if lane is Lane.A else f"{base}-{lane.value}"


def new_slot(prefix: str, number: int, intent: Intent = Intent.RUN, lanes: int = 2) -> SlotRecord:
    """A slot with ``lanes`` empty lanes (two unless a deeper standby needs more)."""
    return SlotRecord(
        number=number,
        lanes=tuple(LaneRecord(lane, lane_name(prefix, number, lane)) for lane in LANES[:lanes]),
        intent=intent,
    )


@dataclass(frozen=True)
class EngineState:
    """The whole supervisor, as data."""

    prefix: str
    desired: int
    slots: tuple[SlotRecord, ...] = ()
    standby: int = 1
    """Standby lanes per slot now (0: off; True/False read as 1/0). With ``auto`` set,
    `standby_auto` moves it between its bounds."""
    auto: AutoStandby | None = None
    """``standby = "auto"``: the bounds and what the rule has learnt (`standby_auto`)."""
    schedule: StandbySchedule | None = None
    """``[agents.standby_schedule]``: its count replaces ``standby`` (or is "auto"'s floor)."""
    scheduled: Scheduled | None = None
    """The schedule as last evaluated (`standby_auto.observe`); None without one."""
    paused: bool = False
    stopping: bool = False
    stop_drain: bool = False
    start_retry_at: float = 0.0
    """Every start waits until then (the PAT could not be read, the engine was down)."""
    server_retry_at: float = 0.0
    """Every server write waits until then (Azure DevOps failed or rate-limited us)."""
    refusal: str = ""
    """Why the organisation refuses our calls (a read or write failed: 429, 5xx,
    unreachable), until one is answered; empty: it answers. While set, an exited
    active lane restarts in place (`planning.refused`)."""
    org_refused: str = ""
    """Why the organisation refuses our identity the pool (`steps.PoolRole`): every start
    waits while it is set, and no slot counts the refused registrations as failures."""
    pool: PoolView | None = None
    """The latest successful read of the pool."""
    docker: HealthSnapshot = field(default_factory=HealthSnapshot)
    cuda: Gate = field(default_factory=Gate)
    """Closed (held, ``cuda_incompatible``) while the driver cannot run the group's image:
    every slot of the group then starts nothing (see `gate_of`)."""
    spec: str = ""
    """The configured agent spec (`config_hash`): what new containers are made from,
    unless a roll-out says otherwise for a slot. Empty: not known (nothing is outdated)."""
    rollout: Rollout | None = None
    """The change of spec going through the slots (`engine.rollout`), or the last one."""
    agent_package: str = ""
    """The cached agent package new containers of the configured spec get (`PackageCached`);
    empty: none, they run the image's agent."""
    overrides: Overrides = field(default_factory=Overrides)
    """When the operator's scale, pause and drains in force were made (`engine.overrides`)."""
    gated_specs: frozenset[str] = frozenset()
    """Specs whose image has the start gate, as their containers' labels said."""

    def gated(self, spec: str) -> bool:
        """New containers of ``spec`` wait for our go (the spec's image has the start gate)."""
        return spec in self.gated_specs

    def target_spec(self, number: int) -> str:
        """The spec slot ``number`` should run: the roll-out's word, else the configured one."""
        if self.rollout is None:
            return self.spec
        return self.rollout.target(number)

    def outdated(self, number: int, lane: LaneRecord) -> bool:
        """The lane's container runs another spec than its slot's target, or lacks the package.

        A container of unknown spec is never outdated: gpuci-tui labels every
        container it makes with its spec, so one without the label was made by
        hand, and replacing it would be a guess. A container of the configured spec
        without the cached newer agent package is: its agent would spend its one job
        leaving to update (exit 12), so it is replaced while idle instead.
        """
        target = self.target_spec(number)
        if not (lane.live and lane.spec and target):
            return False
        if lane.spec != target:
            return True
        return (
            bool(self.agent_package) and target == self.spec and lane.package != self.agent_package
        )

    def slot(self, number: int) -> SlotRecord | None:
        """Slot ``number`` or None."""
        return next((slot for slot in self.slots if slot.number == number), None)

    def with_slot(self, record: SlotRecord) -> EngineState:
        """A copy with ``record`` replacing (or added as) its slot, slots kept in order."""
        slots = self.slots
        # Called for every slot of every plan: a slot in its place (slots kept in order,
        # numbers unique) is swapped in without a sort, and an unchanged one costs no copy.
        numbers = [slot.number for slot in slots]
        if record.number in numbers and all(a < b for a, b in pairwise(numbers)):
            index = numbers.index(record.number)
            if slots[index] is record:
                return self
            return replace(self, slots=(*slots[:index], record, *slots[index + 1 :]))
        others = [slot for slot in slots if slot.number != record.number]
        return replace(self, slots=tuple(sorted([*others, record], key=lambda s: s.number)))

    def without_slot(self, number: int) -> EngineState:
        """A copy without slot ``number``."""
        return replace(self, slots=tuple(s for s in self.slots if s.number != number))

    def lanes(self) -> Iterator[tuple[SlotRecord, LaneRecord]]:
        """Every (slot, lane) pair."""
        for slot in self.slots:
            for record in slot.lanes:
                yield slot, record

    @property
    def used_lanes(self) -> tuple[Lane, ...]:
        """The lanes that run agents: ``a`` and one per standby (only ``a`` without)."""
        return LANES[: 1 + max(0, min(int(self.standby), len(LANES) - 1))]

    @property
    def lane_count(self) -> int:
        """Lanes each slot keeps records for: two, or as many as the deepest standby."""
        deepest = self.auto.most if self.auto is not None else int(self.standby)
        return max(2, min(len(LANES), 1 + deepest))
