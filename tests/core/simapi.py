"""An in-process `AgentPoolApi` over a `SimOrg`, for fast supervisor unit tests.

The HTTP path (SimServer + AzureDevOpsClient) is exercised by the integration
tests; here only the supervisor's logic is under test, and faults are injected
by raising the protocol's own errors.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

from gpuci_tui.core.protocols import Agent, AzureError, AzureNotFoundError, JobRequest, Pool
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import AgentRecord, JobRecord, SimNotFoundError


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


def _job(job: JobRecord) -> JobRequest:
    return JobRequest(
        request_id=job.request_id,
        queue_time=_iso(job.queue_time),
        assign_time=_iso(job.assign_time),
        receive_time=_iso(job.receive_time),
        finish_time=_iso(job.finish_time),
        result=job.result,
        plan_type="Build",
        definition_id=job.definition_id,
        definition_name=job.pipeline,
        owner_name=job.run_name,
        reserved_agent_id=job.agent_id,
        reserved_agent_name=job.agent_name,
    )


class SimPoolApi:
    """`AgentPoolApi` straight onto a `SimOrg` (with a fault hook)."""

    def __init__(self, org: SimOrg) -> None:
        self.org = org
        self.fault: Callable[[str], AzureError | None] | None = None
        self.calls: list[str] = []
        self._lock = threading.Lock()

    @property
    def request_count(self) -> int:
        return len(self.calls)

    def _call(self, name: str) -> None:
        with self._lock:
            self.calls.append(name)
        if self.fault is not None:
            error = self.fault(name)
            if error is not None:
                raise error

    def _agent(self, rec: AgentRecord) -> Agent:
        assigned = None
        if rec.assigned_request is not None:
            assigned = _job(self.org.job(rec.assigned_request))
        return Agent(
            id=rec.id,
            name=rec.name,
            enabled=rec.enabled,
            status=rec.status,
            version=rec.version,
            assigned_request=assigned,
        )

    def resolve_pool(self, name: str) -> Pool:
        self._call("resolve_pool")
        pools = self.org.pools(name)
        if len(pools) != 1:
            raise AzureNotFoundError(f"{len(pools)} pools named {name!r}")
        return Pool(id=pools[0].id, name=pools[0].name)

    def list_agents(self, pool_id: int) -> list[Agent]:
        self._call("list_agents")
        return [self._agent(a) for a in self.org.agents(pool_id)]

    def get_agent(self, pool_id: int, agent_id: int) -> Agent | None:
        self._call("get_agent")
        try:
            return self._agent(self.org.get_agent(pool_id, agent_id))
        except SimNotFoundError:
            return None

    def set_agent_enabled(self, pool_id: int, agent_id: int, enabled: bool) -> Agent:
        self._call("set_agent_enabled")
        return self._agent(self.org.set_agent_enabled(pool_id, agent_id, enabled))

    def delete_agent(self, pool_id: int, agent_id: int) -> None:
        self._call("delete_agent")
        self.org.delete_agent(pool_id, agent_id)

    def list_job_requests(self, pool_id: int) -> list[JobRequest]:
        self._call("list_job_requests")
        return [_job(j) for j in self.org.job_requests(pool_id, completed_request_count=0)]
