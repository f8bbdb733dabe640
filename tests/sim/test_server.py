"""SimServer: the Azure DevOps REST shapes and behaviours over real HTTP on 127.0.0.1."""

from __future__ import annotations

import contextlib
import hashlib
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.private_api import parse_lines
from gpuci_tui.sim.server import SimServer

from .conftest import NO_SCOPE_PAT, PAT, READ_ONLY_PAT, wait_until

POOL = 42
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z$")
SUPPRESS = {"X-TFS-FedAuthRedirect": "Suppress"}
V = {"api-version": "7.1"}


@pytest.fixture
def server(org: SimOrg) -> Iterator[SimServer]:
    with SimServer(org) as s:
        yield s


@pytest.fixture
def http(server: SimServer) -> Iterator[requests.Session]:
    s = requests.Session()
    s.auth = ("", PAT)
    s.headers.update(SUPPRESS)
    yield s
    s.close()


def api(server: SimServer, path: str) -> str:
    return f"{server.org_url}/_apis/distributedtask{path}"


def sim_post(
    server: SimServer, route: str, token: str | None = None, **fields: object
) -> tuple[int, dict[str, str]]:
    body = "".join(f"{k}={v}\n" for k, v in fields.items())
    r = requests.post(
        f"{server.url}/_sim/{route}", data=body, auth=("", token) if token else None, timeout=30
    )
    return r.status_code, parse_lines(r.content)


def register(server: SimServer, name: str) -> tuple[int, str]:
    """Register like config.sh, then open the session like run.sh (as the emulator does)."""
    status, answer = sim_post(server, "register", PAT, pool="gpu", name=name, hostname="h")
    assert status == 200, answer
    aid, key = int(answer["agent_id"]), answer["session"]
    status, opened = sim_post(server, "session", None, agent_id=aid, session=key)
    assert status == 200, opened
    return aid, key


def no_nulls(value: Any, where: str = "$") -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            assert v is not None, f"{where}.{k} is null"
            if k.endswith(("Time", "On", "Until")):
                assert TS.match(v), f"{where}.{k}={v!r}"
            no_nulls(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            no_nulls(v, f"{where}[{i}]")


# --------------------------------------------------------------------------- shapes


def test_pools_envelope_and_single_pool(server: SimServer, http: requests.Session) -> None:
    r = http.get(api(server, "/pools"), params={"poolName": "gpu", "poolType": "automation"})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    body = r.json()
    assert body["count"] == 1 and body["value"][0]["id"] == POOL
    assert body["value"][0]["poolType"] == "automation"
    assert http.get(api(server, "/pools"), params={"poolName": "nope"}).json() == {
        "count": 0,
        "value": [],
    }
    pool = http.get(api(server, f"/pools/{POOL}")).json()
    assert pool["name"] == "gpu" and "count" not in pool
    no_nulls(pool)


def test_org_segment_is_optional(server: SimServer, http: requests.Session) -> None:
    r = http.get(f"{server.url}/_apis/distributedtask/pools")
    assert r.status_code == 200 and r.json()["count"] == 1


def test_agents_include_flags_and_omitted_fields(
    org: SimOrg, server: SimServer, http: requests.Session
) -> None:
    aid, key = register(server, "gpu-1")
    rid = org.queue_job(POOL, pipeline="train - main")
    assert org.poll(aid, key, timeout=1) is not None
    plain = http.get(api(server, f"/pools/{POOL}/agents")).json()["value"][0]
    for absent in ("systemCapabilities", "assignedRequest", "lastCompletedRequest"):
        assert absent not in plain
    assert plain["status"] == "online" and plain["provisioningState"] == "Provisioned"
    assert plain["maxParallelism"] == 1
    full = http.get(
        api(server, f"/pools/{POOL}/agents"),
        params={
            "agentName": "gpu-1",
            "includeCapabilities": "true",
            "includeAssignedRequest": "true",
            "includeLastCompletedRequest": "true",
        },
    ).json()
    assert full["count"] == 1
    agent = full["value"][0]
    assert agent["systemCapabilities"]["Agent.Name"] == "gpu-1"
    assert agent["systemCapabilities"]["HOSTNAME"] == "h"
    assert agent["assignedRequest"]["requestId"] == rid
    assert agent["assignedRequest"]["definition"]["name"] == "train - main"
    assert "lastCompletedRequest" not in agent  # none yet: omitted, not null
    no_nulls(full)
    assert http.get(api(server, f"/pools/{POOL}/agents"), params={"agentName": "other"}).json() == {
        "count": 0,
        "value": [],
    }


def test_job_request_life_cycle_fields(
    org: SimOrg, server: SimServer, http: requests.Session
) -> None:
    rid = org.queue_job(POOL, demands=("cuda",))
    queued = http.get(api(server, f"/pools/{POOL}/jobrequests")).json()["value"][0]
    assert queued["requestId"] == rid
    for absent in ("assignTime", "receiveTime", "result", "reservedAgent", "finishTime"):
        assert absent not in queued
    assert queued["matchedAgents"] == [] and queued["demands"] == ["cuda"]
    assert queued["planType"] == "Build" and re.fullmatch(r"\d{8}\.\d+", queued["owner"]["name"])
    no_nulls(queued)
    aid, key = org.register("gpu", "gpu-1", PAT, capabilities={"cuda": "12.4"})
    assert org.poll(aid, key, timeout=1) is not None
    running = http.get(api(server, f"/pools/{POOL}/jobrequests")).json()["value"][0]
    assert running["reservedAgent"]["name"] == "gpu-1"
    assert "assignTime" in running and "receiveTime" in running and "result" not in running
    org.finish(rid, "succeeded", key)
    done = http.get(api(server, f"/pools/{POOL}/jobrequests")).json()["value"][0]
    assert done["result"] == "succeeded" and TS.match(done["finishTime"])
    assert http.get(
        api(server, f"/pools/{POOL}/jobrequests"), params={"completedRequestCount": 0}
    ).json() == {"count": 0, "value": []}
    by_agent = http.get(
        api(server, f"/pools/{POOL}/jobrequests"),
        params={"agentId": aid, "completedRequestCount": 5},
    ).json()
    assert [j["requestId"] for j in by_agent["value"]] == [rid]


def test_jobrequests_of_several_agents_in_one_read(
    org: SimOrg, server: SimServer, http: requests.Session
) -> None:
    """``agentIds=…&completedRequestCount=N``: those agents' requests only, N finished in all."""
    done: dict[int, list[int]] = {}
    for name in ("gpu-1", "gpu-2", "other"):
        aid, key = org.register("gpu", name, PAT)
        done[aid] = []
        for _ in range(2):
            rid = org.queue_job(POOL)
            assert org.poll(aid, key, timeout=1) is not None
            org.finish(rid, "succeeded", key)
            done[aid].append(rid)
            aid, key = org.register("gpu", name, PAT)  # the next container, same registration
    ours = sorted(done)[:2]
    answer = http.get(
        api(server, f"/pools/{POOL}/jobrequests"),
        params={"agentIds": ",".join(map(str, ours)), "completedRequestCount": 3},
    ).json()["value"]
    newest_first = sorted((r for a in ours for r in done[a]), reverse=True)
    assert [j["requestId"] for j in answer] == newest_first[:3]
    assert all(j["jobName"] == j["definition"]["name"] for j in answer)


def test_a_long_poll_cut_by_an_outage_takes_no_job(org: SimOrg, server: SimServer) -> None:
    """Its connection is gone: left waiting, it would take the first job queued after the
    outage and lose it (its answer has nowhere to go)."""
    aid, key = register(server, "gpu-1")

    def poll() -> None:
        with contextlib.suppress(requests.ConnectionError):  # the outage cuts it
            sim_post(server, "poll", agent_id=aid, session=key, timeout=20)

    polling = threading.Thread(target=poll, daemon=True)
    polling.start()
    wait_until(lambda: org.agents(POOL)[0].active_polls == 1, what="the long poll")
    fault = org.faults.unreachable(duration=30)
    wait_until(lambda: not server.listening, what="the outage")
    wait_until(lambda: org.agents(POOL)[0].active_polls == 0, what="the cut poll to end")
    rid = org.queue_job(POOL)
    org.faults.clear(fault)
    assert org.job(rid).state == "queued", "the cut poll took the job"


def test_jobrequests_paging_with_top_and_continuation(
    org: SimOrg, server: SimServer, http: requests.Session
) -> None:
    ids = [org.queue_job(POOL) for _ in range(5)]
    seen: list[int] = []
    params: dict[str, str | int] = {"$top": 2}
    pages = 0
    while True:
        r = http.get(api(server, f"/pools/{POOL}/jobrequests"), params=params)
        page = r.json()["value"]
        assert len(page) <= 2 and all("matchedAgents" not in j for j in page)
        seen += [j["requestId"] for j in page]
        pages += 1
        token = r.headers.get("X-MS-ContinuationToken")
        if not token:
            break
        params = {"$top": 2, "continuationToken": token}
    assert seen == sorted(ids, reverse=True) and pages == 3


def test_connection_data_and_packages(server: SimServer, http: requests.Session) -> None:
    data = http.get(f"{server.org_url}/_apis/connectionData").json()
    assert data["authenticatedUser"]["providerDisplayName"] == "Jane Doe"
    assert data["deploymentType"] == "hosted"
    pkgs = http.get(api(server, "/packages/agent"), params={"platform": "linux-x64", "top": "1"})
    [pkg] = pkgs.json()["value"]
    assert pkg["platform"] == "linux-x64" and pkg["downloadUrl"].endswith(".tar.gz")
    assert pkg["version"]["major"] == 4


# --------------------------------------------------------------------------- auth


def test_bad_pat_is_401_json_with_suppress_else_203_html(server: SimServer) -> None:
    url = api(server, "/pools")
    r = requests.get(url, auth=("", "wrong"), headers=SUPPRESS, timeout=5)
    assert r.status_code == 401
    assert "TF400813" in r.json()["message"]
    assert r.json()["typeKey"] == "UnauthorizedRequestException"
    r = requests.get(url, auth=("", "wrong"), timeout=5)
    assert r.status_code == 203 and r.headers["Content-Type"].startswith("text/html")
    assert "Sign In" in r.text
    r = requests.get(url, timeout=5)  # no Authorization at all
    assert r.status_code == 203


def test_scopes(server: SimServer) -> None:
    conn = f"{server.org_url}/_apis/connectionData"
    assert requests.get(conn, auth=("", NO_SCOPE_PAT), headers=SUPPRESS, timeout=5).ok
    r = requests.get(api(server, "/pools"), auth=("", NO_SCOPE_PAT), headers=SUPPRESS, timeout=5)
    assert r.status_code == 401 and "TF400813" in r.json()["message"]
    ro = {"auth": ("", READ_ONLY_PAT), "headers": SUPPRESS, "timeout": 5}
    assert requests.get(api(server, f"/pools/{POOL}/agents"), **ro).ok  # type: ignore[arg-type]
    r = requests.delete(api(server, f"/pools/{POOL}/agents/1"), params=V, **ro)  # type: ignore[arg-type]
    assert r.status_code == 401


def test_404_bodies(server: SimServer, http: requests.Session) -> None:
    r = http.get(api(server, "/pools/99"))
    assert r.status_code == 404 and r.json()["typeKey"] == "TaskAgentPoolNotFoundException"
    r = http.get(api(server, f"/pools/{POOL}/agents/12345"))
    assert r.status_code == 404 and r.json()["typeKey"] == "TaskAgentNotFoundException"
    assert http.get(api(server, "/nothing/here")).status_code == 404


# --------------------------------------------------------------------------- writes


def test_patch_and_delete_need_api_version(
    org: SimOrg, server: SimServer, http: requests.Session
) -> None:
    aid, _ = register(server, "gpu-1")
    url = api(server, f"/pools/{POOL}/agents/{aid}")
    r = http.patch(url, json={"enabled": False})
    assert r.status_code == 400 and r.json()["typeKey"] == "VssVersionNotSpecifiedException"
    assert (
        http.patch(url, json={"enabled": False}, params={"api-version": "banana"}).status_code
        == 400
    )
    r = http.patch(
        url,
        json={"id": aid, "enabled": False},
        headers={"Accept": "application/json;api-version=7.1-preview.1"},
    )
    assert r.status_code == 200 and r.json()["enabled"] is False
    assert org.get_agent(POOL, aid).enabled is False
    assert http.patch(url, json={"enabled": "no"}, params=V).status_code == 400
    assert http.get(url).json()["enabled"] is False  # GET without api-version is fine
    assert http.delete(url).status_code == 400
    r = http.delete(url, params=V)
    assert r.status_code == 204 and r.content == b""
    assert http.get(url).status_code == 404
    assert http.delete(url, params=V).status_code == 404


# --------------------------------------------------------------------------- faults


def test_rate_limit_and_server_error_faults(
    org: SimOrg, server: SimServer, http: requests.Session
) -> None:
    org.faults.rate_limit(retry_after=2.5, count=1)
    r = http.get(api(server, "/pools"))
    assert r.status_code == 429 and r.headers["Retry-After"] == "3"
    assert "TF400733" in r.json()["message"]
    assert r.headers["X-RateLimit-Remaining"] == "0" and "X-RateLimit-Delay" in r.headers
    org.faults.server_error(500, count=1)
    assert http.get(api(server, "/pools")).status_code == 500
    assert http.get(api(server, "/pools")).status_code == 200  # counts used up
    org.faults.slow(0.05, count=1, throttled=True)
    r = http.get(api(server, "/pools"))
    assert r.ok and r.headers["X-RateLimit-Delay"] == "0.050"
    org.faults.html_signin(token=PAT, count=1)
    r = http.get(api(server, "/pools"))
    assert r.status_code == 203 and "text/html" in r.headers["Content-Type"]


def test_faults_spare_private_endpoints_unless_asked(org: SimOrg, server: SimServer) -> None:
    org.faults.server_error(503)
    assert sim_post(server, "register", PAT, pool="gpu", name="a")[0] == 200
    org.faults.clear()
    org.faults.server_error(503, private=True)
    status, answer = sim_post(server, "register", PAT, pool="gpu", name="b")
    assert status == 503 and "503" in answer["error"]


def test_unreachable_refuses_connections_then_comes_back_on_the_same_port(
    org: SimOrg, server: SimServer, http: requests.Session
) -> None:
    port = server.port
    assert http.get(api(server, "/pools")).ok  # leaves a keep-alive connection in the pool
    fault = org.faults.unreachable()
    wait_until(lambda: not server.listening, what="the port to close")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    with pytest.raises(requests.ConnectionError):
        http.get(api(server, "/pools"), timeout=2)  # the kept-alive connection is cut too
    org.faults.clear(fault)
    wait_until(lambda: server.listening, what="the port to reopen")
    assert server.port == port
    assert http.get(api(server, "/pools")).ok


def test_non_loopback_host_is_refused(org: SimOrg) -> None:
    with pytest.raises(ValueError, match="loopback"):
        SimServer(org, host="0.0.0.0")  # noqa: S104 - that is the point


# --------------------------------------------------------------------------- agents over HTTP


def test_assignment_rules_over_the_private_endpoints(org: SimOrg, server: SimServer) -> None:
    first, second = org.queue_job(POOL, duration=1), org.queue_job(POOL, duration=1)
    a1, k1 = register(server, "gpu-1")
    a2, k2 = register(server, "gpu-2")
    org.set_agent_enabled(POOL, a2, False)
    assert sim_post(server, "poll", agent_id=a2, session=k2, timeout=0.1)[1] == {"job": "none"}
    status, job = sim_post(server, "poll", agent_id=a1, session=k1, timeout=5)
    assert status == 200 and job["job"] == str(first) and job["duration_ms"] == "1000"
    assert job["kind"] == "normal" and job["result"] == "succeeded"
    assert sim_post(server, "heartbeat", agent_id=a1, session=k1, request_id=first)[1] == {
        "cancel": "0"
    }
    assert sim_post(
        server, "finish", agent_id=a1, session=k1, request_id=first, result="succeeded"
    )[1] == {"ok": "1"}
    # --once: the session took its job; the second one waits for another agent.
    assert sim_post(server, "poll", agent_id=a1, session=k1, timeout=0.1)[1] == {"job": "none"}
    assert sim_post(server, "offline", agent_id=a1, session=k1)[1] == {"ok": "1"}
    assert sim_post(server, "poll", agent_id=a1, session=k1, timeout=0.1)[0] == 409
    org.set_agent_enabled(POOL, a2, True)
    status, job = sim_post(server, "poll", agent_id=a2, session=k2, timeout=5)
    assert job["job"] == str(second)
    # gpu-2 stops heartbeating: abandoned after heartbeat_timeout (0.5 s here).
    assert org.wait_for(lambda o: o.job(second).result == "abandoned", timeout=3)
    assert org.job(first).assign_count == org.job(second).assign_count == 1


def test_private_errors(server: SimServer) -> None:
    status, answer = sim_post(server, "register", "wrong", pool="gpu", name="a")
    assert status == 401 and "PAT" in answer["error"]
    status, answer = sim_post(server, "register", PAT, pool="cpu", name="a")
    assert status == 404 and "cpu" in answer["error"]
    assert sim_post(server, "poll", agent_id="x", session="y")[0] == 400
    assert requests.get(f"{server.url}/_sim/poll", timeout=5).status_code == 405


def test_long_poll_ends_when_the_server_stops(org: SimOrg) -> None:
    server = SimServer(org).start()
    aid, key = register(server, "gpu-1")
    result: list[int] = []
    t = threading.Thread(
        target=lambda: result.append(sim_post(server, "poll", agent_id=aid, session=key)[0])
    )
    t.start()
    wait_until(lambda: org.get_agent(POOL, aid).active_polls == 1, what="the poll")
    server.stop()
    t.join(5)
    assert result == [200]


def test_request_counts_use_route_templates(
    org: SimOrg, server: SimServer, http: requests.Session
) -> None:
    for agent_id in (1, 2, 3):
        http.get(api(server, f"/pools/{POOL}/agents/{agent_id}"))
    register(server, "gpu-1")
    counts = org.request_counts()
    assert counts[("GET", "/_apis/distributedtask/pools/{poolId}/agents/{agentId}")] == 3
    assert ("POST", "/_sim/register") not in counts
    assert org.request_counts(private=True)[("POST", "/_sim/register")] == 1
    assert any(
        '"GET /simorg/_apis/distributedtask/pools/42/agents/3" 404' in line
        for line in server.log_lines
    )


def test_packages_are_real_tarballs_and_the_required_version_is_a_control(
    server: SimServer, http: requests.Session
) -> None:
    [pkg] = http.get(
        api(server, "/packages/agent"), params={"platform": "linux-x64", "top": "1"}
    ).json()["value"]
    assert pkg["downloadUrl"].startswith(server.url + "/_download/agent/4.264.2/")
    tarball = requests.get(pkg["downloadUrl"], timeout=5)  # anonymous, like the real host
    assert tarball.status_code == 200
    assert hashlib.sha256(tarball.content).hexdigest() == pkg["hashValue"]
    status, answer = sim_post(server, "require_agent", version="4.270.0", bad_hash=1)
    assert status == 200 and answer == {"ok": "1", "current": "4.270.0"}
    [new] = http.get(
        api(server, "/packages/agent"), params={"platform": "linux-x64", "top": "1"}
    ).json()["value"]
    assert new["version"] == {"major": 4, "minor": 270, "patch": 0}
    got = requests.get(new["downloadUrl"], timeout=5).content
    assert hashlib.sha256(got).hexdigest() != new["hashValue"]  # the listed hash is wrong
    assert (
        requests.get(f"{server.url}/_download/agent/9.9.9/x.tar.gz", timeout=5).status_code == 404
    )


def test_the_real_client_reads_the_agent_packages(server: SimServer) -> None:
    from gpuci_tui.core.azure.client import AzureDevOpsClient

    server.org.require_agent_version("4.270.0")
    with AzureDevOpsClient(server.org_url, PAT) as client:
        packages = client.agent_packages("linux-x64")
    assert [p.version for p in packages] == ["4.270.0", "4.264.2", "4.261.0"]
    newest = packages[0]
    assert newest.platform == "linux-x64" and newest.filename.endswith("-4.270.0.tar.gz")
    data = requests.get(newest.download_url, timeout=5).content
    assert hashlib.sha256(data).hexdigest() == newest.hash_value
