"""Service principals and managed identities end to end: msal against the simulated
tenant (`SimEntra` over `SimLogin`'s TLS), the client against the simulated organisation."""

from __future__ import annotations

import datetime
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.config.model import AzureConfig
from gpuci_tui.core.errors import AzureAuthError, AzureScopeError
from gpuci_tui.core.secrets.entra import EntraCredential
from gpuci_tui.core.secrets.entra_msal import (
    MI_ENDPOINT_VAR,
    make_credential,
    service_principal_acquirer,
)
from gpuci_tui.core.secrets.entra_secrets import EntraSecretError, EntraSecretStore
from gpuci_tui.sim.login import SimLogin
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer

SECRET = "Q~sim.secret-0123456789abcdefghijklmnopqrs"
CLIENT = "11111111-2222-4333-8444-555555555555"
TENANT = "contoso.onmicrosoft.com"
PAT = "sim-pat-0123456789abcdefghijklmnopqrstuvwxyz0123"


class World:
    def __init__(self, tmp: Path) -> None:
        self.org = SimOrg("simorg")
        self.pool_id = self.org.add_pool("gpu")
        self.app = self.org.entra.add_app("gpuci-lab", client_id=CLIENT, secret=SECRET)
        self.server = SimServer(self.org).start()
        self.login = SimLogin(self.org.entra).start()
        self.session = requests.Session()
        self.session.verify = str(self.login.ca_file)
        # REQUESTS_CA_BUNDLE (set on CI machines) would override verify otherwise.
        self.session.trust_env = False
        self.tmp = tmp

    def azure(self, **kw: str) -> AzureConfig:
        values = {
            "url": self.server.org_url,
            "pool": "gpu",
            "auth": "service-principal",
            "tenant_id": TENANT,
            "client_id": CLIENT,
            "authority": self.login.url,
        }
        values.update(kw)
        return AzureConfig(**values)

    def credential(self, secret: str | None = SECRET, **kw: str) -> EntraCredential:
        env = {"GPUCI_CLIENT_SECRET": secret} if secret else {}
        store = EntraSecretStore(environ=env)
        cred = make_credential(self.azure(**kw), "", store=store, http_client=self.session)
        assert isinstance(cred, EntraCredential)
        return cred

    def client(self, cred: EntraCredential) -> AzureDevOpsClient:
        return AzureDevOpsClient(self.server.org_url, cred, max_retries=0)  # type: ignore[arg-type]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.login.stop()
    w.server.stop()


def test_a_service_principal_with_a_secret_manages_the_pool(world: World) -> None:
    cred = world.credential()
    client = world.client(cred)
    check = client.validate_pat("gpu")
    assert check.ok, check.message
    assert check.user == "gpuci-lab"
    assert cred.describe().startswith("service principal gpuci-lab · token valid 59 min")
    # Bearer on the wire: the organisation saw an access token, not a PAT.
    assert world.org.entra.sign_ins == [(CLIENT, "secret")]
    # The container's value is the same short-lived token (registers with --auth pat).
    agent_id, _ = world.org.register("gpu", "gpu-1", cred.get_token(world.server.org_url))
    assert [a.id for a in client.list_agents(world.pool_id)] == [agent_id]


@pytest.mark.parametrize(
    ("setup", "words"),
    [
        ("wrong", "AADSTS7000215"),
        ("expired", "AADSTS7000222"),
        ("unknown", "AADSTS700016"),
    ],
)
def test_entra_refusals_are_worded(world: World, setup: str, words: str) -> None:
    kw: dict[str, str] = {}
    secret = SECRET
    if setup == "wrong":
        secret = "Q~not-the-secret-0123456789abcdefghij"
    elif setup == "expired":
        world.org.entra.set_secret(CLIENT, SECRET, expires=world.org.entra.clock() - 1)
    else:
        kw["client_id"] = "99999999-2222-4333-8444-555555555555"
    check = world.client(world.credential(secret, **kw)).validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "bad_pat")
    assert words in check.message


def test_not_in_the_organisation_and_not_pool_administrator(world: World) -> None:
    world.app.in_org = False
    cred = world.credential()
    with pytest.raises(AzureAuthError, match="not a member of the organisation"):
        world.client(cred).list_pools()
    # Re-acquired once, then the refusal: two sign-ins, not a loop.
    assert len(world.org.entra.sign_ins) == 2
    world.app.in_org, world.app.pool_admin = True, False
    client = world.client(world.credential())
    check = client.validate_pat("gpu")
    assert (check.ok, check.reason) == (False, "no_scope"), check.message
    world.org.add_pat(PAT)  # an agent registered by someone else, to disable
    agent_id, _ = world.org.register("gpu", "gpu-1", PAT)
    with pytest.raises(AzureScopeError, match="Administrator of the pool"):
        client.set_agent_enabled(world.pool_id, agent_id, False)


def test_an_expired_token_is_replaced_and_a_rotated_secret_picked_up(world: World) -> None:
    world.org.entra.token_lifetime = 400  # inside the 5-minute margin after 100 s
    secret = {"GPUCI_CLIENT_SECRET": SECRET}
    store = EntraSecretStore(environ=secret)
    cred = make_credential(world.azure(), "", store=store, http_client=world.session)
    client = world.client(cred)  # type: ignore[arg-type]
    client.list_pools()
    # Rotation: Entra now takes only the new secret; the store hands it out.
    world.org.entra.set_secret(CLIENT, "Q~rotated-0123456789abcdefghijklmnopq")
    secret["GPUCI_CLIENT_SECRET"] = "Q~rotated-0123456789abcdefghijklmnopq"
    cred.refresh()
    client.list_pools()
    assert [how for _, how in world.org.entra.sign_ins] == ["secret", "secret"]


def test_short_lived_tokens_are_renewed_at_half_their_life_not_at_every_call(
    world: World,
) -> None:
    """90-s tokens on a shared fake clock: one sign-in (and one OpenID read) per 45 s."""
    now = [1_000_000.0]
    world.org.entra.clock = lambda: now[0]
    world.org.entra.token_lifetime = 90
    store = EntraSecretStore(environ={"GPUCI_CLIENT_SECRET": SECRET})
    acquire = service_principal_acquirer(world.azure(), store, world.session)
    cred = EntraCredential("service-principal", CLIENT, acquire, clock=lambda: now[0])
    client = world.client(cred)
    calls = range(3, 601, 3)  # a REST call every 3 s for 10 minutes
    start = now[0]
    for at in calls:
        now[0] = start + at
        client.list_pools()
    # Renewed 45 s after each sign-in (half of 90 s), never inside the 5-minute margin
    # at every call (before: 200 sign-ins and 200 discovery reads for 200 calls).
    expected = len(range(3, 601, 45))
    assert (len(world.org.entra.sign_ins), world.login.discovery_reads) == (expected, expected)
    gaps = {round(b - a) for a, b in itertools.pairwise(world.org.entra.sign_in_times)}
    assert gaps == {45}


def test_a_token_the_organisation_stops_taking_is_reacquired_once(world: World) -> None:
    cred = world.credential()
    client = world.client(cred)
    client.list_pools()
    now = world.org.entra.clock
    world.org.entra.clock = lambda: now() + 3700  # the organisation sees it expired
    try:
        client.list_pools()  # 401 -> a new token -> 200
    finally:
        world.org.entra.clock = now
    assert len(world.org.entra.sign_ins) == 2


def test_a_certificate_signs_in_with_a_verified_assertion(world: World) -> None:
    pem, cert = _certificate(passphrase=b"open-sesame")
    path = world.tmp / "sp.pem"
    path.write_text(pem)
    os.chmod(path, 0o600)
    world.org.entra.add_app("gpuci-cert", client_id=CLIENT, certificate_pem=cert)
    env = {"GPUCI_CERT_PASSPHRASE": "open-sesame"}
    store = EntraSecretStore(environ=env)
    cred = make_credential(
        world.azure(client_certificate=str(path)), "", store=store, http_client=world.session
    )
    assert world.client(cred).validate_pat("gpu").ok  # type: ignore[arg-type]
    assert world.org.entra.sign_ins[-1] == (CLIENT, "certificate")
    # Another key with the same name is refused (the signature is checked).
    other, _ = _certificate(passphrase=None)
    path.write_text(other)
    del env["GPUCI_CERT_PASSPHRASE"]
    cred.refresh()
    with pytest.raises(AzureAuthError, match="AADSTS700027"):
        cred.authorization()
    # A key readable by others is refused before it is used.
    os.chmod(path, 0o644)
    cred.refresh()
    with pytest.raises(AzureAuthError, match="chmod 600"):
        cred.authorization()


def test_certificate_file_problems_are_worded(world: World) -> None:
    from gpuci_tui.core.secrets.entra_secrets import load_certificate

    pem, _ = _certificate(passphrase=b"pw")
    path = world.tmp / "sp.pem"
    path.write_text(pem)
    os.chmod(path, 0o600)
    with pytest.raises(EntraSecretError, match="passphrase is wrong or missing"):
        load_certificate(str(path), None)
    path.write_text(pem.split("-----BEGIN CERTIFICATE-----")[0])
    with pytest.raises(EntraSecretError, match="has no certificate"):
        load_certificate(str(path), "pw")


def test_a_managed_identity_signs_in_through_the_metadata_endpoint(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.org.entra.add_app("gpuci-vm", managed_identity=True)
    monkeypatch.setenv(MI_ENDPOINT_VAR, world.login.url)
    cred = make_credential(
        world.azure(auth="managed-identity", client_id="", tenant_id=""),
        "",
        http_client=world.session,
    )
    assert world.client(cred).validate_pat("gpu").ok  # type: ignore[arg-type]
    assert cred.describe().startswith("managed identity gpuci-vm · token valid")
    assert world.org.entra.sign_ins[-1][1] == "msi"


def _on_arc(world: World, monkeypatch: pytest.MonkeyPatch, token_dir: Path) -> None:
    """Point msal at the simulated Azure Arc endpoint and its challenge files in ``token_dir``.

    msal takes the endpoint from the environment, but reads the challenge file from a
    fixed directory (``/var/opt/azcmagent/tokens``, root's and the himds group's):
    its private table of those directories is the one thing a test must patch.
    """
    import msal.managed_identity as mi

    monkeypatch.setenv("IDENTITY_ENDPOINT", world.login.arc_endpoint)
    monkeypatch.setenv("IMDS_ENDPOINT", world.login.url)
    monkeypatch.delenv("IDENTITY_HEADER", raising=False)  # else msal takes App Service's way
    monkeypatch.setitem(mi._supported_arc_platforms_and_their_prefixes, "linux", str(token_dir))


@pytest.mark.parametrize("client_id", ["", "99999999-2222-4333-8444-555555555555"])
def test_a_managed_identity_on_azure_arc_answers_the_file_challenge(
    world: World, monkeypatch: pytest.MonkeyPatch, client_id: str
) -> None:
    world.org.entra.add_app("gpuci-arc", client_id=client_id or None, managed_identity=True)
    _on_arc(world, monkeypatch, world.login.arc_dir)
    cred = make_credential(
        world.azure(auth="managed-identity", client_id=client_id, tenant_id=""),
        "",
        http_client=world.session,
    )
    assert world.client(cred).validate_pat("gpu").ok  # type: ignore[arg-type]
    assert cred.describe().startswith("managed identity gpuci-arc · token valid")
    assert world.org.entra.sign_ins[-1][1] == "msi"
    assert world.login.arc_challenges == 1
    assert list(world.login.arc_dir.iterdir()) == [], "the challenge file is used once"


def test_an_arc_challenge_file_out_of_reach_is_told_with_the_fix(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    world.org.entra.add_app("gpuci-arc", managed_identity=True)
    _on_arc(world, monkeypatch, tmp_path / "not-the-himds-directory")
    cred = make_credential(
        world.azure(auth="managed-identity", client_id="", tenant_id=""),
        "",
        http_client=world.session,
    )
    with pytest.raises(AzureAuthError, match="himds group"):
        cred.authorization()


def _certificate(passphrase: bytes | None) -> tuple[str, str]:
    """(key + certificate PEM, certificate PEM) of a fresh self-signed RSA certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuci-sp")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    ).decode()
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    return key_pem + cert_pem, cert_pem
