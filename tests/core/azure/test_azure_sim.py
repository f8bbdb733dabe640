"""AzureDevOpsClient against the simulated organisation served over real HTTP (SimServer)."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator

import pytest

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.errors import (
    AzureAuthError,
    AzureNotFoundError,
    AzureRateLimitError,
    AzureScopeError,
    AzureServerError,
    AzureUnreachableError,
)
from gpuci_tui.sim.org import READ_SCOPE, SimOrg
from gpuci_tui.sim.server import SimServer

PAT = "simPAT0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"


class Sim:
    """A running organisation with one pool, ``gpu``."""

    def __init__(self) -> None:
        self.org = SimOrg("simorg")
        self.org.add_pat(PAT)
        self.pool_id = self.org.add_pool("gpu")
        self.server = SimServer(self.org).start()

    def client(self, token: str = PAT, **kw: object) -> AzureDevOpsClient:
        return AzureDevOpsClient(self.server.org_url, token, **kw)  # type: ignore[arg-type]

    def running_agent(self, name: str) -> tuple[int, int]:
        """Register ``name``, queue a job and let the agent take it: (agent_id, request_id)."""
        agent_id, session = self.org.register("gpu", name, PAT, hostname=f"{name}-host")
        request_id = self.org.queue_job(self.pool_id, pipeline="train - main", duration=60)
        ticket = self.org.poll(agent_id, session, timeout=5)
        assert ticket is not None, "the simulated agent got no job"
        return agent_id, request_id


@pytest.fixture
def sim() -> Iterator[Sim]:
    env = Sim()
    yield env
    env.server.stop()


def test_validate_and_resolve_the_pool(sim: Sim) -> None:
    client = sim.client()
    check = client.validate_pat("gpu")
    assert (check.ok, check.reason, check.user) == (True, "ok", "Jane Doe"), check.message
    assert check.pool is not None and check.pool.id == sim.pool_id
    assert client.resolve_pool("gpu").id == sim.pool_id
    assert [p.name for p in client.list_pools()] == ["gpu"]


def test_agents_jobs_disable_and_delete(sim: Sim) -> None:
    agent_id, request_id = sim.running_agent("gpu-agent-1")
    idle_id, _ = sim.org.register("gpu", "gpu-agent-2", PAT)
    client = sim.client()

    agents = {a.id: a for a in client.list_agents(sim.pool_id, include_capabilities=True)}
    busy = agents[agent_id]
    assert busy.status == "online"
    assert busy.system_capabilities.get("HOSTNAME") == "gpu-agent-1-host"
    assert busy.assigned_request is not None
    assert busy.assigned_request.request_id == request_id
    assert busy.assigned_request.definition_name == "train - main"
    assert busy.assigned_request.reserved_agent_name == "gpu-agent-1"
    assert agents[idle_id].assigned_request is None

    (running,) = client.list_job_requests(sim.pool_id)
    assert running.request_id == request_id
    assert running.receive_time is not None and running.result is None

    disabled = client.set_agent_enabled(sim.pool_id, idle_id, False)
    assert disabled.enabled is False
    again = client.get_agent(sim.pool_id, idle_id)
    assert again is not None and again.enabled is False

    client.delete_agent(sim.pool_id, idle_id)
    assert client.get_agent(sim.pool_id, idle_id) is None
    client.delete_agent(sim.pool_id, idle_id)  # already gone: fine


def test_finished_jobs_are_not_listed(sim: Sim) -> None:
    agent_id, request_id = sim.running_agent("gpu-agent-1")
    client = sim.client()
    assert [r.request_id for r in client.list_job_requests(sim.pool_id)] == [request_id]
    sim.org.finish(request_id, "succeeded")
    assert client.list_job_requests(sim.pool_id) == []


def test_auth_and_scope_failures(sim: Sim) -> None:
    with pytest.raises(AzureAuthError):
        sim.client("not-the-pat").list_pools()
    assert sim.client("not-the-pat").validate_pat("gpu").reason == "bad_pat"

    read_only = "readonlyPAT0123456789abcdefghijklmnopqrstuvwxyz"
    sim.org.add_pat(read_only, scopes=[READ_SCOPE])
    client = sim.client(read_only)
    client.connection_data()
    agent_id, _ = sim.org.register("gpu", "gpu-agent-1", PAT)
    with pytest.raises(AzureScopeError):
        client.set_agent_enabled(sim.pool_id, agent_id, False)

    sim.org.revoke_pat(PAT)
    assert sim.client().validate_pat("gpu").reason == "bad_pat"


def test_pool_not_found_and_ambiguous(sim: Sim) -> None:
    client = sim.client()
    with pytest.raises(AzureNotFoundError, match="Did you mean 'gpu'"):
        client.resolve_pool("gpus")
    assert client.validate_pat("gpus").reason == "pool_not_found"
    sim.org.add_pool("gpu")
    assert client.validate_pat("gpu").reason == "pool_ambiguous"


def test_injected_faults(sim: Sim) -> None:
    sleeps: list[float] = []
    client = sim.client(sleep=sleeps.append, max_retries=2)

    fault = sim.org.faults.server_error(503, count=2)
    assert client.resolve_pool("gpu").id == sim.pool_id  # two 503s, then success
    assert len(sleeps) == 2
    sim.org.faults.clear(fault)

    fault = sim.org.faults.server_error(500)
    with pytest.raises(AzureServerError):
        client.list_agents(sim.pool_id)
    sim.org.faults.clear(fault)

    fault = sim.org.faults.html_signin()
    with pytest.raises(AzureAuthError):
        client.list_agents(sim.pool_id)
    sim.org.faults.clear(fault)

    fault = sim.org.faults.rate_limit(retry_after=120, count=1)
    with pytest.raises(AzureRateLimitError) as err:
        client.list_agents(sim.pool_id)
    assert err.value.retry_after == pytest.approx(120, abs=1)
    assert client.rate_limit_state.throttled_until is not None


def test_unreachable_while_the_port_is_closed(sim: Sim) -> None:
    client = sim.client(timeout=2)
    fault = sim.org.faults.unreachable()
    try:
        deadline_ok = sim.org.wait_for(lambda _: not sim.server.listening, timeout=5)
        assert deadline_ok, "the simulated server did not close its port"
        check = client.validate_pat("gpu")
        assert check.reason == "unreachable", check.message
        with pytest.raises(AzureUnreachableError, match="refused"):
            client.list_agents(sim.pool_id)
    finally:
        sim.org.faults.clear(fault)


def test_the_pat_stays_out_of_logs(sim: Sim, caplog: pytest.LogCaptureFixture) -> None:
    basic = base64.b64encode(f":{PAT}".encode()).decode()
    with caplog.at_level(logging.DEBUG):
        client = sim.client()
        client.validate_pat("gpu")
        client.list_agents(sim.pool_id)
    assert caplog.records, "expected request log records"
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert PAT not in text and basic not in text
