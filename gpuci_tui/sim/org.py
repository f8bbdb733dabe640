"""`SimOrg`: a thread-safe model of one Azure DevOps organisation's agent pools.

It holds PATs, pools, agent registrations and job requests, and applies the
server's rules: FIFO dispatch to enabled, online, polling, idle agents; one job
per ``--once`` session; ``abandoned`` when an agent stops heartbeating or is
deleted mid-job. The HTTP server (`gpuci_tui.sim.server`), the busybox agent
emulator (through the server) and `SimulatedRuntime` (directly) all drive it.

Assumptions where the real service is undocumented (see azure-devops-api.md §8):

* A replaced registration (``config.sh --replace``) keeps the agent's id and its
  ``enabled`` flag (the agent updates the existing registration, azure-devops-api.md
  §5.2); a new name is created enabled. The old session stops working and a job
  it ran is abandoned.
* Registration and session are two steps, as with ``config.sh`` then ``run.sh``:
  a registered agent is offline until it opens its session. `startup` says how
  long an agent takes before each step (see `AgentStartup`).
* A disabled agent keeps running its current job; it only gets no new one.
* Deleting an agent that runs a job abandons the job at once.
* Heartbeat loss is detected lazily: every read or agent call first sweeps
  agents whose last sign of life is older than ``heartbeat_timeout``.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from gpuci_tui.sim.agent_packages import SimAgentPackages
from gpuci_tui.sim.demands import SimDemand, meets_all, satisfies
from gpuci_tui.sim.entra import SimEntra
from gpuci_tui.sim.faults import FaultInjector
from gpuci_tui.sim.metrics import RequestMetricsMixin, RequestStats
from gpuci_tui.sim.org_agents import AgentSideMixin
from gpuci_tui.sim.records import (
    AgentRecord,
    AgentStartup,
    JobKind,
    JobRecord,
    PatRecord,
    PoolRecord,
    SimAuthError,
    SimError,
    SimForbiddenError,
    SimNotFoundError,
    SimScopeError,
)

READ_SCOPE = "agentpools"
MANAGE_SCOPE = "agentpools_manage"
DEFAULT_SCOPES = (READ_SCOPE, MANAGE_SCOPE)


class SimOrg(AgentSideMixin, RequestMetricsMixin):
    """One simulated organisation. All methods are thread-safe.

    Args:
        name: Organisation name (shown in connectionData and URLs).
        heartbeat_timeout: Seconds without a poll/heartbeat after which an agent
            is offline and its job abandoned.
        agent_version: Version reported by agents that do not give one.
        clock: Time source for every timestamp (waits always use real time).
        startup: How long simulated agents take to register and to open a session.
    """

    def __init__(
        self,
        name: str = "simorg",
        *,
        heartbeat_timeout: float = 6.0,
        agent_version: str = "4.264.2",
        clock: Callable[[], float] = time.time,
        startup: AgentStartup | None = None,
    ) -> None:
        self.name = name
        self.startup = startup or AgentStartup()
        self.heartbeat_timeout = heartbeat_timeout
        self.agent_version = agent_version
        self.clock = clock
        self.instance_id = str(uuid.uuid4())
        self.faults = FaultInjector(clock)
        self.entra = SimEntra(clock)
        """The tenant whose access tokens the organisation takes (service principals)."""
        self.stats = RequestStats(clock)
        self.packages = SimAgentPackages()
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._pats: dict[str, PatRecord] = {}
        self._pools: dict[int, PoolRecord] = {}
        self._agents: dict[int, AgentRecord] = {}
        self._sessions: dict[str, int] = {}
        self._jobs: dict[int, JobRecord] = {}
        self._queue: list[int] = []
        self._definitions: dict[str, int] = {}
        self._runs: dict[tuple[int, str], int] = {}
        self._pool_ids = itertools.count(42)
        self._agent_ids = itertools.count(1001)
        self._job_ids = itertools.count(890_001)
        self._poll_order = itertools.count()
        self._poll_rank: dict[int, int] = {}

    # ------------------------------------------------------------------ setup

    def add_pat(
        self, token: str, scopes: Iterable[str] = DEFAULT_SCOPES, user: str = "Jane Doe"
    ) -> None:
        """Make ``token`` a valid PAT with ``scopes`` (``agentpools``, ``agentpools_manage``)."""
        with self._lock:
            self._pats[token] = PatRecord(token, frozenset(scopes), user, str(uuid.uuid4()))

    def revoke_pat(self, token: str) -> None:
        """Make a PAT invalid from now on (as if it expired)."""
        with self._lock:
            if token in self._pats:
                self._pats[token].revoked = True

    def add_pool(self, name: str, pool_type: str = "automation") -> int:
        """Create a pool and return its id (42, 43, …). Adding a name twice makes it ambiguous."""
        with self._lock:
            pool_id = next(self._pool_ids)
            self._pools[pool_id] = PoolRecord(
                pool_id, name, pool_type, self.clock(), str(uuid.uuid4())
            )
            return pool_id

    # ------------------------------------------------------------------ auth

    def authenticate(self, token: str | None, scope: str | None = READ_SCOPE) -> PatRecord:
        """Check a PAT (and that it carries ``scope``, when given).

        Raises:
            SimAuthError: unknown, revoked or missing token.
            SimScopeError: valid token without ``scope``.
        """
        with self._lock:
            pat = self._pats.get(token or "")
            if pat is None and token:
                pat = self._principal_record(token)
            if pat is None or pat.revoked:
                raise SimAuthError(
                    "TF400813: The user '' is not authorized to access this resource."
                )
            if scope is not None and scope not in pat.scopes:
                if pat.service_principal:
                    # A member without the pool's Administrator role: Azure says 403.
                    raise SimForbiddenError(
                        f"Access denied. {pat.user} needs Manage permissions for the agent "
                        "pool to perform the action. For more information, contact the "
                        "Azure DevOps Server administrator."
                    )
                raise SimScopeError(
                    f"TF400813: The user '{pat.user}' is not authorized to access this resource."
                )
            return PatRecord(
                pat.token, pat.scopes, pat.user, pat.user_id, pat.revoked, pat.service_principal
            )

    def _principal_record(self, token: str) -> PatRecord | None:
        """An Entra access token as the organisation sees it (None: not one it accepts)."""
        principal = self.entra.principal(token)
        if principal is None or not principal.in_org:
            return None
        scopes = DEFAULT_SCOPES if principal.pool_admin else (READ_SCOPE,)
        user_id = str(uuid.uuid5(uuid.NAMESPACE_OID, principal.client_id))
        return PatRecord(token, frozenset(scopes), principal.name, user_id, service_principal=True)

    # ------------------------------------------------------------------ pools and agents

    def pools(self, name: str | None = None, pool_type: str | None = None) -> list[PoolRecord]:
        """Pools, optionally filtered by exact name and type (``automation``/``deployment``)."""
        with self._lock:
            return [
                PoolRecord(p.id, p.name, p.pool_type, p.created_on, p.scope)
                for p in self._pools.values()
                if (name is None or p.name == name)
                and (pool_type is None or p.pool_type.lower() == pool_type.lower())
            ]

    def get_pool(self, pool_id: int) -> PoolRecord:
        """One pool. Raises SimNotFoundError."""
        with self._lock:
            return self._pool(pool_id)

    def pool_size(self, pool_id: int) -> int:
        """Number of agents registered in the pool."""
        with self._lock:
            return sum(1 for a in self._agents.values() if a.pool_id == pool_id)

    def _pool(self, pool_id: int) -> PoolRecord:
        pool = self._pools.get(pool_id)
        if pool is None:
            raise SimNotFoundError(
                f"Agent pool {pool_id} could not be found.", "TaskAgentPoolNotFoundException"
            )
        return pool

    def _agent(self, pool_id: int, agent_id: int) -> AgentRecord:
        self._pool(pool_id)
        agent = self._agents.get(agent_id)
        if agent is None or agent.pool_id != pool_id:
            raise SimNotFoundError(
                f"No agent could be found with identifier {agent_id}.",
                "TaskAgentNotFoundException",
            )
        return agent

    def agents(
        self, pool_id: int, name: str | None = None, demands: Sequence[SimDemand] = ()
    ) -> list[AgentRecord]:
        """Agents of a pool (copies): only the one called ``name``, those meeting ``demands``."""
        with self._lock:
            self._sweep()
            self._pool(pool_id)
            return [
                a.copy()
                for a in self._agents.values()
                if a.pool_id == pool_id
                and (name is None or a.name == name)
                and (not demands or meets_all(a.all_capabilities, demands))
            ]

    def agent_by_id(self, agent_id: int) -> AgentRecord | None:
        """The agent with ``agent_id`` in any pool (a copy), or None."""
        with self._lock:
            agent = self._agents.get(agent_id)
            return None if agent is None else agent.copy()

    def get_agent(self, pool_id: int, agent_id: int) -> AgentRecord:
        """One agent (copy). Raises SimNotFoundError."""
        with self._lock:
            self._sweep()
            return self._agent(pool_id, agent_id).copy()

    def find_agent(self, name: str) -> AgentRecord | None:
        """The agent called ``name`` in any pool (tests and demo), or None."""
        with self._lock:
            self._sweep()
            for a in self._agents.values():
                if a.name == name:
                    return a.copy()
            return None

    def set_agent_enabled(self, pool_id: int, agent_id: int, enabled: bool) -> AgentRecord:
        """PATCH ``enabled``. A disabled agent finishes its current job but gets no new one."""
        with self._cond:
            agent = self._agent(pool_id, agent_id)
            agent.enabled = enabled
            if enabled:
                self._dispatch()
            self._cond.notify_all()
            return agent.copy()

    def delete_agent(self, pool_id: int, agent_id: int) -> None:
        """Delete a registration; its running job is abandoned and its session ends.

        The service does not refuse a busy agent as far as is known (a maintainer,
        microsoft/azure-pipelines-agent#2887: the docs warn against deleting agents
        that "maybe even are still running jobs"), so neither does this: a prune reads
        each agent again right before its DELETE and keeps a busy one.
        """
        with self._cond:
            agent = self._agent(pool_id, agent_id)
            self._abandon_current(agent, "the agent was deleted while running the job")
            self._end_session(agent)
            del self._agents[agent_id]
            self._poll_rank.pop(agent_id, None)
            self._cond.notify_all()

    # ------------------------------------------------------------------ jobs

    def queue_job(
        self,
        pool_id: int,
        pipeline: str = "train - main",
        duration: float = 2.0,
        result: str = "succeeded",
        kind: JobKind = "normal",
        demands: Iterable[str] = (),
    ) -> int:
        """Queue a job request and return its id.

        Args:
            pool_id: Pool the job targets.
            pipeline: Pipeline (definition) name; the run name is derived from it.
            duration: Seconds the job runs on the agent.
            result: Result the agent reports when a ``normal`` job runs to its end.
            kind: ``normal``; ``oom`` (the job eats memory until the container is
                killed); ``fail`` (the job ends with result ``failed``).
            demands: Demand strings (``"cuda"``, ``"gpu -equals a100"``).
        """
        with self._cond:
            self._pool(pool_id)
            now = self.clock()
            def_id = self._definitions.setdefault(pipeline, 4000 + len(self._definitions) * 7)
            day = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d")
            run_no = self._runs.get((def_id, day), 0) + 1
            self._runs[(def_id, day)] = run_no
            request_id = next(self._job_ids)
            if self.packages.required:
                # Tasks with a minimumAgentVersion add this demand (azure-devops-api.md §2.8).
                demands = (*demands, f"Agent.Version -gtVersion {self.packages.required}")
            self._jobs[request_id] = JobRecord(
                request_id=request_id,
                pool_id=pool_id,
                pipeline=pipeline,
                definition_id=def_id,
                run_name=f"{day}.{run_no}",
                run_id=670_000 + request_id % 100_000,
                duration=duration,
                kind=kind,
                planned_result="failed" if kind == "fail" else result,
                demands=tuple(demands),
                queue_time=now,
            )
            self._queue.append(request_id)
            self._dispatch()
            self._cond.notify_all()
            return request_id

    def require_agent_version(self, version: str) -> None:
        """Offer agent ``version`` and require it from now on (agents older than it update).

        Queued jobs that a required-version agent would take are not lost: an old agent
        that would get one receives an update order instead, and the job stays queued.
        """
        with self._cond:
            self.packages.require(version)
            self._dispatch()
            self._cond.notify_all()

    def cancel_job(self, request_id: int) -> None:
        """Cancel a job: a queued one ends ``canceled`` now, a running one at its next heartbeat."""
        with self._cond:
            job = self._job(request_id)
            if job.state == "queued":
                self._queue.remove(request_id)
                self._finish_locked(job, "canceled", note="canceled before an agent took it")
            elif job.state == "running":
                job.cancel_requested = True
            self._cond.notify_all()

    def _job(self, request_id: int) -> JobRecord:
        job = self._jobs.get(request_id)
        if job is None:
            raise SimNotFoundError(
                f"Job request {request_id} could not be found.", "TaskAgentJobNotFoundException"
            )
        return job

    def job(self, request_id: int) -> JobRecord:
        """One job request (copy). Raises SimNotFoundError."""
        with self._lock:
            self._sweep()
            return self._job(request_id).copy()

    def kept_job(self, request_id: int) -> JobRecord | None:
        """One job request (copy), or None once the organisation no longer keeps it.

        An agent's ``assignedRequest``/``lastCompletedRequest`` point at requests that
        retention (or a long-running harness pruning its records) may have dropped: the
        agent list then leaves the request out rather than failing the whole read.
        """
        with self._lock:
            job = self._jobs.get(request_id)
            return None if job is None else job.copy()

    def jobs(self, pool_id: int | None = None) -> list[JobRecord]:
        """Every job request ever queued (copies, oldest first): the record for assertions."""
        with self._lock:
            self._sweep()
            return [j.copy() for j in self._jobs.values() if pool_id in (None, j.pool_id)]

    job_log = jobs

    def job_requests(
        self,
        pool_id: int,
        *,
        agent_id: int | None = None,
        completed_request_count: int | None = None,
    ) -> list[JobRecord]:
        """What ``GET …/jobrequests`` returns, newest first.

        Args:
            pool_id: The pool.
            agent_id: Only requests reserved by this agent.
            completed_request_count: Unfinished requests plus at most this many
                finished ones (0: only queued and running); None: all.
        """
        with self._lock:
            self._sweep()
            self._pool(pool_id)
            picked: list[JobRecord] = []
            finished = 0
            for job in reversed(self._jobs.values()):
                if job.pool_id != pool_id or (agent_id is not None and job.agent_id != agent_id):
                    continue
                if job.state == "finished":
                    if completed_request_count is not None and finished >= completed_request_count:
                        continue
                    finished += 1
                picked.append(job.copy())
            return picked

    def matched_agents(self, job: JobRecord) -> list[AgentRecord]:
        """Agents of the job's pool whose capabilities satisfy its demands."""
        with self._lock:
            return [
                a.copy()
                for a in self._agents.values()
                if a.pool_id == job.pool_id and satisfies(a, job.demands)
            ]

    def wait_for(self, predicate: Callable[[SimOrg], bool], timeout: float) -> bool:
        """Block until ``predicate(self)`` holds (re-checked on every change); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if predicate(self):
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                # Heartbeat loss happens without a notify, hence the short slices.
                self._cond.wait(min(remaining, 0.05))


__all__ = [
    "DEFAULT_SCOPES",
    "MANAGE_SCOPE",
    "READ_SCOPE",
    "SimAuthError",
    "SimError",
    "SimNotFoundError",
    "SimOrg",
    "SimScopeError",
]
