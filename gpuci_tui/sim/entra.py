"""`SimEntra`: the simulated organisation's Microsoft Entra tenant.

Applications (service principals) sign in with a client secret or a
certificate assertion (RS256/PS256 JWT signed with the key of a registered
certificate, checked against it), managed identities through the VM metadata
endpoint. Each sign-in yields a signed JWT access token for Azure DevOps that
expires after `token_lifetime`; the organisation (`SimOrg.authenticate`) takes
it as ``Bearer``, or as a PAT (Basic), as the service does. The failures are
Entra's own: AADSTS7000215 (wrong secret), 7000222 (expired secret), 700016
(unknown application), 700027 (unknown certificate).

Org-side facts live here too: whether an application was added to the
organisation (else 401/203) and whether it is an Administrator of the pools
(else 403 on pool writes).
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jwt

ADO_RESOURCE = "499b84ac-1321-427f-aa17-267ca6975798"
TENANT_ID = "72f988bf-0000-4000-8000-00000000c0de"
"""The simulated tenant's id (any tenant name in a URL is accepted as this one)."""
MI_NAME = "gpuci-vm-identity"


@dataclass
class SimApp:
    """An application registration with its service principal."""

    client_id: str
    name: str
    secrets: dict[str, float | None] = field(default_factory=dict)
    """Client secret value -> expiry (epoch seconds; None: never)."""
    certificates: dict[str, Any] = field(default_factory=dict)
    """SHA-256 thumbprint (hex) -> public key of a registered certificate."""
    in_org: bool = True
    """Added to the organisation (Organization settings → Users)."""
    pool_admin: bool = True
    """Administrator of the agent pools (may register and manage agents)."""
    managed_identity: bool = False
    federated: set[str] = field(default_factory=set)
    """Federated tokens (Kubernetes service-account tokens) the app accepts as assertions;
    the simulation trusts them by value instead of checking their issuer's keys."""


@dataclass(frozen=True)
class Principal:
    """Who an access token speaks for, as the organisation sees it."""

    client_id: str
    name: str
    in_org: bool
    pool_admin: bool


def _aadsts(status: int, error: str, code: int, text: str) -> tuple[int, dict[str, Any]]:
    return status, {
        "error": error,
        "error_description": f"AADSTS{code}: {text} Trace ID: {uuid.uuid4()}",
        "error_codes": [code],
        "timestamp": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime()),
        "trace_id": str(uuid.uuid4()),
        "correlation_id": str(uuid.uuid4()),
    }


class SimEntra:
    """The tenant; thread-safe.

    Args:
        clock: Time source for issued and expiry times.
        token_lifetime: Seconds an access token is valid (Entra: 60-90 minutes).
    """

    def __init__(
        self, clock: Callable[[], float] = time.time, token_lifetime: float = 3600.0
    ) -> None:
        self.clock = clock
        self.token_lifetime = token_lifetime
        self._key = secrets.token_bytes(32)
        self._lock = threading.Lock()
        self._apps: dict[str, SimApp] = {}
        self.sign_ins: list[tuple[str, str]] = []
        """(client_id, how) per successful sign-in: ``secret`` | ``certificate`` | ``msi`` |
        ``federated``."""
        self.sign_in_times: list[float] = []
        """When each of `sign_ins` happened (this tenant's clock): drills check that a
        token was renewed before the previous one expired."""

    # ------------------------------------------------------------------ setup

    def add_app(
        self,
        name: str,
        *,
        client_id: str | None = None,
        secret: str | None = None,
        secret_expires: float | None = None,
        certificate_pem: str | None = None,
        managed_identity: bool = False,
        in_org: bool = True,
        pool_admin: bool = True,
    ) -> SimApp:
        """Register an application (and its service principal); returns it."""
        app = SimApp(
            client_id or str(uuid.uuid4()),
            name,
            in_org=in_org,
            pool_admin=pool_admin,
            managed_identity=managed_identity,
        )
        if secret is not None:
            app.secrets[secret] = secret_expires
        if certificate_pem is not None:
            self._add_certificate(app, certificate_pem)
        with self._lock:
            self._apps[app.client_id.lower()] = app
        return app

    def app(self, client_id: str) -> SimApp:
        """The registered application ``client_id`` (KeyError when unknown)."""
        with self._lock:
            return self._apps[client_id.lower()]

    def set_secret(self, client_id: str, secret: str, expires: float | None = None) -> None:
        """Replace the application's secrets by ``secret`` (a rotation)."""
        with self._lock:
            self._apps[client_id.lower()].secrets = {secret: expires}

    def set_pool_admin(self, admin: bool, client_id: str = "") -> int:
        """Give (or take) the pools' Administrator role; returns how many apps changed.

        ``client_id`` empty: every application. A control for drills and demos: the
        organisation's answer changes at once for tokens already issued, as Azure's does.
        """
        with self._lock:
            apps = [
                a
                for a in self._apps.values()
                if not client_id or a.client_id.lower() == client_id.lower()
            ]
            for app in apps:
                app.pool_admin = admin
        return len(apps)

    def add_certificate(self, client_id: str, pem: str) -> None:
        """Register another certificate (its public part, PEM) on the application."""
        with self._lock:
            self._add_certificate(self._apps[client_id.lower()], pem)

    @staticmethod
    def _add_certificate(app: SimApp, pem: str) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes

        cert = x509.load_pem_x509_certificate(pem.encode())
        app.certificates[cert.fingerprint(hashes.SHA256()).hex()] = cert.public_key()

    # ------------------------------------------------------------------ sign-in

    def token_request(self, form: Mapping[str, str], audience: str) -> tuple[int, dict[str, Any]]:
        """``POST /{tenant}/oauth2/v2.0/token``: client credentials; (status, JSON body)."""
        if form.get("grant_type") != "client_credentials":
            return _aadsts(400, "unsupported_grant_type", 70003, "The grant type is not supported.")
        if not form.get("scope", "").startswith(ADO_RESOURCE):
            return _aadsts(400, "invalid_scope", 70011, "The provided scope is not valid.")
        client_id = form.get("client_id", "")
        with self._lock:
            app = self._apps.get(client_id.lower())
        if app is None or app.managed_identity:
            return _aadsts(
                400,
                "unauthorized_client",
                700016,
                f"Application with identifier '{client_id}' was not found in the directory.",
            )
        if "client_secret" in form:
            given = form["client_secret"]
            if given not in app.secrets:
                return _aadsts(
                    401,
                    "invalid_client",
                    7000215,
                    "Invalid client secret provided. Ensure the secret being sent in the "
                    "request is the client secret value, not the client secret ID.",
                )
            expires = app.secrets[given]
            if expires is not None and self.clock() >= expires:
                return _aadsts(
                    401,
                    "invalid_client",
                    7000222,
                    f"The provided client secret keys for app '{client_id}' are expired.",
                )
            return 200, self._issue(app, "secret")
        if form.get("client_assertion_type", "").endswith("jwt-bearer"):
            if form.get("client_assertion", "") in app.federated:
                return 200, self._issue(app, "federated")
            if not self._assertion_ok(app, form.get("client_assertion", ""), audience):
                return _aadsts(
                    401,
                    "invalid_client",
                    700027,
                    "Client assertion failed signature validation, or its key is not "
                    "registered on the application.",
                )
            return 200, self._issue(app, "certificate")
        return _aadsts(
            401, "invalid_client", 7000218, "The request body must contain client_secret."
        )

    def managed_identity_request(
        self, params: Mapping[str, str], headers: Mapping[str, str]
    ) -> tuple[int, dict[str, Any]]:
        """``GET /metadata/identity/oauth2/token`` of the VM metadata service."""
        if headers.get("Metadata", "").lower() != "true":
            return 400, {"error": "invalid_request", "error_description": "Required metadata "
                         "header not specified"}  # fmt: skip
        if params.get("resource", "").rstrip("/") != ADO_RESOURCE:
            return 400, {"error": "invalid_resource", "error_description": "bad resource"}
        wanted = params.get("client_id", "").lower()
        with self._lock:
            found = [a for a in self._apps.values() if a.managed_identity]
        app = next((a for a in found if not wanted or a.client_id.lower() == wanted), None)
        if app is None:
            return 400, {
                "error": "invalid_request",
                "error_description": "Identity not found",
            }
        body = self._issue(app, "msi")
        body["expires_in"] = str(body["expires_in"])  # IMDS sends numbers as strings
        body["resource"] = ADO_RESOURCE
        return 200, body

    def _assertion_ok(self, app: SimApp, assertion: str, audience: str) -> bool:
        try:
            header = jwt.get_unverified_header(assertion)
        except jwt.PyJWTError:
            return False
        thumb = _b64url_hex(header.get("x5t#S256", ""))
        key = app.certificates.get(thumb)
        if key is None:
            return False
        try:
            claims = jwt.decode(
                assertion, key, algorithms=["PS256", "RS256"], audience=audience,
                options={"require": ["exp", "aud", "iss", "sub"]},
            )  # fmt: skip
        except jwt.PyJWTError:
            return False
        return bool(claims.get("iss") == claims.get("sub") == app.client_id)

    def _issue(self, app: SimApp, how: str) -> dict[str, Any]:
        now = self.clock()
        claims = {
            "aud": ADO_RESOURCE,
            "iss": f"https://sts.windows.net/{TENANT_ID}/",
            "tid": TENANT_ID,
            "appid": app.client_id,
            "app_displayname": app.name,
            "oid": str(uuid.uuid5(uuid.NAMESPACE_OID, app.client_id)),
            "iat": int(now),
            "nbf": int(now),
            "exp": int(now + self.token_lifetime),
            "jti": secrets.token_hex(8),
        }
        token = jwt.encode(claims, self._key, algorithm="HS256")
        with self._lock:
            self.sign_ins.append((app.client_id, how))
            self.sign_in_times.append(now)
        return {
            "token_type": "Bearer",
            "expires_in": int(self.token_lifetime),
            "ext_expires_in": int(self.token_lifetime),
            "access_token": token,
        }

    # ------------------------------------------------------------------ the organisation's view

    def principal(self, token: str) -> Principal | None:
        """Who ``token`` speaks for; None when it is not a valid, unexpired token of ours."""
        if token.count(".") != 2:
            return None
        try:
            claims = jwt.decode(
                token, self._key, algorithms=["HS256"], audience=ADO_RESOURCE,
                options={"verify_exp": False, "verify_nbf": False, "verify_iat": False},
            )  # fmt: skip
        except jwt.PyJWTError:
            return None
        # Expiry on our clock (tests run it fast), not on the real one.
        if self.clock() >= float(claims.get("exp", 0)):
            return None
        with self._lock:
            app = self._apps.get(str(claims.get("appid", "")).lower())
        if app is None:
            return None
        return Principal(app.client_id, app.name, app.in_org, app.pool_admin)


def _b64url_hex(value: str) -> str:
    import base64

    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    except ValueError:
        return ""
