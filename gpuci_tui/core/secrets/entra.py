"""Microsoft Entra credentials: a service principal or a managed identity, through msal.

`EntraCredential` holds one access token for Azure DevOps in memory (never on
disk), acquires a new one `refresh_margin` before it expires (5 minutes, or
half the token's lifetime when that is shorter), and again at once when the organisation refuses it (the transport calls
`refresh`). Every acquisition reads the client secret or certificate again, so
one rotated in the keyring or its file is picked up without a restart.

Entra's refusals (``AADSTS…`` codes) are put into words with the fix
(`describe_aadsts`).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpuci_tui.core.errors import AzureAuthError, GpuciError
from gpuci_tui.core.secrets.credentials import WAIT_FOR_NEW

LOG = logging.getLogger("gpuci_tui.azure")

ADO_RESOURCE = "499b84ac-1321-427f-aa17-267ca6975798"
"""Azure DevOps' application id: the audience of its access tokens."""
ADO_SCOPE = f"{ADO_RESOURCE}/.default"
REFRESH_MARGIN = 300.0
"""Seconds before expiry at which a new token is acquired (no request races the expiry),
for a token that lives at least twice as long (`refresh_margin`)."""
FAILURE_BACKOFF = 30.0
"""After a failed sign-in, callers get the same failure for this long (no storm on Entra)."""

Acquire = Callable[[], Mapping[str, Any]]
"""One sign-in: msal's result dict (``access_token``/``expires_in``, or ``error``...)."""

KIND_WORDS = {"service-principal": "service principal", "managed-identity": "managed identity"}

_AADSTS_FIXES: dict[int, str] = {
    7000215: "the client secret is wrong. Copy the secret's Value (not its Secret ID) from the "
    "app registration's Certificates & secrets page and store it with `gpuci-tui setup`",
    7000222: "the client secret has expired. Create a new one on the app registration's "
    "Certificates & secrets page and store it with `gpuci-tui setup`; the daemon picks it "
    "up at its next sign-in",
    700016: "Entra knows no application with this client id in this tenant. Check "
    "[azure] client_id and tenant_id against the app registration's overview",
    90002: "the tenant does not exist. Check [azure] tenant_id (Directory (tenant) ID)",
    700027: "the certificate is not registered on the application, or has expired. Upload "
    "its public part on the app registration's Certificates & secrets page",
    7000112: "the application is disabled in the tenant. Ask a tenant administrator to enable it",
}


def describe_aadsts(result: Mapping[str, Any], who: str) -> str:
    """The failure msal returned (``result``), in plain words with the fix.

    Args:
        result: The dict msal returned (``error``, ``error_description``, ``error_codes``).
        who: The identity, for the message (``service principal 1b2c…``).
    """
    codes = [c for c in result.get("error_codes") or () if isinstance(c, int)]
    description = str(result.get("error_description") or result.get("error") or "")
    for code in codes:
        if code in _AADSTS_FIXES:
            return f"Entra refused to sign in {who} (AADSTS{code}): {_AADSTS_FIXES[code]}."
    first_line = description.splitlines()[0] if description else "no reason given"
    return f"Entra refused to sign in {who}: {first_line}"


def refresh_margin(lifetime: float, margin: float = REFRESH_MARGIN) -> float:
    """Seconds before expiry at which a token valid ``lifetime`` seconds is renewed.

    The smaller of ``margin`` and half the lifetime: a token that lives under
    ``margin`` would otherwise be "due" the moment it arrives, and every call
    would sign in again (90-s tokens: 1,114 sign-ins for 903 REST calls).
    """
    return min(margin, max(lifetime, 0.0) / 2)


def token_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT access token, unverified (for display only: never trusted)."""
    try:
        payload = token.split(".")[1]
        decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}
    return decoded if isinstance(decoded, dict) else {}


class EntraCredential:
    """An Entra access token for Azure DevOps, refreshed before it expires.

    Args:
        kind: ``service-principal`` or ``managed-identity``.
        client_id: The application (client) id ("" for a system-assigned identity).
        acquire: Performs one sign-in (see `msal_acquirer`); injectable for tests.
        clock: Epoch seconds; injectable for tests on a fake clock.
        margin: Seconds before expiry when a new token is acquired (at most half
            the token's lifetime: `refresh_margin`).
    """

    def __init__(
        self,
        kind: str,
        client_id: str,
        acquire: Acquire,
        *,
        clock: Callable[[], float] = time.time,
        margin: float = REFRESH_MARGIN,
    ) -> None:
        self.kind = kind
        self.client_id = client_id
        self._acquire = acquire
        self._clock = clock
        self._margin = margin
        self._lock = threading.Lock()
        """Guards the state below; held only briefly."""
        self._sign_in_lock = threading.Lock()
        self._token = ""
        self._expires_at: float | None = None
        self._renew_at: float | None = None
        """When the current token is due for renewal (`refresh_margin` before it expires)."""
        self._name = ""
        self._failure: str | None = None
        self._failed_at = 0.0
        self._refused = False
        """The organisation refused even a fresh token (not a member)."""
        self.acquisitions = 0
        """Sign-ins performed (tests and metrics count them)."""

    def __repr__(self) -> str:
        return f"EntraCredential({self.kind}, {self.client_id or 'system-assigned'})"

    @property
    def who(self) -> str:
        """``service principal NAME`` (its display name once known, else its client id)."""
        words = KIND_WORDS.get(self.kind, self.kind)
        name = self._name or self.client_id or "(system-assigned)"
        return f"{words} {name}"

    @property
    def expires_at(self) -> float | None:
        """When the current token expires (None before the first sign-in)."""
        with self._lock:
            return self._expires_at

    def authorization(self) -> str:
        """``Bearer`` and a token valid for at least the margin (signing in when needed).

        Raises:
            AzureAuthError: Entra refused the sign-in (the reason and the fix in words).
        """
        return f"Bearer {self._valid_token()}"

    def get_token(self, org_url: str) -> str:
        """The access token, for an agent container's registration (``--auth pat``).

        Azure DevOps takes an Entra access token wherever it takes a PAT, so the
        container gets a credential that is useless within the hour instead of
        the service principal's secret.

        Raises:
            AzureAuthError: Entra refused the sign-in, or the organisation refused
                the identity and has not accepted it since.
        """
        with self._lock:
            refused = self._refused
        if refused:
            raise AzureAuthError(self.rejected_message() + WAIT_FOR_NEW)
        return self._valid_token()

    def note_rejected(self, secret: str) -> None:
        """See `Credential.note_rejected`."""
        with self._lock:
            self._refused = True

    def note_accepted(self) -> None:
        """See `Credential.note_accepted`."""
        with self._lock:
            self._refused = False

    def refresh(self) -> None:
        """Drop the token: the next call signs in again, reading the secret afresh."""
        with self._lock:
            self._token = ""
            self._expires_at = None
            self._renew_at = None
            self._failure = None

    def describe(self) -> str:
        """E.g. ``service principal gpuci-lab · token valid 52 min``."""
        with self._lock:
            failure, expires = self._failure, self._expires_at
        if failure is not None:
            return f"{self.who} · sign-in failed"
        if expires is None:
            return f"{self.who} · not signed in yet"
        left = expires - self._clock()
        if left <= 0:
            return f"{self.who} · token expired"
        return f"{self.who} · token valid {max(1, int(left // 60))} min"

    @property
    def last_failure(self) -> str | None:
        """Why the latest sign-in failed (None after a success)."""
        with self._lock:
            return self._failure

    def rejected_message(self) -> str:
        """See `Credential.rejected_message`."""
        return (
            f"The organisation refused the access token of {self.who}, even a freshly acquired "
            "one: the identity is not a member of the organisation. Add it in Organization "
            "settings → Users (Add users, search its name; Basic access is enough)."
        )

    def forbidden_message(self, org: str) -> str:
        """See `Credential.forbidden_message`."""
        return (
            f"{self.who} is a member of {org} but may not manage the agent pool: make it an "
            "Administrator of the pool (Organization settings → Agent pools → the pool → "
            "Security → Add, role Administrator)."
        )

    def _valid_token(self) -> str:
        token = self._current()
        if token is not None:
            return token
        # One sign-in at a time (callers wait for it rather than each signing in), and
        # outside the state lock: `describe` must answer at once during a slow sign-in.
        with self._sign_in_lock:
            token = self._current()
            if token is not None:
                return token
            return self._sign_in()

    def _current(self) -> str | None:
        """The token when still good for the margin; raises a recent failure; else None."""
        with self._lock:
            now = self._clock()
            if self._token and self._renew_at is not None and now < self._renew_at:
                return self._token
            if self._failure is not None and now - self._failed_at < FAILURE_BACKOFF:
                raise AzureAuthError(self._failure)
            return None

    def _sign_in(self) -> str:
        """One acquisition (under the sign-in lock)."""
        self.acquisitions += 1
        try:
            result = self._acquire()
        except GpuciError as exc:  # already plain words (no secret stored, bad key file...)
            return self._fail(str(exc))
        except Exception as exc:  # noqa: BLE001 - msal and requests raise anything
            return self._fail(f"Cannot sign in {self.who}: {type(exc).__name__}: {str(exc)[:300]}")
        token = result.get("access_token")
        if not isinstance(token, str) or not token:
            return self._fail(describe_aadsts(result, self.who))
        expires_in = float(result.get("expires_in") or 3600)
        name = str(token_claims(token).get("app_displayname") or "")
        with self._lock:
            # Expiry counts from now, after the sign-in: never later than Entra's own.
            self._token, self._expires_at = token, self._clock() + expires_in
            self._renew_at = self._expires_at - refresh_margin(expires_in, self._margin)
            self._failure = None
            self._name = name or self._name
        LOG.info("signed in %s; token valid %d min", self.who, int(expires_in // 60))
        return token

    def _fail(self, message: str) -> str:
        with self._lock:
            self._token, self._expires_at = "", None
            self._failure, self._failed_at = message, self._clock()
        LOG.warning("%s", message)
        raise AzureAuthError(message)
