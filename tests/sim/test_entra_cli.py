"""``check-config`` signs in and checks the pool live for a service principal;
``token set`` stores its client secret."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.main import main
from gpuci_tui.core.config.loader import save_config
from gpuci_tui.core.config.model import AgentsConfig, AzureConfig, Config
from gpuci_tui.sim.login import SimLogin
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer

SECRET = "Q~cli.secret-0123456789abcdefghijklmnopqrs"
CLIENT = "11111111-2222-4333-8444-555555555555"


class World:
    def __init__(self) -> None:
        self.org = SimOrg("simorg")
        self.org.add_pool("gpu")
        self.app = self.org.entra.add_app("gpuci-lab", client_id=CLIENT, secret=SECRET)
        self.server = SimServer(self.org).start()
        self.login = SimLogin(self.org.entra).start()

    def config(self, path: Path) -> Path:
        azure = AzureConfig(
            url=self.server.org_url,
            pool="gpu",
            auth="service-principal",
            tenant_id="contoso.onmicrosoft.com",
            client_id=CLIENT,
            authority=self.login.url,
        )
        agents = AgentsConfig(count=1, image="acme/agent:1", name_prefix="h", gpus="none")
        save_config(Config(azure=azure, agents=agents), path)
        return path


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    w = World()
    # The daemon's msal session trusts what requests trusts: here, the sim's CA.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(w.login.ca_file))
    yield w
    w.login.stop()
    w.server.stop()


def test_check_config_signs_in_and_checks_the_pool(
    world: World,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = world.config(tmp_path / "config.toml")
    monkeypatch.setenv("GPUCI_CLIENT_SECRET", SECRET)
    assert main(["--config", str(config), "check-config"]) == exitcodes.OK
    out = capsys.readouterr().out
    assert "identity: service principal gpuci-lab · token valid" in out
    assert "can be managed" in out
    assert SECRET not in out

    world.app.pool_admin = False
    assert main(["--config", str(config), "check-config"]) == exitcodes.CREDENTIALS
    assert "is not its Administrator" in capsys.readouterr().out

    monkeypatch.setenv("GPUCI_CLIENT_SECRET", "Q~wrong-0123456789abcdefghijklmnopqrs")
    assert main(["--config", str(config), "check-config"]) == exitcodes.CREDENTIALS
    out = capsys.readouterr().out
    assert "AADSTS7000215" in out and "the client secret is wrong" in out


def test_token_set_stores_the_client_secret_in_the_keyring(
    world: World,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.keyring_fakes import MemoryKeyring  # an encrypted-looking in-memory backend

    backend = MemoryKeyring()
    monkeypatch.setattr("gpuci_tui.core.secrets.token_store.default_backend", lambda: backend)
    config = world.config(tmp_path / "config.toml")
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    assert main(["--config", str(config), "token", "set", "--stdin"]) == exitcodes.OK
    assert "client secret stored in the keyring" in capsys.readouterr().out
    assert main(["--config", str(config), "token", "check"]) == exitcodes.OK
    assert "can be managed" in capsys.readouterr().out
    assert main(["--config", str(config), "token", "delete"]) == exitcodes.OK
    assert "client secret deleted" in capsys.readouterr().out


def test_check_config_live_checks_a_pat_too(
    world: World,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pat = "simPAT-live-0123456789abcdefghijklmnopqrstuvwxyzABC"
    world.org.add_pat(pat)
    config = tmp_path / "config.toml"
    agents = AgentsConfig(count=1, image="acme/agent:1", name_prefix="h", gpus="none")
    save_config(
        Config(azure=AzureConfig(url=world.server.org_url, pool="gpu"), agents=agents), config
    )
    monkeypatch.setenv("GPUCI_PAT", pat)
    assert main(["--config", str(config), "check-config"]) == exitcodes.OK
    assert "identity" not in capsys.readouterr().out, "offline without --live, as before"
    assert main(["--config", str(config), "check-config", "--live"]) == exitcodes.OK
    out = capsys.readouterr().out
    assert "identity: PAT" in out and "can be managed" in out and pat not in out


def test_a_certificate_with_a_passphrase_from_the_cli(
    world: World,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The certificate path of ``[azure]``: ``token set`` stores its key's passphrase (not the
    key), ``check-config`` signs in with the certificate and checks the pool."""
    import dataclasses

    from gpuci_tui.core.config.loader import load_config
    from tests.keyring_fakes import MemoryKeyring
    from tests.sim.test_entra import _certificate

    backend = MemoryKeyring()
    monkeypatch.setattr("gpuci_tui.core.secrets.token_store.default_backend", lambda: backend)
    pem, cert = _certificate(passphrase=b"cli-passphrase-0123")
    key_file = tmp_path / "sp.pem"
    key_file.write_text(pem)
    key_file.chmod(0o600)
    world.app.secrets.clear()  # only the certificate signs in
    world.org.entra.add_certificate(CLIENT, cert)
    config = world.config(tmp_path / "config.toml")
    loaded = load_config(config)
    azure = dataclasses.replace(loaded.azure, client_certificate=str(key_file))
    save_config(dataclasses.replace(loaded, azure=azure), config)

    monkeypatch.setattr("sys.stdin", io.StringIO("cli-passphrase-0123\n"))
    assert main(["--config", str(config), "token", "set", "--stdin"]) == exitcodes.OK
    assert "certificate passphrase stored in the keyring" in capsys.readouterr().out
    assert list(backend.items.values()) == ["cli-passphrase-0123"]
    assert main(["--config", str(config), "check-config"]) == exitcodes.OK
    out = capsys.readouterr().out
    assert "identity: service principal gpuci-lab · token valid" in out and "can be managed" in out
    assert {how for _, how in world.org.entra.sign_ins} == {"certificate"}
    key_file.chmod(0o644)  # a private key others can read is refused, with the fix
    assert main(["--config", str(config), "check-config"]) == exitcodes.CREDENTIALS
    assert "chmod 600" in capsys.readouterr().out


def test_a_managed_identity_from_the_cli(
    world: World,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nothing to store (``token set`` says so); ``check-config`` signs in through the
    metadata endpoint and checks the pool, including a missing pool role."""
    from gpuci_tui.core.secrets.entra_msal import MI_ENDPOINT_VAR

    app = world.org.entra.add_app("gpuci-vm", managed_identity=True)
    monkeypatch.setenv(MI_ENDPOINT_VAR, world.login.url)
    config = tmp_path / "config.toml"
    azure = AzureConfig(url=world.server.org_url, pool="gpu", auth="managed-identity")
    agents = AgentsConfig(count=1, image="acme/agent:1", name_prefix="h", gpus="none")
    save_config(Config(azure=azure, agents=agents), config)
    assert main(["--config", str(config), "token", "set", "--stdin"]) == exitcodes.OK
    assert "no secret to store" in capsys.readouterr().out
    assert main(["--config", str(config), "check-config"]) == exitcodes.OK
    out = capsys.readouterr().out
    assert "identity: managed identity gpuci-vm · token valid" in out and "can be managed" in out
    app.pool_admin = False
    assert main(["--config", str(config), "check-config"]) == exitcodes.CREDENTIALS
    assert "is not its Administrator" in capsys.readouterr().out
