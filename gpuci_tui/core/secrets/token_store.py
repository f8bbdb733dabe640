"""The PAT: where it is stored (OS keyring), where else it may come from, and log redaction.

The PAT is looked up in this order: the file named by ``GPUCI_PAT_FILE``, the
systemd credential ``gpuci-pat`` (`pat_file`), ``GPUCI_PAT``, then the keyring
(service ``gpuci-tui``, user name = the normalised organisation URL). Without a
Secret Service the keyring is gpuci-tui's own encrypted file store
(`open_cryptfile`), which the command line unlocks with a passphrase asked on
the terminal (`gpuci_tui.cli.unlock`). Two keyring behaviours are never
allowed: a plaintext backend (it would store the PAT base64-encoded, not
encrypted) and a backend that asks for a password with ``getpass`` (it would
corrupt a running Textual screen or hang a daemon). Both become a `GpuciError`
that says what to do instead. Every PAT handed out is registered with the
log redactor (`redaction`) first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

import keyring
import keyring.errors
from keyring.backend import KeyringBackend

from gpuci_tui.core.config import paths
from gpuci_tui.core.config.validate import validate_org_url
from gpuci_tui.core.errors import GpuciError

# TokenFileError, PAT_FILE_MAX and SERVICE_ADVICE are re-exported: callers deal with this
# module only.
from gpuci_tui.core.secrets.pat_file import PAT_FILE_MAX as PAT_FILE_MAX
from gpuci_tui.core.secrets.pat_file import SERVICE_ADVICE as SERVICE_ADVICE
from gpuci_tui.core.secrets.pat_file import PatFileReader, pat_file
from gpuci_tui.core.secrets.pat_file import TokenFileError as TokenFileError

# SecretRedactor and mask_token are re-exported: callers deal with this module only.
from gpuci_tui.core.secrets.redaction import SecretRedactor as SecretRedactor
from gpuci_tui.core.secrets.redaction import mask_token as mask_token
from gpuci_tui.core.secrets.redaction import redact, register_secret

T = TypeVar("T")

SERVICE = "gpuci-tui"
STORE_HINT = 'store one with "gpuci-tui token set" or run "gpuci-tui setup"'
NO_KEYRING_ADVICE = (
    "Over SSH there is usually no Secret Service on D-Bus. Either run gpuci-tui under "
    '"dbus-run-session" with "gnome-keyring-daemon --unlock" (see docs/identity.md, "Keyring"), '
    "or use the encrypted file store (its passphrase is asked on the terminal). " + SERVICE_ADVICE
)


class KeyringUnavailableError(GpuciError):
    """No usable keyring: none reachable, disabled, failing, or one that would prompt."""


class KeyringLockedError(KeyringUnavailableError):
    """The keyring exists but is locked (or the encrypted file store needs its passphrase)."""


class WrongPassphraseError(KeyringLockedError):
    """The passphrase given for the encrypted file store is wrong."""


class PlaintextKeyringRefusedError(KeyringUnavailableError):
    """The selected keyring stores secrets unencrypted; gpuci-tui does not use it."""


class TokenMissingError(GpuciError):
    """No PAT is stored for this organisation."""


class InvalidTokenError(GpuciError):
    """A PAT (typed, or read from GPUCI_PAT / GPUCI_PAT_FILE) is empty or malformed."""


# --------------------------------------------------------------------------- keyring diagnosis


@dataclass(frozen=True)
class KeyringStatus:
    """What the keyring can do for us, in words the operator can act on."""

    usable: bool
    kind: str
    """``secret-service`` | ``cryptfile`` | ``plaintext`` | ``absent`` | ``locked`` | ``other``.
    ``cryptfile`` with ``usable`` False means the store needs its passphrase (`open_cryptfile`)."""
    backend_name: str
    message: str
    advice: str = ""


def default_backend() -> KeyringBackend:
    """The backend keyring selected, narrowed to one backend.

    keyring's ``ChainerBackend`` asks each backend in turn, so a missing PAT in the
    Secret Service falls through to the encrypted file store, which prompts on
    the terminal. Only the chain's first (highest-priority) backend is used.
    """
    backend = keyring.get_keyring()
    chained = getattr(backend, "backends", None)
    if isinstance(chained, list):
        return chained[0] if chained else _no_keyring()
    return backend


def _no_keyring() -> KeyringBackend:
    from keyring.backends import fail

    return cast(KeyringBackend, fail.Keyring())  # type: ignore[no-untyped-call]


def _name(backend: KeyringBackend) -> str:
    return f"{type(backend).__module__}.{type(backend).__qualname__}"


def _classify(backend: KeyringBackend) -> KeyringStatus:
    """The status that follows from the backend's type alone (no call made)."""
    name = _name(backend)
    if name == "keyring.backends.fail.Keyring":
        message = "No keyring is available in this session."
        return KeyringStatus(False, "absent", name, message, NO_KEYRING_ADVICE)
    if name == "keyring.backends.null.Keyring":
        message = "The keyring is disabled (null backend, chosen by PYTHON_KEYRING_BACKEND or "
        advice = "Unset it, or use the encrypted file store, or GPUCI_PAT_FILE."
        return KeyringStatus(False, "absent", name, message + "keyringrc.cfg).", advice)
    if "Plaintext" in type(backend).__name__:
        message = f"The selected keyring ({name}) stores secrets unencrypted; gpuci-tui refuses it."
        advice = "Use the Secret Service or the encrypted file store, or GPUCI_PAT_FILE."
        return KeyringStatus(False, "plaintext", name, message, advice)
    unlocked = _passphrase_set(backend)
    if unlocked is not None:  # a passphrase file store of keyrings.cryptfile / keyrings.alt
        is_cryptfile = type(backend).__name__ == "CryptFileKeyring"
        if unlocked:
            return KeyringStatus(True, "cryptfile" if is_cryptfile else "other", name, "Unlocked.")
        if is_cryptfile:
            message = (
                "There is no Secret Service in this session, and the encrypted file store "
                "needs its passphrase, which is asked on a terminal."
            )
            return KeyringStatus(False, "cryptfile", name, message, SERVICE_ADVICE)
        message = f"The selected keyring ({name}) would ask for its password on the terminal."
        return KeyringStatus(False, "other", name, message, "Use the encrypted file store.")
    if name.startswith(("keyring.backends.SecretService", "keyring.backends.libsecret")):
        return KeyringStatus(True, "secret-service", name, "Secret Service (e.g. gnome-keyring).")
    return KeyringStatus(True, "other", name, f"Keyring backend {name}.")


def _passphrase_set(backend: KeyringBackend) -> bool | None:
    """None for a backend without a passphrase; else whether it is set (unset: getpass)."""
    own = vars(backend)
    if "_keyring_key" in own:  # keyrings.cryptfile sets it to None in __init__
        return own["_keyring_key"] is not None
    if hasattr(type(backend), "keyring_key"):  # keyrings.alt: a property until assigned
        return "keyring_key" in own
    return None


def diagnose_keyring(backend: KeyringBackend | None = None) -> KeyringStatus:
    """Find out whether the keyring (default: keyring's choice) can store and return the PAT.

    A backend that looks usable is probed with one harmless lookup, which is
    how a locked Secret Service collection shows. Never prompts on the terminal.
    """
    chosen = backend if backend is not None else default_backend()
    status = _classify(chosen)
    if not status.usable:
        return status
    try:
        chosen.get_password(SERVICE, "gpuci-tui-probe")
    except (keyring.errors.KeyringLocked, keyring.errors.InitError) as exc:
        advice = (
            "Unlock it (over SSH: printf %s PASSWORD | gnome-keyring-daemon --unlock), "
            "or use the encrypted file store, or GPUCI_PAT_FILE."
        )
        return KeyringStatus(
            False, "locked", status.backend_name, f"The keyring is locked: {exc}", advice
        )
    except Exception as exc:  # noqa: BLE001 - any backend failure makes it unusable
        message = (
            f"The keyring ({status.backend_name}) failed: {redact(str(exc)) or type(exc).__name__}"
        )
        return KeyringStatus(False, status.kind, status.backend_name, message, NO_KEYRING_ADVICE)
    return status


# --------------------------------------------------------------------------- encrypted file store


def encrypted_store_instead(status: KeyringStatus) -> bool:
    """Whether the PAT goes to gpuci-tui's own encrypted file store (`open_cryptfile`).

    So it does where there is no Secret Service: keyring then picks its own
    passphrase file store, locked (it would ask with ``getpass`` at its first
    use), or no backend at all. A backend disabled on purpose (the null one), a
    plaintext one or a locked Secret Service keep their own advice.
    """
    if status.usable:
        return False
    return status.kind == "cryptfile" or status.backend_name == "keyring.backends.fail.Keyring"


def open_cryptfile(
    passphrase: str, path: Path | None = None, fast_kdf: bool = False
) -> KeyringBackend:
    """Open (or create) the encrypted PAT store, unlocked with ``passphrase``.

    Args:
        passphrase: The store's passphrase (a new store is created with it).
        path: The store file (default: `paths.cryptfile_path`).
        fast_kdf: Cheap Argon2 parameters, for tests only; a store written with
            them can only be opened with them.

    Raises:
        WrongPassphraseError: the passphrase does not open the existing store.
        KeyringLockedError: the passphrase is empty.
        KeyringUnavailableError: the file cannot be created or is damaged.
    """
    from keyrings.cryptfile.cryptfile import CryptFileKeyring

    target = path if path is not None else paths.cryptfile_path()
    if not passphrase.strip():
        raise KeyringLockedError(f"The passphrase is empty; enter the passphrase of {target}.")
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise KeyringUnavailableError(f"Cannot create {target.parent}: {exc.strerror}.") from None
    store = CryptFileKeyring()
    store.file_path = str(target)
    if fast_kdf:
        store.time_cost, store.memory_cost = 1, 1024
    try:
        store.keyring_key = passphrase
    except ValueError as exc:
        store._keyring_key = None  # the setter keeps a key that failed; drop it
        if "MAC check" in str(exc) or "Incorrect" in str(exc):
            raise WrongPassphraseError(
                f"Wrong passphrase for the encrypted PAT store {target}. Try again; if it is "
                "lost, move the file away and store the PAT again."
            ) from None
        raise KeyringUnavailableError(
            f"The encrypted PAT store {target} is damaged ({exc}); move it away and store "
            "the PAT again."
        ) from None
    except Exception as exc:  # noqa: BLE001 - unreadable or corrupt file, whatever the parser says
        raise KeyringUnavailableError(
            f"The encrypted PAT store {target} cannot be opened ({type(exc).__name__}: {exc}); "
            "move it away and store the PAT again."
        ) from None
    return cast(KeyringBackend, store)


# --------------------------------------------------------------------------- the token store


class TokenStore:
    """Reads and stores the PAT (implements `protocols.TokenSource`).

    Args:
        backend: The keyring backend to use (e.g. from `open_cryptfile`); None
            means keyring's own choice, resolved at each call (`default_backend`).
        environ: Where ``GPUCI_PAT_FILE``, ``CREDENTIALS_DIRECTORY`` and ``GPUCI_PAT``
            are read (default: os.environ).
    """

    def __init__(
        self, backend: KeyringBackend | None = None, *, environ: Mapping[str, str] | None = None
    ) -> None:
        self._backend = backend
        self._environ = os.environ if environ is None else environ
        self._files = PatFileReader()

    @property
    def backend(self) -> KeyringBackend:
        """The keyring backend calls go to."""
        return self._backend if self._backend is not None else default_backend()

    def status(self) -> KeyringStatus:
        """`diagnose_keyring` for this store's backend."""
        return diagnose_keyring(self.backend)

    def get_token(self, org_url: str) -> str:
        """The PAT for ``org_url``: from its file (`pat_file`), else GPUCI_PAT, else the keyring.

        Raises:
            TokenFileError: GPUCI_PAT_FILE (or the systemd credential) is set but unusable.
            InvalidTokenError: the PAT found is empty or malformed.
            TokenMissingError: none is stored for this organisation.
            KeyringUnavailableError: (and subclasses) the keyring cannot be used.
        """
        source = pat_file(self._environ)
        if source is not None:
            pat = _clean(self._files.read(source), f"in {source.named_by}")
        elif self._environ.get("GPUCI_PAT", "").strip():
            pat = _clean(self._environ["GPUCI_PAT"], "in GPUCI_PAT")
        else:
            url = validate_org_url(org_url)
            stored = self._call("read the PAT from", lambda b: b.get_password(SERVICE, url))
            if stored is None:
                raise TokenMissingError(f"No PAT is stored for {url}; {STORE_HINT}.")
            pat = _clean(stored, "in the keyring")
        register_secret(pat)
        return pat

    def set_token(self, org_url: str, pat: str) -> None:
        """Store ``pat`` (trimmed) for ``org_url`` in the keyring and check it reads back.

        Raises:
            InvalidTokenError: the PAT is empty or malformed.
            PlaintextKeyringRefusedError: the keyring would store it unencrypted.
            KeyringUnavailableError: (and subclasses) the keyring cannot be used.
        """
        url = validate_org_url(org_url)
        clean = _clean(pat, "given")
        register_secret(clean)
        self._call("store the PAT in", lambda b: b.set_password(SERVICE, url, clean))
        if self._call("read the PAT back from", lambda b: b.get_password(SERVICE, url)) != clean:
            raise KeyringUnavailableError(
                f"The keyring ({_name(self.backend)}) accepted the PAT but does not return it; "
                "use another keyring, the encrypted file store, or GPUCI_PAT_FILE."
            )

    def delete_token(self, org_url: str) -> bool:
        """Remove the stored PAT of ``org_url``; False when there was none."""
        url = validate_org_url(org_url)
        if self._call("read", lambda b: b.get_password(SERVICE, url)) is None:
            return False
        self._call("delete the PAT from", lambda b: b.delete_password(SERVICE, url))
        return True

    def pat_file(self) -> Path | None:
        """The file `get_token` reads the PAT from (GPUCI_PAT_FILE or the systemd credential)."""
        source = pat_file(self._environ)
        return source.path if source is not None else None

    def keyring_needed(self) -> bool:
        """Whether `get_token` asks the keyring (no PAT file, credential or GPUCI_PAT)."""
        return pat_file(self._environ) is None and not self._environ.get("GPUCI_PAT", "").strip()

    def source_of_token(self, org_url: str) -> str:
        """Where `get_token` would take the PAT from: ``file``, ``env``, ``keyring`` or ``none``.

        Raises:
            KeyringUnavailableError: (and subclasses) the keyring had to be asked
                and cannot be used.
        """
        if not self.keyring_needed():
            return "file" if self.pat_file() is not None else "env"
        url = validate_org_url(org_url)
        found = self._call("read", lambda b: b.get_password(SERVICE, url))
        return "none" if found is None else "keyring"

    def _call(self, doing: str, action: Callable[[KeyringBackend], T]) -> T:
        """Run ``action`` on a backend that is safe to use, as a plain-message `GpuciError`."""
        backend = self.backend
        status = _classify(backend)
        if not status.usable:
            error = {
                "plaintext": PlaintextKeyringRefusedError,
                "cryptfile": KeyringLockedError,
            }.get(status.kind, KeyringUnavailableError)
            raise error(f"{status.message} {status.advice}".strip())
        try:
            return action(backend)
        except (keyring.errors.KeyringLocked, keyring.errors.InitError) as exc:
            raise KeyringLockedError(
                f"Cannot {doing} the keyring: it is locked ({redact(str(exc))}). Unlock it, or use "
                "the encrypted file store or GPUCI_PAT_FILE."
            ) from None
        except keyring.errors.NoKeyringError:
            raise KeyringUnavailableError(f"No keyring is available. {NO_KEYRING_ADVICE}") from None
        except Exception as exc:  # noqa: BLE001 - backends raise anything (D-Bus, files, crypto)
            detail = redact(str(exc)) or type(exc).__name__
            raise KeyringUnavailableError(
                f"Cannot {doing} the keyring ({status.backend_name}): {detail}."
            ) from None


def _clean(raw: str, source: str) -> str:
    """The PAT without surrounding whitespace, or InvalidTokenError naming ``source`` ("given")."""
    pat = raw.strip()
    again = "copy it again from Azure DevOps (User settings > Personal access tokens)"
    if not pat:
        raise InvalidTokenError(f"The PAT {source} is empty; {again}.")
    if any(c.isspace() for c in pat):
        raise InvalidTokenError(f"The PAT {source} has spaces or line breaks inside; {again}.")
    if not (pat.isascii() and pat.isprintable()):
        raise InvalidTokenError(f"The PAT {source} has characters a PAT never has; {again}.")
    return pat
