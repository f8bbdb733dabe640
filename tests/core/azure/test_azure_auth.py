"""The PAT: auth and scope errors, validate_pat's reason codes, and never leaking it."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.azure.errors import PatAuth
from gpuci_tui.core.errors import AzureAuthError, AzureError, AzureScopeError
from tests.core.azure.test_azure_fake import PAT, FakeAzure, Reply, closed_port, envelope

POOLS = "_apis/distributedtask/pools"
CONNECTION = "_apis/connectionData"
ME = {"authenticatedUser": {"id": "79de", "providerDisplayName": "Jane Doe"}, "instanceId": "1bc7"}
HTML_SIGNIN = b"<html><head><title>Azure DevOps Services | Sign In</title></head></html>"
GPU_POOL = {"id": 42, "name": "gpu", "isHosted": False, "poolType": "automation", "size": 3}


@pytest.fixture
def fake() -> Iterator[FakeAzure]:
    server = FakeAzure().start()
    yield server
    server.stop()


def make(fake: FakeAzure, token: object = PAT, **kw: object) -> AzureDevOpsClient:
    kw.setdefault("sleep", lambda s: pytest.fail(f"unexpected sleep({s})"))
    return AzureDevOpsClient(fake.url, token, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- auth and scope


@pytest.mark.parametrize(
    "reply",
    [
        Reply(203, HTML_SIGNIN, content_type="text/html; charset=utf-8"),
        Reply(200, HTML_SIGNIN, content_type="text/html"),
        Reply(401, {"message": "TF400813: The user '' is not authorized"}),
        Reply(401),
    ],
    ids=["203-html", "200-html", "401-json", "401-empty"],
)
def test_rejected_pat_is_an_auth_error_with_advice(fake: FakeAzure, reply: Reply) -> None:
    fake.on("GET", POOLS, reply)
    with pytest.raises(AzureAuthError) as err:
        make(fake).list_pools()
    assert "wrong, expired or revoked" in str(err.value)
    assert "gpuci-tui setup" in str(err.value)


def test_403_on_pools_is_a_scope_error(fake: FakeAzure) -> None:
    fake.on("GET", POOLS, Reply(403, {"message": "Access denied"}))
    with pytest.raises(AzureScopeError, match="Agent Pools"):
        make(fake).list_pools()


def test_401_on_pools_after_connection_data_succeeded_is_a_scope_error(fake: FakeAzure) -> None:
    fake.on("GET", CONNECTION, Reply(200, ME))
    fake.on("GET", POOLS, Reply(401))
    client = make(fake)
    client.connection_data()
    with pytest.raises(AzureScopeError, match=r"Agent Pools \(read & manage\)"):
        client.list_pools()


def test_a_rotated_token_is_used_at_once_and_401_is_then_an_auth_error(fake: FakeAzure) -> None:
    tokens = iter(["firstpat", "secondpat", "secondpat"])
    fake.on("GET", CONNECTION, Reply(200, ME))
    fake.on("GET", POOLS, Reply(401))
    client = make(fake, token=lambda: next(tokens))
    client.connection_data()
    # The PAT that connectionData accepted is not the one now rejected.
    with pytest.raises(AzureAuthError):
        client.list_pools()
    sent = [s.headers["Authorization"] for s in fake.seen]
    assert sent[0] != sent[1]


def test_anonymous_answer_of_a_public_org_is_an_auth_error(fake: FakeAzure) -> None:
    anonymous = {"authenticatedUser": {"descriptor": "System:PublicAccess;aa44", "id": "aa44"}}
    fake.on("GET", CONNECTION, Reply(200, anonymous))
    fake.on("GET", POOLS, Reply(401))
    client = make(fake)
    with pytest.raises(AzureAuthError, match="anonymously"):
        client.connection_data()
    # Not taken as proof of a valid PAT: a 401 afterwards is still "bad PAT".
    with pytest.raises(AzureAuthError):
        client.list_pools()


@pytest.mark.parametrize("token", ["", "   \n", "pat with spaces"])
def test_missing_or_malformed_pat_is_refused_before_any_request(
    fake: FakeAzure, token: str
) -> None:
    client = make(fake, token=lambda: token)
    with pytest.raises(AzureAuthError, match="gpuci-tui setup"):
        client.list_pools()
    assert fake.seen == []
    assert client.request_count == 0


def test_credentials_in_netrc_do_not_replace_the_pat(
    fake: FakeAzure, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password other-secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    fake.on("GET", POOLS, Reply(200, envelope()))
    make(fake).list_pools()
    encoded = fake.seen[0].headers["Authorization"].split()[1]
    assert base64.b64decode(encoded).decode() == f":{PAT}"


def test_token_file_newline_is_trimmed(fake: FakeAzure) -> None:
    fake.on("GET", POOLS, Reply(200, envelope()))
    make(fake, token=f"{PAT}\n").list_pools()
    encoded = fake.seen[0].headers["Authorization"].split()[1]
    assert base64.b64decode(encoded).decode() == f":{PAT}"


# --------------------------------------------------------------------------- validate_pat


def arm_pool_lookups(
    fake: FakeAzure, found: list[dict[str, object]], manageable: bool = True
) -> None:
    fake.on("GET", CONNECTION, Reply(200, ME))
    fake.on("GET", POOLS, Reply(200, envelope(*found)), query={"poolName": "gpu"})
    fake.on(
        "GET",
        POOLS,
        Reply(200, envelope(*found) if manageable else envelope()),
        query={"poolName": "gpu", "actionFilter": "manage"},
    )


def test_validate_ok(fake: FakeAzure) -> None:
    arm_pool_lookups(fake, [GPU_POOL])
    check = make(fake).validate_pat("gpu")
    assert (check.ok, check.reason, check.user) == (True, "ok", "Jane Doe")
    assert check.pool is not None and check.pool.id == 42
    assert "pool 'gpu' (id 42, 3 agents)" in check.message


def test_validate_without_a_pool_checks_pool_access(fake: FakeAzure) -> None:
    fake.on("GET", CONNECTION, Reply(200, ME))
    fake.on("GET", POOLS, Reply(200, envelope(GPU_POOL)))
    check = make(fake).validate_pat(None)
    assert (check.ok, check.reason, check.pool) == (True, "ok", None)
    assert "1 agent pool " in check.message
    assert len(fake.requests_to(POOLS)) == 1


def test_validate_bad_pat(fake: FakeAzure) -> None:
    fake.on("GET", CONNECTION, Reply(401))
    check = make(fake).validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "bad_pat")
    assert "expired" in check.message


def test_validate_no_scope_on_401(fake: FakeAzure) -> None:
    fake.on("GET", CONNECTION, Reply(200, ME))
    fake.on("GET", POOLS, Reply(401))
    check = make(fake).validate_pat("gpu")
    assert (check.ok, check.reason, check.user) == (False, "no_scope", "Jane Doe")


def test_validate_no_scope_when_the_pool_cannot_be_managed(fake: FakeAzure) -> None:
    arm_pool_lookups(fake, [GPU_POOL], manageable=False)
    check = make(fake).validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "no_scope")
    assert check.pool is not None
    assert "Administrator" in check.message


def test_validate_pool_not_found(fake: FakeAzure) -> None:
    arm_pool_lookups(fake, [])
    fake.on("GET", POOLS, Reply(200, envelope({"id": 1, "name": "Default"})))
    fake.on("GET", POOLS, Reply(200, envelope()), query={"poolName": "gpu"})
    check = make(fake).validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "pool_not_found")
    assert "Pools you can see: Default." in check.message


def test_validate_pool_ambiguous(fake: FakeAzure) -> None:
    arm_pool_lookups(fake, [GPU_POOL, dict(GPU_POOL, id=43)])
    check = make(fake).validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "pool_ambiguous")


def test_validate_unreachable() -> None:
    client = AzureDevOpsClient(f"http://127.0.0.1:{closed_port()}/org", PAT)
    check = client.validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "unreachable")
    assert "refused" in check.message


def test_validate_rate_limited(fake: FakeAzure) -> None:
    fake.on("GET", CONNECTION, Reply(429, headers={"Retry-After": "300"}))
    check = make(fake).validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "rate_limited")
    assert "300 s" in check.message


def test_validate_server_error(fake: FakeAzure) -> None:
    fake.on("GET", CONNECTION, Reply(500))
    check = make(fake, max_retries=0).validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "error")
    assert "HTTP 500" in check.message


def test_validate_wrong_org_url(fake: FakeAzure) -> None:
    check = make(fake).validate_pat("gpu")  # the fake answers 404 to unknown routes
    assert (check.ok, check.reason) == (False, "error")
    assert "does not look like an Azure DevOps organisation" in check.message


def test_validate_token_source_failure_is_reported_not_raised(fake: FakeAzure) -> None:
    def locked() -> str:
        raise AzureAuthError("The keyring is locked: unlock it with `gpuci-tui setup`.")

    check = make(fake, token=locked).validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "bad_pat")
    assert fake.seen == []


# --------------------------------------------------------------------------- secrecy


def test_the_pat_never_appears_in_errors_logs_or_reprs(
    fake: FakeAzure, caplog: pytest.LogCaptureFixture
) -> None:
    basic = base64.b64encode(f":{PAT}".encode()).decode()
    # A server that echoes the credentials back in its error messages.
    fake.on("GET", POOLS, Reply(400, {"message": f"bad header Basic {basic} for {PAT}"}))
    fake.on("GET", f"{POOLS}/1/agents", Reply(500, {"message": PAT}))
    fake.on("GET", CONNECTION, Reply(401, {"message": PAT}))
    fake.on("GET", f"{POOLS}/1/jobrequests", Reply(hang=True))
    client = make(fake, max_retries=1, timeout=0.3, sleep=lambda s: None)
    client_other = AzureDevOpsClient(f"http://127.0.0.1:{closed_port()}/org", PAT)
    texts: list[str] = [repr(client), str(client.rate_limit_state)]
    calls: list[Callable[[], object]] = [
        client.list_pools,
        lambda: client.list_agents(1),
        client.connection_data,
        lambda: client.list_job_requests(1),
        client_other.list_pools,
    ]
    with caplog.at_level(logging.DEBUG):
        for call in calls:
            with pytest.raises(AzureError) as err:
                call()
            texts += [str(err.value), repr(err.value)]
        texts.append(client.validate_pat("gpu").message)
    texts += [r.getMessage() for r in caplog.records]
    auth = PatAuth(PAT)
    prepared = requests.Request("GET", fake.url, auth=auth).prepare()
    texts += [repr(auth), repr(prepared), repr(prepared.headers), repr(dict(prepared.headers))]
    joined = "\n".join(texts)
    assert "***" in joined  # the echoed secret was there and was redacted
    assert PAT not in joined
    assert basic not in joined
    assert any("GET /_apis/distributedtask/pools" in r.getMessage() for r in caplog.records)
