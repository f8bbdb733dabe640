"""`SimPoolApi`: the `AgentPoolApi` protocol served straight from a `SimOrg` (no HTTP).

For fast supervisor unit tests and the in-process demo. It applies the same
auth, scope and public-endpoint faults as `SimServer` and records each call in
the organisation's request stats under the same route templates, so request
budgets can be asserted without a socket.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from gpuci_tui.core.azure.packages import PACKAGES, newest_first, parse_agent_package
from gpuci_tui.core.errors import (
    AzureAuthError,
    AzureBadRequestError,
    AzureNotFoundError,
    AzureRateLimitError,
    AzureScopeError,
    AzureServerError,
    AzureUnreachableError,
)
from gpuci_tui.core.packages import AgentPackage
from gpuci_tui.core.protocols import JOB_REQUEST_CAP, Agent, JobRequest, JobRequests, Pool
from gpuci_tui.sim.agent_packages import OFFLINE_BASE
from gpuci_tui.sim.demands import DemandSyntaxError, read_filter
from gpuci_tui.sim.org import MANAGE_SCOPE, READ_SCOPE, SimOrg
from gpuci_tui.sim.records import (
    AgentRecord,
    JobRecord,
    SimAuthError,
    SimNotFoundError,
    SimScopeError,
    wire_time,
)

T = TypeVar("T")

POOLS = "/_apis/distributedtask/pools"
POOL = "/_apis/distributedtask/pools/{poolId}"
AGENTS = "/_apis/distributedtask/pools/{poolId}/agents"
AGENT = "/_apis/distributedtask/pools/{poolId}/agents/{agentId}"
JOBREQUESTS = "/_apis/distributedtask/pools/{poolId}/jobrequests"


class SimPoolApi:
    """An `AgentPoolApi` bound to one organisation and one PAT.

    Args:
        org: The organisation.
        token: The PAT to authenticate every call with.
        url: Shown in error messages.
    """

    def __init__(self, org: SimOrg, token: str, url: str = "https://sim.invalid/simorg") -> None:
        self.org = org
        self.token = token
        self.url = url
        self.download_base = OFFLINE_BASE
        """Where the listed tarballs are said to be (a sim server's URL when one serves them)."""
        self._count = 0
        self._count_lock = threading.Lock()

    @property
    def request_count(self) -> int:
        """How many calls this client made."""
        return self._count

    def _call(self, method: str, route: str, scope: str, fn: Callable[[], T]) -> T:
        with self._count_lock:
            self._count += 1
        status = 200
        try:
            if self.org.faults.unreachable_now():
                status = 0
                raise AzureUnreachableError(
                    f"Cannot reach {self.url} (connection refused). Check the network; "
                    "retrying in the background."
                )
            hit = self.org.faults.match(private=False, token=self.token)
            if hit is not None:
                status = hit.status
                if hit.kind == "delay":
                    time.sleep(hit.delay)
                elif hit.kind == "rate_limit":
                    raise AzureRateLimitError(
                        f"Azure DevOps is rate-limiting this PAT (429); retrying after "
                        f"{hit.retry_after:g} s.",
                        hit.retry_after,
                    )
                elif hit.kind == "html":
                    raise AzureAuthError(
                        f"{self.url} answered with a sign-in page: the PAT was rejected. "
                        "Store a valid PAT."
                    )
                else:
                    raise AzureServerError(
                        f"{self.url} answered HTTP {hit.status}. It is retried automatically."
                    )
            status = 200
            self.org.authenticate(self.token, scope)
            return fn()
        except SimScopeError as exc:
            status = 401
            raise AzureScopeError(
                "The PAT is valid but lacks the Agent Pools (read, manage) scope. "
                "Create a PAT with that scope."
            ) from exc
        except SimAuthError as exc:
            status = 401
            raise AzureAuthError(f"{self.url} rejected the PAT (401). Store a valid PAT.") from exc
        except SimNotFoundError as exc:
            status = 404
            raise AzureNotFoundError(exc.message) from exc
        except DemandSyntaxError as exc:
            status = 400
            raise AzureBadRequestError(
                f"Azure DevOps refused the demands filter with HTTP 400: {exc}"
            ) from exc
        finally:
            self.org.stats.record(method, route, status)

    # ------------------------------------------------------------------ protocol

    def resolve_pool(self, name: str) -> Pool:
        """The pool called ``name``; AzureNotFoundError on 0 or several matches."""
        pools = self._call("GET", POOLS, READ_SCOPE, lambda: self.org.pools(name))
        if len(pools) != 1:
            why = "does not exist" if not pools else f"is ambiguous ({len(pools)} pools)"
            raise AzureNotFoundError(f"The agent pool {name!r} {why} in {self.url}.")
        p = pools[0]
        return Pool(p.id, p.name, self.org.pool_size(p.id), False, p.pool_type)

    def list_agents(
        self,
        pool_id: int,
        *,
        include_capabilities: bool = False,
        demands: Sequence[str] = (),
        agent_name: str | None = None,
        include_last_completed: bool = False,
    ) -> list[Agent]:
        """The pool's agents with their assigned requests, filtered as the service filters.

        Capabilities always come; the last completed request when asked for. A demand the
        organisation cannot read raises `AzureBadRequestError` (the service's 400).
        """
        agents = self._call(
            "GET",
            AGENTS,
            READ_SCOPE,
            lambda: self.org.agents(pool_id, agent_name, read_filter(",".join(demands))),
        )
        return [self._agent(a, last_completed=include_last_completed) for a in agents]

    def get_agent(
        self, pool_id: int, agent_id: int, *, include_capabilities: bool = False
    ) -> Agent | None:
        """One agent, None when it does not exist (a missing pool raises)."""
        try:
            record = self._call(
                "GET", AGENT, READ_SCOPE, lambda: self.org.get_agent(pool_id, agent_id)
            )
        except AzureNotFoundError:
            if not any(p.id == pool_id for p in self.org.pools()):
                raise  # a missing pool is still an error
            return None
        return self._agent(record)

    def set_agent_enabled(self, pool_id: int, agent_id: int, enabled: bool) -> Agent:
        """PATCH ``enabled``."""
        record = self._call(
            "PATCH",
            AGENT,
            MANAGE_SCOPE,
            lambda: self.org.set_agent_enabled(pool_id, agent_id, enabled),
        )
        return self._agent(record)

    def delete_agent(self, pool_id: int, agent_id: int) -> None:
        """DELETE a registration; a missing one is fine."""
        try:
            self._call(
                "DELETE", AGENT, MANAGE_SCOPE, lambda: self.org.delete_agent(pool_id, agent_id)
            )
        except AzureNotFoundError:
            return

    def list_job_requests(self, pool_id: int) -> JobRequests:
        """Queued and running requests (``completedRequestCount=0``), at most the service's cap."""
        jobs = self._call(
            "GET",
            JOBREQUESTS,
            READ_SCOPE,
            lambda: self.org.job_requests(pool_id, completed_request_count=0),
        )
        # As the service: a queued request names the agents that meet its demands.
        return JobRequests(
            (
                job_request(j, [a.name for a in self.org.matched_agents(j)])
                if j.state == "queued"
                else job_request(j)
                for j in jobs[:JOB_REQUEST_CAP]
            ),
            capped=len(jobs) >= JOB_REQUEST_CAP,
        )

    def last_job(self, pool_id: int, agent_id: int) -> JobRequest | None:
        """The agent's most recent finished request (``agentId=…&completedRequestCount=1``)."""
        jobs = self._call(
            "GET",
            JOBREQUESTS,
            READ_SCOPE,
            lambda: self.org.job_requests(pool_id, agent_id=agent_id, completed_request_count=1),
        )
        finished = [job_request(j) for j in jobs if j.result is not None]
        return max(finished, key=lambda r: (r.finish_time or "", r.request_id), default=None)

    def agent_packages(self, platform: str) -> list[AgentPackage]:
        """``packages/agent?platform=…``: what the organisation offers, newest first."""
        entries = self._call(
            "GET",
            "/" + PACKAGES,
            READ_SCOPE,
            lambda: self.org.packages.entries(platform, None, self.download_base),
        )
        return newest_first([parse_agent_package(e) for e in entries])

    def _agent(self, a: AgentRecord, *, last_completed: bool = False) -> Agent:
        assigned = last = None
        if (
            a.assigned_request is not None
            and (kept := self.org.kept_job(a.assigned_request)) is not None
        ):
            assigned = job_request(kept)
        wanted = a.last_completed_request if last_completed else None
        if wanted is not None and (kept := self.org.kept_job(wanted)) is not None:
            last = job_request(kept)
        return Agent(
            id=a.id,
            name=a.name,
            enabled=a.enabled,
            status=a.status,
            version=a.version,
            created_on=wire_time(a.created_on),
            status_changed_on=wire_time(a.status_changed_on),
            assigned_request=assigned,
            system_capabilities=dict(a.capabilities),
            last_completed_request=last,
        )


def job_request(j: JobRecord, matched: Sequence[str] | None = None) -> JobRequest:
    """A job record as the protocol's `JobRequest` (``matched``: its matchedAgents' names)."""

    def ts(value: float | None) -> str | None:
        return None if value is None else wire_time(value)

    return JobRequest(
        request_id=j.request_id,
        queue_time=ts(j.queue_time),
        assign_time=ts(j.assign_time),
        receive_time=ts(j.receive_time),
        finish_time=ts(j.finish_time),
        result=j.result,
        plan_type="Build",
        definition_id=j.definition_id,
        definition_name=j.pipeline,
        owner_name=j.run_name,
        reserved_agent_id=j.agent_id,
        reserved_agent_name=j.agent_name,
        demands=j.demands,
        matched_agents=tuple(matched) if matched is not None else None,
    )


__all__ = ["SimPoolApi", "job_request"]
