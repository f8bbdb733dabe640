"""One credential seam: what the daemon sends to Azure DevOps, and what a container registers with.

Three kinds stand behind the same `Credential` face:

* ``pat``: a personal access token, sent as HTTP Basic with an empty user
  name (`PatCredential`, today's behaviour, unchanged);
* ``service-principal`` and ``managed-identity``: a Microsoft Entra access
  token acquired with msal and sent as ``Bearer`` (`entra.EntraCredential`).

Nothing outside ``core/secrets`` and ``core/azure`` needs to know which kind is
in use: the transport asks for `Credential.authorization`, the supervisor asks
for `Credential.get_token` (the value a container's agent registers with),
the console shows `Credential.describe`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from gpuci_tui.core.errors import AzureAuthError

TokenProvider = str | Callable[[], str]
"""A PAT, or a callable returning it (called before every request)."""

PAT_REJECTED = (
    "The organisation rejected the PAT: it is wrong, expired or revoked. Create a new PAT "
    "with the Agent Pools (read & manage) scope and store it with `gpuci-tui setup`."
)
PAT_EXPIRED = (
    "The organisation rejected the PAT: it expired on {date} (or was revoked). Create a new "
    "PAT with the Agent Pools (read & manage) scope, store it with `gpuci-tui token set` and "
    "set [azure] pat_expires to its new date; the daemon uses it within a minute."
)
PAT_WARN_DAYS = 14
"""Days before a known PAT expiry from which the header, ``status`` and the log warn."""
DAY = 86400.0


@runtime_checkable
class Credential(Protocol):
    """How gpuci-tui proves who it is to one organisation.

    Implementations are thread-safe: the transport calls them from worker threads.
    """

    kind: str
    """``pat`` | ``service-principal`` | ``managed-identity``."""

    def authorization(self) -> str:
        """The ``Authorization`` header value for the next request (``Basic …``/``Bearer …``).

        Raises:
            GpuciError: no credential can be had now (plain words, with the fix).
        """
        ...

    @property
    def expires_at(self) -> float | None:
        """Epoch seconds when the current token stops working; None: not known / never."""
        ...

    def refresh(self) -> None:
        """Forget the current token so that the next `authorization` acquires a new one.

        The secret (client secret, certificate) is read again at that point, so a
        rotated one is picked up without restarting the daemon.
        """
        ...

    def describe(self) -> str:
        """The identity and its state in a few words (header, ``status``)."""
        ...

    def get_token(self, org_url: str) -> str:
        """What an agent container registers with (`protocols.TokenSource` face).

        For a PAT, the PAT; for Entra kinds, a short-lived access token.
        """
        ...

    def rejected_message(self) -> str:
        """What to say when the organisation answers 401/203 (after any retry)."""
        ...

    def forbidden_message(self, org: str) -> str:
        """What to say when the identity is valid but may not use the pool (403)."""
        ...

    def note_rejected(self, secret: str) -> None:
        """The organisation refused ``secret`` for good (after any retry).

        Until it accepts a request again (or the PAT is replaced), `get_token`
        raises instead of handing out what would only fail: agent starts wait
        instead of failing one after another.
        """
        ...

    def note_accepted(self) -> None:
        """The organisation answered a request: any refusal is over."""
        ...


def fingerprint(secret: str) -> str:
    """A digest of ``secret``: what is kept to recognise it, instead of a second copy."""
    return hashlib.sha256(secret.encode()).hexdigest()


WAIT_FOR_NEW = " Agents are not started until the organisation accepts a credential again."


def header_secret(header: str) -> str:
    """The secret inside an ``Authorization`` value, for redacting it from messages.

    ``Basic`` yields the PAT (its encoding is redacted with it); ``Bearer`` the token.
    """
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return value
        return decoded.partition(":")[2] or value
    return value


def pat_scope_message(org: str) -> str:
    """What to say when the PAT works but may not touch agent pools."""
    return (
        f"The PAT is valid for {org} but may not use agent pools: it lacks the Agent Pools "
        "(read & manage) scope, or your account is not allowed to manage the pool. Create a PAT "
        "with that scope and store it with `gpuci-tui setup`."
    )


class PatCredential:
    """A PAT, sent as HTTP Basic with an empty user name (gpuci-tui's original behaviour).

    Args:
        token: The PAT, or a callable returning it; called before every request, so
            a PAT rotated in the token source takes effect as the source allows.
        expires_on: The PAT's expiry (epoch seconds, ``[azure] pat_expires``); None: unknown.
        clock: Epoch seconds (tests).
    """

    kind = "pat"

    def __init__(
        self,
        token: TokenProvider,
        *,
        expires_on: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._source = token
        self._expires_on = expires_on
        self._clock = clock
        self._lock = threading.Lock()
        self._refused: str | None = None
        """Fingerprint of the PAT the organisation refused (None: none refused)."""

    def __repr__(self) -> str:
        return "PatCredential(<redacted>)"

    def token(self) -> str:
        """The PAT, trimmed and checked.

        Raises:
            AzureAuthError: There is no PAT, or it cannot be a PAT.
            GpuciError: The token source failed (passed through; already plain).
        """
        source = self._source
        raw = source() if callable(source) else source
        token = raw.strip() if isinstance(raw, str) else ""
        if not token:
            raise AzureAuthError(
                "No PAT is available for this organisation. Store one with `gpuci-tui setup`."
            )
        if any(ch.isspace() or ord(ch) < 32 for ch in token):
            raise AzureAuthError(
                "The stored PAT contains spaces or line breaks, which a PAT never has. "
                "Store it again with `gpuci-tui setup`."
            )
        return token

    def authorization(self) -> str:
        """``Basic`` with an empty user name and the PAT as password."""
        return "Basic " + base64.b64encode(f":{self.token()}".encode()).decode("ascii")

    @property
    def expires_at(self) -> float | None:
        """The expiry given in the configuration (the service does not tell its holder)."""
        return self._expires_on

    def refresh(self) -> None:
        """Nothing to re-acquire: the PAT is read from its source at every request."""

    def describe(self) -> str:
        """``PAT``, with its expiry when known and near: ``PAT · expires in 5 days (…)``.

        The date shown is the last day the PAT works (its expiry is that day's end).
        """
        if self._expires_on is None:
            return "PAT"
        left = self._expires_on - self._clock()
        date = time.strftime("%Y-%m-%d", time.gmtime(self._expires_on - 1))
        if left <= 0:
            return f"PAT · expired on {date}: renew it"
        if left <= PAT_WARN_DAYS * DAY:
            days = int(left // DAY)
            when = "today" if days == 0 else f"in {days} day{'s' if days != 1 else ''}"
            return f"PAT · expires {when} ({date}): renew it"
        return "PAT"

    def get_token(self, org_url: str) -> str:
        """The PAT itself: the agent registers with ``--auth pat``.

        Raises:
            AzureAuthError: the organisation refused this very PAT (a new one is used
                as soon as it is stored), or there is none.
        """
        token = self.token()
        with self._lock:
            refused = self._refused == fingerprint(token)
        if refused:
            raise AzureAuthError(self.rejected_message() + WAIT_FOR_NEW)
        return token

    def note_rejected(self, secret: str) -> None:
        """See `Credential.note_rejected`."""
        with self._lock:
            self._refused = fingerprint(secret)

    def note_accepted(self) -> None:
        """See `Credential.note_accepted`."""
        with self._lock:
            self._refused = None

    def rejected_message(self) -> str:
        """See `Credential.rejected_message`: "expired" when the known expiry has passed."""
        if self._expires_on is not None and self._clock() >= self._expires_on:
            date = time.strftime("%Y-%m-%d", time.gmtime(self._expires_on - 1))
            return PAT_EXPIRED.format(date=date)
        return PAT_REJECTED

    def forbidden_message(self, org: str) -> str:
        """See `Credential.forbidden_message`."""
        return pat_scope_message(org)


def renewal_due(credential: Credential) -> float | None:
    """When an operator must have renewed the credential (a PAT's known expiry).

    None for tokens the credential renews itself (Entra) and for an unknown expiry.
    """
    return credential.expires_at if credential.kind == "pat" else None


def as_credential(token: TokenProvider | Credential) -> Credential:
    """``token`` as a `Credential`: a PAT (or a callable returning one) becomes `PatCredential`."""
    if isinstance(token, str) or not isinstance(token, Credential):
        return PatCredential(token)
    return token
