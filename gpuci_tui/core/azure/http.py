"""HTTP transport to one Azure DevOps organisation: auth, safety, retries, rate limits.

`AzureTransport` sends one logical request and turns every answer that is not
a usable success into the plain-worded `AzureError` subclass the operator
should see. It owns the things every endpoint shares:

* the credential's ``Authorization`` header (`secrets.credentials`: a PAT as
  Basic auth, or an Entra access token as Bearer), asked for on every request
  so a rotated PAT or a refreshed token takes effect at once; a rejected
  access token is re-acquired once before the rejection is reported;
* refusing to send the PAT in clear text (``http://``) to anything but loopback;
* retries with exponential backoff and jitter for 5xx and dropped connections, while
  the organisation is not known down (`outage`: once a call failed so, one attempt each
  until a call is answered);
* ``Retry-After`` / ``X-RateLimit-*`` handling, without blocking callers for long
  (`rate_limits`);
* a request counter and the latest rate-limit figures, both thread-safe;
* the daemon's own cap on its calls (``[azure] max_requests_per_minute``, `budget`):
  a call of a low priority gives way to the higher ones when the cap is near;
* the last minute of attempts and bytes (`usage`), and an optional observer told
  each attempt's route, status and size (the daemon's metrics).

Nothing here knows about pools or agents; see `client.py` for the endpoints.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import quote, urlencode

import requests

from gpuci_tui.core.azure.answer import Answer, Json, answer_size, decode_answer
from gpuci_tui.core.azure.budget import Priority
from gpuci_tui.core.azure.errors import (
    HeaderAuth,
    OrgUrl,
    describe_transport_error,
    redirect_error,
)
from gpuci_tui.core.azure.outage import OutageWatch, may_retry
from gpuci_tui.core.azure.parse import RateLimitState, parse_retry_after, server_message
from gpuci_tui.core.azure.rate_limits import MAX_INLINE_WAIT, RateLimits
from gpuci_tui.core.azure.usage import HttpAttempt, RequestLedger, route_of
from gpuci_tui.core.errors import (
    AzureAuthError,
    AzureBadRequestError,
    AzureError,
    AzureNotFoundError,
    AzureScopeError,
    AzureServerError,
    AzureUnreachableError,
)
from gpuci_tui.core.host_readings import AzureUsage
from gpuci_tui.core.secrets.credentials import (
    Credential,
    TokenProvider,
    as_credential,
    header_secret,
)
from gpuci_tui.core.secrets.redaction import redact

LOG = logging.getLogger("gpuci_tui.azure")

BACKOFF_BASE = 0.5
BACKOFF_CAP = 8.0

__all__ = ["Answer", "AzureTransport", "TokenProvider"]


class AzureTransport:
    """Sends requests to one organisation; thread-safe.

    Args:
        org_url: Organisation URL, e.g. ``https://dev.azure.com/contoso``.
        token: A `Credential`, or a PAT or a callable returning it (called before
            every request).
        timeout: Seconds for connecting and for each read.
        max_retries: Extra attempts after a 5xx, a short 429 or a dropped connection.
        session: A `requests.Session` to use (closed by `close` only if created here).
        api_version: Sent as ``Accept: application/json;api-version=...``.
        user_agent: The ``User-Agent`` header.
        clock: Wall-clock time source (epoch seconds), injectable for tests.
        sleep: Used for backoff waits, injectable for tests (None: real time; a 5xx's
            backoff then ends early when another call finds the organisation down).
        jitter: Returns a float in [0, 1) that spreads retries out.
        max_requests_per_minute: This client's cap on its attempts (None: none).

    Raises:
        AzureError: The URL is malformed or would send the PAT in clear text.
    """

    def __init__(
        self,
        org_url: str,
        token: TokenProvider | Credential,
        *,
        timeout: float = 15.0,
        max_retries: int = 4,
        session: requests.Session | None = None,
        api_version: str = "7.1",
        user_agent: str = "gpuci-tui",
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] | None = None,
        jitter: Callable[[], float] = random.random,
        max_requests_per_minute: int | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.org = OrgUrl.parse(org_url)
        self.credential = as_credential(token)
        """What proves our identity (`secrets.credentials.Credential`)."""
        self._timeout = timeout
        self._max_retries = max_retries
        self._owns_session = session is None
        self._session = session if session is not None else requests.Session()
        self._api_version = api_version
        self._user_agent = user_agent
        self._clock = clock
        self._sleep = sleep or time.sleep
        self._jitter = jitter
        self._lock = threading.Lock()
        self._count = 0
        self._limits = RateLimits()
        self._ledger = RequestLedger(max_requests_per_minute)
        self.outage = OutageWatch(sleep)
        """Whether the organisation is known down (then one attempt per call)."""
        self._identity_fingerprint: str | None = None
        self.observer: Callable[[HttpAttempt], None] | None = None
        """Told each attempt (route, status, bytes), from the calling thread."""
        # Plain http:// only ever goes to loopback: never via a proxy from the
        # environment, which would see the PAT in clear text. requests drops a
        # proxy whose per-request value is None (typeshed only allows str).
        self._proxies: dict[str, str] | None = (
            None if self.org.scheme == "https" else cast(dict[str, str], dict.fromkeys(_NO_PROXY))
        )

    def __repr__(self) -> str:
        return f"AzureTransport(org_url={self.org.url!r}, requests={self.request_count})"

    # ------------------------------------------------------------------ state

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far, retries included."""
        with self._lock:
            return self._count

    @property
    def rate_limit_state(self) -> RateLimitState:
        """The latest rate-limit figures (a frozen copy)."""
        return self._limits.state

    def usage(self) -> AzureUsage:
        """The last minute of attempts and bytes, the cap, and the service's word on the budget."""
        return self._ledger.usage(self._clock(), self._limits.state)

    def set_request_cap(self, cap: int | None) -> None:
        """Change ``[azure] max_requests_per_minute`` (a reload applies it at once)."""
        self._ledger.set_cap(cap)

    def forget_identity(self) -> None:
        """Forget that a PAT was accepted (its answer turned out to be anonymous)."""
        with self._lock:
            self._identity_fingerprint = None

    def close(self) -> None:
        """Close the session if this transport created it."""
        if self._owns_session:
            self._session.close()

    # ------------------------------------------------------------------ token

    def current_token(self) -> str:
        """The secret to send now (the PAT, or the access token), trimmed.

        Raises:
            AzureAuthError: There is no PAT, or it cannot be a PAT.
            GpuciError: The credential failed (passed through; already plain).
        """
        return header_secret(self.credential.authorization())

    # ------------------------------------------------------------------ requests

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Json = None,
        api_version: str | None = None,
        pool_endpoint: bool = False,
        confirms_identity: bool = False,
        priority: Priority = Priority.READ,
    ) -> Answer:
        """Send one logical request (with retries) and return its 2xx answer.

        Args:
            method: ``GET``, ``PATCH``, ``DELETE``…
            path: Below the organisation URL, e.g. ``_apis/distributedtask/pools``.
            params: Query parameters.
            json_body: Sent as ``application/json`` when not None.
            api_version: Overrides the client's version for this call.
            pool_endpoint: A 401 here after the PAT was accepted means "no scope".
            confirms_identity: A 2xx here proves the PAT is valid (``connectionData``).
            priority: Who gives way first when ``max_requests_per_minute`` is near.

        Raises:
            AzureAuthError, AzureScopeError, AzureNotFoundError, AzureRateLimitError,
            AzureUnreachableError, AzureServerError, AzureBadRequestError, AzureError:
            see the module doc. AzureHeldBackError: a periodic read the cap held back.
        """
        query = f"?{urlencode(params, quote_via=quote)}" if params else ""
        url = f"{self.org.url}/{path}{query}"
        shown = f"/{path}{query}"
        route = route_of(path)
        attempt = 0
        reacquired = False
        called_off: AzureError | None = None
        while True:
            if called_off is not None and self.outage.down:
                # Another call found the organisation down while this one waited to retry:
                # the next probe is the retry (`outage`).
                raise called_off
            called_off = None
            self._limits.raise_if_blocked(self._clock())
            self._ledger.clear_to_send(priority, f"{method} {shown}", self._clock, self._sleep)
            # Checked before every send, not just at construction: the URL is
            # the last thing standing between the PAT and a clear-text network.
            self.org.check_safe(url)
            header = self.credential.authorization()
            token = header_secret(header)
            headers = self._headers(api_version, json_body is not None)
            failure: AzureUnreachableError | None = None
            retryable = False
            with self._lock:
                self._count += 1
            started = time.monotonic()
            try:
                response = self._session.request(
                    method,
                    url,
                    headers=headers,
                    auth=HeaderAuth(header),
                    data=None if json_body is None else json.dumps(json_body),
                    timeout=self._timeout,
                    allow_redirects=False,
                    proxies=None if self._proxies is None else dict(self._proxies),
                )
            except requests.RequestException as exc:
                text, retryable = describe_transport_error(exc, self.org.netloc, self._timeout)
                failure = AzureUnreachableError(redact(text, token))
            elapsed_ms = (time.monotonic() - started) * 1000
            if failure is not None:
                self._attempted(HttpAttempt(method, route, None))
            else:
                self._attempted(
                    HttpAttempt(method, route, response.status_code, answer_size(response))
                )
            if failure is not None:
                # Raised outside the except block so that no exception chain
                # (whose request object carries the Authorization header) is kept.
                LOG.warning("%s %s failed after %.0f ms: %s", method, shown, elapsed_ms, failure)
                if retryable and may_retry(attempt, self._max_retries, self.outage.down):
                    self.outage.back_off(self._backoff(attempt))
                    attempt += 1
                    called_off = failure
                    continue
                self.outage.failed()
                raise failure
            LOG.debug("%s %s -> %d in %.0f ms", method, shown, response.status_code, elapsed_ms)
            try:
                try:
                    retry = self._evaluate(response, method, shown, token, pool_endpoint, attempt)
                except AzureAuthError:
                    # An access token can be refused before its stated expiry (revoked,
                    # clock skew): acquire a new one once, then report the refusal.
                    if reacquired or self.credential.kind == "pat":
                        self.credential.note_rejected(token)
                        raise
                    LOG.warning("%s %s: token refused; acquiring a new one", method, shown)
                    self.credential.refresh()
                    reacquired = True
                    continue
                if retry is None:
                    self.credential.note_accepted()
                    answer = decode_answer(response, method, shown)
                    if confirms_identity:
                        with self._lock:
                            self._identity_fingerprint = _fingerprint(token)
                    return answer
            finally:
                response.close()
            if retry.unless_down is None:
                self._sleep(retry.delay)  # a 429's wait: the service's word, kept
            else:
                self.outage.back_off(retry.delay)
                called_off = retry.unless_down
            attempt += 1

    def _attempted(self, attempt: HttpAttempt) -> None:
        """Count one attempt (the last minute, and the observer's metrics)."""
        self._ledger.received(self._clock(), attempt.response_bytes)
        if self.observer is not None:
            self.observer(attempt)

    def _headers(self, api_version: str | None, has_body: bool) -> dict[str, str]:
        headers = {
            "Accept": f"application/json;api-version={api_version or self._api_version}",
            # Without it a bad PAT yields a 203/302 sign-in page instead of a 401.
            "X-TFS-FedAuthRedirect": "Suppress",
            "User-Agent": self._user_agent,
        }
        if has_body:
            headers["Content-Type"] = "application/json"
        return headers

    def _backoff(self, attempt: int) -> float:
        ceiling = min(BACKOFF_CAP, BACKOFF_BASE * (2.0**attempt))
        return ceiling * (0.5 + 0.5 * self._jitter())

    def _evaluate(
        self,
        response: requests.Response,
        method: str,
        shown: str,
        token: str,
        pool_endpoint: bool,
        attempt: int,
    ) -> _Retry | None:
        """Raise for a failed answer; return when to retry, or None for success."""
        status = response.status_code
        now = self._clock()
        self._limits.note(response.headers, now)
        if status < 500:
            self.outage.answered()  # any answer, a refusal included: the organisation is up
        if status == 203:
            raise AzureAuthError(self.credential.rejected_message())
        if 300 <= status < 400:
            raise redirect_error(response.headers.get("Location", ""), status)
        if 200 <= status < 300:
            # The service answers a rejected PAT with a sign-in page when it
            # does not honour X-TFS-FedAuthRedirect; JSON APIs never send HTML.
            if "text/html" in response.headers.get("Content-Type", "").lower():
                raise AzureAuthError(self.credential.rejected_message())
            return None
        if status == 401:
            with self._lock:
                known_good = self._identity_fingerprint == _fingerprint(token)
            if pool_endpoint and known_good:
                raise AzureScopeError(self.credential.forbidden_message(self.org.name))
            raise AzureAuthError(self.credential.rejected_message())
        if status == 403:
            raise AzureScopeError(self.credential.forbidden_message(self.org.name))
        if status == 404:
            detail = redact(server_message(response.content), token)
            raise AzureNotFoundError(f"Azure DevOps has no {shown} ({detail or 'HTTP 404'}).")
        if status == 429:
            more = attempt < self._max_retries
            pause = self._limits.too_many(
                response.headers, now, may_retry=more, what=f"{method} {shown}"
            )
            return _Retry(pause)
        if status >= 500:
            wait = parse_retry_after(response.headers, now)
            tries = attempt + 1
            failure = AzureServerError(
                f"Azure DevOps answered HTTP {status} to {method} {shown} "
                f"({tries} attempt{'s' if tries > 1 else ''}). The problem is on Microsoft's "
                "side (see https://status.dev.azure.com); try again in a few minutes.",
                retry_after=wait,
            )
            if may_retry(attempt, self._max_retries, self.outage.down) and (
                wait is None or wait <= MAX_INLINE_WAIT
            ):
                delay = max(self._backoff(attempt), wait or 0.0)
                LOG.warning(
                    "%s %s -> HTTP %d; retry %d in %.1f s",
                    method,
                    shown,
                    status,
                    attempt + 1,
                    delay,
                )
                return _Retry(delay, failure)
            self.outage.failed()
            raise failure
        detail = redact(server_message(response.content), token)
        refused = AzureBadRequestError if status == 400 else AzureError
        raise refused(
            f"Azure DevOps refused {method} {shown} with HTTP {status}"
            + (f": {detail}" if detail else ".")
        )


_NO_PROXY = ("http", "https", "all")


@dataclass(frozen=True)
class _Retry:
    """A failed attempt to send again after ``delay`` seconds."""

    delay: float
    unless_down: AzureError | None = None
    """Raised instead, if the organisation is found down meanwhile (a 5xx's retry); None:
    the retry is kept (a 429's short ``Retry-After``)."""


def _fingerprint(token: str) -> str:
    # Only a digest is kept, so no second copy of the PAT lives in this object.
    return hashlib.sha256(token.encode()).hexdigest()
