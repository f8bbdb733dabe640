"""SimPoolApi: the AgentPoolApi protocol served in-process from a SimOrg."""

from __future__ import annotations

import pytest

from gpuci_tui.core.errors import (
    AzureAuthError,
    AzureNotFoundError,
    AzureRateLimitError,
    AzureScopeError,
    AzureServerError,
    AzureUnreachableError,
)
from gpuci_tui.sim.api import AGENT, AGENTS, SimPoolApi
from gpuci_tui.sim.org import SimOrg

from .conftest import NO_SCOPE_PAT, PAT, READ_ONLY_PAT

POOL = 42


def test_reads_and_writes(org: SimOrg) -> None:
    api = SimPoolApi(org, PAT)
    pool = api.resolve_pool("gpu")
    assert (pool.id, pool.name, pool.size) == (POOL, "gpu", 0)
    aid, key = org.register("gpu", "gpu-1", PAT, hostname="abc")
    rid = org.queue_job(POOL, pipeline="train - main")
    assert org.poll(aid, key, timeout=1) is not None
    [agent] = api.list_agents(POOL)
    assert agent.status == "online" and agent.enabled
    assert agent.system_capabilities["HOSTNAME"] == "abc"
    assert agent.assigned_request is not None
    assert agent.assigned_request.request_id == rid
    assert agent.assigned_request.owner_name is not None
    assert agent.created_on is not None and agent.created_on.endswith("Z")
    assert api.set_agent_enabled(POOL, aid, False).enabled is False
    [job] = api.list_job_requests(POOL)
    assert (job.request_id, job.reserved_agent_name, job.definition_name) == (
        rid,
        "gpu-1",
        "train - main",
    )
    api.delete_agent(POOL, aid)
    api.delete_agent(POOL, aid)  # already gone: fine
    assert api.get_agent(POOL, aid) is None
    assert api.list_job_requests(POOL) == []  # abandoned when deleted
    with pytest.raises(AzureNotFoundError):
        api.get_agent(99, 1)
    assert api.request_count == 9
    counts = org.request_counts()
    assert counts[("GET", AGENTS)] == 1 and counts[("DELETE", AGENT)] == 2


def test_pool_resolution_errors(org: SimOrg) -> None:
    api = SimPoolApi(org, PAT)
    with pytest.raises(AzureNotFoundError, match="does not exist"):
        api.resolve_pool("cpu")
    org.add_pool("gpu")
    with pytest.raises(AzureNotFoundError, match="ambiguous"):
        api.resolve_pool("gpu")


def test_auth_and_scope(org: SimOrg) -> None:
    with pytest.raises(AzureAuthError):
        SimPoolApi(org, "wrong").list_agents(POOL)
    with pytest.raises(AzureScopeError):
        SimPoolApi(org, NO_SCOPE_PAT).list_agents(POOL)
    assert SimPoolApi(org, READ_ONLY_PAT).list_agents(POOL) == []
    with pytest.raises(AzureScopeError):
        SimPoolApi(org, READ_ONLY_PAT).set_agent_enabled(POOL, 1, False)


def test_faults_become_the_protocol_errors(org: SimOrg) -> None:
    api = SimPoolApi(org, PAT)
    org.faults.rate_limit(retry_after=7, count=1)
    with pytest.raises(AzureRateLimitError) as exc:
        api.list_agents(POOL)
    assert exc.value.retry_after == 7
    org.faults.server_error(503, count=1)
    with pytest.raises(AzureServerError, match="503"):
        api.list_agents(POOL)
    org.faults.html_signin(token=PAT, count=1)
    with pytest.raises(AzureAuthError, match="sign-in page"):
        api.list_agents(POOL)
    fault = org.faults.unreachable()
    with pytest.raises(AzureUnreachableError):
        api.list_agents(POOL)
    org.faults.clear(fault)
    assert api.list_agents(POOL) == []
