"""What the daemon last read of the pool, Docker's disk and the agent versions.

Parts of `SupervisorSnapshot` (``pool_summary``, ``pools``, ``disk``,
``agent_versions``, ``azure_usage``) that describe the host's surroundings rather
than its slots: the pool as the server sees it (and why the disabled agents are
disabled), the free space of Docker's data root, the agent versions of the
organisation, the images and the package cache, and what the daemon's calls cost
the organisation. The same rules as
`gpuci_tui.core.models` hold: frozen, plain dataclasses that travel unchanged over
the control socket (`gpuci_tui.core.wire`); `models` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DiskSnapshot:
    """Free space of the Docker engine's data root, as the disk watch last read it."""

    state: str = "unknown"
    """``ok``, ``low`` (below ``[docker] min_free``: unused images are removed),
    ``critical`` (below ``[docker] hard_floor``: no pull starts) or ``unknown``."""
    root: str = ""
    """The engine's data root (``DockerRootDir``)."""
    free_bytes: int | None = None
    """None: not known (the data root is not visible from here, or not read yet)."""
    total_bytes: int | None = None
    min_free_bytes: int | None = None
    """The watermark below which unused images are removed (None: never)."""
    hard_floor_bytes: int = 0
    message: str = ""
    checked_at: float | None = None
    images_removed: int = 0
    """Images removed to free space since the daemon started."""


@dataclass(frozen=True)
class ImageAgentVersion:
    """The agent version one group's image bakes (its ``io.gpuci.agent-version`` label)."""

    group: str
    image: str
    baked: str | None = None
    """None: the image has no such label (not built by dockeragent/build.sh) or is absent."""


@dataclass(frozen=True)
class AgentVersionsSnapshot:
    """The organisation's agent version, the images' and the host's package cache."""

    org_version: str | None = None
    """The newest agent the organisation offers (``packages/agent``); None: not read yet."""
    images: tuple[ImageAgentVersion, ...] = ()
    cached: str | None = None
    """The newest verified package in the host's cache, mounted into new agent containers
    whose image is older (None: none)."""
    demanded: str | None = None
    """The highest ``Agent.Version -gtVersion`` queued jobs demand (None: none)."""
    warnings: tuple[str, ...] = ()
    message: str = ""
    """The last fetch problem (a refused package, a failed download); empty when none."""
    checked_at: float | None = None


@dataclass(frozen=True)
class DisabledAgents:
    """Why the pool's disabled agents are disabled, one count per reason.

    Each disabled agent counts once, under the first reason that holds, in this order.
    """

    busy: int = 0
    """Ours, running its last job here (its slot drained, restarted, retired or held)."""
    leaving: int = 0
    """Ours, being drained, restarted or retired."""
    held: int = 0
    """Ours, held back from jobs by GPU admission or health."""
    standby: int = 0
    """Ours, a hot standby (disabled on purpose until its slot needs it)."""
    idle: int = 0
    """Ours, a registration with no container now (its slot starts one when needed)."""
    others: int = 0
    """Not this host's: disabled by a person in Azure DevOps, or another host's agents."""

    @property
    def ours(self) -> int:
        """This host's disabled agents, whatever the reason."""
        return self.busy + self.leaving + self.held + self.standby + self.idle


@dataclass(frozen=True)
class PoolSummary:
    """The pool as the server sees it: our lanes' agents (`ours_only`) or every agent."""

    pool_id: int | None = None
    name: str = ""
    online: int = 0
    offline: int = 0
    disabled: int = 0
    queued_jobs: int = 0
    running_jobs: int = 0
    queued_capped: bool = False
    """The job requests read were at the service's cap (200): ``queued_jobs`` is a lower
    bound, shown as "N or more" (`queued_text`)."""
    standby: int = 0
    """How many of the disabled agents are this host's hot standbys (disabled on purpose)."""
    disabled_why: DisabledAgents = field(default_factory=DisabledAgents)
    """The ``disabled`` agents by reason (from the same read of the pool)."""
    read_at: float | None = None
    """When the agents were read (online, offline, disabled; None: not read yet)."""
    jobs_read_at: float | None = None
    """When ``queued_jobs`` was read: the job requests are read less often, and again
    soon after a job starts or ends here. ``running_jobs`` is as fresh as the
    supervisor knows: its own agents' jobs from the engine, the others' from ``read_at``."""
    waiting: tuple[str, ...] = ()
    """Queued jobs no agent of the pool can take, by reason (``no agent with gpu.product = …``)."""
    ours_only: bool = False
    """``online``/``offline``/``disabled`` count only our lanes' agents (the read asked the
    service for them, `demands`); False: every agent of the pool (the service refused the
    filter, or a daemon from before the filter)."""

    @property
    def queued_text(self) -> str:
        """The queue for people: ``3``, or ``200 or more`` when the read was at the cap."""
        return queued_words(self.queued_jobs, self.queued_capped)


def queued_words(count: int, capped: bool) -> str:
    """A queue count for people: a capped read is a lower bound (``200 or more``), never exact."""
    return f"{count} or more" if capped else str(count)


@dataclass(frozen=True)
class AzureUsage:
    """What the daemon's calls cost the organisation: the last minute, and its budget.

    Read from the client at each snapshot (`protocols.UsageReporting`); all zero / None
    with a client that does not count (a test double).
    """

    requests_last_minute: int = 0
    """HTTP attempts in the last 60 s (retries included)."""
    bytes_last_minute: int = 0
    """Response bytes received in the last 60 s."""
    cap_per_minute: int | None = None
    """``[azure] max_requests_per_minute`` (None: no cap)."""
    held_last_minute: int = 0
    """Calls the cap held back in the last 60 s (periodic reads first)."""
    rate_limit_remaining: float | None = None
    """``X-RateLimit-Remaining`` of the latest answer that carried it (the identity's budget
    left in the service's 5-minute window, shared by every host signing in as it)."""
    rate_limit_limit: float | None = None
    """``X-RateLimit-Limit``: that window's budget."""
    rate_limit_reset_at: float | None = None
    """``X-RateLimit-Reset``: when the identity's use falls back under the limit."""
    retry_after_until: float | None = None
    """Until when the service asked us to wait (``Retry-After``, a delay); None: it did not."""
    read_at: float | None = None
    """When the client counted these (None: a client or a daemon that does not count)."""

    @property
    def budget_low(self) -> bool:
        """The identity's budget in the service's window is under a fifth of its limit."""
        left, limit = self.rate_limit_remaining, self.rate_limit_limit
        return left is not None and limit is not None and limit > 0 and left < limit / 5
