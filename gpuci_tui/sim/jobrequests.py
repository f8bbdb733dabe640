"""``GET …/pools/{id}/jobrequests`` as the service answers it: filters, ``$top`` paging, the cap.

The query's parameters (azure-devops-api.md §2.8): ``agentId`` or ``agentIds``
(one agent's or several agents' requests), ``completedRequestCount`` (unfinished
ones plus at most that many finished), ``$top`` with ``continuationToken`` (pages;
``$top`` overrides ``completedRequestCount`` and leaves ``matchedAgents`` out,
kedacore/keda#4387). Whatever is asked, one answer holds at most `TOP_CAP`
requests (kedacore/keda#6819).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuci_tui.sim import wire
from gpuci_tui.sim.org import SimOrg

TOP_CAP = 200
"""The most job requests one answer holds, whatever ``$top`` says."""


def answer(
    org: SimOrg, pool_id: int, query: Mapping[str, str], org_url: str
) -> tuple[list[wire.Json], dict[str, str]]:
    """The requests the query asks for (as JSON), and the answer's headers.

    Raises:
        ValueError: a parameter that must be a number is not.
    """
    agent_id = int(query["agentId"]) if "agentId" in query else None
    agent_ids = (
        {int(i) for i in query["agentIds"].split(",") if i.strip()} if "agentIds" in query else None
    )
    completed = int(query["completedRequestCount"]) if "completedRequestCount" in query else None
    top = int(query["$top"]) if "$top" in query else None
    after = int(query["continuationToken"]) if "continuationToken" in query else None
    if top is not None:
        completed = None  # $top overrides completedRequestCount (kedacore/keda#4387)
    jobs = org.job_requests(
        pool_id, agent_id=agent_id, completed_request_count=completed, agent_ids=agent_ids
    )
    headers: dict[str, str] = {}
    if after is not None:
        jobs = [j for j in jobs if j.request_id < after]
    if top is not None:
        top = max(0, min(top, TOP_CAP))
        if len(jobs) > top:
            jobs = jobs[:top]
            if jobs:
                headers["X-MS-ContinuationToken"] = str(jobs[-1].request_id)
    jobs = jobs[:TOP_CAP]  # a longer list is never answered whole (kedacore/keda#6819)
    # With $top the service leaves matchedAgents out (kedacore/keda#4387).
    return [wire.job(org, j, org_url, matched=top is None) for j in jobs], headers
