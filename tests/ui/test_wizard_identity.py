"""The setup wizard offers a service principal beside the PAT: it signs in live against the
simulated tenant, stores the client secret in the keyring, lists the pools with it and
writes ``[azure] auth`` (the PAT path is unchanged: tests/ui/test_wizard.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuci_tui.core.config.loader import load_config
from gpuci_tui.core.secrets.token_store import TokenStore
from gpuci_tui.screens.dashboard import DashboardScreen
from gpuci_tui.sim.login import SimLogin
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer
from tests.keyring_fakes import MemoryKeyring
from tests.ui.helpers import text_of, wait_for
from tests.ui.wizard_harness import URL, Setup, wizard

SECRET = "Q~wizard.secret-0123456789abcdefghijklmno"
CLIENT = "11111111-2222-4333-8444-555555555555"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"


class Org:
    def __init__(self) -> None:
        self.org = SimOrg("simorg")
        self.org.add_pool("gpu-a100")
        self.app = self.org.entra.add_app("gpuci-lab", client_id=CLIENT, secret=SECRET)
        self.server = SimServer(self.org).start()
        self.login = SimLogin(self.org.entra).start()


@pytest.fixture
def org(monkeypatch: pytest.MonkeyPatch) -> Iterator[Org]:
    o = Org()
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(o.login.ca_file))
    yield o
    o.login.stop()
    o.server.stop()


async def test_a_service_principal_is_set_up_end_to_end(tmp_path: Path, org: Org) -> None:
    backend = MemoryKeyring()
    async with wizard(tmp_path, token_store=TokenStore(backend=backend)) as w:
        await _to_sign_in(w, org)
        assert w.field("#pat").has_focus, "the PAT stays the default"
        await w.pilot.click("#auth-service-principal")
        await w.pilot.pause()
        assert not w.field("#pat").display and w.field("#tenant-id").display
        await w.fill("#tenant-id", TENANT)
        await w.fill("#authority", org.login.url)
        await w.fill("#client-id", "not-a-guid")
        await w.next()
        assert w.wizard.index == 1 and "is not a client id" in w.message
        await w.fill("#client-id", CLIENT)
        await w.fill("#client-secret", "Q~wrong-0123456789abcdefghijklmnopqrst")
        await w.next()
        assert w.wizard.index == 1 and "AADSTS7000215" in w.message, w.message
        await w.fill("#client-secret", SECRET)
        await w.next()
        assert w.wizard.index == 2, w.message
        stored = [v for (_, user), v in backend.items.items() if "#client-secret:" in user]
        assert stored == [SECRET]
        # The pool list comes from the organisation, read as the service principal.
        await w.fill("#pool-name", "gpu-a100")
        await w.next()
        assert w.wizard.index == 3, w.message
        for index in range(3, 6):
            await w.at(index)
            await w.next()
        await w.at(6)
        review = text_of(w.wizard, "#review")
        assert (
            "Sign-in       signed in as service principal gpuci-lab; client secret stored in "
            "the OS keyring" in review
        ), review
        await w.pilot.press("enter")
        await wait_for(
            w.pilot, lambda: isinstance(w.app.screen, DashboardScreen), what="the dashboard"
        )
        saved = load_config(w.config_path)
        assert (saved.azure.auth, saved.azure.tenant_id, saved.azure.client_id) == (
            "service-principal",
            TENANT,
            CLIENT,
        )
        assert SECRET not in w.config_path.read_text()


async def _to_sign_in(w: Setup, org: Org) -> None:
    """Past the organisation step (the simulated organisation's URL) to the sign-in step."""
    await w.at(0)
    await w.fill("#url", org.server.org_url)
    await w.next()
    await w.at(1)


async def _finish(w: Setup, pool: str = "gpu-a100") -> str:
    """From step 2 to the review (the pool, then the later steps as they are); its text."""
    await w.fill("#pool-name", pool)
    await w.next()
    assert w.wizard.index == 3, w.message
    for index in range(3, 6):
        await w.at(index)
        await w.next()
    await w.at(6)
    return text_of(w.wizard, "#review")


async def test_a_managed_identity_needs_no_secret_and_is_written(
    tmp_path: Path, org: Org, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuci_tui.core.secrets.entra_msal import MI_ENDPOINT_VAR

    org.org.entra.add_app("gpuci-vm", managed_identity=True)
    monkeypatch.setenv(MI_ENDPOINT_VAR, org.login.url)  # the VM metadata endpoint, simulated
    backend = MemoryKeyring()
    async with wizard(tmp_path, token_store=TokenStore(backend=backend)) as w:
        await _to_sign_in(w, org)
        await w.pilot.click("#auth-managed-identity")
        await w.pilot.pause()
        # Only the client id (empty: the system-assigned identity): no tenant, secret or file.
        shown = {f: w.field(f).display for f in ("#pat", "#tenant-id", "#client-secret")}
        assert shown == dict.fromkeys(shown, False), shown
        assert w.field("#client-id").display and not w.field("#client-certificate").display
        await w.next()
        assert w.wizard.index == 2, w.message
        review = await _finish(w)
        assert "Sign-in       signed in as managed identity gpuci-vm" in review, review
        assert "stored" not in review.split("Sign-in", 1)[1].splitlines()[0]
        await w.pilot.press("enter")
        await wait_for(
            w.pilot, lambda: isinstance(w.app.screen, DashboardScreen), what="the dashboard"
        )
    saved = load_config(w.config_path)
    assert (saved.azure.auth, saved.azure.client_id, saved.azure.tenant_id) == (
        "managed-identity",
        "",
        "",
    )
    assert backend.items == {}, "nothing stored: Azure gives the host its tokens"
    assert org.org.entra.sign_ins[-1][1] == "msi"


async def test_a_service_principal_with_a_certificate_file_is_written(
    tmp_path: Path, org: Org
) -> None:
    from tests.sim.test_entra import _certificate

    pem, cert = _certificate(passphrase=None)
    key_file = tmp_path / "sp.pem"
    key_file.write_text(pem)
    key_file.chmod(0o600)
    org.app.secrets.clear()  # only the certificate signs in
    org.org.entra.add_certificate(CLIENT, cert)
    backend = MemoryKeyring()
    async with wizard(tmp_path, token_store=TokenStore(backend=backend)) as w:
        await _to_sign_in(w, org)
        await w.pilot.click("#auth-service-principal")
        await w.pilot.pause()
        await w.fill("#tenant-id", TENANT)
        await w.fill("#authority", org.login.url)
        await w.fill("#client-id", CLIENT)
        await w.fill("#client-certificate", "sp.pem")
        await w.next()
        assert w.wizard.index == 1 and "must be an absolute path" in w.message, w.message
        await w.fill("#client-certificate", str(key_file))
        await w.next()
        assert w.wizard.index == 2, w.message
        review = await _finish(w)
        line = review.split("Sign-in", 1)[1].splitlines()[0]
        assert "signed in as service principal gpuci-lab" in line and "stored" not in line
        await w.pilot.press("enter")
        await wait_for(
            w.pilot, lambda: isinstance(w.app.screen, DashboardScreen), what="the dashboard"
        )
    saved = load_config(w.config_path)
    assert (saved.azure.auth, saved.azure.client_certificate) == (
        "service-principal",
        str(key_file),
    )
    assert backend.items == {}, "a certificate stays in its file"
    assert {how for _, how in org.org.entra.sign_ins} == {"certificate"}
    assert "PRIVATE KEY" not in w.config_path.read_text()


async def test_every_service_principal_field_is_reachable_on_an_80x24_terminal(
    tmp_path: Path,
) -> None:
    """The fields under the method buttons scroll into view as Tab reaches them.

    The identity block was as high as the rows left on screen and clipped what was
    below them: at 80x24 every field was invisible (found through tmux).
    """
    async with wizard(tmp_path, size=(80, 24)) as w:
        await w.at(0)
        await w.fill("#url", URL)
        await w.next()
        await w.at(1)
        await w.pilot.press("tab", "down", "enter")  # the method buttons: service principal
        await w.pilot.pause()
        screen = w.app.screen.region
        for name in ("tenant-id", "client-id", "client-secret", "client-certificate", "authority"):
            await w.pilot.press("tab")
            await w.pilot.pause()
            field = w.field(f"#{name}")
            assert field.has_focus, w.app.focused
            assert field.region.height == 3 and screen.contains_region(field.region), (
                name,
                field.region,
            )
