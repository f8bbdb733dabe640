"""Configuration schema (TOML). Loading, validation and atomic saving live here too.

The file format is a public contract, documented in README.md ("Configuration").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

GPU_POLICIES = ("all", "none", "per-agent")
NETWORK_MODES = ("bridge", "host")


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
    """``[azure]``."""

    url: str
    """Organisation URL, e.g. ``https://dev.azure.com/ORG``."""
    pool: str
    """Agent pool name."""


@dataclass(frozen=True)
class AgentsConfig:
    """``[agents]``."""

    count: int
    image: str
    name_prefix: str
    """Agent and container names are ``{name_prefix}-{slot}``; default: host name."""
    network: str = "bridge"
    gpus: str = "all"
    """``all`` | ``none`` | ``per-agent`` (slot i gets GPU i)."""
    volumes: tuple[VolumeConfig, ...] = ()
    oom_score_adj: int = 1000
    """Makes the kernel kill the job, not the host's own services, under memory pressure."""
    mem_limit: str | None = None
    """Optional Docker memory limit per agent, e.g. ``"64g"``."""
    docker_socket: bool = False
    """Opt-in: mount /var/run/docker.sock for container jobs (root-equivalent on the host)."""


@dataclass(frozen=True)
class SupervisorConfig:
    """``[supervisor]`` (optional; the defaults suit most hosts)."""

    poll_interval: float = 10.0
    """Seconds between agent-list calls to Azure DevOps (one call per cycle, never per slot)."""
    backoff_base: float = 2.0
    """First delay after an early failure; doubles per consecutive failure."""
    backoff_max: float = 60.0
    park_after: int = 5
    """Consecutive early failures after which a slot is parked."""
    healthy_after: float = 30.0
    """A container that lived this long (or took a job) did not fail early."""
    stop_timeout: float = 30.0
    """Seconds between SIGTERM and SIGKILL when stopping an idle agent."""


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
