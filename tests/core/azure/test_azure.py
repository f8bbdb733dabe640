"""AzureDevOpsClient against a scripted server on 127.0.0.1: headers, pools, agents, job requests."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator

import pytest

from gpuci_tui.core.azure.client import AzureDevOpsClient, AzurePoolAmbiguousError
from gpuci_tui.core.errors import AzureError, AzureNotFoundError
from gpuci_tui.core.protocols import AgentPoolApi
from tests.core.azure.test_azure_fake import PAT, FakeAzure, Reply, envelope

POOLS = "_apis/distributedtask/pools"
CONNECTION = "_apis/connectionData"
ME = {
    "authenticatedUser": {"id": "79de", "providerDisplayName": "Jane Doe", "isActive": True},
    "authorizedUser": {"id": "79de", "providerDisplayName": "Jane Doe"},
    "instanceId": "1bc7",
    "deploymentType": "hosted",
}
GPU_POOL = {"id": 42, "name": "gpu", "isHosted": False, "poolType": "automation", "size": 3}


@pytest.fixture
def fake() -> Iterator[FakeAzure]:
    server = FakeAzure().start()
    yield server
    server.stop()


def no_sleep(seconds: float) -> None:
    raise AssertionError(f"unexpected sleep({seconds})")


def make(fake: FakeAzure, token: object = PAT, **kw: object) -> AzureDevOpsClient:
    kw.setdefault("sleep", no_sleep)
    return AzureDevOpsClient(fake.url, token, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- headers


def test_requests_carry_basic_auth_with_an_empty_user_and_the_azure_headers(
    fake: FakeAzure,
) -> None:
    fake.on("GET", POOLS, Reply(200, envelope(GPU_POOL)))
    client = make(fake)
    client.list_pools()
    (seen,) = fake.requests_to(POOLS)
    scheme, _, encoded = seen.headers["Authorization"].partition(" ")
    assert scheme == "Basic"
    assert base64.b64decode(encoded).decode() == f":{PAT}"
    assert seen.headers["X-TFS-FedAuthRedirect"] == "Suppress"
    assert seen.headers["Accept"] == "application/json;api-version=7.1"
    assert seen.headers["User-Agent"].startswith("gpuci-tui/")
    assert seen.q("poolType") == "automation"


def test_the_client_satisfies_the_agent_pool_protocol(fake: FakeAzure) -> None:
    client: AgentPoolApi = make(fake)
    assert client.request_count == 0


def test_connection_data_uses_the_preview_version_it_exists_in(fake: FakeAzure) -> None:
    fake.on("GET", CONNECTION, Reply(200, ME))
    assert make(fake).connection_data()["instanceId"] == "1bc7"
    (seen,) = fake.requests_to(CONNECTION)
    assert seen.headers["Accept"] == "application/json;api-version=7.1-preview.1"


def test_patch_sends_the_enabled_flag_as_json_with_the_api_version(fake: FakeAzure) -> None:
    path = f"{POOLS}/42/agents/11"
    fake.on("PATCH", path, Reply(200, {"id": 11, "name": "gpu-1", "enabled": False}))
    agent = make(fake).set_agent_enabled(42, 11, False)
    assert (agent.id, agent.enabled) == (11, False)
    (seen,) = fake.requests_to(path)
    assert json.loads(seen.body) == {"id": 11, "enabled": False}
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.headers["Accept"] == "application/json;api-version=7.1"
    assert seen.headers["X-TFS-FedAuthRedirect"] == "Suppress"


def test_patch_of_a_missing_agent_is_not_found(fake: FakeAzure) -> None:
    fake.on("PATCH", f"{POOLS}/42/agents/11", Reply(404, {"message": "TaskAgentNotFound"}))
    with pytest.raises(AzureNotFoundError, match="no longer registered"):
        make(fake).set_agent_enabled(42, 11, True)


def test_patch_answered_without_a_body_reads_the_agent_back(fake: FakeAzure) -> None:
    path = f"{POOLS}/42/agents/11"
    fake.on("PATCH", path, Reply(204))
    fake.on("GET", path, Reply(200, {"id": 11, "name": "gpu-1", "enabled": True}))
    assert make(fake).set_agent_enabled(42, 11, True).enabled is True


@pytest.mark.parametrize("status", [200, 204])
def test_delete_accepts_any_success(fake: FakeAzure, status: int) -> None:
    path = f"{POOLS}/42/agents/11"
    fake.on("DELETE", path, Reply(status))
    client = make(fake)
    client.delete_agent(42, 11)
    (seen,) = fake.requests_to(path)
    assert seen.headers["Accept"] == "application/json;api-version=7.1"
    assert client.request_count == 1


def test_delete_of_a_gone_agent_is_ignored(fake: FakeAzure) -> None:
    fake.on("DELETE", f"{POOLS}/42/agents/11", Reply(404, {"message": "not found"}))
    make(fake).delete_agent(42, 11)


# --------------------------------------------------------------------------- pools


def test_resolve_pool_by_exact_name(fake: FakeAzure) -> None:
    fake.on("GET", POOLS, Reply(200, envelope(GPU_POOL)), query={"poolName": "gpu"})
    pool = make(fake).resolve_pool("gpu")
    assert (pool.id, pool.name, pool.size, pool.is_hosted, pool.pool_type) == (
        42,
        "gpu",
        3,
        False,
        "automation",
    )


def test_resolve_pool_prefers_the_exact_name_over_case_variants(fake: FakeAzure) -> None:
    other = {"id": 43, "name": "GPU"}
    fake.on("GET", POOLS, Reply(200, envelope(other, GPU_POOL)), query={"poolName": "gpu"})
    assert make(fake).resolve_pool("gpu").id == 42


def test_resolve_pool_accepts_a_single_case_insensitive_match(fake: FakeAzure) -> None:
    fake.on(
        "GET", POOLS, Reply(200, envelope({"id": 43, "name": "GPU"})), query={"poolName": "gpu"}
    )
    assert make(fake).resolve_pool("gpu").id == 43


def test_unknown_pool_lists_the_visible_ones_and_suggests_a_close_name(fake: FakeAzure) -> None:
    fake.on("GET", POOLS, Reply(200, envelope()), query={"poolName": "gpus"})
    fake.on(
        "GET",
        POOLS,
        Reply(
            200,
            envelope(GPU_POOL, {"id": 1, "name": "Default"}, {"id": 2, "name": "Azure Pipelines"}),
        ),  # noqa: E501
    )
    with pytest.raises(AzureNotFoundError) as err:
        make(fake).resolve_pool("gpus")
    text = str(err.value)
    assert "No agent pool named 'gpus' in org." in text
    assert "Did you mean 'gpu'?" in text
    assert "Pools you can see: Azure Pipelines, Default, gpu." in text
    assert not isinstance(err.value, AzurePoolAmbiguousError)


def test_unknown_pool_message_survives_a_failing_pool_list(fake: FakeAzure) -> None:
    fake.on("GET", POOLS, Reply(403))
    fake.on("GET", POOLS, Reply(200, envelope()), query={"poolName": "gpu"})
    with pytest.raises(AzureNotFoundError, match="No agent pool named 'gpu'"):
        make(fake).resolve_pool("gpu")


def test_several_pools_with_the_name_are_ambiguous(fake: FakeAzure) -> None:
    twin = dict(GPU_POOL, id=77)
    fake.on("GET", POOLS, Reply(200, envelope(GPU_POOL, twin)), query={"poolName": "gpu"})
    with pytest.raises(AzurePoolAmbiguousError) as err:
        make(fake).resolve_pool("gpu")
    assert "ids 42, 77" in str(err.value)
    assert [p.id for p in err.value.pools] == [42, 77]
    assert isinstance(err.value, AzureNotFoundError)  # the protocol's contract


def test_get_pool_and_a_deleted_pool(fake: FakeAzure) -> None:
    fake.on("GET", f"{POOLS}/42", Reply(200, GPU_POOL))
    client = make(fake)
    assert client.get_pool(42).name == "gpu"
    with pytest.raises(AzureNotFoundError, match="no agent pool with id 5"):
        client.get_pool(5)


def test_unreadable_answer_is_a_plain_error(fake: FakeAzure) -> None:
    fake.on("GET", POOLS, Reply(200, {"unexpected": True}))
    with pytest.raises(AzureError, match="cannot read"):
        make(fake).list_pools()


# --------------------------------------------------------------------------- agents


AGENT_BUSY = {
    "id": 11735,
    "name": "gpu-agent-1",
    "version": "4.264.2",
    "enabled": True,
    "status": "online",
    "provisioningState": "Provisioned",
    "maxParallelism": 1,
    "createdOn": "2026-04-14T10:05:00.123Z",
    "statusChangedOn": "2026-04-14T10:05:30.5033333Z",
    "assignedRequest": {
        "requestId": 890659,
        "queueTime": "2022-09-28T11:19:49.89Z",
        "assignTime": "2022-09-28T11:20:29.5033333Z",
        "receiveTime": "2022-09-28T11:20:32.0530499Z",
        "planType": "Build",
        "definition": {"id": 4869, "name": "base - main"},
        "owner": {"id": 673584, "name": "20220928.2"},
        "reservedAgent": {"id": 11735, "name": "gpu-agent-1"},
    },
    "_links": {"self": {"href": "x"}},
}
AGENT_MINIMAL = {"id": 12, "name": "gpu-agent-2"}


def test_list_agents_is_one_call_with_assigned_requests(fake: FakeAzure) -> None:
    path = f"{POOLS}/42/agents"
    fake.on("GET", path, Reply(200, envelope(AGENT_BUSY, AGENT_MINIMAL)))
    client = make(fake)
    busy, idle = client.list_agents(42)
    (seen,) = fake.requests_to(path)
    assert seen.q("includeAssignedRequest") == "true"
    assert seen.q("includeCapabilities") is None
    assert client.request_count == 1
    job = busy.assigned_request
    assert job is not None
    assert (job.request_id, job.definition_name, job.owner_name) == (
        890659,
        "base - main",
        "20220928.2",
    )
    assert (job.reserved_agent_id, job.reserved_agent_name) == (11735, "gpu-agent-1")
    assert job.assign_time == "2022-09-28T11:20:29.5033333Z"
    assert (busy.status, busy.enabled, busy.version) == ("online", True, "4.264.2")
    # Absent fields: the dataclass defaults, no error.
    assert (idle.status, idle.enabled, idle.assigned_request, idle.version) == (
        "offline",
        True,
        None,
        None,
    )


def test_list_agents_with_a_name_filter_and_capabilities(fake: FakeAzure) -> None:
    path = f"{POOLS}/42/agents"
    caps = dict(
        AGENT_MINIMAL, systemCapabilities={"Agent.Name": "gpu-agent-2", "HOSTNAME": "c0ffee"}
    )
    fake.on("GET", path, Reply(200, envelope(caps)))
    (agent,) = make(fake).list_agents(42, agent_name="gpu-agent-2", include_capabilities=True)
    (seen,) = fake.requests_to(path)
    assert (seen.q("agentName"), seen.q("includeCapabilities")) == ("gpu-agent-2", "true")
    assert agent.system_capabilities["HOSTNAME"] == "c0ffee"


def test_list_agents_of_a_deleted_pool_is_not_found(fake: FakeAzure) -> None:
    with pytest.raises(AzureNotFoundError, match="id 42"):
        make(fake).list_agents(42)


def test_get_agent_and_a_missing_agent(fake: FakeAzure) -> None:
    path = f"{POOLS}/42/agents/11735"
    fake.on("GET", path, Reply(200, AGENT_BUSY))
    client = make(fake)
    agent = client.get_agent(42, 11735)
    assert agent is not None and agent.assigned_request is not None
    assert fake.requests_to(path)[0].q("includeAssignedRequest") == "true"
    assert client.get_agent(42, 1) is None


# --------------------------------------------------------------------------- job requests


def job(request_id: int, **extra: object) -> dict[str, object]:
    return {"requestId": request_id, "queueTime": "2026-01-01T00:00:00.1234567Z", **extra}


def test_job_requests_follow_continuation_tokens(fake: FakeAzure) -> None:
    path = f"{POOLS}/42/jobrequests"
    fake.on(
        "GET", path, Reply(200, envelope(job(1), job(2)), headers={"X-MS-ContinuationToken": "p2"})
    )
    fake.on(
        "GET",
        path,
        Reply(200, envelope(job(2), job(3)), headers={"X-MS-ContinuationToken": "p3"}),
        query={"continuationToken": "p2"},
    )
    fake.on("GET", path, Reply(200, envelope(job(4))), query={"continuationToken": "p3"})
    requests_ = make(fake).list_job_requests(42)
    assert [r.request_id for r in requests_] == [1, 2, 3, 4]
    seen = fake.requests_to(path)
    assert [s.q("continuationToken") for s in seen] == [None, "p2", "p3"]
    assert all(s.q("completedRequestCount") == "0" for s in seen)


def test_our_agents_finished_requests_come_in_one_read(fake: FakeAzure) -> None:
    """``agentIds=…&completedRequestCount=N``: one call for every agent; newest first, the
    unfinished left out, the job's name (what its agent prints) read."""
    path = f"{POOLS}/42/jobrequests"
    done = {"result": "succeeded", "assignTime": "2026-01-01T00:00:01Z"}
    fake.on(
        "GET",
        path,
        Reply(
            200,
            envelope(
                job(5, finishTime="2026-01-01T00:00:09Z", jobName="Build", **done),
                job(6),  # still running
                job(7, finishTime="2026-01-01T00:01:00Z", **done),
            ),
        ),
    )
    client = make(fake)
    found = client.finished_jobs(42, [13, 12, 13], 200)
    assert [(r.request_id, r.job_name) for r in found] == [(7, None), (5, "Build")]
    (seen,) = fake.requests_to(path)
    assert (seen.q("agentIds"), seen.q("completedRequestCount")) == ("12,13", "200")
    assert client.finished_jobs(42, [], 200) == [] and len(fake.requests_to(path)) == 1


def test_job_request_paging_is_capped(fake: FakeAzure, caplog: pytest.LogCaptureFixture) -> None:
    path = f"{POOLS}/42/jobrequests"
    pages = [
        Reply(200, envelope(job(n)), headers={"X-MS-ContinuationToken": f"t{n}"})
        for n in range(100)
    ]
    fake.on("GET", path, *pages)
    with caplog.at_level(logging.WARNING, logger="gpuci_tui.azure"):
        found = make(fake).list_job_requests(42)
    assert len(fake.requests_to(path)) == 20
    assert len(found) == 20
    assert "more than 20 pages" in caplog.text


def test_job_requests_leave_finished_ones_out(fake: FakeAzure) -> None:
    path = f"{POOLS}/42/jobrequests"
    finished = job(9, finishTime="2026-01-01T00:10:00Z", result="succeeded")
    running = job(10, assignTime="2026-01-01T00:00:01Z", receiveTime="2026-01-01T00:00:02Z",
                  reservedAgent={"id": 5, "name": "a"})  # fmt: skip
    fake.on("GET", path, Reply(200, envelope(finished, running, job(11), {"no": "id"})))
    found = make(fake).list_job_requests(42)
    assert [r.request_id for r in found] == [10, 11]
    assert found[0].reserved_agent_name == "a"
