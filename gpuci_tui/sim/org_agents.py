"""The agent side of `SimOrg`: register, long-poll, heartbeat, finish, go offline.

Kept apart from the admin side (org.py) so each file stays readable; the state
is shared and always touched under the organisation's lock. The job dispatcher
and the heartbeat sweep live here because they are what agents set in motion.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from gpuci_tui.sim.demands import satisfies
from gpuci_tui.sim.records import (
    AgentRecord,
    AgentUpdate,
    JobRecord,
    JobTicket,
    PatRecord,
    PoolRecord,
    SimError,
    SimNotFoundError,
    SimSessionError,
)

if TYPE_CHECKING:
    import itertools

    from gpuci_tui.sim.agent_packages import SimAgentPackages


class AgentSideMixin:
    """Agent-facing operations of `SimOrg` (see that class for the shared state)."""

    clock: Callable[[], float]
    heartbeat_timeout: float
    agent_version: str
    packages: SimAgentPackages
    _lock: threading.RLock
    _cond: threading.Condition
    _pools: dict[int, PoolRecord]
    _agents: dict[int, AgentRecord]
    _sessions: dict[str, int]
    _jobs: dict[int, JobRecord]
    _queue: list[int]
    _agent_ids: itertools.count[int]
    _poll_order: itertools.count[int]
    _poll_rank: dict[int, int]

    def authenticate(self, token: str | None, scope: str | None = "agentpools") -> PatRecord:
        """Check a PAT; implemented by `SimOrg`."""
        raise NotImplementedError

    # ------------------------------------------------------------------ agent calls

    def register(
        self,
        pool_name: str,
        agent_name: str,
        token: str,
        hostname: str = "",
        *,
        capabilities: Mapping[str, str] | None = None,
        version: str | None = None,
        os_description: str = "Linux 6.1.0 #1 SMP Debian (busybox emulator)",
        max_jobs: int | None = 1,
        open_session: bool = True,
    ) -> tuple[int, str]:
        """Register an agent the way ``config.sh --replace`` (+ ``run.sh --once``) do.

        An existing agent of the same name in the pool is replaced: it keeps its
        id and ``enabled`` flag, gets new capabilities and a new session; its old
        session stops working and a job it was running is abandoned. A new name
        is created enabled.

        Args:
            pool_name: Pool name (the first pool of that name is used).
            agent_name: Agent name.
            token: The PAT; it needs the ``agentpools_manage`` scope.
            hostname: Container host name (becomes the ``HOSTNAME`` capability).
            capabilities: Extra capabilities (the agent's environment).
            version: Agent version (default: the organisation's).
            os_description: ``osDescription``.
            max_jobs: Jobs per session; 1 models ``--once``, None unlimited.
            open_session: Also open the session at once (``run.sh`` started); when
                False the agent stays offline until `open_session` is called.

        Returns:
            ``(agent_id, key)``; the key opens the session (or, with ``open_session``,
            authenticates later calls).

        Raises:
            SimAuthError / SimScopeError: bad PAT.
            SimNotFoundError: no pool of that name.
        """
        self.authenticate(token, "agentpools_manage")
        with self._cond:
            self._sweep()
            pool = next((p for p in self._pools.values() if p.name == pool_name), None)
            if pool is None:
                raise SimNotFoundError(
                    f"Agent pool {pool_name} does not exist or you do not have permission.",
                    "TaskAgentPoolNotFoundException",
                )
            now = self.clock()
            version = version or self.agent_version
            caps = {
                "Agent.Name": agent_name,
                "Agent.OS": "Linux",
                "Agent.OSArchitecture": "X64",
                "Agent.Version": version,
                "Agent.ComputerName": hostname or agent_name,
                "Agent.HomeDirectory": "/azp",
                **dict(capabilities or {}),
            }
            if hostname:
                caps["HOSTNAME"] = hostname
            agent = next(
                (a for a in self._agents.values() if a.pool_id == pool.id and a.name == agent_name),
                None,
            )
            if agent is None:
                agent = AgentRecord(
                    id=next(self._agent_ids),
                    pool_id=pool.id,
                    name=agent_name,
                    version=version,
                    os_description=os_description,
                    created_on=now,
                    status_changed_on=now,
                )
                self._agents[agent.id] = agent
            else:
                self._abandon_current(agent, "the agent registration was replaced")
                self._end_session(agent)
            agent.version = version
            agent.os_description = os_description
            agent.capabilities = caps
            agent.hostname = hostname
            agent.registrations += 1
            key = secrets.token_hex(16)
            agent.session_jobs = 0
            agent.update_to = None
            agent.session_max_jobs = max_jobs
            agent.pending_key = key
            if open_session:
                self._open(agent, key, now)
            self._cond.notify_all()
            return agent.id, key

    def add_elsewhere(
        self,
        pool_id: int,
        name: str,
        capabilities: Mapping[str, str],
        *,
        online: bool,
        enabled: bool = True,
        since: float | None = None,
    ) -> int:
        """An agent another host registered and keeps alive (`sim.foreign`); returns its id.

        It is listed like any agent, but never polls here, takes no job here and is
        never swept offline: its host, not this organisation, decides its status.
        """
        with self._cond:
            if pool_id not in self._pools:
                raise SimNotFoundError(
                    f"Agent pool {pool_id} could not be found.", "TaskAgentPoolNotFoundException"
                )
            when = self.clock() if since is None else since
            version = capabilities.get("Agent.Version", self.agent_version)
            agent = AgentRecord(
                id=next(self._agent_ids),
                pool_id=pool_id,
                name=name,
                version=version,
                os_description="Linux 6.8.0-45-generic #45-Ubuntu SMP",
                enabled=enabled,
                online=online,
                created_on=when,
                status_changed_on=when,
                capabilities=dict(capabilities),
                hostname=capabilities.get("HOSTNAME", ""),
                registrations=1,
                elsewhere=True,
            )
            self._agents[agent.id] = agent
            return agent.id

    def open_session(self, agent_id: int, key: str) -> str:
        """``run.sh`` starts: the registered agent opens its session and shows online.

        Returns:
            The session key (the key `register` returned).

        Raises:
            SimSessionError: the registration was replaced or deleted meanwhile.
        """
        with self._cond:
            agent = self._agents.get(agent_id)
            if agent is None or agent.pending_key != key:
                raise SimSessionError("The agent registration was replaced or deleted.")
            self._open(agent, key, self.clock())
            self._cond.notify_all()
            return key

    def _open(self, agent: AgentRecord, key: str, now: float) -> None:
        agent.pending_key = None
        agent.session_key = key
        self._sessions[key] = agent.id
        self._set_online(agent, True, now)
        agent.last_seen = now

    def poll(
        self,
        agent_id: int,
        session_key: str,
        timeout: float,
        cancel: threading.Event | None = None,
        cut: threading.Event | None = None,
    ) -> JobTicket | AgentUpdate | None:
        """Long-poll for a job: block up to ``timeout`` seconds.

        Returns the job assigned to this agent, an `AgentUpdate` when the server
        would hand it a job but it is older than the required version, or None when
        the time is up or ``cancel`` is set (call `wake` after setting it, to end the
        wait at once). ``cut``: the poll's connection was dropped (an outage): it ends
        before taking any job, since its answer would have nowhere to go.

        Raises:
            SimSessionError: the session was replaced, ended, or the agent deleted.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            agent = self._session_agent(agent_id, session_key)
            self._sweep()
            if not agent.online:
                # Heartbeat loss ended the session; a real agent gets a conflict too.
                raise SimSessionError("The agent session expired; register again.")
            agent.active_polls += 1
            self._poll_rank.setdefault(agent.id, next(self._poll_order))
            try:
                while True:
                    if cut is not None and cut.is_set():
                        return None
                    self._dispatch()
                    if self._sessions.get(session_key) != agent.id:
                        raise SimSessionError("The agent session ended (replaced or deleted).")
                    if agent.update_to is not None:
                        update, agent.update_to = AgentUpdate(agent.update_to), None
                        agent.session_max_jobs = 0  # it leaves: no job for this session
                        return update
                    ticket = self._deliver(agent)
                    if ticket is not None:
                        return ticket
                    if cancel is not None and cancel.is_set():
                        return None
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    self._cond.wait(remaining)
            finally:
                agent.active_polls -= 1
                if agent.active_polls == 0:
                    self._poll_rank.pop(agent.id, None)
                agent.last_seen = self.clock()

    def wake(self) -> None:
        """Wake every blocked poll so it re-checks its ``cancel`` event."""
        with self._cond:
            self._cond.notify_all()

    def heartbeat(self, agent_id: int, session_key: str, request_id: int | None = None) -> bool:
        """Renew the agent's lease (and its job's). Returns True when the job must stop.

        The job must stop when it was canceled, or already abandoned (the
        heartbeat came too late).

        Raises:
            SimSessionError: the session is no longer valid.
        """
        with self._cond:
            agent = self._session_agent(agent_id, session_key)
            self._sweep()
            agent.last_seen = self.clock()
            if request_id is None:
                return False
            job = self._jobs.get(request_id)
            if job is None or job.agent_id != agent.id:
                return True
            return job.cancel_requested or job.state == "finished"

    def finish(self, request_id: int, result: str, session_key: str | None = None) -> bool:
        """The agent reports its job's result. Returns False if the job had already ended.

        Raises:
            SimSessionError: ``session_key`` is not the session of the job's agent.
            SimNotFoundError: unknown request.
        """
        with self._cond:
            self._sweep()
            job = self._jobs.get(request_id)
            if job is None:
                raise SimNotFoundError(
                    f"Job request {request_id} could not be found.",
                    "TaskAgentJobNotFoundException",
                )
            if session_key is not None:
                agent = self._session_agent(job.agent_id or -1, session_key)
                agent.last_seen = self.clock()
            if job.state != "running":
                return False
            if job.cancel_requested:
                result = "canceled"
            self._finish_locked(job, result)
            self._cond.notify_all()
            return True

    def offline(self, agent_id: int, session_key: str | None = None) -> None:
        """The agent ends its session (``run.sh`` exits). Unknown agents are ignored.

        Raises:
            SimSessionError: ``session_key`` given and not the agent's session.
        """
        with self._cond:
            agent = self._agents.get(agent_id)
            if agent is None:
                return
            if session_key is not None and agent.session_key != session_key:
                raise SimSessionError("The agent session ended (replaced or deleted).")
            self._abandon_current(agent, "the agent went offline while running the job")
            self._end_session(agent)
            self._cond.notify_all()

    # ------------------------------------------------------------------ rules (lock held)

    def _session_agent(self, agent_id: int, session_key: str) -> AgentRecord:
        if self._sessions.get(session_key) != agent_id or agent_id not in self._agents:
            raise SimSessionError("The agent session ended (replaced or deleted).")
        return self._agents[agent_id]

    def _set_online(self, agent: AgentRecord, online: bool, now: float) -> None:
        if agent.online != online:
            agent.online = online
            agent.status_changed_on = now

    def _end_session(self, agent: AgentRecord) -> None:
        agent.pending_key = None
        if agent.session_key is not None:
            self._sessions.pop(agent.session_key, None)
            agent.session_key = None
        self._set_online(agent, False, self.clock())

    def _deliver(self, agent: AgentRecord) -> JobTicket | None:
        if agent.assigned_request is None:
            return None
        job = self._jobs[agent.assigned_request]
        if job.receive_time is not None:
            return None  # already handed over; the agent is running it
        job.receive_time = self.clock()
        return JobTicket(
            job.request_id, job.pipeline, job.run_name, job.duration, job.kind, job.planned_result
        )

    def _eligible(self, agent: AgentRecord, job: JobRecord) -> bool:
        return (
            agent.pool_id == job.pool_id
            and agent.enabled
            and agent.online
            and agent.active_polls > 0
            and agent.assigned_request is None
            and agent.update_to is None
            and (agent.session_max_jobs is None or agent.session_jobs < agent.session_max_jobs)
            and satisfies(agent, job.demands)
        )

    def _dispatch(self) -> None:
        """Hand queued jobs, oldest first, to the agents that have been polling longest."""
        if not self._queue:
            return
        now = self.clock()
        waiting = sorted(
            (a for a in self._agents.values() if a.active_polls > 0),
            key=lambda a: self._poll_rank.get(a.id, 0),
        )
        if not waiting:
            return
        for request_id in list(self._queue):
            job = self._jobs[request_id]
            agent = None
            for candidate in (a for a in waiting if self._eligible(a, job)):
                update = self.packages.update_for(candidate.version)
                if update is None:
                    agent = candidate
                    break
                # The server's AgentRefreshMessage instead of the job, which stays queued.
                candidate.update_to = update
                self._cond.notify_all()
            if agent is None:
                continue
            self._queue.remove(request_id)
            job.assign_time = now
            job.agent_id = agent.id
            job.agent_name = agent.name
            job.assign_count += 1
            agent.assigned_request = request_id
            agent.session_jobs += 1
            self._cond.notify_all()

    def _finish_locked(self, job: JobRecord, result: str, note: str = "") -> None:
        job.result = result
        job.finish_time = self.clock()
        job.note = note or job.note
        agent = self._agents.get(job.agent_id) if job.agent_id is not None else None
        if agent is not None and agent.assigned_request == job.request_id:
            agent.assigned_request = None
            agent.last_completed_request = job.request_id

    def _abandon_current(self, agent: AgentRecord, why: str) -> None:
        if agent.assigned_request is not None:
            self._finish_locked(self._jobs[agent.assigned_request], "abandoned", note=why)

    def _sweep(self) -> None:
        """Take agents that stopped showing signs of life offline; abandon their jobs."""
        now = self.clock()
        for agent in self._agents.values():
            if (
                agent.online
                and agent.active_polls == 0
                and not agent.elsewhere
                and now - agent.last_seen > self.heartbeat_timeout
            ):
                self._abandon_current(agent, "the agent stopped heartbeating")
                self._end_session(agent)
                self._cond.notify_all()


__all__ = ["AgentSideMixin", "SimError"]
