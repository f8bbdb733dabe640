"""Microsoft's own Python SDK (``azure-devops``) against the simulated organisation.

The SDK first asks ``OPTIONS {org}/_apis`` (resource locations) and
``GET {org}/_apis/ResourceAreas``, then builds every URL from the answers: if
the simulation answers those as the service does, every agent-pool call the
project makes works through the SDK too. Each call here is one the supervisor
makes with its own client.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.devops import _file_cache
from azure.devops.connection import Connection
from msrest.authentication import Authentication, BasicAuthentication, BasicTokenAuthentication

from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer
from tests.sim.conftest import PAT

POOL = 42


def _creds(org: SimOrg, kind: str) -> Authentication:
    """A PAT as Basic, or a service principal's Entra access token as Bearer."""
    if kind == "pat":
        return BasicAuthentication("", PAT)
    secret = "Q~sdk-secret-0123456789abcdefghijklmn"
    app = org.entra.add_app("gpuci-sdk", secret=secret)
    status, body = org.entra.token_request(
        {
            "grant_type": "client_credentials",
            "client_id": app.client_id,
            "client_secret": secret,
            "scope": "499b84ac-1321-427f-aa17-267ca6975798/.default",
        },
        "aud",
    )
    assert status == 200, body
    return BasicTokenAuthentication({"access_token": body["access_token"]})


@pytest.fixture(params=["pat", "bearer"])
def sdk(
    org: SimOrg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[tuple[Any, SimServer]]:
    # The SDK caches locations on disk by URL: a port reused by another test must not hit them.
    for module, name in (("client", "OPTIONS_FILE_CACHE"), ("connection", "RESOURCE_FILE_CACHE")):
        cache = _file_cache.get_cache(name, 0, str(tmp_path))
        monkeypatch.setattr(f"azure.devops.{module}.{name}", cache)
    server = SimServer(org).start()
    try:
        connection = Connection(base_url=server.org_url, creds=_creds(org, request.param))
        yield connection.clients_v7_1.get_task_agent_client(), server
    finally:
        server.stop()


def test_the_sdk_lists_pools_and_agents_with_their_requests(
    org: SimOrg, sdk: tuple[Any, SimServer]
) -> None:
    client, server = sdk
    [pool] = client.get_agent_pools(pool_name="gpu")
    assert (pool.id, pool.name, pool.pool_type, pool.is_hosted) == (
        POOL,
        "gpu",
        "automation",
        False,
    )
    assert pool.scope and pool.created_on is not None and pool.owner is not None
    done_id, done_key = org.register("gpu", "gpu-1", PAT, hostname="abc")
    first = org.queue_job(POOL, pipeline="eval - nightly")
    assert org.poll(done_id, done_key, timeout=5) is not None
    assert org.finish(first, "succeeded", done_key)
    busy_id, busy_key = org.register("gpu", "gpu-2", PAT, hostname="def")
    second = org.queue_job(POOL, pipeline="train - main")
    ticket = org.poll(busy_id, busy_key, timeout=5) or org.poll(done_id, done_key, timeout=5)
    assert ticket is not None
    agents = client.get_agents(
        POOL,
        include_capabilities=True,
        include_assigned_request=True,
        include_last_completed_request=True,
    )
    by_name = {a.name: a for a in agents}
    assert set(by_name) == {"gpu-1", "gpu-2"}
    one = by_name["gpu-1"]
    assert one.status == "online" and one.enabled is True and one.id == done_id
    assert one.system_capabilities["HOSTNAME"] == "abc"
    assert one.version and one.os_description and one.created_on is not None
    assert one.authorization is not None and one.authorization.client_id
    assert one.max_parallelism == 1 and one.provisioning_state == "Provisioned"
    assigned = [a.assigned_request for a in agents if a.assigned_request is not None]
    assert [r.request_id for r in assigned] == [second]
    assert assigned[0].definition is not None and assigned[0].definition.name == "train - main"
    assert assigned[0].queue_time is not None and assigned[0].plan_type
    finished = [a.last_completed_request for a in agents if a.last_completed_request is not None]
    assert first in [r.request_id for r in finished]
    assert next(r for r in finished if r.request_id == first).result == "succeeded"
    # Without the include flags, the service leaves them out.
    plain = client.get_agent(POOL, done_id)
    assert plain.system_capabilities is None and plain.assigned_request is None
    routes = {route for (method, route) in org.request_counts() if method == "OPTIONS"}
    assert routes == {"/_apis"}, "the SDK found every resource through the locations"


def test_the_sdk_disables_enables_and_deletes_an_agent(
    org: SimOrg, sdk: tuple[Any, SimServer]
) -> None:
    from azure.devops.v7_1.task_agent.models import TaskAgent

    client, _ = sdk
    agent_id, _ = org.register("gpu", "gpu-1", PAT)
    changed = client.update_agent(TaskAgent(id=agent_id, enabled=False), POOL, agent_id)
    assert changed.enabled is False and org.get_agent(POOL, agent_id).enabled is False
    changed = client.update_agent(TaskAgent(id=agent_id, enabled=True), POOL, agent_id)
    assert changed.enabled is True
    client.delete_agent(POOL, agent_id)
    assert client.get_agents(POOL) == []


def test_the_sdk_sees_the_services_not_found_errors(
    org: SimOrg, sdk: tuple[Any, SimServer]
) -> None:
    from azure.devops.exceptions import AzureDevOpsServiceError

    client, _ = sdk
    with pytest.raises(AzureDevOpsServiceError, match="Agent pool 99 could not be found") as err:
        client.get_agents(99)
    assert err.value.type_key == "TaskAgentPoolNotFoundException"
    with pytest.raises(AzureDevOpsServiceError) as err:
        client.get_agent(POOL, 12345)
    assert err.value.type_key == "TaskAgentNotFoundException"
    with pytest.raises(AzureDevOpsServiceError) as err:
        client.delete_agent(99, 1)
    assert err.value.type_key == "TaskAgentPoolNotFoundException"
    assert client.get_agent_pools(pool_name="nope") == []
