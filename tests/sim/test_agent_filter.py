"""The agent list's filters as the simulated organisation serves them: demands, agentName,
lastCompletedRequest; and a pool of 5,000 other hosts' agents read for ours only.

The organisation reads demands itself (`sim.demands`), from azure-devops-api.md: a
bare name = the capability exists (system or user), ``NAME -equals VALUE`` ignoring
case, several demands all hold, one it cannot read -> HTTP 400 with the service's
JSON error body.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.errors import AzureBadRequestError
from gpuci_tui.sim.demands import DemandSyntaxError, SimDemand, job_can_run_on, read_filter
from gpuci_tui.sim.foreign import add_foreign_agents
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer

from .conftest import PAT

POOL = 42
OURS = {"GPUCI_INSTANCE": "0a1b2c3d4e5f", "GPUCI_HOST": "gpu-01"}


@pytest.fixture
def server(org: SimOrg) -> Iterator[SimServer]:
    with SimServer(org) as s:
        yield s


def names(server: SimServer, **params: str) -> list[str]:
    reply = requests.get(
        f"{server.org_url}/_apis/distributedtask/pools/{POOL}/agents",
        params=params,
        auth=("", PAT),
        headers={"X-TFS-FedAuthRedirect": "Suppress"},
        timeout=30,
    )
    assert reply.status_code == 200, reply.text
    return sorted(a["name"] for a in reply.json()["value"])


def seed(org: SimOrg) -> None:
    org.add_elsewhere(POOL, "ours-0", {**OURS, "cuda": "12.4"}, online=True)
    org.add_elsewhere(POOL, "ours-0-b", dict(OURS), online=False)
    org.add_elsewhere(
        POOL, "theirs-0", {"GPUCI_INSTANCE": "ffffffffffff", "GPUCI_HOST": "gpu-02"}, online=True
    )
    org.add_elsewhere(POOL, "bare-0", {"Agent.OS": "Linux"}, online=True)


def test_a_bare_name_keeps_the_agents_that_have_the_capability(
    org: SimOrg, server: SimServer
) -> None:
    seed(org)
    assert names(server, demands="GPUCI_INSTANCE") == ["ours-0", "ours-0-b", "theirs-0"]
    assert names(server, demands="gpuci_instance") == ["ours-0", "ours-0-b", "theirs-0"]


def test_equals_ignores_case_and_several_demands_must_all_hold(
    org: SimOrg, server: SimServer
) -> None:
    seed(org)
    assert names(server, demands="GPUCI_INSTANCE -equals 0A1B2C3D4E5F") == ["ours-0", "ours-0-b"]
    assert names(server, demands="GPUCI_HOST -equals gpu-01,cuda") == ["ours-0"]
    assert names(server, demands="GPUCI_HOST -equals gpu-01, cuda -equals 12.3") == []
    assert names(server, demands="") == ["bare-0", "ours-0", "ours-0-b", "theirs-0"]


def test_user_capabilities_count_too(org: SimOrg) -> None:
    seed(org)
    with org._lock:  # noqa: SLF001 - a person adds a user capability in the portal
        agent = next(a for a in org._agents.values() if a.name == "bare-0")  # noqa: SLF001
        agent.user_capabilities["docker"] = "yes"
    assert [a.name for a in org.agents(POOL, demands=read_filter("docker"))] == ["bare-0"]


@pytest.mark.parametrize(
    "demands", ["GPUCI_INSTANCE -equals", "GPUCI_INSTANCE -like 0a1b*", "cuda,,GPUCI_HOST", " "]
)
def test_a_demand_the_service_cannot_read_is_refused_with_its_error_body(
    org: SimOrg, server: SimServer, demands: str
) -> None:
    seed(org)
    if not demands.strip():  # blank: no filter at all
        assert len(names(server, demands=demands)) == 4
        return
    reply = requests.get(
        f"{server.org_url}/_apis/distributedtask/pools/{POOL}/agents",
        params={"demands": demands},
        auth=("", PAT),
        timeout=30,
        headers={"X-TFS-FedAuthRedirect": "Suppress"},
    )
    assert reply.status_code == 400
    body = reply.json()
    assert body["typeKey"] == "ArgumentException"
    assert "demands filter cannot be read" in body["message"]
    assert body["$id"] == "1" and "innerException" in body


def test_agent_name_and_the_last_completed_request(org: SimOrg, server: SimServer) -> None:
    seed(org)
    assert names(server, agentName="theirs-0") == ["theirs-0"]
    agent_id, key = org.register("gpu", "runner-0", PAT, "runner-0", capabilities=OURS)
    request = org.queue_job(POOL, duration=0.1)
    ticket = org.poll(agent_id, key, timeout=10)
    assert ticket is not None and getattr(ticket, "request_id", None) == request
    assert org.finish(request, "failed", key)
    with AzureDevOpsClient(server.url, PAT, max_retries=0) as client:
        plain = client.list_agents(POOL, agent_name="runner-0")
        assert [a.last_completed_request for a in plain] == [None]  # only when asked for
        (agent,) = client.list_agents(POOL, agent_name="runner-0", include_last_completed=True)
    assert agent.last_completed_request is not None
    assert agent.last_completed_request.request_id == request
    assert agent.last_completed_request.result == "failed"


def test_a_refused_filter_is_a_bad_request_for_the_client(org: SimOrg, server: SimServer) -> None:
    with (
        AzureDevOpsClient(server.url, PAT, max_retries=0) as client,
        pytest.raises(AzureBadRequestError, match="HTTP 400"),
    ):
        client.list_agents(POOL, demands=("GPUCI_INSTANCE -equals",))


def test_5000_agents_of_other_hosts_and_the_filtered_read_returns_only_ours(
    org: SimOrg, server: SimServer
) -> None:
    add_foreign_agents(org, POOL, 5000)
    org.add_elsewhere(POOL, "ours-0", dict(OURS), online=True)
    org.add_elsewhere(POOL, "ours-0-b", dict(OURS), online=True)
    with AzureDevOpsClient(server.url, PAT, max_retries=0) as client:
        started = time.monotonic()
        ours = client.list_agents(
            POOL, demands=("GPUCI_INSTANCE -equals 0a1b2c3d4e5f",), include_last_completed=True
        )
        filtered = client.usage()
        everyone = client.list_agents(POOL)
        whole = client.usage()
    assert sorted(a.name for a in ours) == ["ours-0", "ours-0-b"]
    assert len(everyone) == 5002
    assert filtered.bytes_last_minute < 3_000  # two agents' worth
    assert whole.bytes_last_minute - filtered.bytes_last_minute > 2_000_000
    # Not a timed test: a bound far above the few ms it takes, to catch a read of the
    # whole pool behind the filter (seconds on a loaded machine).
    assert time.monotonic() - started < 60


def test_the_other_hosts_are_a_realistic_mix(org: SimOrg) -> None:
    add_foreign_agents(org, POOL, 800)
    agents = org.agents(POOL)
    online = sum(a.online for a in agents)
    assert 400 < online < 700 and any(not a.enabled for a in agents)
    hosts = {a.capabilities["GPUCI_HOST"] for a in agents}
    assert len(hosts) == 100 and all(a.elsewhere for a in agents)
    org.heartbeat_timeout = 0.0
    assert sum(a.online for a in org.agents(POOL)) == online  # their hosts keep them online


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("cuda", SimDemand("cuda")), ("gpu -equals H100 80GB", SimDemand("gpu", "-equals", "H100 80GB")),
     ("cuda.x -gtVersion 12.4", SimDemand("cuda.x", "-gtVersion", "12.4"))],
)  # fmt: skip
def test_demands_are_read_as_the_api_writes_them(text: str, parsed: SimDemand) -> None:
    assert read_filter(text) == (parsed,)


@pytest.mark.parametrize("bad", ["cuda -equals", "cuda -EQUALS 1", "cuda -ltVersion 2", "a,"])
def test_what_the_service_cannot_read(bad: str) -> None:
    with pytest.raises(DemandSyntaxError):
        read_filter(bad)


@pytest.mark.parametrize(
    ("caps", "demands", "met"),
    [({"cuda.x": "12.4"}, ["cuda.x -gtVersion 12.4"], True),
     ({"cuda.x": "12.3.9"}, ["cuda.x -gtVersion 12.4"], False),
     ({"cuda.x": "12.10"}, ["cuda.x -gtVersion 12.4"], True),
     ({"cuda.x": "junk"}, ["cuda.x -gtVersion 12.4"], False),
     ({"cuda.x": "12.4"}, ["cuda.x -gtVersion 12"], True),
     ({}, ["Agent.Version -gtVersion 9.0.0"], True),
     ({"gpu": "a100"}, ["gpu -equals A100", "gpu -bogus x"], False)],
)  # fmt: skip
def test_a_jobs_demands_as_the_organisation_matches_them(
    caps: dict[str, str], demands: list[str], met: bool
) -> None:
    assert job_can_run_on(caps, demands) is met
