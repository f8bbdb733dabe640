"""What flows through the engine loop: observations in, actions out, notes on the side.

* An *observation* is a fact the engine learns: a Docker event, a listing, a
  read of the pool, the result of one of its own actions. `transitions.apply`
  folds it into the `EngineState`.
* An *action* is one I/O step the planner (`planner.decide`) wants done. The
  executor carries it out and answers with an observation.
* A *note* is what a transition tells the outside world: an operator-facing
  event, or a finished job for the history.

All plain frozen dataclasses, so tests can write them in tables. The steps of the
organisation (its reads, our writes) are `server_steps`', those of the agents' own
facts and the start gate `agent.steps`'; their unions are here.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuci_tui.core.engine.agent.steps import AgentSaid, GiveGo, GoGiven, ReadAgent
from gpuci_tui.core.engine.gpu_admission import GateReading
from gpuci_tui.core.engine.lifecycle import Lane
from gpuci_tui.core.engine.server_steps import (
    AgentChecked,
    AgentWritten,
    CheckAgent,
    PoolRead,
    PoolRole,
    PoolUnread,
    QueueRead,
    ServerFailed,
    SetEnabled,
)
from gpuci_tui.core.models import ExitInfo, ImageUsed, JobInfo
from gpuci_tui.core.protocols import ContainerInfo

# =========================================================================== observations


@dataclass(frozen=True)
class ListedContainer:
    """One listed container, with the slot and lane its labels name.

    The labels are parsed before the engine sees them (`docker.agentspec.placed`):
    the engine knows slots and lanes, never Docker's label keys.
    """

    slot: int
    lane: Lane
    info: ContainerInfo
    spec: str = ""
    """The agent spec its label names (empty: no label)."""
    package: str = ""
    """The cached agent package version mounted into it (empty: the image's agent)."""
    gated: bool = False
    """Its image has the start gate (its labels say so)."""


def image_used(info: ContainerInfo, known: ImageUsed | None = None) -> ImageUsed:
    """The image a listed or started container runs, as the engine reported it.

    ``known``: what the lane knew; its digest stays when this report lacks one for the
    same image (a failed image read must not forget it).
    """
    digest = info.repo_digest
    if not digest and known is not None and known.image_id == info.image_id:
        digest = known.repo_digest
    return ImageUsed(info.image, info.image_id, digest)


@dataclass(frozen=True)
class Listed:
    """The engine's containers with our labels (at start and after the event stream came back).

    Only containers whose labels name a slot are listed.
    """

    containers: tuple[ListedContainer, ...]
    at: float


@dataclass(frozen=True)
class Started:
    """Our start of a lane's container succeeded."""

    slot: int
    lane: Lane
    container_id: str
    at: float
    image: ImageUsed = ImageUsed()
    """The image it runs, as the start found it (no further Docker call)."""
    spec: str = ""
    """The agent spec it was made from (empty: the one its start was planned with)."""
    package: str = ""
    """The cached agent package version mounted into it (empty: the image's agent)."""
    gated: bool = False
    """Its image has the start gate: its agent waits for our go (`GiveGo`) after registering."""


@dataclass(frozen=True)
class NameHolder:
    """The container that holds the name a lane's start wanted, read from its labels.

    The labels are parsed before the engine sees them (`docker.agentspec.name_holder`).
    """

    container_id: str
    status: str
    """Docker's state of it: created, running, exited, dead…"""
    ours: bool
    """It carries this supervisor's instance label: ours, left over (removed as usual)."""
    instance: str = ""
    """The gpuci-tui instance its labels name (empty: not made by gpuci-tui)."""
    state_dir: str = ""
    """The state directory of the daemon that made it, when its labels say."""


@dataclass(frozen=True)
class StartFailed:
    """Our start of a lane's container failed; ``kind`` says whose fault it was.

    ``conflict``: the name is still taken (retry soon; ``holder`` says by what when
    Docker could tell: a container not ours is a named problem on the slot);
    ``engine``: Docker is unreachable (all starts pause); ``token``: the PAT could
    not be read (all starts pause); ``pull``: the image is absent and could not be pulled (the lane
    waits and retries; not counted); ``gate``: the start needed the image's start
    gate and the image has none (nothing was created; the spec is planned without
    the gate from now on, not counted); ``start``: the slot's own problem (counts
    towards parking).
    """

    slot: int
    lane: Lane
    kind: str
    reason: str
    at: float
    holder: NameHolder | None = None


@dataclass(frozen=True)
class Appeared:
    """A container with our labels started that we did not start (adopt it)."""

    slot: int
    lane: Lane
    container_id: str
    at: float
    spec: str = ""
    """The agent spec its label names (empty: no label)."""
    package: str = ""
    """The cached agent package version its label names (empty: the image's agent)."""
    gated: bool = False
    """Its image has the start gate (its labels say so)."""


@dataclass(frozen=True)
class Died:
    """A container of ours exited (``code`` None: unknown, e.g. gone during an outage)."""

    slot: int
    lane: Lane
    container_id: str
    code: int | None
    at: float


@dataclass(frozen=True)
class OutOfMemory:
    """The kernel's OOM killer hit a container of ours."""

    slot: int
    lane: Lane
    container_id: str


@dataclass(frozen=True)
class Destroyed:
    """A container of ours was removed: its name is free."""

    slot: int
    lane: Lane
    container_id: str
    at: float


@dataclass(frozen=True)
class Stopped:
    """Our stop call returned (the ``die`` event says how the container ended)."""

    slot: int
    lane: Lane
    error: str | None = None


@dataclass(frozen=True)
class Removed:
    """Our force-remove of a container returned (gone, or ``error`` says why not)."""

    slot: int
    lane: Lane
    container_id: str
    error: str | None = None
    """Why the container could not be removed (it still holds the lane's name)."""
    at: float = 0.0
    """When the removal failed (its retry is timed from here)."""


@dataclass(frozen=True)
class LogTail:
    """The last lines of a failed container (none when they could not be read)."""

    slot: int
    container_id: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class EngineLost:
    """The Docker engine stopped answering (event stream lost, or a call failed)."""

    message: str
    at: float


@dataclass(frozen=True)
class EngineAnswered:
    """The Docker engine answered (a ping, a listing, an event stream back)."""

    at: float
    restored: bool = False
    """The event stream came back after an outage (a listing follows)."""


@dataclass(frozen=True)
class GpuObserved:
    """One GPU frame, read as each slot's gate (`gpu_admission.slot_reading`)."""

    at: float
    readings: tuple[tuple[int, GateReading], ...]
    """(slot, its reading) for every slot of the group."""
    hold_down: float = 10.0
    """The group's ``gpu_hold_down``: how long a flapping GPU must pass before release."""
    cleared: frozenset[int] = frozenset()
    """Slots whose GPUs an operator has just cleared (``gpu clear``): released at once."""


@dataclass(frozen=True)
class CudaChecked:
    """Whether the driver can start the group's image (`gpu.cuda_fit.refusal`, read by the host).

    Read at start, whenever NVML reports another driver, and whenever the image
    changes; the parsing and the CUDA rules stay outside the engine, which only
    holds the group's slots while ``reason`` is set.
    """

    at: float
    reason: str = ""
    """Why the image cannot start, with the fix; empty: it can."""


@dataclass(frozen=True)
class PackageCached:
    """The agent package a new container of the group's image gets (`AgentUpdates.mount_for`).

    Sent by the host whenever its reading of the cache changes. A container of the
    configured spec without it leaves to update at its next job, so the engine replaces
    it (`EngineState.outdated`) before a job makes it leave.
    """

    at: float
    version: str = ""
    """The cached newer package's version; empty: new containers keep the image's agent."""


Observation = (
    Listed
    | Started
    | StartFailed
    | Appeared
    | Died
    | OutOfMemory
    | Destroyed
    | Stopped
    | Removed
    | LogTail
    | EngineLost
    | EngineAnswered
    | PoolRead
    | PoolUnread
    | QueueRead
    | AgentWritten
    | AgentChecked
    | ServerFailed
    | GpuObserved
    | CudaChecked
    | PackageCached
    | PoolRole
    | AgentSaid
    | GoGiven
)

# =========================================================================== actions


@dataclass(frozen=True)
class StartAgent:
    """Create the lane's container (token file copied in), then start it."""

    slot: int
    lane: Lane
    spec: str = ""
    """The agent spec to make it from (the executor keeps each spec's configuration);
    empty: the configured one."""
    gated: bool = False
    """The start is planned for an image with the start gate, and is only safe with it:
    an image without the gate label is refused (``StartFailed`` of kind ``gate``)."""


@dataclass(frozen=True)
class StopAgent:
    """SIGTERM the lane's container: only planned after a confirmed 'disabled, no job'."""

    slot: int
    lane: Lane
    container_id: str


@dataclass(frozen=True)
class RemoveContainer:
    """Force-remove a dead or leftover container that still holds the lane's name."""

    slot: int
    lane: Lane
    container_id: str


@dataclass(frozen=True)
class FetchLogs:
    """Read the log tail of a container that failed (best effort)."""

    slot: int
    container_id: str


Action = (
    StartAgent
    | StopAgent
    | RemoveContainer
    | SetEnabled
    | CheckAgent
    | FetchLogs
    | GiveGo
    | ReadAgent
)

# =========================================================================== notes


@dataclass(frozen=True)
class Note:
    """An operator-facing event (becomes a `SupervisorEvent`)."""

    kind: str
    message: str
    slot: int | None = None
    agent: str = ""
    """The agent (lane) the event is about; a slot's lanes take turns being its agent."""
    seconds: float | None = None
    """A duration the note measures, for the metrics (`timings`)."""

    @property
    def job_started(self) -> bool:
        """The event says one of our agents was handed a job."""
        return self.kind == "job_assigned"


@dataclass(frozen=True)
class JobEnded:
    """A container that took a job has exited: one row of the job history."""

    slot: int
    lane: Lane
    agent: str
    container_id: str
    job: JobInfo | None
    """The job its lane was seen running (request id 0: only its line told); None: never."""
    started_at: float | None
    exit: ExitInfo
    agent_id: int | None = None
    """The registration's id: its last finished job request says the rest."""
    xids: tuple[int, ...] = ()
    """Critical Xids the slot's GPUs raised while the job ran."""
    image: ImageUsed = ImageUsed()
    """The image the job ran on."""
    startup_s: float | None = None
    """Its agent's start-up, container start to online (None: not measured)."""


Output = Note | JobEnded
