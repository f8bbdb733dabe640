"""What can go wrong talking to Azure DevOps, in plain words, and the guard against the worst.

* `OrgUrl` checks the configured URL and refuses plain ``http://`` to anything
  but this machine, so the PAT never crosses a network in clear text.
* `PatAuth` sends the PAT, `HeaderAuth` any credential's header; `Redacted` keeps it out of reprs (messages: `redaction.redact`).
* `describe_transport_error`, `redirect_error`, `AUTH_MESSAGE` and
  `scope_message` say why the organisation could not be used and what to do.
* `AzurePoolAmbiguousError` refines `AzureNotFoundError` for duplicate pool names.

The base error classes live in `protocols.py`.
"""

from __future__ import annotations

import base64
import difflib
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
import requests.auth
import urllib3

from gpuci_tui.core.config.org_url import OrgUrlProblem, is_loopback_host, parse_org_url
from gpuci_tui.core.errors import AzureAuthError, AzureError, AzureNotFoundError
from gpuci_tui.core.protocols import Pool
from gpuci_tui.core.secrets.credentials import PAT_REJECTED, pat_scope_message

# --------------------------------------------------------------------------- organisation URL


@dataclass(frozen=True)
class OrgUrl:
    """A checked organisation URL.

    Attributes:
        url: Normalised, without a trailing slash.
        scheme: ``https`` or ``http`` (the latter only for loopback hosts).
        host: Host name or address, lower case, without brackets.
        netloc: ``host[:port]`` as shown in messages.
        name: The organisation's name, for messages.
    """

    url: str
    scheme: str
    host: str
    netloc: str
    name: str

    @classmethod
    def parse(cls, raw: str) -> OrgUrl:
        """Check and normalise ``raw``.

        Raises:
            AzureError: Not an http(s) URL, has credentials or a query, or is
                ``http://`` to a host that is not this machine.
        """
        try:
            address = parse_org_url(raw)
        except OrgUrlProblem as problem:
            raise AzureError(_problem_message(problem)) from None
        org = cls(
            url=address.url,
            scheme=address.scheme,
            host=address.host,
            netloc=address.netloc,
            name=address.name,
        )
        org.check_safe(org.url)
        return org

    @property
    def is_loopback(self) -> bool:
        """Whether the host is this machine (127.0.0.0/8, ::1 or localhost)."""
        return is_loopback_host(self.host)

    def check_safe(self, url: str) -> None:
        """Refuse a URL that would carry the PAT in clear text off this machine.

        Raises:
            AzureError: ``url`` is ``http://`` to a host that is not loopback.
        """
        parts = urlsplit(url)
        if parts.scheme.lower() == "https":
            return
        if parts.scheme.lower() == "http" and is_loopback_host(parts.hostname or ""):
            return
        raise AzureError(
            f"Refusing to send the PAT to {parts.hostname or url} over plain http://: "
            "anyone on the network could read it. Use the https:// address of the "
            "organisation (http:// is only allowed for 127.0.0.1, ::1 and localhost)."
        )


def _problem_message(problem: OrgUrlProblem) -> str:
    """``problem`` worded for the client's caller."""
    raw = problem.raw
    if problem.kind in ("empty", "spaces", "no_scheme", "not_url"):
        return (
            f"{raw!r} is not an organisation URL. Use the address of your organisation, "
            "e.g. https://dev.azure.com/ORG."
        )
    if problem.kind == "insecure_http":
        host = urlsplit(raw).hostname or raw
        return (
            f"Refusing to send the PAT to {host} over plain http://: "
            "anyone on the network could read it. Use the https:// address of the "
            "organisation (http:// is only allowed for 127.0.0.1, ::1 and localhost)."
        )
    return {
        "bad_port": f"The organisation URL {raw!r} has an invalid port.",
        "credentials": "The organisation URL must not contain a user name or password; "
        "the PAT is stored separately (`gpuci-tui setup`).",
        "query": "The organisation URL must not contain '?' or '#' parts; "
        "use e.g. https://dev.azure.com/ORG.",
        "missing_org": "The organisation URL lacks the organisation's name: "
        "use https://dev.azure.com/ORG.",
        "project_page": f"{raw} is a project or page address, not the organisation's: "
        f"use {problem.fix}.",
        "bad_name": f"{problem.segment!r} is not a valid organisation name (letters, digits "
        "and inner hyphens, at most 50): use https://dev.azure.com/ORG.",
    }[problem.kind]


# --------------------------------------------------------------------------- messages


class AzurePoolAmbiguousError(AzureNotFoundError):
    """More than one pool answers to the configured name.

    Attributes:
        pools: The pools that matched.
    """

    def __init__(self, message: str, pools: tuple[Pool, ...]) -> None:
        super().__init__(message)
        self.pools = pools


AUTH_MESSAGE = PAT_REJECTED
"""What to say when the organisation rejects the PAT (`PatCredential.rejected_message`)."""

scope_message = pat_scope_message
"""What to say when the PAT works but may not touch agent pools."""


def redirect_error(location: str, status: int) -> AzureError:
    """The error for a 3xx answer (redirects are never followed: they could move the PAT).

    Args:
        location: The ``Location`` header.
        status: The 3xx status.
    """
    target = location.split("?", 1)[0].split("#", 1)[0]
    lowered = target.lower()
    if "signin" in lowered or "login." in lowered or "oauth" in lowered:
        return AzureAuthError(AUTH_MESSAGE)
    return AzureError(
        f"The organisation URL redirects (HTTP {status}) to {target or 'another address'}. "
        "Set the organisation URL to the address Azure DevOps shows in the browser, "
        "e.g. https://dev.azure.com/ORG."
    )


def no_pool_message(name: str, org: str, visible: list[str] | None) -> str:
    """What to say when no pool is called ``name``.

    Args:
        name: The pool name looked for.
        org: The organisation's name.
        visible: Names of the pools the PAT's user can see (None: unknown).
    """
    text = f"No agent pool named {name!r} in {org}."
    if visible is None:
        return text + " Check the name in Organization settings → Agent pools."
    if not visible:
        return text + (
            " The PAT's user can see no pools at all: ask an organisation administrator "
            "for access to the pool, or create it in Organization settings → Agent pools."
        )
    names = sorted(set(visible), key=str.casefold)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    more = f" (and {len(names) - 15} more)" if len(names) > 15 else ""
    return f"{text}{hint} Pools you can see: {', '.join(names[:15])}{more}."


# --------------------------------------------------------------------------- secrets in text


class Redacted(str):
    """A header value whose ``repr`` hides it (debuggers, rich tracebacks with locals)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'<redacted>'"


class PatAuth(requests.auth.AuthBase):
    """Basic auth with an empty user name and the PAT as password.

    Passing an auth object (rather than a header) also stops requests from
    replacing it with credentials it finds in ``~/.netrc``.
    """

    def __init__(self, token: str) -> None:
        basic = base64.b64encode(f":{token}".encode()).decode("ascii")
        # Redacted keeps the PAT out of any repr() of the request's headers.
        self._header = Redacted(f"Basic {basic}")

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        """Add the Authorization header to ``request``."""
        request.headers["Authorization"] = self._header
        return request

    def __repr__(self) -> str:
        return "PatAuth(<redacted>)"


class HeaderAuth(requests.auth.AuthBase):
    """Sends a ready ``Authorization`` value (a credential's `authorization`).

    Like `PatAuth`, an auth object keeps requests from using ``~/.netrc``, and
    `Redacted` keeps the value out of any repr of the request's headers.
    """

    def __init__(self, header: str) -> None:
        self._header = Redacted(header)

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        """Add the Authorization header to ``request``."""
        request.headers["Authorization"] = self._header
        return request

    def __repr__(self) -> str:
        return "HeaderAuth(<redacted>)"


# --------------------------------------------------------------------------- network failures


def describe_transport_error(
    exc: requests.RequestException, netloc: str, timeout: float
) -> tuple[str, bool]:
    """Put a failure to talk to the server in plain words.

    Args:
        exc: What requests raised.
        netloc: ``host[:port]`` to name in the message.
        timeout: The client's timeout, for the message.

    Returns:
        (message, retryable): retryable only for a connection dropped mid-request.
    """
    chain = list(_exception_chain(exc))
    retryable = False
    if isinstance(exc, requests.exceptions.SSLError) or any(
        isinstance(e, ssl.SSLError) for e in chain
    ):
        verify = next(
            (e.verify_message for e in chain if isinstance(e, ssl.SSLCertVerificationError)), ""
        )
        reason = (
            f"the TLS certificate is not trusted ({verify})"
            if verify
            else "the TLS handshake failed"
        ) + "; behind a TLS-inspecting proxy, point REQUESTS_CA_BUNDLE at its CA certificate"
    elif isinstance(exc, requests.exceptions.ConnectTimeout):
        reason = f"no answer while connecting within {timeout:g} s"
    elif isinstance(exc, requests.exceptions.Timeout) or any(
        # A read timeout while the body streams in surfaces as a ConnectionError.
        isinstance(e, TimeoutError | urllib3.exceptions.ReadTimeoutError)
        for e in chain
    ):
        reason = f"it accepted the connection but sent no answer within {timeout:g} s"
    elif isinstance(exc, requests.exceptions.ProxyError):
        reason = "the proxy (HTTPS_PROXY) refused or failed the connection"
    elif any(isinstance(e, socket.gaierror) for e in chain) or any(
        type(e).__name__ == "NameResolutionError" for e in chain
    ):
        reason = "the host name does not resolve (DNS)"
    elif any(isinstance(e, ConnectionRefusedError) for e in chain):
        reason = "connection refused (nothing is listening there)"
    elif any(isinstance(e, ConnectionResetError | BrokenPipeError) for e in chain) or any(
        type(e).__name__ in ("RemoteDisconnected", "ProtocolError", "IncompleteRead") for e in chain
    ):
        reason = "the connection was dropped before the answer was complete"
        retryable = True
    elif isinstance(exc, requests.exceptions.ChunkedEncodingError):
        reason = "the answer broke off midway"
        retryable = True
    else:
        reason = f"a network error ({type(exc).__name__})"
    return (
        f"Cannot reach {netloc}: {reason}. Check the organisation URL, this host's network "
        "and its proxy settings.",
        retryable,
    )


def _exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything it wraps (causes, contexts, urllib3 ``reason``s, args)."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 20:
        current = todo.pop()
        if any(current is s for s in seen):
            continue
        seen.append(current)
        linked = [getattr(current, "reason", None), current.__cause__, current.__context__]
        linked += list(current.args)
        todo.extend(e for e in linked if isinstance(e, BaseException))
    return seen
