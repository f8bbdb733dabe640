"""The calls on one pool's agents and job requests, and how the client reads answers.

`PoolAgentCalls` is the part of `AzureDevOpsClient` that the supervisor calls every
cycle: the pool's agents with their assigned requests (one call for every slot;
``demands`` asks the service for ours only), enabling, disabling and deleting a
registration, the pool's unfinished job requests (paged; an answer at the service's
cap says so) and our agents' finished requests (the history's reconciliation). The observer's reads are `Priority.PERIODIC`
(they give way first under ``[azure] max_requests_per_minute``), enabling and
disabling `Priority.INTAKE` (last). It also holds the helpers every call of
the client uses to turn an answer into the dataclasses of `core/protocols.py`,
with messages an operator can act on when it cannot (`_items`, `_one`, `_pool_gone`).
`AzureDevOpsClient` (`client.py`) builds the transport and adds the organisation's
calls: identity, pools, agent packages, the PAT check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from gpuci_tui.core.azure.answer import Answer
from gpuci_tui.core.azure.budget import Priority
from gpuci_tui.core.azure.http import AzureTransport
from gpuci_tui.core.azure.parse import (
    MalformedError,
    collection,
    parse_agent,
    parse_items,
    parse_job_request,
)
from gpuci_tui.core.errors import AzureError, AzureNotFoundError
from gpuci_tui.core.protocols import JOB_REQUEST_CAP, Agent, JobRequest, JobRequests

LOG = logging.getLogger("gpuci_tui.azure")

POOLS = "_apis/distributedtask/pools"

JOB_REQUEST_PAGE_CAP = 20
"""Most pages of job requests read per call; unfinished requests rarely fill one."""

T = TypeVar("T")


class PoolAgentCalls:
    """A pool's agents and job requests over an `AzureTransport` (the client's base)."""

    _http: AzureTransport
    """Set by `AzureDevOpsClient`: auth, retries and rate limits."""

    @property
    def org_url(self) -> str:
        """The normalised organisation URL."""
        return self._http.org.url

    @property
    def org_name(self) -> str:
        """The organisation's name, for messages."""
        return self._http.org.name

    # ------------------------------------------------------------------ agents

    def list_agents(
        self,
        pool_id: int,
        *,
        include_capabilities: bool = False,
        demands: Sequence[str] = (),
        agent_name: str | None = None,
        include_last_completed: bool = False,
    ) -> list[Agent]:
        """The pool's agents with their assigned requests, in one call.

        Args:
            pool_id: The pool.
            include_capabilities: Also fetch ``systemCapabilities`` (larger answer).
            demands: Only the agents meeting every demand (sent comma-separated, as
                ``demands`` of `Agents - List`): the service filters, not us.
            agent_name: Only the agent with this name.
            include_last_completed: Also each agent's ``lastCompletedRequest``.

        Raises:
            AzureNotFoundError: The pool does not exist (any more).
            AzureBadRequestError: The service refused a demand (HTTP 400).
        """
        params = {"includeAssignedRequest": "true"}
        if include_capabilities:
            params["includeCapabilities"] = "true"
        if include_last_completed:
            params["includeLastCompletedRequest"] = "true"
        if demands:
            params["demands"] = ",".join(d.strip() for d in demands)
        if agent_name:
            params["agentName"] = agent_name
        try:
            answer = self._http.request(
                "GET",
                f"{POOLS}/{int(pool_id)}/agents",
                params=params,
                pool_endpoint=True,
                priority=Priority.PERIODIC,
            )
        except AzureNotFoundError:
            raise self._pool_gone(pool_id) from None
        return self._items(answer, parse_agent, "agent")

    def get_agent(
        self, pool_id: int, agent_id: int, *, include_capabilities: bool = False
    ) -> Agent | None:
        """One agent with its assigned request; None when it is not registered."""
        params = {"includeAssignedRequest": "true"}
        if include_capabilities:
            params["includeCapabilities"] = "true"
        try:
            answer = self._http.request(
                "GET", self._agent_path(pool_id, agent_id), params=params, pool_endpoint=True
            )
        except AzureNotFoundError:
            return None
        return self._one(answer, parse_agent, "agent")

    def set_agent_enabled(self, pool_id: int, agent_id: int, enabled: bool) -> Agent:
        """Enable or disable an agent; a disabled agent gets no new jobs.

        Raises:
            AzureNotFoundError: The agent is no longer registered.
            AzureScopeError: The PAT may read but not manage the pool.
        """
        try:
            answer = self._http.request(
                "PATCH",
                self._agent_path(pool_id, agent_id),
                json_body={"id": int(agent_id), "enabled": bool(enabled)},
                pool_endpoint=True,
                priority=Priority.INTAKE,
            )
        except AzureNotFoundError:
            raise AzureNotFoundError(
                f"Agent {agent_id} is no longer registered in pool {pool_id}."
            ) from None
        if answer.body is None:  # some servers answer 204: read the agent back
            agent = self.get_agent(pool_id, agent_id)
            if agent is None:
                raise AzureNotFoundError(
                    f"Agent {agent_id} is no longer registered in pool {pool_id}."
                )
            return agent
        agent = self._one(answer, parse_agent, "agent")
        if agent.enabled != bool(enabled):
            LOG.warning(
                "Asked to %s agent %s but the service reports enabled=%s",
                "enable" if enabled else "disable",
                agent.name,
                agent.enabled,
            )
        return agent

    def delete_agent(self, pool_id: int, agent_id: int) -> None:
        """Delete a registration; one that is already gone is not an error."""
        try:
            self._http.request("DELETE", self._agent_path(pool_id, agent_id), pool_endpoint=True)
        except AzureNotFoundError:
            LOG.debug("Agent %s of pool %s was already deleted", agent_id, pool_id)

    # ------------------------------------------------------------------ job requests

    def finished_jobs(self, pool_id: int, agent_ids: Sequence[int], count: int) -> list[JobRequest]:
        """The latest finished job requests of ``agent_ids``, newest first (their results, times).

        One call: ``jobrequests?agentIds=…&completedRequestCount=N`` (azure-devops-api.md
        §2.8), whatever the number of agents. Unfinished requests in the answer are left out.
        """
        if not agent_ids:
            return []
        params = {
            "agentIds": ",".join(str(int(i)) for i in sorted(set(agent_ids))),
            "completedRequestCount": str(max(1, int(count))),
        }
        try:
            answer = self._http.request(
                "GET", f"{POOLS}/{int(pool_id)}/jobrequests", params=params, pool_endpoint=True
            )
        except AzureNotFoundError:
            raise self._pool_gone(pool_id) from None
        finished = [r for r in self._items(answer, parse_job_request, "job request") if r.result]
        return sorted(finished, key=lambda r: (r.finish_time or "", r.request_id), reverse=True)

    def list_job_requests(self, pool_id: int) -> JobRequests:
        """The pool's unfinished job requests (queued and running).

        Uses ``completedRequestCount=0`` and follows ``X-MS-ContinuationToken``
        for at most `JOB_REQUEST_PAGE_CAP` pages. The service answers at most
        `JOB_REQUEST_CAP` requests (kedacore/keda#6819): a last page that full, with
        no token for more, is marked ``capped`` (the queue may be longer).

        Raises:
            AzureNotFoundError: The pool does not exist (any more).
        """
        found: dict[int, JobRequest] = {}
        continuation: str | None = None
        capped = False
        for _ in range(JOB_REQUEST_PAGE_CAP):
            params = {"completedRequestCount": "0"}
            if continuation:
                params["continuationToken"] = continuation
            try:
                answer = self._http.request(
                    "GET",
                    f"{POOLS}/{int(pool_id)}/jobrequests",
                    params=params,
                    pool_endpoint=True,
                    priority=Priority.PERIODIC,
                )
            except AzureNotFoundError:
                raise self._pool_gone(pool_id) from None
            page = self._items(answer, parse_job_request, "job request")
            for request in page:
                found.setdefault(request.request_id, request)
            if not answer.continuation_token or answer.continuation_token == continuation:
                capped = len(page) >= JOB_REQUEST_CAP
                break
            continuation = answer.continuation_token
        else:
            capped = True
            LOG.warning(
                "Pool %s has more than %d pages of unfinished job requests; read only those",
                pool_id,
                JOB_REQUEST_PAGE_CAP,
            )
        # completedRequestCount=0 should leave finished ones out; make sure of it.
        unfinished = (r for r in found.values() if r.result is None and r.finish_time is None)
        return JobRequests(unfinished, capped=capped)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _agent_path(pool_id: int, agent_id: int) -> str:
        return f"{POOLS}/{int(pool_id)}/agents/{int(agent_id)}"

    def _pool_gone(self, pool_id: int) -> AzureNotFoundError:
        return AzureNotFoundError(
            f"There is no agent pool with id {pool_id} in {self.org_name} (was it deleted?). "
            "Check the pool name in the configuration."
        )

    def _unreadable(self, what: str, why: str) -> str:
        return (
            f"Azure DevOps sent an answer about {what} that gpuci-tui cannot read ({why}). "
            f"Check that {self.org_url} is an Azure DevOps organisation URL."
        )

    def _items(self, answer: Answer, parser: Callable[[object], T], what: str) -> list[T]:
        try:
            items = collection(answer.body)
        except MalformedError as exc:
            raise AzureError(self._unreadable(f"{what}s", str(exc))) from None
        return parse_items(items, parser, what)

    def _one(self, answer: Answer, parser: Callable[[object], T], what: str) -> T:
        try:
            return parser(answer.body)
        except MalformedError as exc:
            raise AzureError(self._unreadable(f"the {what}", str(exc))) from None
