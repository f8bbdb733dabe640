"""The configuration's data: what `config.load_config` builds and `config.save_config` writes.

Plain frozen dataclasses with no rules (the rules are in `validate`,
`groups` and `loader`). A configuration runs one or more *agent groups*:
the ``[agents]`` table alone is one group (``default``); ``[groups.NAME]``
tables make several, each taking ``[agents]`` values as its defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from gpuci_tui.core.config.docker_disk import DockerConfig
from gpuci_tui.core.config.fleet import FleetConfig
from gpuci_tui.core.config.observe import GpuConfig, HistoryConfig, MetricsConfig
from gpuci_tui.core.engine.gpu_admission import GpuAdmission
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.standby.schedule import StandbySchedule

#: Name of the one group an ``[agents]``-only configuration runs.
DEFAULT_GROUP = "default"


@dataclass(frozen=True)
class VolumeConfig:
    """A read-only dataset mount (``[[agents.volumes]]``)."""

    host: str
    """Absolute host directory."""
    container: str
    """Absolute path inside the agent container."""
    env: str | None = None
    """Env var inside the agent that names ``container``."""


@dataclass(frozen=True)
class AzureConfig:
    """``[azure]``: the organisation and pool the agents register in, and how the daemon
    signs in to it (a PAT, a service principal or a managed identity).
    """

    url: str
    """Organisation URL, e.g. ``https://dev.azure.com/ORG``."""
    pool: str
    """Agent pool name."""
    remove_offline_after: float | None = None
    """Seconds after which the daemon removes a stale registration by itself (None: never;
    the file says e.g. ``"7d"``). See `core.engine.stale` for what counts as stale."""
    auth: str = "pat"
    """``pat`` | ``service-principal`` | ``managed-identity`` (see `secrets.credentials`)."""
    tenant_id: str = ""
    """Microsoft Entra tenant (GUID or domain) of the service principal."""
    client_id: str = ""
    """Application (client) id of the service principal, or of a user-assigned
    managed identity (empty: the system-assigned one)."""
    authority: str = "https://login.microsoftonline.com"
    """Entra sign-in host: another for sovereign clouds, the simulator's in tests."""
    client_certificate: str = ""
    """PEM file with the service principal's certificate and private key; empty:
    the principal signs in with a client secret (stored like the PAT)."""
    pat_expires: str = ""
    """The PAT's expiry date (``YYYY-MM-DD``, as Azure DevOps showed it at creation);
    warned about `secrets.credentials.PAT_WARN_DAYS` days before. Empty: not known."""
    max_requests_per_minute: int | None = None
    """This daemon's cap on its calls to the organisation (None: none). Periodic reads
    give way first, enabling and disabling lanes last (`core.azure.budget`)."""


@dataclass(frozen=True)
class AgentsConfig:
    """``[agents]``: the agent slots of this host (with ``[groups.NAME]`` tables, the
    values every group starts from).
    """

    count: int
    """Number of slots: each runs one single-job agent at a time (and its standbys)."""
    image: str
    """The agent image: a tag, ``[REGISTRY[:PORT]/]REPO[:TAG]``, or pinned by digest,
    ``REPO[:TAG]@sha256:<64 hex>``."""
    name_prefix: str
    """Agent and container names are ``{name_prefix}-{slot}``; default: host name."""
    network: str = "bridge"
    """The agent containers' Docker network mode."""
    gpus: str = "all"
    """``all`` | ``none`` | ``per-agent`` (slot i gets GPU i, or the i-th of ``gpu_ids``) |
    ``list`` (every agent gets ``gpu_ids``) | ``mig`` (slot i gets the i-th MIG device)."""
    gpu_ids: tuple[str, ...] = ()
    """GPU indexes or UUIDs for ``per-agent`` and ``list`` (TOML ``gpus = [...]`` or
    ``gpus = { per_agent = [...] }``)."""
    gpus_per_slot: int = 1
    """With ``per-agent``: each slot gets this many distinct GPUs, NVLink-joined ones kept
    together (see `core.config.slot_shapes`). ``gpus = "mig"``: one slot per MIG device."""
    volumes: tuple[VolumeConfig, ...] = ()
    """Read-only dataset mounts, ``[[agents.volumes]]`` tables."""
    oom_score_adj: int = 1000
    """Makes the kernel kill the job, not the host's own services, under memory pressure."""
    mem_limit: str | None = None
    """Optional Docker memory limit per agent, e.g. ``"64g"``."""
    docker_socket: bool = False
    """Opt-in: mount /var/run/docker.sock for container jobs (root-equivalent on the host)."""
    standby: bool | int | str = True
    """Hot standby: keep agents per slot registered, online and disabled, and enable one
    the moment the active agent's container exits. ``true`` (= 1): one standby, two
    registrations per slot; ``N``: N standbys, N + 1 registrations; ``"auto"``: between
    ``standby_min`` and ``standby_max``, sized to the queue (`engine.standby_auto`)."""
    standby_min: int = 2
    """With ``standby = "auto"``: standbys per slot kept while idle. Two by default: a burst
    of short jobs then starts on ready agents while "auto" starts more (each new lane needs a
    whole agent start-up first; with one, a 3-s job burst runs at 1.30-1.36x the ideal, with
    two at 1.18x: BENCHMARKS.md)."""
    standby_max: int = 3
    """With ``standby = "auto"``: standbys per slot at the most (each slot registers
    ``standby_max + 1`` agents once)."""
    max_agents: int | None = None
    """With ``standby = "auto"``: registered agents of this group at the most (the cap
    bounds the standbys per slot to ``max_agents // count - 1``); None: no cap."""
    standby_schedule: StandbySchedule | None = None
    """``[agents.standby_schedule]``: standbys per slot by weekday and time in a time zone
    (Managed DevOps Pools' semantics, `engine.standby_schedule`). With ``standby = N`` the
    count in force replaces N; with "auto" it is the floor kept while idle. None: none."""
    gpu_admission: GpuAdmission = field(default_factory=GpuAdmission)
    """Who else may use a slot's GPUs while its agent takes jobs (see `gpu_admission`)."""
    gpu_hold_down: float = 10.0
    """Seconds a GPU that flaps (busy again soon after its slot was released) must stay
    free before the slot takes jobs again; a GPU that frees up once is released at once."""
    pull: str = "missing"
    """When to pull ``image``: ``never``, ``missing`` (not on the host) or ``always`` (the
    registry has a newer digest for the tag); GitLab Runner's ``pull_policy``."""
    pull_check_interval: float = 300.0
    """Seconds between two registry checks of one image with ``pull = "always"``."""


@dataclass(frozen=True)
class Config:
    """The whole configuration file."""

    azure: AzureConfig
    agents: AgentsConfig
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)
    keys: dict[str, str] = field(default_factory=dict)
    """``[keys]``: binding id -> key(s), e.g. ``drain = "x"``."""
    path: Path | None = None
    """The file this was loaded from (not written to the file)."""
    gpu: GpuConfig = field(default_factory=GpuConfig)
    """``[gpu]``: sampling for per-job GPU accounting."""
    history: HistoryConfig = field(default_factory=HistoryConfig)
    """``[history]``: retention of the local job history."""
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    """``[metrics]``: the Prometheus endpoint of ``gpuci-tui run`` (off by default)."""
    docker: DockerConfig = field(default_factory=DockerConfig)
    """``[docker]``: the disk watermarks of Docker's data root."""
    groups: tuple[AgentGroup, ...] = ()
    """``[groups.NAME]``: several agent groups (empty: ``agents`` is the only group)."""
    fleet: FleetConfig = field(default_factory=FleetConfig)
    """``[fleet]``: the hosts the console watches over ssh (see `config.fleet`)."""


@dataclass(frozen=True)
class AgentGroup:
    """One group of identical agents: its own pool, image, count, GPUs, names."""

    name: str
    pool: str
    agents: AgentsConfig
    implicit: bool = False
    """The ``[agents]``-only configuration's single group (no group label, plain slot numbers)."""


def agent_groups(config: Config) -> tuple[AgentGroup, ...]:
    """The groups a configuration runs (the ``[agents]`` group when there are no others)."""
    if config.groups:
        return config.groups
    return (AgentGroup(DEFAULT_GROUP, config.azure.pool, config.agents, implicit=True),)


def for_group(config: Config, group: AgentGroup) -> Config:
    """The configuration of one group, as a single-group configuration."""
    azure = dataclasses.replace(config.azure, pool=group.pool)
    return dataclasses.replace(config, azure=azure, agents=group.agents, groups=())
