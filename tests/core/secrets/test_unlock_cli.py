"""The command line without a Secret Service: the encrypted file store, unlocked on the terminal.

keyring's own choice is made the locked encrypted file store it picks where there
is no D-Bus (`CryptFileKeyring`, no passphrase); the terminal is a script of
answers; the store is the real keyrings.cryptfile with cheap KDF settings. The
real binary in a real terminal is tests/real/test_headless_token_tmux.py.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from keyring.backend import KeyringBackend

from gpuci_tui.cli import exitcodes, unlock
from gpuci_tui.cli.common import CliExit
from gpuci_tui.cli.main import main
from gpuci_tui.core.config import paths
from gpuci_tui.core.config.model import AzureConfig
from gpuci_tui.core.secrets import token_store
from gpuci_tui.core.secrets.token_store import TokenStore
from tests.core.secrets_helpers import URL, new_pat
from tests.keyring_fakes import MemoryKeyring


class Script:
    """A terminal that answers from a list and records what it was asked and told."""

    def __init__(self, *answers: str, present: bool = True) -> None:
        self.answers = list(answers)
        self.present = present
        self.asked: list[str] = []
        self.said: list[str] = []

    def available(self) -> bool:
        return self.present

    def ask(self, prompt: str) -> str:
        self.asked.append(prompt)
        return self.answers.pop(0)

    def say(self, text: str) -> None:
        self.said.append(text)


def fast_open(passphrase: str, path: Path) -> KeyringBackend:
    return token_store.open_cryptfile(passphrase, path, fast_kdf=True)


@pytest.fixture
def no_secret_service(monkeypatch: pytest.MonkeyPatch) -> None:
    """keyring's choice is what it picks without D-Bus: its encrypted file store, locked."""
    from keyrings.cryptfile.cryptfile import CryptFileKeyring

    monkeypatch.setattr(token_store, "default_backend", CryptFileKeyring)
    monkeypatch.setattr(token_store, "open_cryptfile", _fast(token_store.open_cryptfile))


def _fast(opener: Callable[..., KeyringBackend]) -> Callable[..., KeyringBackend]:
    return lambda passphrase, path=None, fast_kdf=False: opener(passphrase, path, fast_kdf=True)


AZURE = AzureConfig(url=URL, pool="gpu")


# --------------------------------------------------------------------------- the rules, in a table


@pytest.mark.usefixtures("no_secret_service")
@pytest.mark.parametrize(
    ("exists", "creating", "answers", "asked", "opened"),  # asked: each prompt's first word
    [
        # A new store: its passphrase twice.
        (False, True, ["pw-1", "pw-1"], ["New", "Repeat"], True),
        # Two that differ, then two that match: asked again.
        (False, True, ["pw-1", "pw-2", "pw-3", "pw-3"], ["New", "Repeat", "New", "Repeat"], True),
        # An empty one is refused before the repeat.
        (False, True, ["", "pw-1", "pw-1"], ["New", "New", "Repeat"], True),
        # An existing store: once.
        (True, False, ["pw-0"], ["Passphrase"], True),
        (True, True, ["pw-0"], ["Passphrase"], True),
        # A wrong one, then the right one.
        (True, False, ["nope", "pw-0"], ["Passphrase", "Passphrase"], True),
        # Three wrong ones: the command gives up.
        (True, False, ["a", "b", "c"], ["Passphrase", "Passphrase", "Passphrase"], False),
        # Three mismatched pairs: nothing is created.
        (False, True, ["a", "b", "c", "d", "e", "f"], ["New", "Repeat"] * 3, False),
    ],
)
def test_the_encrypted_store_is_created_or_unlocked_on_the_terminal(
    tmp_path: Path,
    exists: bool,
    creating: bool,
    answers: list[str],
    asked: list[str],
    opened: bool,
) -> None:
    path = tmp_path / "pat-store.cfg"
    if exists:
        fast_open("pw-0", path)
    terminal = Script(*answers)
    if opened:
        backend = unlock.keyring_backend(creating=creating, terminal=terminal, store_path=path)
        assert backend is not None and token_store.diagnose_keyring(backend).usable
    else:
        with pytest.raises(CliExit) as info:
            unlock.keyring_backend(creating=creating, terminal=terminal, store_path=path)
        assert info.value.code == exitcodes.CREDENTIALS
        assert path.exists() is exists
    assert [prompt.split()[0] for prompt in terminal.asked] == asked  # the prompts' first words
    assert not terminal.answers, "every answer was asked for"


@pytest.mark.usefixtures("no_secret_service")
@pytest.mark.parametrize("exists", [False, True])
def test_without_a_terminal_it_says_how_a_service_gets_the_pat(
    tmp_path: Path, exists: bool
) -> None:
    path = tmp_path / "pat-store.cfg"
    if exists:
        fast_open("pw-0", path)
    terminal = Script(present=False)
    with pytest.raises(CliExit) as info:
        unlock.keyring_backend(creating=True, terminal=terminal, store_path=path)
    message = info.value.message
    assert info.value.code == exitcodes.CREDENTIALS
    assert ("is locked" if exists else "would be created") in message
    for fix in ("GPUCI_PAT_FILE", "LoadCredential=gpuci-pat:", "$CREDENTIALS_DIRECTORY/gpuci-pat"):
        assert fix in message
    assert "gpuci-tui token" not in message and "in gpuci-tui" not in message
    assert terminal.asked == []


@pytest.mark.usefixtures("no_secret_service")
def test_reading_from_no_store_says_nothing_is_stored_without_asking(tmp_path: Path) -> None:
    terminal = Script()
    with pytest.raises(unlock.NoEncryptedStore) as info:
        unlock.keyring_backend(terminal=terminal, store_path=tmp_path / "absent.cfg")
    assert "No PAT is stored" in info.value.message and "GPUCI_PAT_FILE" in info.value.message
    assert terminal.asked == []


def test_a_working_keyring_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_store, "default_backend", MemoryKeyring)
    terminal = Script()
    assert unlock.keyring_backend(creating=True, terminal=terminal) is None
    assert terminal.asked == []


@pytest.mark.usefixtures("no_secret_service")
@pytest.mark.parametrize(
    "environ",
    [{"GPUCI_PAT": "p" * 52}, {"GPUCI_PAT_FILE": "/run/pat"}, {"CREDENTIALS_DIRECTORY": "CRED"}],
)
def test_a_pat_the_environment_gives_needs_no_passphrase(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    if "CREDENTIALS_DIRECTORY" in environ:
        (tmp_path / "gpuci-pat").write_text(new_pat())
        environ = {"CREDENTIALS_DIRECTORY": str(tmp_path)}
    terminal = Script(present=False)
    store = unlock.command_store(AZURE, terminal=terminal, environ=environ)
    assert not store.keyring_needed() and terminal.asked == []
    # Storing one still needs the keyring: without a terminal, that fails with the fix.
    with pytest.raises(CliExit, match="GPUCI_PAT_FILE"):
        unlock.command_store(AZURE, writes=True, terminal=terminal, environ=environ)


# --------------------------------------------------------------------------- the commands


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    from gpuci_tui.core.config.loader import save_config
    from gpuci_tui.core.config.model import AgentsConfig, Config

    path = tmp_path / "config.toml"
    agents = AgentsConfig(count=1, image="acme/agent:1", name_prefix="h", gpus="none")
    save_config(Config(azure=AZURE, agents=agents), path)
    return path


@pytest.mark.usefixtures("no_secret_service")
def test_token_set_then_delete_through_the_encrypted_store(
    config_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pat = new_pat()
    terminal = Script("pw-1", "pw-1", "pw-1")
    monkeypatch.setattr(unlock, "Tty", lambda: terminal)
    monkeypatch.setattr("sys.stdin", io.StringIO(pat + "\n"))
    assert main(["--config", str(config_file), "token", "set", "--stdin"]) == exitcodes.OK
    store = paths.cryptfile_path()
    assert f"PAT stored in the encrypted file store {store} for {URL}" in capsys.readouterr().out
    assert TokenStore(fast_open("pw-1", store), environ={}).get_token(URL) == pat
    assert main(["--config", str(config_file), "token", "delete"]) == exitcodes.OK
    assert f"PAT deleted from the encrypted file store {store}" in capsys.readouterr().out
    assert len(terminal.asked) == 3  # two to create it, one to delete


@pytest.mark.usefixtures("no_secret_service")
def test_token_delete_with_no_store_asks_nothing(
    config_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal = Script()
    monkeypatch.setattr(unlock, "Tty", lambda: terminal)
    assert main(["--config", str(config_file), "token", "delete"]) == exitcodes.OK
    assert f"no PAT was stored for {URL}" in capsys.readouterr().out
    assert terminal.asked == [] and not paths.cryptfile_path().exists()


@pytest.mark.usefixtures("no_secret_service")
def test_run_and_prune_without_a_terminal_say_how_a_service_gets_the_pat(
    config_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuci_tui.cli.run_cmd import real_services
    from gpuci_tui.core.config.loader import load_config

    fast_open("pw-0", paths.cryptfile_path())
    terminal = Script(present=False)
    monkeypatch.setattr(unlock, "Tty", lambda: terminal)
    with pytest.raises(CliExit) as info:  # what `run` does first
        real_services(load_config(config_file))
    assert info.value.code == exitcodes.CREDENTIALS
    assert "is locked" in info.value.message and "GPUCI_PAT_FILE" in info.value.message
    args = ["--config", str(config_file), "agents", "prune", "--dry-run"]
    assert main(args) == exitcodes.CREDENTIALS  # no daemon answers: it would ask the pool
    assert "$CREDENTIALS_DIRECTORY/gpuci-pat" in capsys.readouterr().err
    assert terminal.asked == []
