"""The small seams between the supervisor and the outside systems.

Each outside system (Azure DevOps, the container engine, NVML, the keyring)
is reached through one protocol defined here, with plain dataclasses for what
crosses it. The real implementations live in `azure/client.py`, `docker/runtime.py`,
`gpu/nvml_sampler.py` and `secrets/token_store.py`; tests and the demo pass fakes or
simulations.

All protocol methods are blocking (requests, docker-py, NVML are); the
supervisor calls them through `asyncio.to_thread`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo
from gpuci_tui.core.host_readings import AzureUsage

# --------------------------------------------------------------------------- Azure DevOps


@dataclass(frozen=True)
class Pool:
    """An agent pool."""

    id: int
    name: str
    size: int | None = None
    is_hosted: bool = False
    pool_type: str | None = None


@dataclass(frozen=True)
class JobRequest:
    """A job request of a pool (queued, running or finished)."""

    request_id: int
    queue_time: str | None = None
    assign_time: str | None = None
    receive_time: str | None = None
    finish_time: str | None = None
    result: str | None = None
    plan_type: str | None = None
    definition_id: int | None = None
    definition_name: str | None = None
    owner_name: str | None = None
    """The run's name (``owner.name``), e.g. ``20260928.2``."""
    reserved_agent_id: int | None = None
    reserved_agent_name: str | None = None
    demands: tuple[str, ...] = ()  # e.g. "Agent.Version -gtVersion 4.270.0"
    matched_agents: tuple[str, ...] | None = None  # None: not in the answer (with $top)
    job_name: str | None = None
    """The job's name (``jobName``): what its agent prints in ``Running job: NAME``."""


@dataclass(frozen=True)
class Agent:
    """An agent registration in a pool."""

    id: int
    name: str
    enabled: bool = True
    status: str = "offline"
    version: str | None = None
    created_on: str | None = None
    status_changed_on: str | None = None
    assigned_request: JobRequest | None = None
    system_capabilities: Mapping[str, str] = field(default_factory=dict)
    last_completed_request: JobRequest | None = None
    """Its most recent finished request (result, times), when the list was asked for it
    (``includeLastCompletedRequest``): a job's end needs no read of its own."""


JOB_REQUEST_CAP = 200
"""The most job requests one answer of the service holds, whatever ``$top`` asks
(kedacore/keda#6819): a longer queue is only ever seen in part."""


class JobRequests(list[JobRequest]):
    """The pool's unfinished job requests, as one read of the service gave them.

    A plain list (callers and test doubles that return lists keep working) that also
    says whether the answer was at the service's cap (`JOB_REQUEST_CAP`): then the
    queue is longer than what was read, and is shown as "N or more", never as N.
    """

    def __init__(self, requests: Iterable[JobRequest] = (), *, capped: bool = False) -> None:
        super().__init__(requests)
        self.capped = capped


def at_cap(requests: Sequence[JobRequest]) -> bool:
    """Whether a read of job requests stopped at the service's cap (more may wait)."""
    return bool(getattr(requests, "capped", False))


@dataclass(frozen=True)
class PatCheck:
    """Result of validating a PAT against an organisation and pool."""

    ok: bool
    reason: str
    """``ok`` | ``bad_pat`` | ``no_scope`` | ``pool_not_found`` | ``pool_ambiguous`` |
    ``unreachable`` | ``rate_limited`` | ``error``."""
    message: str
    user: str | None = None
    pool: Pool | None = None


class AgentPoolApi(Protocol):
    """What the supervisor needs from Azure DevOps (one organisation, one PAT)."""

    def resolve_pool(self, name: str) -> Pool:
        """Find the pool by exact name; raise AzureNotFoundError on 0 or >1 matches."""
        ...

    def list_agents(
        self,
        pool_id: int,
        *,
        include_capabilities: bool = False,
        demands: Sequence[str] = (),
        agent_name: str | None = None,
        include_last_completed: bool = False,
    ) -> list[Agent]:
        """The pool's agents with their assigned request (one call).

        Args:
            pool_id: The pool.
            include_capabilities: Also their capabilities (a larger answer).
            demands: Only the agents that meet every demand (``NAME``: the capability
                exists; ``NAME -equals VALUE``): the service filters, the answer is small.
            agent_name: Only the agent of this name (``agentName=``; [] when none).
            include_last_completed: Also each agent's last finished request.

        Raises:
            AzureBadRequestError: The service refused a demand (it did not filter).
        """
        ...

    def get_agent(
        self, pool_id: int, agent_id: int, *, include_capabilities: bool = False
    ) -> Agent | None:
        """One agent with its assigned request, None when it does not exist."""
        ...

    def set_agent_enabled(self, pool_id: int, agent_id: int, enabled: bool) -> Agent:
        """PATCH the agent's ``enabled`` flag."""
        ...

    def delete_agent(self, pool_id: int, agent_id: int) -> None:
        """Delete a registration (any 2xx is success; 404 is ignored)."""
        ...

    def list_job_requests(self, pool_id: int) -> list[JobRequest]:
        """Unfinished job requests of the pool (queued and running).

        The real client returns `JobRequests`, which says when the answer was at the
        service's cap (`at_cap`).
        """
        ...

    def finished_jobs(self, pool_id: int, agent_ids: Sequence[int], count: int) -> list[JobRequest]:
        """The latest finished job requests of these agents, newest first (one call).

        ``jobrequests?agentIds=…&completedRequestCount=COUNT``: at most ``count``
        finished requests (the service may answer fewer; unfinished ones are left out).
        """
        ...

    @property
    def request_count(self) -> int:
        """How many HTTP requests this client has sent."""
        ...


@runtime_checkable
class UsageReporting(Protocol):
    """A client that can say what its calls cost (the real one; test doubles need not)."""

    def usage(self) -> AzureUsage:
        """The last minute of requests and bytes, its cap, the service's word on the budget."""
        ...

    def set_request_cap(self, cap: int | None) -> None:
        """Apply ``[azure] max_requests_per_minute`` (None: no cap) at once."""
        ...


# --------------------------------------------------------------------------- containers


@dataclass(frozen=True)
class VolumeMount:
    """A read-only bind mount with the env var that names it inside the agent."""

    host: str
    container: str
    env: str | None = None


@dataclass(frozen=True)
class ContainerSpec:
    """Everything needed to start one agent container."""

    name: str
    image: str
    labels: Mapping[str, str]
    environment: Mapping[str, str]
    """Never holds the PAT: it is delivered as the file `token_path`."""
    token_path: str = "/run/azp/token"
    network: str = "bridge"
    gpus: str | tuple[str, ...] = "none"
    """``"all"``, ``"none"`` or a tuple of device indexes/UUIDs."""
    volumes: tuple[VolumeMount, ...] = ()
    oom_score_adj: int = 1000
    mem_limit: str | None = None
    command: tuple[str, ...] | None = None
    auto_remove: bool = False
    """Docker removes the container when it exits. Off for agents: Docker drops a dead
    container's logs with it (~100 ms after ``die``), before a loaded host reads its
    tail; the supervisor removes each dead container itself, after reading the tail."""
    extra_mounts: tuple[tuple[str, str, str], ...] = ()
    """Further (host, container, mode) binds, e.g. an opt-in Docker socket."""
    required_labels: Mapping[str, str] = field(default_factory=dict)
    """Labels the image must carry, else nothing is created (`ImageLabelMissingError`):
    a start that is only safe with the image's start gate says so here."""


@dataclass(frozen=True)
class ContainerInfo:
    """A container as the engine reports it."""

    id: str
    name: str
    labels: Mapping[str, str]
    status: str
    """Docker's state: created, running, exited, dead, removing, …"""
    image: str = ""
    """The image reference the container was created from (``REPO:TAG`` or ``REPO@sha256:…``)."""
    started_at: float | None = None
    exit_code: int | None = None
    oom_killed: bool = False
    image_id: str = ""
    """The id of the image it runs (``sha256:`` of the image config); empty when not known."""
    repo_digest: str = ""
    """The image's registry digest for the reference's repository (``REPO@sha256:…``);
    empty for an image that was built here and never pushed or pulled."""


@dataclass(frozen=True)
class ContainerEvent:
    """A container event from the engine, or a stream status change.

    ``action`` is Docker's (``create``, ``start``, ``die``, ``oom``, ``destroy``, …)
    or ``stream-lost`` / ``stream-restored`` emitted by the runtime itself when
    the event stream breaks and comes back (then the supervisor re-adopts).
    """

    action: str
    container_id: str = ""
    name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    time: float = 0.0
    message: str = ""


@runtime_checkable
class ContainerRuntime(Protocol):
    """What the supervisor needs from the container engine."""

    def ping(self) -> None:
        """Raise RuntimeUnavailableError with a plain message when the engine is unusable."""
        ...

    def list_containers(self, labels: Mapping[str, str]) -> list[ContainerInfo]:
        """Containers (running or not) that carry all of ``labels``."""
        ...

    def start(self, spec: ContainerSpec, token: str) -> ContainerInfo:
        """Create the container, copy the token file into it, start it.

        Raises:
            ContainerNameConflictError: the name is still taken.
            ContainerStartError: with a plain reason (image missing, GPU runtime…).
        """
        ...

    def stop(self, container_id: str, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; a gone container is not an error."""
        ...

    def remove(self, container_id: str) -> None:
        """Force-remove; a gone container is not an error."""
        ...

    def logs_tail(self, container_id: str, lines: int = 20) -> list[str]:
        """The last lines of the container's output ([] when gone)."""
        ...

    def image_present(self, image: str) -> bool:
        """Whether the image is present locally (never pulls)."""
        ...

    def events(self, labels: Mapping[str, str], stop: threading.Event) -> Iterator[ContainerEvent]:
        """Block and yield container events for ``labels`` until ``stop`` is set.

        Reconnects by itself when the stream breaks, yielding ``stream-lost``
        and ``stream-restored`` events around the gap.
        """
        ...

    def follow_output(self, container_id: str, stop: threading.Event) -> Iterator[str]:
        """Block and yield the container's output lines, from its start, as they come.

        Ends when the container has ended (its last line read) or ``stop`` is set
        (within about a second). Lines are read incrementally and not kept.
        """
        ...

    def put_file(self, container_id: str, path: str, content: str) -> None:
        """Write a root-only file (directory 0700, file 0600) into a running container.

        Raises:
            GpuciError: the container is gone or the engine refused.
        """
        ...


@dataclass(frozen=True)
class DiskUsage:
    """The engine's data root and its free space (None: the root is not visible here)."""

    root: str
    free_bytes: int | None
    total_bytes: int | None = None


@dataclass(frozen=True)
class ImageInfo:
    """A local image: its id, tags, creation time (epoch seconds) and size in bytes."""

    id: str
    tags: tuple[str, ...] = ()
    created: float = 0.0
    size: int = 0


@runtime_checkable
class DockerDisk(Protocol):
    """What the disk watch needs from the engine (Docker's API has no free-space call)."""

    def disk_usage(self) -> DiskUsage:
        """The data root (``docker info``) and its free space when readable from here."""
        ...

    def list_images(self) -> list[ImageInfo]:
        """Every local image (not the intermediate layers)."""
        ...

    def image_ids_in_use(self) -> set[str]:
        """The image ids of every container, running or not (any owner)."""
        ...

    def image_id(self, ref: str) -> str | None:
        """The id ``ref`` (a tag or ``repo@sha256:…``) names locally, or None."""
        ...

    def remove_image(self, ref: str) -> bool:
        """Remove a tag or an image, never forced (the engine refuses an image in use).

        Returns whether the image was deleted (False: only a tag went).
        """
        ...

    def prune_build_cache(self) -> int:
        """Remove the dangling build cache; returns the bytes freed."""
        ...


# --------------------------------------------------------------------------- GPUs


# The readings themselves (GpuFrame, GpuSample, ...) are plain data: `core.gpu_readings`.


class GpuSampler(Protocol):
    """Samples the host's GPUs; never raises for a missing driver."""

    def host_info(self) -> GpuHostInfo:
        """Driver facts, or available=False with the reason."""
        ...

    def sample(self) -> GpuFrame:
        """One frame of all GPUs."""
        ...

    def close(self) -> None:
        """Release NVML."""
        ...


# --------------------------------------------------------------------------- secrets


class TokenSource(Protocol):
    """Where the supervisor gets the PAT from."""

    def get_token(self, org_url: str) -> str:
        """Return the PAT for ``org_url`` (trimmed) or raise `GpuciError` with advice."""
        ...


@dataclass(frozen=True)
class ImageConfig:
    """What a local image says of itself (``docker image inspect``)."""

    image_id: str
    """``sha256:…``: the same tag may point to another image tomorrow."""
    env: Mapping[str, str]
    """Its ``Config.Env`` (``NVIDIA_REQUIRE_CUDA``, ``CUDA_VERSION``…)."""
    labels: Mapping[str, str]
    """Its ``Config.Labels`` (``io.gpuci.cuda``…)."""
