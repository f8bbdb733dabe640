"""The PAT's safety on the way out: clear-text refusal, no proxies or redirects, org URL checks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from requests.adapters import HTTPAdapter

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.azure.errors import OrgUrl
from gpuci_tui.core.errors import AzureAuthError, AzureError
from tests.core.azure.test_azure_fake import PAT, FakeAzure, FakeClock, Reply

POOLS = "_apis/distributedtask/pools"
POOL_LIST = {"count": 1, "value": [{"id": 7, "name": "gpu"}]}


class RecordingAdapter(HTTPAdapter):
    """Records every request a session would send, and sends none."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def send(
        self, request: requests.PreparedRequest, *args: object, **kwargs: object
    ) -> requests.Response:
        self.calls.append(str(request.url))
        raise AssertionError(f"no request may be sent, got {request.url}")


@pytest.fixture
def fake() -> Iterator[FakeAzure]:
    server = FakeAzure().start()
    yield server
    server.stop()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make(url: str, clock: FakeClock, **kw: object) -> AzureDevOpsClient:
    return AzureDevOpsClient(url, PAT, clock=clock, sleep=clock.sleep, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- URL safety


@pytest.mark.parametrize(
    "url",
    [
        "http://dev.azure.com/org",
        "http://10.1.2.3/org",
        "http://127.0.0.1.example.com/org",
        "http://[fe80::1]/org",
    ],
)
def test_plain_http_to_a_non_loopback_host_is_refused_without_traffic(url: str) -> None:
    adapter = RecordingAdapter()
    session = requests.Session()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    with pytest.raises(AzureError) as err:
        AzureDevOpsClient(url, PAT, session=session)
    assert "plain http://" in str(err.value)
    assert adapter.calls == []


def test_the_url_is_rechecked_before_every_request(fake: FakeAzure) -> None:
    adapter = RecordingAdapter()
    session = requests.Session()
    session.mount("http://", adapter)
    client = AzureDevOpsClient(fake.url, PAT, session=session)
    # Simulate state gone wrong after construction: the per-request check must hold.
    client._http.org = OrgUrl(  # noqa: SLF001
        url="http://10.9.9.9/org", scheme="http", host="10.9.9.9", netloc="10.9.9.9", name="org"
    )
    with pytest.raises(AzureError, match="plain http://"):
        client.list_pools()
    assert adapter.calls == []
    assert client.request_count == 0


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/org",
        "http://127.8.9.10/org",
        "http://localhost:1234/org/",
        "http://[::1]:8080/org",
        "https://dev.azure.com/org",
        "https://contoso.visualstudio.com",
    ],
)
def test_loopback_http_and_any_https_are_accepted(url: str) -> None:
    client = AzureDevOpsClient(url, PAT)
    assert not client.org_url.endswith("/")
    assert client.request_count == 0


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("https://user:pw@dev.azure.com/org", "user name or password"),
        ("https://dev.azure.com/org?x=1", "'?' or '#'"),
        ("ftp://dev.azure.com/org", "not an organisation URL"),
        ("dev.azure.com/org", "not an organisation URL"),
        ("https://dev.azure.com/", "organisation's name"),
        ("https://dev.azure.com/contoso/ml-project/_build", "use https://dev.azure.com/contoso."),
    ],
)
def test_malformed_urls_are_refused_plainly(url: str, words: str) -> None:
    with pytest.raises(AzureError, match=words.replace("?", r"\?")):
        AzureDevOpsClient(url, PAT)


def test_org_name_is_derived_for_messages() -> None:
    assert AzureDevOpsClient("https://dev.azure.com/contoso/", PAT).org_name == "contoso"
    assert AzureDevOpsClient("https://fabrikam.visualstudio.com", PAT).org_name == "fabrikam"


def test_loopback_http_ignores_proxies_from_the_environment(
    fake: FakeAzure, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = FakeAzure().start()
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        fake.on("GET", POOLS, Reply(200, POOL_LIST))
        make(fake.url, clock).list_pools()
        assert proxy.seen == []
        assert len(fake.requests_to(POOLS)) == 1
    finally:
        proxy.stop()


def test_redirects_are_not_followed(fake: FakeAzure, clock: FakeClock) -> None:
    other = FakeAzure().start()
    try:
        moved = Reply(
            301,
            b"<html><body>Object moved</body></html>",
            content_type="text/html",
            headers={"Location": f"{other.url}/{POOLS}?x=1"},
        )
        fake.on("GET", POOLS, moved)
        with pytest.raises(AzureError) as err:
            make(fake.url, clock).list_pools()
        assert not isinstance(err.value, AzureAuthError)
        assert f"{other.url}/{POOLS}" in str(err.value)
        assert "?x=1" not in str(err.value)
        assert other.seen == []
    finally:
        other.stop()


def test_redirect_to_a_sign_in_page_is_an_auth_error(fake: FakeAzure, clock: FakeClock) -> None:
    signin = "https://app.vssps.visualstudio.com/_signin?realm=x"
    fake.on("GET", POOLS, Reply(302, headers={"Location": signin}))
    with pytest.raises(AzureAuthError):
        make(fake.url, clock).list_pools()
