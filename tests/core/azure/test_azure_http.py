"""Transport of the Azure DevOps client: retries, rate limits, network failures, URL safety."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
import requests
import urllib3
from requests.adapters import HTTPAdapter

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.errors import (
    AzureError,
    AzureRateLimitError,
    AzureServerError,
    AzureUnreachableError,
)
from tests.core.azure.test_azure_fake import PAT, FakeAzure, FakeClock, Reply, closed_port

POOLS = "_apis/distributedtask/pools"
POOL_LIST = {"count": 1, "value": [{"id": 7, "name": "gpu"}]}


class RaisingAdapter(HTTPAdapter):
    """Fails every request with ``failure`` (as requests would after a network error)."""

    def __init__(self, failure: requests.RequestException) -> None:
        super().__init__()
        self.failure = failure

    def send(
        self, request: requests.PreparedRequest, *args: object, **kwargs: object
    ) -> requests.Response:
        raise self.failure


@pytest.fixture
def fake() -> Iterator[FakeAzure]:
    server = FakeAzure().start()
    yield server
    server.stop()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make(url: str, clock: FakeClock, **kw: object) -> AzureDevOpsClient:
    return AzureDevOpsClient(
        url,
        PAT,
        clock=clock,
        sleep=clock.sleep,
        jitter=lambda: 0.0,
        **kw,  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------- 5xx


def test_server_errors_are_retried_with_growing_backoff_then_succeed(
    fake: FakeAzure, clock: FakeClock
) -> None:
    fake.on("GET", POOLS, Reply(500), Reply(503), Reply(502), Reply(200, POOL_LIST))
    client = make(fake.url, clock)
    assert [p.name for p in client.list_pools()] == ["gpu"]
    assert client.request_count == 4
    assert len(fake.requests_to(POOLS)) == 4
    # jitter=0 gives the lower bound of each window: 0.5 * 2**n / 2
    assert clock.sleeps == [0.25, 0.5, 1.0]


def test_jitter_spreads_the_backoff_within_its_window(fake: FakeAzure, clock: FakeClock) -> None:
    fake.on("GET", POOLS, Reply(500), Reply(200, POOL_LIST))
    client = AzureDevOpsClient(fake.url, PAT, clock=clock, sleep=clock.sleep, jitter=lambda: 0.99)
    client.list_pools()
    assert clock.sleeps == [pytest.approx(0.4975)]


def test_server_errors_exhausted_raise_server_error(fake: FakeAzure, clock: FakeClock) -> None:
    fake.on("GET", POOLS, Reply(500, {"message": "boom"}))
    client = make(fake.url, clock, max_retries=2)
    with pytest.raises(AzureServerError) as err:
        client.list_pools()
    assert len(fake.requests_to(POOLS)) == 3
    assert client.request_count == 3
    assert "HTTP 500" in str(err.value)
    assert "3 attempts" in str(err.value)
    assert err.value.retry_after is None, "no Retry-After: the observer's own backoff"


def test_a_server_error_with_a_long_retry_after_says_it(fake: FakeAzure, clock: FakeClock) -> None:
    """Past the inline wait it is not slept through: the error carries it to the backoff."""
    fake.on("GET", POOLS, Reply(503, headers={"Retry-After": "45"}))
    client = make(fake.url, clock)
    with pytest.raises(AzureServerError) as err:
        client.list_pools()
    assert err.value.retry_after == 45.0 and clock.sleeps == []


def test_dropped_connection_is_retried(fake: FakeAzure, clock: FakeClock) -> None:
    fake.on("GET", POOLS, Reply(drop=True), Reply(200, POOL_LIST))
    client = make(fake.url, clock)
    assert [p.id for p in client.list_pools()] == [7]
    assert client.request_count == 2


# --------------------------------------------------------------------------- 429 and rate-limit headers


def test_short_retry_after_is_slept_through(fake: FakeAzure, clock: FakeClock) -> None:
    fake.on("GET", POOLS, Reply(429, headers={"Retry-After": "2"}), Reply(200, POOL_LIST))
    client = make(fake.url, clock)
    assert [p.id for p in client.list_pools()] == [7]
    assert clock.sleeps == [2.0]


def test_long_retry_after_raises_without_sleeping_and_blocks_further_requests(
    fake: FakeAzure, clock: FakeClock
) -> None:
    fake.on(
        "GET",
        POOLS,
        Reply(
            429,
            {"message": "TF400733: The request has been canceled"},
            headers={"Retry-After": "120", "X-RateLimit-Resource": "Core"},
        ),
        Reply(200, POOL_LIST),
    )
    client = make(fake.url, clock)
    with pytest.raises(AzureRateLimitError) as err:
        client.list_pools()
    assert err.value.retry_after == 120
    assert clock.sleeps == []
    assert "Core" in str(err.value)
    assert client.rate_limit_state.throttled_until == clock.now + 120
    # While blocked the client answers from memory instead of extending the block.
    clock.now += 60
    with pytest.raises(AzureRateLimitError) as again:
        client.list_pools()
    assert again.value.retry_after == pytest.approx(60)
    assert len(fake.requests_to(POOLS)) == 1
    clock.now += 61
    assert [p.id for p in client.list_pools()] == [7]


def test_retry_after_as_http_date(fake: FakeAzure, clock: FakeClock) -> None:
    when = datetime.fromtimestamp(clock.now + 90, UTC)
    fake.on("GET", POOLS, Reply(429, headers={"Retry-After": format_datetime(when, usegmt=True)}))
    client = make(fake.url, clock)
    with pytest.raises(AzureRateLimitError) as err:
        client.list_pools()
    assert err.value.retry_after == pytest.approx(90)


def test_short_http_date_retry_after_is_slept_through(fake: FakeAzure, clock: FakeClock) -> None:
    when = datetime.fromtimestamp(clock.now + 3, UTC)
    fake.on(
        "GET",
        POOLS,
        Reply(429, headers={"Retry-After": format_datetime(when, usegmt=True)}),
        Reply(200, POOL_LIST),
    )
    client = make(fake.url, clock)
    client.list_pools()
    assert clock.sleeps == [pytest.approx(3)]


def test_rate_limit_headers_are_exposed(fake: FakeAzure, clock: FakeClock) -> None:
    reset = clock.now + 240
    fake.on(
        "GET",
        POOLS,
        Reply(
            200,
            POOL_LIST,
            headers={
                "X-RateLimit-Resource": "ATCPU",
                "X-RateLimit-Delay": "0.5",
                "X-RateLimit-Limit": "200",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": str(int(reset)),
            },
        ),
    )
    client = make(fake.url, clock)
    assert client.rate_limit_state.throttled(clock.now) is False
    client.list_pools()
    state = client.rate_limit_state
    assert (state.remaining, state.limit, state.delay_s) == (0, 200, 0.5)
    assert state.reset_at == int(reset)
    assert state.resource == "ATCPU"
    assert state.throttled_until == int(reset)
    assert state.throttled(clock.now)
    assert not state.throttled(reset + 1)


def test_remaining_without_delay_does_not_throttle(fake: FakeAzure, clock: FakeClock) -> None:
    fake.on("GET", POOLS, Reply(200, POOL_LIST, headers={"X-RateLimit-Remaining": "150"}))
    client = make(fake.url, clock)
    client.list_pools()
    assert client.rate_limit_state.remaining == 150
    assert client.rate_limit_state.throttled_until is None


# --------------------------------------------------------------------------- network failures


def test_connection_refused_is_unreachable_and_not_retried(clock: FakeClock) -> None:
    port = closed_port()
    client = make(f"http://127.0.0.1:{port}/org", clock)
    with pytest.raises(AzureUnreachableError) as err:
        client.list_pools()
    assert f"127.0.0.1:{port}" in str(err.value)
    assert "refused" in str(err.value)
    assert client.request_count == 1
    assert err.value.__cause__ is None and err.value.__context__ is None


def test_timeout_is_unreachable(fake: FakeAzure, clock: FakeClock) -> None:
    fake.on("GET", POOLS, Reply(hang=True))
    client = make(fake.url, clock, timeout=0.3)
    with pytest.raises(AzureUnreachableError) as err:
        client.list_pools()
    assert "no answer within 0.3 s" in str(err.value)
    assert client.request_count == 1


def test_a_body_that_stalls_is_a_timeout(fake: FakeAzure, clock: FakeClock) -> None:
    fake.on("GET", POOLS, Reply(200, POOL_LIST, stall_body=True))
    client = make(fake.url, clock, timeout=0.3)
    with pytest.raises(AzureUnreachableError, match=r"no answer within 0\.3 s"):
        client.list_pools()


def _resolution_failure(host: str) -> requests.ConnectionError:
    reason = urllib3.exceptions.NameResolutionError(
        host,
        None,  # type: ignore[arg-type]  # only used in the message
        socket.gaierror(-2, "Name or service not known"),
    )
    wrapped = urllib3.exceptions.MaxRetryError(None, "/", reason)  # type: ignore[arg-type]
    return requests.ConnectionError(wrapped)


def _untrusted_certificate() -> requests.exceptions.SSLError:
    cause = ssl.SSLCertVerificationError(1, "certificate verify failed")
    cause.verify_message = "self-signed certificate in certificate chain"
    wrapped = urllib3.exceptions.MaxRetryError(None, "/", cause)  # type: ignore[arg-type]
    return requests.exceptions.SSLError(wrapped)


@pytest.mark.parametrize(
    ("failure", "words"),
    [
        (_resolution_failure("dev.azure.com"), "does not resolve (DNS)"),
        (_untrusted_certificate(), "self-signed certificate in certificate chain"),
        (requests.exceptions.ProxyError("proxy said no"), "proxy"),
    ],
)
def test_dns_tls_and_proxy_failures_are_unreachable_in_plain_words(
    failure: requests.RequestException, words: str, clock: FakeClock
) -> None:
    # Failures are raised by an adapter: no DNS query or TLS handshake leaves the host.
    session = requests.Session()
    session.mount("https://", RaisingAdapter(failure))
    client = make("https://dev.azure.com/contoso", clock, session=session)
    with pytest.raises(AzureUnreachableError) as err:
        client.list_pools()
    assert "Cannot reach dev.azure.com" in str(err.value)
    assert words in str(err.value)
    assert client.request_count == 1


# --------------------------------------------------------------------------- other answers


def test_non_json_success_is_a_plain_error(fake: FakeAzure, clock: FakeClock) -> None:
    fake.on("GET", POOLS, Reply(200, b"hello", content_type="text/plain"))
    with pytest.raises(AzureError, match="not JSON"):
        make(fake.url, clock).list_pools()


def test_other_client_errors_carry_the_service_message(fake: FakeAzure, clock: FakeClock) -> None:
    fake.on("GET", POOLS, Reply(400, {"message": "VS402371: bad\n  parameter", "typeKey": "X"}))
    with pytest.raises(AzureError) as err:
        make(fake.url, clock).list_pools()
    assert "HTTP 400" in str(err.value)
    assert "VS402371: bad parameter" in str(err.value)


def test_request_count_is_thread_safe(fake: FakeAzure) -> None:
    fake.on("GET", POOLS, Reply(200, POOL_LIST))
    client = AzureDevOpsClient(fake.url, PAT)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(10):
                client.list_pools()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert client.request_count == 60
    assert len(fake.requests_to(POOLS)) == 60
