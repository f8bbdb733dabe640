"""msal behind `EntraCredential`, and `make_credential`: the credential a configuration names.

Each sign-in builds a fresh msal application with its default in-memory token
cache: msal would otherwise answer a forced refresh (after a 401) from its
cache, and a fresh application also reads the secret again (rotation). That
costs one OpenID metadata request per sign-in, about once an hour.

``instance_discovery=False``: msal's instance discovery asks
login.microsoftonline.com which hosts are aliases of the authority; gpuci-tui
uses the one authority configured (public cloud, a sovereign cloud, or the
simulator in tests), so the question is not needed and would fail off the
public cloud. Tenant discovery (the OpenID metadata) still runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpuci_tui.core.errors import AzureAuthError
from gpuci_tui.core.secrets.credentials import Credential, PatCredential, TokenProvider
from gpuci_tui.core.secrets.entra import ADO_RESOURCE, ADO_SCOPE, Acquire, EntraCredential
from gpuci_tui.core.secrets.entra_secrets import (
    CERT_PASSPHRASE,
    CLIENT_SECRET,
    EntraSecretStore,
    load_certificate,
)

if TYPE_CHECKING:
    import requests

    from gpuci_tui.core.config.model import AzureConfig

MI_ENDPOINT_VAR = "AZURE_POD_IDENTITY_AUTHORITY_HOST"
"""msal's override of the Azure VM metadata host (169.254.169.254); tests point it at the sim."""
SIGN_IN_TIMEOUT = 15.0
"""Seconds for each request of a sign-in (msal sets none on a session it is given)."""


class _Timed:
    """msal's ``http_client``: a requests session whose calls cannot hang for ever."""

    def __init__(self, session: requests.Session | None) -> None:
        import requests

        self._session = session or requests.Session()

    def get(self, url: str, **kwargs: Any) -> requests.Response:
        """GET with `SIGN_IN_TIMEOUT` unless msal gave one."""
        kwargs.setdefault("timeout", SIGN_IN_TIMEOUT)
        return self._session.get(url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> requests.Response:
        """POST with `SIGN_IN_TIMEOUT` unless msal gave one."""
        kwargs.setdefault("timeout", SIGN_IN_TIMEOUT)
        return self._session.post(url, **kwargs)

    def close(self) -> None:
        """Close the session."""
        self._session.close()


def service_principal_acquirer(
    azure: AzureConfig,
    store: EntraSecretStore,
    http_client: requests.Session | None = None,
) -> Acquire:
    """One client-credentials sign-in per call, with the secret or certificate read afresh."""
    timed = _Timed(http_client)  # one session for every sign-in: its connections are reused

    def acquire() -> Mapping[str, Any]:
        import msal

        credential: str | dict[str, str]
        if azure.client_certificate:
            credential = load_certificate(
                azure.client_certificate,
                lambda: store.get_secret(azure.url, CERT_PASSPHRASE, azure.client_id),
            ).for_msal()
        else:
            secret = store.get_secret(azure.url, CLIENT_SECRET, azure.client_id)
            if secret is None:
                raise AzureAuthError(
                    f"No client secret is stored for service principal {azure.client_id}: "
                    "store it with `gpuci-tui setup` (or GPUCI_CLIENT_SECRET_FILE), or set "
                    "[azure] client_certificate."
                )
            credential = secret
        try:
            app = msal.ConfidentialClientApplication(
                azure.client_id,
                client_credential=credential,
                authority=f"{azure.authority}/{azure.tenant_id}",
                http_client=timed,
                instance_discovery=False,
            )
        except ValueError as exc:
            raise AzureAuthError(
                f"Cannot use the sign-in host {azure.authority} for tenant {azure.tenant_id}: "
                f"{str(exc)[:200]} Check [azure] authority and tenant_id."
            ) from None
        result: Mapping[str, Any] = app.acquire_token_for_client(scopes=[ADO_SCOPE])
        return result

    return acquire


def managed_identity_acquirer(
    azure: AzureConfig, http_client: requests.Session | None = None
) -> Acquire:
    """One managed-identity sign-in per call (Azure VM metadata endpoint, or Azure Arc's)."""
    timed = _Timed(http_client)

    def acquire() -> Mapping[str, Any]:
        import msal
        import requests

        identity: msal.ManagedIdentity = (
            msal.UserAssignedManagedIdentity(client_id=azure.client_id)
            if azure.client_id
            else msal.SystemAssignedManagedIdentity()
        )
        client = msal.ManagedIdentityClient(identity, http_client=timed)
        try:
            result: Mapping[str, Any] = client.acquire_token_for_client(resource=ADO_RESOURCE)
        except requests.RequestException:
            host = os.environ.get("IDENTITY_ENDPOINT") or os.environ.get(
                MI_ENDPOINT_VAR, "http://169.254.169.254"
            )
            raise AzureAuthError(
                f"No managed identity endpoint answers at {host}: this host is not an Azure VM "
                "(or Azure Arc-enabled server) with a managed identity. Assign one to the VM, "
                'or use auth = "service-principal".'
            ) from None
        except OSError as exc:  # after RequestException, which is an OSError too
            # Azure Arc: its endpoint asked us to read a challenge file that root and the
            # himds group own; the daemon's user is not in that group.
            raise AzureAuthError(
                f"Azure Arc's identity endpoint gave a challenge file this user cannot read "
                f"({type(exc).__name__}: {getattr(exc, 'filename', '') or exc}). Add the user "
                "gpuci-tui runs as to the himds group (sudo usermod -aG himds USER), then "
                "restart it."
            ) from None
        return result

    return acquire


def make_credential(
    azure: AzureConfig,
    pat: TokenProvider,
    *,
    store: EntraSecretStore | None = None,
    http_client: requests.Session | None = None,
) -> Credential:
    """The credential ``[azure] auth`` names.

    Args:
        azure: The ``[azure]`` section.
        pat: Where the PAT comes from (used with ``auth = "pat"`` only).
        store: Where the service principal's secret is kept (default: the keyring's).
        http_client: The session msal uses (tests pass one trusting the simulator's CA).
    """
    if azure.auth == "service-principal":
        acquire = service_principal_acquirer(azure, store or EntraSecretStore(), http_client)
        return EntraCredential("service-principal", azure.client_id, acquire)
    if azure.auth == "managed-identity":
        return EntraCredential(
            "managed-identity", azure.client_id, managed_identity_acquirer(azure, http_client)
        )
    return PatCredential(pat, expires_on=pat_expiry(azure.pat_expires))


def pat_expiry(date: str) -> float | None:
    """``YYYY-MM-DD`` as the epoch second the PAT stops working (its end, UTC); None if empty."""
    import datetime

    if not date:
        return None
    day = datetime.date.fromisoformat(date) + datetime.timedelta(days=1)
    return datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC).timestamp()
