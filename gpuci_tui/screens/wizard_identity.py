"""Wizard step 2's other ways to sign in: a service principal or a managed identity.

`IdentityChoice` sits under the PAT field (which keeps the focus, so the PAT
path is unchanged); choosing another method hides the PAT field and shows the
tenant, client id and client secret (or certificate file). `check_identity`
signs in live, checks the organisation, and stores the client secret in the
keyring the PAT would use; the later steps use that signed-in credential.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from textual import on
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Input, RadioButton, RadioSet, Static

from gpuci_tui.core.config.model import AzureConfig
from gpuci_tui.core.errors import GpuciError

if TYPE_CHECKING:
    from gpuci_tui.screens.wizard_base import Step

METHODS = (
    ("pat", "Personal access token (PAT)"),
    ("service-principal", "Service principal (Microsoft Entra app registration)"),
    ("managed-identity", "Managed identity of this Azure VM / Arc-enabled server"),
)


class IdentityChoice(Vertical):
    """How gpuci-tui signs in, and a service principal's or identity's fields."""

    # A Vertical is 1fr high: inside the step's scroll area it would get only the rows left
    # on screen and clip the fields below them (at 80x24, every field), out of reach of
    # the scrolling. As high as its content, the step scrolls to each field instead.
    DEFAULT_CSS = """
    IdentityChoice, IdentityChoice > #entra-fields {
        height: auto;
    }
    """

    def __init__(self, azure: AzureConfig | None, *, id: str) -> None:
        """Preset from the existing configuration's ``[azure]`` (None: a PAT)."""
        super().__init__(id=id)
        self.azure = azure
        self.method = azure.auth if azure is not None else "pat"

    def compose(self) -> Iterable[Widget]:
        """The method buttons, then the Entra fields (shown for the other methods)."""
        azure = self.azure
        yield Static("Sign in with:", classes="hint")
        with RadioSet(id="auth-method"):
            for key, label in METHODS:
                yield RadioButton(label, value=key == self.method, id=f"auth-{key}")
        with Vertical(id="entra-fields"):
            yield Input(
                value=azure.tenant_id if azure else "",
                placeholder="Directory (tenant) ID",
                id="tenant-id",
            )
            yield Input(
                value=azure.client_id if azure else "",
                placeholder="Application (client) ID (managed identity: empty = system-assigned)",
                id="client-id",
            )
            yield Input(
                password=True,
                placeholder="client secret (hidden; empty: keep the stored one)",
                id="client-secret",
            )
            yield Input(
                value=azure.client_certificate if azure else "",
                placeholder="or a certificate: /path/to/key-and-cert.pem (0600)",
                id="client-certificate",
            )
            yield Input(
                value=azure.authority if azure else AzureConfig("", "").authority,
                placeholder="sign-in host (sovereign clouds)",
                id="authority",
            )

    def on_mount(self) -> None:
        """Show the fields the preset method needs."""
        self._show()

    @on(RadioSet.Changed, "#auth-method")
    def _changed(self, event: RadioSet.Changed) -> None:
        self.method = str(event.pressed.id or "auth-pat").removeprefix("auth-")
        self._show()

    def _show(self) -> None:
        entra = self.method != "pat"
        self.query_one("#entra-fields").display = entra
        sp = self.method == "service-principal"
        for name in ("#tenant-id", "#client-secret", "#client-certificate", "#authority"):
            self.query_one(name).display = sp
        screen_pat = self.screen.query("#pat")
        for field in screen_pat:
            field.display = not entra

    def value(self, field: str) -> str:
        """The trimmed text of ``field`` (``tenant-id``, ``client-id``…)."""
        return self.query_one(f"#{field}", Input).value.strip()


async def check_identity(step: Step, choice: IdentityChoice) -> str | None:
    """Sign in as the chosen identity, check the organisation, store the secret.

    Returns:
        A plain error message, or None (the draft then holds the identity).
    """
    from gpuci_tui.core.azure.client import AzureDevOpsClient
    from gpuci_tui.core.config.auth_rules import check_auth_table
    from gpuci_tui.core.config.file import ConfigError
    from gpuci_tui.core.secrets.entra_msal import make_credential
    from gpuci_tui.core.secrets.entra_secrets import CLIENT_SECRET, EntraSecretStore

    url = step.draft.url
    base = step.services.config.azure if step.services.config is not None else None
    values: dict[str, Any] = {
        "auth": choice.method,
        "tenant_id": choice.value("tenant-id") if choice.method == "service-principal" else "",
        "client_id": choice.value("client-id"),
        "client_certificate": (
            choice.value("client-certificate") if choice.method == "service-principal" else ""
        ),
    }
    problems = [str(e) for e in check_auth_table(values, {k: v for k, v in values.items() if v})]
    try:
        from gpuci_tui.core.config import auth_rules

        auth_rules.validate_tenant_id(values["tenant_id"])
        auth_rules.validate_client_id(values["client_id"])
        auth_rules.validate_client_certificate(values["client_certificate"])
        authority = (
            auth_rules.validate_authority(choice.value("authority"))
            if choice.method == "service-principal"
            else (base.authority if base is not None else AzureConfig("", "").authority)
        )
    except ConfigError as exc:
        problems.append(str(exc))
    if problems:
        return "\n".join(problems)
    azure = AzureConfig(url=url, pool="", authority=authority, **values)
    store = step.services.token_store
    backend: Any = getattr(store, "backend", None)
    secret = choice.value("client-secret")
    keyring = EntraSecretStore(backend) if backend is not None else EntraSecretStore()
    checking = EntraSecretStore(environ={"GPUCI_CLIENT_SECRET": secret}) if secret else keyring
    credential = make_credential(azure, "", store=checking)
    step.say(f"Signing in and checking {url}…", "busy")
    client = AzureDevOpsClient(url, credential)
    check = await step.wizard.in_thread(lambda: client.validate_pat(None))
    if not check.ok:
        return check.message
    who = credential.describe().split(" · ")[0]  # without the token's state: it changes
    if secret and not values["client_certificate"]:
        try:
            await step.wizard.in_thread(
                lambda: keyring.set_secret(url, CLIENT_SECRET, values["client_id"], secret)
            )
        except GpuciError as exc:
            return (
                f"Signed in, but the client secret cannot be stored: {exc} Use "
                "GPUCI_CLIENT_SECRET_FILE (a 0600 file) and leave the field empty."
            )
        # From now on the secret is read from the keyring, like the daemon will.
        credential = make_credential(azure, "", store=keyring)
    step.draft.identity = {k: v for k, v in values.items() if v}
    step.draft.identity["authority"] = authority
    step.draft.credential = credential
    step.draft.user = check.user
    step.draft.pat_note = f"signed in as {who}" + (
        "; client secret stored in the OS keyring"
        if secret and not values["client_certificate"]
        else ""
    )
    return None


def azure_of(draft_url: str, pool: str, identity: dict[str, str], base: Any) -> AzureConfig:
    """The ``[azure]`` the review writes: the chosen identity, other keys kept."""
    from gpuci_tui.core.config.model import AzureConfig

    if base is not None:
        # Carried over from the file: the wizard does not ask for them (remove_offline_after too).
        kept: dict[str, Any] = {
            "authority": base.authority,
            "pat_expires": base.pat_expires,
            "remove_offline_after": base.remove_offline_after,
        }
        if identity.get("auth", "pat") != "pat":
            kept["pat_expires"] = ""
        return AzureConfig(url=draft_url, pool=pool, **{**kept, **identity})
    fields: dict[str, Any] = dict(identity)
    return AzureConfig(url=draft_url, pool=pool, **fields)
