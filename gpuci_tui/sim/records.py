"""The simulated organisation's records and errors.

`SimOrg` keeps mutable records under its lock and hands out copies of them, so a
caller can read a record at leisure without racing the agents. Times are Unix
floats here; the HTTP layer formats them the way Azure DevOps does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

JobKind = Literal["normal", "oom", "fail", "fake_completed"]
JobState = Literal["queued", "running", "finished"]

#: The results Azure DevOps reports for a finished job request.
JOB_RESULTS = ("succeeded", "succeededWithIssues", "failed", "canceled", "skipped", "abandoned")


def wire_time(ts: float) -> str:
    """Format a Unix time like Azure DevOps: UTC, 7 fraction digits, ``Z``.

    Args:
        ts: Seconds since the epoch.

    Returns:
        e.g. ``2026-11-22T09:35:41.1234567Z``.
    """
    whole = int(ts)
    ticks = round((ts - whole) * 10_000_000)
    if ticks >= 10_000_000:  # rounding carried into the next second
        whole, ticks = whole + 1, ticks - 10_000_000
    base = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{ticks:07d}Z"


# --------------------------------------------------------------------------- errors


class SimError(Exception):
    """A request the organisation refuses; carries what the HTTP layer needs.

    Attributes:
        status: HTTP status the server answers with.
        type_key: VSS exception name (``typeKey`` in the JSON error body).
    """

    status = 400
    type_key = "InvalidRequestException"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SimAuthError(SimError):
    """Unknown, revoked or missing PAT."""

    status = 401
    type_key = "UnauthorizedRequestException"


class SimScopeError(SimAuthError):
    """The PAT is valid but lacks the scope the resource needs (Azure also answers 401)."""


class SimForbiddenError(SimScopeError):
    """A service principal in the organisation that is not the pool's Administrator."""

    status = 403
    type_key = "AccessCheckException"


class SimNotFoundError(SimError):
    """A pool, agent or job request does not exist."""

    status = 404

    def __init__(self, message: str, type_key: str) -> None:
        super().__init__(message)
        self.type_key = type_key


class SimSessionError(SimError):
    """The agent's session is no longer valid (replaced, deleted or gone offline)."""

    status = 409
    type_key = "TaskAgentSessionConflictException"


class SimUnavailableError(SimError):
    """An injected fault made an in-process call fail (see `FaultInjector`)."""

    def __init__(self, message: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class AgentStartup:
    """How long a simulated agent takes to come up, like the real one (seconds).

    The real agent spends seconds in ``config.sh`` (process start, connection
    test, key generation) before its registration exists, then more in
    ``run.sh`` before it has a session and shows as online. Both simulated
    agents (the busybox emulator and the in-process one) wait these times at
    the same two points. Tests default to 0; benchmarks and the demo use
    `REALISTIC`.

    Attributes:
        register: From the agent's start to its registration existing (offline).
        session: From the registration to the session (online, can take jobs).
    """

    register: float = 0.0
    session: float = 0.0


#: Measured orders of magnitude of the real agent (azure-devops-api.md §5.2): ~6 s, ~3 s.
REALISTIC_STARTUP = AgentStartup(register=6.0, session=3.0)


@dataclass
class PatRecord:
    """A personal access token known to the organisation."""

    token: str
    scopes: frozenset[str]
    user: str
    user_id: str
    revoked: bool = False
    service_principal: bool = False
    """An Entra access token of a service principal or managed identity, not a PAT."""


@dataclass
class PoolRecord:
    """An agent pool."""

    id: int
    name: str
    pool_type: str = "automation"
    created_on: float = 0.0
    scope: str = ""


@dataclass
class AgentRecord:
    """One agent registration.

    ``online`` follows the agent's session: it turns on when the agent opens a
    session (``run.sh`` starting, after ``config.sh`` registered it) and off at
    ``offline()`` (a ``--once`` agent calls it after its job or on SIGTERM),
    when the registration is replaced or deleted, or when the agent stops
    polling/heartbeating for ``heartbeat_timeout``.
    """

    id: int
    pool_id: int
    name: str
    version: str
    os_description: str
    enabled: bool = True
    online: bool = False
    created_on: float = 0.0
    status_changed_on: float = 0.0
    capabilities: dict[str, str] = field(default_factory=dict)
    hostname: str = ""
    session_key: str | None = None
    pending_key: str | None = None
    """Registered (``config.sh`` done) but ``run.sh`` has not opened its session yet."""
    session_jobs: int = 0
    """Jobs handed out in the current session (a ``--once`` agent takes at most one)."""
    session_max_jobs: int | None = 1
    registrations: int = 0
    """How often this name was registered (1 + number of replacements)."""
    assigned_request: int | None = None
    update_to: str | None = None
    """An update order the agent has not yet received (see `AgentUpdate`)."""
    last_completed_request: int | None = None
    last_seen: float = 0.0
    active_polls: int = 0
    user_capabilities: dict[str, str] = field(default_factory=dict)
    """Capabilities a person added in the portal (the agent's own are ``capabilities``)."""
    elsewhere: bool = False
    """Another host's agent, kept online (or offline) by that host: it never polls here,
    takes no job here and is never swept offline (`sim.foreign`)."""

    @property
    def all_capabilities(self) -> dict[str, str]:
        """System and user capabilities together, as demands are matched against them."""
        return {**self.capabilities, **self.user_capabilities}

    @property
    def status(self) -> str:
        """``online`` or ``offline`` as the REST API reports it."""
        return "online" if self.online else "offline"

    def copy(self) -> AgentRecord:
        """A detached copy (capabilities included)."""
        return dataclasses.replace(
            self,
            capabilities=dict(self.capabilities),
            user_capabilities=dict(self.user_capabilities),
        )


@dataclass
class JobRecord:
    """One job request and everything that happened to it (for assertions).

    ``assign_count`` counts how often the server handed this job to an agent;
    the organisation guarantees it never exceeds 1.
    """

    request_id: int
    pool_id: int
    pipeline: str
    definition_id: int
    run_name: str
    run_id: int
    duration: float
    kind: JobKind
    planned_result: str
    demands: tuple[str, ...] = ()
    queue_time: float = 0.0
    assign_time: float | None = None
    receive_time: float | None = None
    finish_time: float | None = None
    result: str | None = None
    agent_id: int | None = None
    agent_name: str | None = None
    assign_count: int = 0
    cancel_requested: bool = False
    note: str = ""
    """Why the job ended the way it did when the agent did not report it (e.g. abandoned)."""

    @property
    def state(self) -> JobState:
        """``queued`` (waiting for an agent), ``running`` (assigned) or ``finished``."""
        if self.result is not None:
            return "finished"
        if self.assign_time is not None:
            return "running"
        return "queued"

    def copy(self) -> JobRecord:
        """A detached copy."""
        return dataclasses.replace(self)


@dataclass(frozen=True)
class JobTicket:
    """What an agent receives when a poll hands it a job."""

    request_id: int
    pipeline: str
    run_name: str
    duration: float
    kind: JobKind
    result: str
    """The result the agent reports when the job runs to its end (kind ``normal``)."""


@dataclass(frozen=True)
class AgentUpdate:
    """What an out-of-date agent receives instead of a job: update to ``version`` first.

    The real server's AgentRefreshMessage; a ``--once`` agent leaves to update.
    """

    version: str


@dataclass(frozen=True)
class RequestLogEntry:
    """One HTTP (or in-process API) request the organisation saw."""

    at: float
    method: str
    route: str
    """Route template, e.g. ``/_apis/distributedtask/pools/{poolId}/agents``."""
    status: int
    private: bool = False
    detail: str = ""
    size: int = 0
    """The bytes of the answer's body (what the caller received)."""
