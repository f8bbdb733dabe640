"""The supervisor's public vocabulary: state snapshots, events and commands.

Everything here is a frozen, plain dataclass made of str/int/float/bool/None,
tuples and other such dataclasses, so one value travels unchanged between the
in-process supervisor, the control socket (JSON lines), the CLI (`status --json`)
and the console. Keep these stable: all three speak them.

`gpuci_tui.core.wire` turns them into JSON-ready dicts and back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

# The pool's, the disk's and the agent versions' readings live in `host_readings`;
# re-exported here because this module is where every caller takes the vocabulary.
from gpuci_tui.core.host_readings import AgentVersionsSnapshot as AgentVersionsSnapshot
from gpuci_tui.core.host_readings import AzureUsage as AzureUsage
from gpuci_tui.core.host_readings import DisabledAgents as DisabledAgents
from gpuci_tui.core.host_readings import DiskSnapshot as DiskSnapshot
from gpuci_tui.core.host_readings import ImageAgentVersion as ImageAgentVersion
from gpuci_tui.core.host_readings import PoolSummary as PoolSummary
from gpuci_tui.core.registrations import StaleRegistration

#: Bumped when a field changes meaning; additions do not bump it.
PROTOCOL_VERSION = 1

#: Most agent slots one supervisor (one agent group) runs: the limit of ``agents.count``,
#: of ``scale`` and of the command line's help, all read from here.
MAX_SLOTS = 64


class SlotState(StrEnum):
    """Where one agent slot is in its life cycle."""

    EMPTY = "empty"
    """No container; the supervisor will start one (or replenishing is paused)."""
    STARTING = "starting"
    """Container running, its agent not yet online with the server."""
    IDLE = "idle"
    """Agent online and enabled, no job assigned."""
    BUSY = "busy"
    """Agent has an assigned job."""
    DRAINING = "draining"
    """Disabled on the server; waiting for the running job to end (or stopping an idle one)."""
    DRAINED = "drained"
    """Drained: no container, not replaced until resumed."""
    BACKOFF = "backoff"
    """The last container failed early; waiting before the next start."""
    PARKED = "parked"
    """Too many consecutive failures; not restarted until resumed."""
    HELD = "held"
    """A GPU of the slot is used by a process not ours: its agent waits, disabled."""
    QUARANTINED = "quarantined"
    """A GPU of the slot is failing: no new job, not replenished until cleared."""


class HealthState(StrEnum):
    """Health of an outside system as last seen by the supervisor."""

    UNKNOWN = "unknown"
    OK = "ok"
    AUTH_FAILED = "auth_failed"
    RATE_LIMITED = "rate_limited"
    UNREACHABLE = "unreachable"
    ERROR = "error"


@dataclass(frozen=True)
class JobInfo:
    """The job an agent runs, as the server reports it (or, until a read, as the agent said it)."""

    request_id: int
    """The job request's id; 0 while only the agent's own line told of the job."""
    pipeline: str | None = None
    """Pipeline (definition) name."""
    run: str | None = None
    """Run (owner) name, e.g. ``20260928.2``."""
    definition_id: int | None = None
    assign_time: str | None = None
    """ISO-8601 UTC time the server assigned the job."""
    result: str | None = None
    queue_time: str | None = None
    """ISO-8601 UTC time the job was queued (with ``assign_time``: its queue wait)."""
    name: str | None = None
    """The job's name as its agent printed it (``Running job: NAME``)."""


def seen_job(kept: JobInfo | None, current: JobInfo | None) -> JobInfo | None:
    """The job to remember of a container: one with a request id before a name only.

    The history ties the container's row to it, never to "the agent's latest".
    """
    if current is None or (kept is not None and kept.request_id and not current.request_id):
        return kept
    return current


@dataclass(frozen=True)
class ExitInfo:
    """How a slot's previous container ended."""

    code: int | None
    oom: bool = False
    at: float = 0.0
    """Unix time of the exit."""
    reason: str = ""
    """Plain-words reason: "job finished", "start failed: image not present", …"""
    log_tail: tuple[str, ...] = ()
    took_job: bool = False
    """Whether the container ran a job before it exited."""
    lost_job: bool = False
    """It died under a job it was running, and not because gpuci-tui stopped it ("killed
    during job N"): the job is lost on this slot (history result ``abandoned``). The
    image is not to blame: it never counts towards backoff or parking."""


@dataclass(frozen=True)
class ImageUsed:
    """The image a container runs, as the engine reported it when it started or was listed."""

    reference: str = ""
    """What the container was created from (``REPO:TAG`` or ``REPO@sha256:…``)."""
    image_id: str = ""
    """The image's id (``sha256:`` of its config): exactly what ran; empty when not known."""
    repo_digest: str = ""
    """``REPO@sha256:…`` of the reference's repository, when the image has one."""


@dataclass(frozen=True)
class AgentSnapshot:
    """One of a slot's two agent registrations (lane ``a`` or ``b``) and its container."""

    lane: str
    name: str
    phase: str
    """``empty``, ``starting``, ``booting``, ``ready``, ``busy``, ``stopping``, ``exited``."""
    role: str = ""
    """``active`` (may take a job), ``standby`` (ready but disabled on the server),
    ``leaving`` (being replaced or retired), or empty when it runs nothing."""
    container_id: str | None = None
    started_at: float | None = None
    agent_id: int | None = None
    agent_status: str | None = None
    agent_enabled: bool | None = None
    job: JobInfo | None = None
    image: str = ""
    """The image reference this lane's container was created from (empty: no container)."""
    image_id: str = ""
    """The id of the image the container runs (empty: not known yet)."""
    repo_digest: str = ""
    """Its registry digest (``REPO@sha256:…``) when the image has one."""
    start_gate: bool = False
    """The container was started with its image's start gate: its agent waits for the
    daemon's go after registering (dockeragent/start.sh, ``io.gpuci.start-gate``)."""


@dataclass(frozen=True)
class SlotSnapshot:
    """One slot of the supervisor, as of `SupervisorSnapshot.taken_at`."""

    slot: int
    name: str
    """Agent and container name: ``{name_prefix}-{slot}``."""
    state: SlotState
    container_id: str | None = None
    started_at: float | None = None
    """Unix time the current container started."""
    agent_id: int | None = None
    agent_status: str | None = None
    """``online`` / ``offline`` as the server says, None when not registered."""
    agent_enabled: bool | None = None
    job: JobInfo | None = None
    gpus: tuple[str, ...] = ()
    """GPU indexes given to the container; ``("all",)`` for every GPU."""
    devices: str = ""
    """A slot shaped by the hardware: ``GPU 0+3`` or ``MIG 1g.10gb 0/3`` (else empty)."""
    last_exit: ExitInfo | None = None
    failures: int = 0
    """Consecutive early failures (reset by a container that takes a job)."""
    backoff_until: float | None = None
    restart_pending: bool = False
    """A restart was asked while busy: the container is replaced after its job."""
    message: str = ""
    """What the supervisor is doing with this slot, in plain words."""
    jobs_done: int = 0
    intent: str = "run"
    """What the operator asked for: ``run``, ``drain``, ``restart`` or ``retire``."""
    lane: str = "a"
    """Which of the slot's registrations the fields above describe (the active one)."""
    standby: str = ""
    """The hot standby of this slot: ``ready``, ``booting``, ``pending`` (not there
    yet), ``off`` (standby disabled in the configuration) or empty (slot not running)."""
    agents: tuple[AgentSnapshot, ...] = ()
    """Both registrations of the slot, with their containers."""
    group: str = ""
    """The agent group (empty in a configuration with only ``[agents]``)."""
    gpu_memory_bytes: int | None = None
    """GPU memory the running job's processes hold now (None: idle, or not measured)."""
    gpu_util_percent: float | None = None
    """The running job's GPU utilisation now, 0–100 (None: idle, or not known)."""
    gate: str = "open"
    """``open``, ``held`` (a GPU is used by a process not ours: no next job) or
    ``quarantined`` (a GPU is failing: no next job, not replenished)."""
    gate_reason: str = ""
    """Why the slot waits, naming the GPU ("GPU 0 used by pid 4242 python, 61 GB, not ours")."""
    gate_code: str = ""
    """Bounded reason: ``foreign_process``, ``xid``, ``ecc``, ``row_remap``, ``slowdown``,
    ``lost`` or ``driver``."""
    image: str = ""
    """The image the configuration names for this slot (its group's ``image``)."""
    image_id: str = ""
    """The id of the image the slot's row lane runs (empty: no container, or not known)."""
    repo_digest: str = ""
    """That image's registry digest (``REPO@sha256:…``) when known."""

    @property
    def key(self) -> str:
        """How operators name the slot: ``GROUP/SLOT``, or ``SLOT`` with one group."""
        return f"{self.group}/{self.slot}" if self.group else str(self.slot)


@dataclass(frozen=True)
class GpuGateSnapshot:
    """One GPU as the daemon's admission and health watch sees it."""

    index: int
    uuid: str | None = None
    state: str = "ok"
    """``ok``, ``held`` (used by a process not ours) or ``quarantined`` (failing)."""
    reason: str = ""
    code: str = ""
    """Bounded reason, as `SlotSnapshot.gate_code`."""


@dataclass(frozen=True)
class HealthSnapshot:
    """Health of the Azure DevOps organisation or the Docker engine."""

    state: HealthState = HealthState.UNKNOWN
    message: str = ""
    checked_at: float | None = None
    """When the system last answered (or, when it fails, when it was last tried)."""
    retry_at: float | None = None
    """When the supervisor will call again after a failure or a rate-limit delay."""
    identity: str = ""
    """Who the supervisor signs in as, in a few words (``service principal gpuci-lab ·
    token valid 52 min``, ``PAT · expires in 5 days (…)``); empty for a PAT with nothing
    to say and for health other than Azure DevOps'."""
    pat_expires_at: float | None = None
    """When the PAT expires (``[azure] pat_expires``); None: not a PAT, or not known."""
    pool_role: str = ""
    """Why the organisation refuses our identity the pool (``auth_failed`` while the rest
    works: reads and running jobs go on, agent starts wait); empty: it does not."""


@dataclass(frozen=True)
class GroupSummary:
    """One agent group of the supervisor."""

    name: str
    pool: str
    name_prefix: str
    desired_count: int
    standby: bool = True


@dataclass(frozen=True)
class RolloutSnapshot:
    """A change of agent spec (image, volumes, env, memory limit) going through a group's slots."""

    group: str
    """The agent group ("" for the only one)."""
    image_from: str
    """The image the slots ran before the change (the configured reference)."""
    image_to: str
    """The image they change to (the same as ``image_from`` when only other fields changed)."""
    state: str
    """``canary`` (only the canary slots change), ``rolling`` (every slot changes),
    ``done``, or ``rolled_back`` (back to ``image_from``; see ``reason``)."""
    slots_total: int
    slots_new: int
    """Slots whose every lane runs the new spec."""
    busy_old: int = 0
    """Slots still running a job on the old spec (they change after it)."""
    canary_slots: tuple[int, ...] = ()
    successes: int = 0
    """Successful jobs on the new spec so far (counted on canary slots)."""
    needed: int = 0
    """Successful canary jobs before the rest follow (0: no canary)."""
    reason: str | None = None
    """Why the change was rolled back."""
    started_at: float | None = None


@dataclass(frozen=True)
class RuntimeOverride:
    """An operator's command in force over the file: a scale, a pause, a drained slot.

    Shown beside the file's value (`wording.override_words`), listed by ``reload
    --dry-run`` and dropped by ``reload --reset-overrides`` (`engine.overrides`).
    """

    kind: str
    """``scale``, ``pause`` or ``drain``."""
    group: str = ""
    """The agent group ("" for the only one)."""
    at: float | None = None
    """When it was made (None: not known, e.g. kept from before the time was recorded)."""
    value: str = ""
    """What runs: the count (``scale``), the slot (``drain``, as ``GROUP/SLOT`` or ``SLOT``)."""
    file_value: str = ""
    """What the file says instead (``scale``: its count)."""


@dataclass(frozen=True)
class SupervisorSnapshot:
    """Everything a console or `status` needs to render the supervisor."""

    taken_at: float
    org_url: str
    pool: str
    instance: str
    """Identifies the supervised set of agents (org + pool + name prefix)."""
    desired_count: int
    paused: bool = False
    stopping: bool = False
    mode: str = "in-process"
    """``in-process`` or ``daemon`` (a ``gpuci-tui run`` process)."""
    pid: int | None = None
    slots: tuple[SlotSnapshot, ...] = ()
    pool_summary: PoolSummary = field(default_factory=PoolSummary)
    azure: HealthSnapshot = field(default_factory=HealthSnapshot)
    docker: HealthSnapshot = field(default_factory=HealthSnapshot)
    disk: DiskSnapshot = field(default_factory=DiskSnapshot)
    """Free space of Docker's data root (the disk watch; unknown without one)."""
    agent_versions: AgentVersionsSnapshot = field(default_factory=AgentVersionsSnapshot)
    """Agent versions: the organisation's, each image's, the cached package (issue 20)."""
    azure_requests: int = 0
    """Azure DevOps calls made since start (for the rate budget)."""
    azure_usage: AzureUsage = field(default_factory=AzureUsage)
    """What the daemon's calls cost the organisation: its rate, bytes, cap and the
    identity's budget left as the service last said."""
    started_at: float | None = None
    """When the supervisor started (a daemon's: when ``gpuci-tui run`` began supervising),
    on its own clock like ``taken_at``; None until then. Readers elsewhere derive the
    uptime from ``taken_at - started_at`` (`engine.snapshots.daemon_uptime`), never from
    their own clock."""
    protocol: int = PROTOCOL_VERSION
    standby: bool = False
    """Hot standby is on: each running slot keeps a second, disabled agent ready."""
    standby_depth: str = ""
    """Standby lanes per slot: ``off``, ``1``, or ``2/3 (auto)`` (now / at most)."""
    groups: tuple[GroupSummary, ...] = ()
    """The agent groups, when the configuration has ``[groups.NAME]`` tables."""
    pools: tuple[PoolSummary, ...] = ()
    """Every pool the groups use (``pool_summary`` adds them up)."""
    gpu_accounting: bool = False
    """The supervisor measures each job's GPU use, so a busy slot without figures
    means "not known" rather than "not measured" (the console shows "—")."""
    gpu_gates: tuple[GpuGateSnapshot, ...] = ()
    """Every GPU's admission and health state (empty when the daemon watches no GPU)."""
    rollouts: tuple[RolloutSnapshot, ...] = ()
    """Agent-spec changes in progress or just finished (one per group at most)."""
    pulls: tuple[str, ...] = ()
    """The image pulls in flight, one line per image (``pulling IMAGE: 3/7 layers, …``)."""
    stale: tuple[StaleRegistration, ...] = ()
    """The pool's stale registrations at the last read with capabilities (`engine.stale`)."""
    overrides: tuple[RuntimeOverride, ...] = ()
    """The operator's overrides in force over the file, every group's (`engine.overrides`)."""

    def slot(self, number: int, group: str = "") -> SlotSnapshot | None:
        """Return the snapshot of slot ``number`` (of ``group``) or None."""
        for item in self.slots:
            if item.slot == number and item.group == group:
                return item
        return None

    def slot_by_key(self, key: str) -> SlotSnapshot | None:
        """The slot named ``GROUP/SLOT`` (or ``SLOT``), or None."""
        return next((item for item in self.slots if item.key == key), None)


@dataclass(frozen=True)
class SupervisorEvent:
    """Something that happened, for logs, the console and `--wait`."""

    at: float
    kind: str
    """e.g. ``container_started``, ``container_exited``, ``job_assigned``,
    ``job_finished``, ``slot_parked``, ``drained``, ``azure_error``, ``command``."""
    message: str
    slot: int | None = None
    group: str = ""
    agent: str = ""
    """The agent the event is about (empty: the slot or the host as a whole)."""
    seconds: float | None = None
    """A duration it measures: an ``agent_online``'s start-up, a ``job_assigned``'s gap since
    the slot's previous job (None: none; `engine.timings`)."""
    seq: int = 0
    """Its number among the events of the supervisor that reported it, from 1 (0: not
    numbered, an older daemon's). With ``at`` it tells an event apart from every other:
    a console that subscribes again gets the recent events again and keeps each once."""

    @property
    def identity(self) -> tuple[object, ...]:
        """What tells this event apart from every other one of its supervisor.

        ``(at, seq)`` for a numbered event (a restarted daemon counts from 1 again,
        at later times); for an unnumbered one, everything it says.
        """
        if self.seq:
            return (self.at, self.seq)
        return (self.at, self.kind, self.slot, self.group, self.agent, self.message)
