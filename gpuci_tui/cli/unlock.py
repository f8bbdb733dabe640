"""The keyring of a command: keyring's own, or the encrypted file store unlocked on the terminal.

Without a Secret Service (an SSH login has no D-Bus session) the PAT lives in
gpuci-tui's encrypted file store (`token_store.encrypted_store_instead`). The
first ``token set`` creates it and asks for its new passphrase twice; every
later command that needs the keyring (``token check``, ``agents prune``,
``run``) asks for it once. The passphrase is read from the terminal itself
(/dev/tty, not echoed), never from standard input, which may carry the PAT
(``token set --stdin``). Without a terminal (a service, cron, ``ssh`` without
``-t``) the command fails with how a service gets the PAT instead
(`pat_file.SERVICE_ADVICE`).
"""

from __future__ import annotations

import getpass
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from keyring.backend import KeyringBackend

from gpuci_tui.core.errors import GpuciError

from . import exitcodes
from .common import CliExit

if TYPE_CHECKING:
    from gpuci_tui.core.config.model import AzureConfig
    from gpuci_tui.core.secrets.entra_secrets import EntraSecretStore
    from gpuci_tui.core.secrets.token_store import TokenStore

ATTEMPTS = 3
"""Passphrases a person may get wrong (or mistype twice) before the command gives up."""

Opener = Callable[[str, Path], KeyringBackend]
"""Opens (or creates) the encrypted store at a path with a passphrase (`open_cryptfile`)."""


class NoEncryptedStore(CliExit):
    """Nothing to read: no Secret Service and no encrypted file store yet."""


class Terminal(Protocol):
    """Where a passphrase is asked: the controlling terminal (`Tty`), or a test's script."""

    def available(self) -> bool:
        """Whether there is a terminal to ask on."""
        ...

    def ask(self, prompt: str) -> str:
        """One passphrase, typed without echo."""
        ...

    def say(self, text: str) -> None:
        """One line for the person at the terminal."""
        ...


class Tty:
    """The process's controlling terminal (/dev/tty), whatever standard input is."""

    def available(self) -> bool:
        """Whether /dev/tty opens (a process without a controlling terminal gets ENXIO)."""
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return False
        os.close(fd)
        return True

    def ask(self, prompt: str) -> str:
        """``getpass`` on /dev/tty (checked by `available` first: no fallback to stdin)."""
        return getpass.getpass(prompt)

    def say(self, text: str) -> None:
        """To standard error, which a terminal session shows."""
        print(text, file=sys.stderr, flush=True)


def command_store(
    azure: AzureConfig,
    *,
    writes: bool = False,
    creating: bool | None = None,
    terminal: Terminal | None = None,
    environ: dict[str, str] | None = None,
) -> EntraSecretStore:
    """The token store of a command (the PAT, or a service principal's secret).

    The keyring is unlocked (`keyring_backend`) only when the command changes
    it (``writes``) or reads a secret the environment does not give: a PAT
    file, a systemd credential or a variable never leads to a passphrase prompt.
    ``creating`` (default: ``writes``): a missing encrypted store is created.
    """
    from gpuci_tui.core.secrets.entra_secrets import EntraSecretStore

    store = EntraSecretStore(environ=environ)
    if writes or keyring_read(azure, store):
        create = writes if creating is None else creating
        backend = keyring_backend(creating=create, terminal=terminal)
        if backend is not None:
            return EntraSecretStore(backend, environ=environ)
    return store


def keyring_name(store: TokenStore) -> str:
    """Where ``store`` keeps secrets, for a message: the encrypted file store's path, or the keyring."""
    path = getattr(store.backend, "file_path", None)
    if type(store.backend).__name__ == "CryptFileKeyring" and isinstance(path, str):
        return f"the encrypted file store {path}"
    return "the keyring"


def keyring_read(azure: AzureConfig, store: EntraSecretStore) -> bool:
    """Whether signing in as ``azure`` says reads the keyring (nothing else gives the secret)."""
    from gpuci_tui.core.secrets.entra_secrets import CERT_PASSPHRASE, CLIENT_SECRET

    if azure.auth == "pat":
        return store.keyring_needed()
    if azure.auth == "managed-identity":
        return False
    return store.secret_keyring_needed(
        CERT_PASSPHRASE if azure.client_certificate else CLIENT_SECRET
    )


def keyring_backend(
    *,
    creating: bool = False,
    terminal: Terminal | None = None,
    store_path: Path | None = None,
    opener: Opener | None = None,
) -> KeyringBackend | None:
    """The keyring backend a command's token store is to use.

    None (keyring's own choice, resolved at each call) when that works, or when
    it says itself what is wrong (a locked Secret Service, a plaintext backend);
    otherwise gpuci-tui's encrypted file store, unlocked with a passphrase asked
    on the terminal.

    Args:
        creating: The command stores a secret (``token set``): a store that does
            not exist yet is created, its passphrase asked twice.
        terminal: Where to ask (default: the controlling terminal).
        store_path: The store's file (default: `paths.cryptfile_path`).
        opener: Opens the store (default: `token_store.open_cryptfile`).

    Raises:
        CliExit: (credentials) no store to read from, no terminal to ask on, or
            no right passphrase after `ATTEMPTS` tries.
    """
    from gpuci_tui.core.config import paths
    from gpuci_tui.core.secrets import token_store

    if not token_store.encrypted_store_instead(token_store.diagnose_keyring()):
        return None
    path = store_path or paths.cryptfile_path()
    new = not path.exists()
    if new and not creating:
        raise NoEncryptedStore(
            exitcodes.CREDENTIALS,
            f"No PAT is stored: there is no Secret Service in this session and no encrypted "
            f"file store ({path}); {token_store.STORE_HINT}. {token_store.SERVICE_ADVICE}",
        )
    tty = terminal or Tty()
    if not tty.available():
        raise CliExit(exitcodes.CREDENTIALS, no_terminal(path, new))
    open_store = opener or (lambda passphrase, at: token_store.open_cryptfile(passphrase, at))
    if new:
        return _create(path, tty, open_store)
    return _unlock(path, tty, open_store)


def no_terminal(path: Path, new: bool) -> str:
    """Why a command without a terminal cannot use the encrypted store, and what a service does."""
    from gpuci_tui.core.secrets.token_store import SERVICE_ADVICE

    state = "would be created" if new else "is locked"
    return (
        f"There is no Secret Service in this session, and the encrypted file store ({path}) "
        f"{state}: its passphrase is asked on a terminal, and there is none here (over SSH, "
        f"ssh -t gives one). {SERVICE_ADVICE}"
    )


def _create(path: Path, tty: Terminal, open_store: Opener) -> KeyringBackend:
    tty.say(
        "There is no Secret Service in this session: the PAT goes into a new encrypted "
        f"file store, {path}. Choose its passphrase (every later command asks for it)."
    )
    for _ in range(ATTEMPTS):
        first = tty.ask("New passphrase: ")
        if not first.strip():
            tty.say("The passphrase is empty; type one.")
            continue
        if tty.ask("Repeat the passphrase: ") != first:
            tty.say("The two passphrases differ; type them again.")
            continue
        return _opened(path, first, open_store)
    raise CliExit(
        exitcodes.CREDENTIALS,
        f"No passphrase was chosen after {ATTEMPTS} tries; nothing was stored.",
    )


def _unlock(path: Path, tty: Terminal, open_store: Opener) -> KeyringBackend:
    from gpuci_tui.core.secrets.token_store import KeyringLockedError

    for _ in range(ATTEMPTS):
        passphrase = tty.ask(f"Passphrase of the encrypted PAT store {path}: ")
        try:
            return _opened(path, passphrase, open_store, retry=KeyringLockedError)
        except KeyringLockedError as exc:  # wrong or empty: the person may type it again
            tty.say(str(exc))
    raise CliExit(
        exitcodes.CREDENTIALS,
        f"Wrong passphrase {ATTEMPTS} times for the encrypted PAT store {path}. If it is "
        "lost, move the file away and store the PAT again.",
    )


def _opened(
    path: Path,
    passphrase: str,
    open_store: Opener,
    retry: type[GpuciError] | None = None,
) -> KeyringBackend:
    """The store opened, or CliExit for a store that cannot be used (``retry``: re-raised)."""
    try:
        return open_store(passphrase, path)
    except GpuciError as exc:
        if retry is not None and isinstance(exc, retry):
            raise
        raise CliExit(exitcodes.CREDENTIALS, str(exc)) from None
