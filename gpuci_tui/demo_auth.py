"""``gpuci-tui demo --auth service-principal``: the demo signed in as a service principal.

The simulated organisation's Entra tenant (`sim.entra`) is served over TLS on
127.0.0.1 (`sim.login`); a demo application with a generated client secret
(held in memory only) signs in through msal exactly as on a real host, and its
short-lived access tokens register the demo's agents.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuci_tui.core.config.model import AzureConfig
    from gpuci_tui.core.secrets.credentials import Credential
    from gpuci_tui.sim.org import SimOrg

DEMO_APP = "gpuci-demo-sp"
DEMO_TENANT = "demo.onmicrosoft.com"


@dataclass
class DemoIdentity:
    """The demo's service principal: its `[azure]` section, credential and clean-up."""

    azure: AzureConfig
    credential: Credential
    close: Callable[[], None]
    secret: str = ""
    """The application's client secret (the demo's keyring holds it for other shells)."""
    ca_file: Path | None = None
    """The certificate the simulated tenant's sign-in is served with (clients trust it)."""


def service_principal(org: SimOrg, azure: AzureConfig) -> DemoIdentity:
    """Register a demo application in ``org``'s tenant and sign in as it."""
    import requests

    from gpuci_tui.core.secrets.entra_msal import make_credential
    from gpuci_tui.core.secrets.entra_secrets import EntraSecretStore
    from gpuci_tui.sim.login import SimLogin

    secret = "Q~" + secrets.token_urlsafe(30)
    app = org.entra.add_app(DEMO_APP, secret=secret)
    login = SimLogin(org.entra).start()
    session = requests.Session()
    session.verify = str(login.ca_file)
    session.trust_env = False  # REQUESTS_CA_BUNDLE would replace the demo's CA
    azure = replace(
        azure,
        auth="service-principal",
        tenant_id=DEMO_TENANT,
        client_id=app.client_id,
        authority=login.url,
    )
    store = EntraSecretStore(environ={"GPUCI_CLIENT_SECRET": secret})
    credential = make_credential(azure, "", store=store, http_client=session)

    def close() -> None:
        session.close()
        login.stop()

    return DemoIdentity(azure, credential, close, secret=secret, ca_file=login.ca_file)
