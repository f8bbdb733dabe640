"""The PAT store: precedence, trimming, keyring safety rules and log redaction."""

from __future__ import annotations

import base64
import getpass
import io
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import keyring
import keyring.errors
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import chainer, fail, null

from gpuci_tui.core import secrets
from gpuci_tui.core.secrets import (
    InvalidTokenError,
    KeyringLockedError,
    KeyringUnavailableError,
    PlaintextKeyringRefusedError,
    SecretRedactor,
    TokenFileError,
    TokenMissingError,
    TokenStore,
    diagnose_keyring,
    mask_token,
    redact,
    register_secret,
)

URL = "https://dev.azure.com/acme"


def new_pat() -> str:
    """A unique 52-character PAT-like value (each test registers its own)."""
    return (uuid.uuid4().hex + uuid.uuid4().hex)[:52]


class MemoryKeyring(KeyringBackend):
    """An in-memory backend, as keyring's own tests use."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.items.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.items[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.items.pop((service, username), None) is None:
            raise keyring.errors.PasswordDeleteError("not found")


class FailingKeyring(MemoryKeyring):
    """Raises ``error`` on every call."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def get_password(self, service: str, username: str) -> str | None:
        raise self.error

    set_password = get_password  # type: ignore[assignment]


class ForgetfulKeyring(MemoryKeyring):
    """Accepts every write and keeps nothing."""

    def set_password(self, service: str, username: str, password: str) -> None:
        pass


@pytest.fixture
def default_keyring() -> Iterator[Callable[[KeyringBackend], None]]:
    """Set keyring's default backend for one test, then restore the previous one."""
    previous = keyring.get_keyring()
    yield keyring.set_keyring
    keyring.set_keyring(previous)


@pytest.fixture
def no_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any terminal prompt fail the test (the file stores call getpass.getpass)."""

    def prompt(*args: object, **kwargs: object) -> str:
        raise AssertionError("the keyring tried to prompt on the terminal")

    monkeypatch.setattr(getpass, "getpass", prompt)


def pat_file(tmp_path: Path, content: str, mode: int = 0o600) -> Path:
    path = tmp_path / "pat"
    path.write_text(content)
    path.chmod(mode)
    return path


# --------------------------------------------------------------------------- keyring round trip


def test_set_get_delete_with_an_explicit_backend() -> None:
    backend = MemoryKeyring()
    store = TokenStore(backend, environ={})
    pat = new_pat()

    store.set_token(URL + "/", pat)

    assert backend.items == {("gpuci-tui", URL): pat}  # user name = the normalised URL
    assert store.get_token(URL) == pat
    assert store.source_of_token(URL) == "keyring"
    assert store.delete_token(URL) is True
    assert store.delete_token(URL) is False
    assert store.source_of_token(URL) == "none"


def test_default_backend_is_keyrings_choice(default_keyring: Callable[..., None]) -> None:
    backend = MemoryKeyring()
    default_keyring(backend)
    pat = new_pat()
    TokenStore(environ={}).set_token(URL, pat)
    assert backend.items[("gpuci-tui", URL)] == pat


def test_missing_pat_says_how_to_store_one() -> None:
    with pytest.raises(TokenMissingError) as info:
        TokenStore(MemoryKeyring(), environ={}).get_token(URL)
    assert str(info.value) == (
        f'No PAT is stored for {URL}; store one with "gpuci-tui token set" or run "gpuci-tui setup".'
    )


def test_set_token_trims_and_checks_the_pat() -> None:
    backend = MemoryKeyring()
    store = TokenStore(backend, environ={})
    pat = new_pat()
    store.set_token(URL, f"  {pat}\r\n")
    assert backend.items[("gpuci-tui", URL)] == pat
    with pytest.raises(InvalidTokenError) as info:
        store.set_token(URL, f"{pat[:20]} {pat[20:]}")
    assert str(info.value) == (
        "The PAT given has spaces or line breaks inside; copy it again from Azure DevOps (User "
        "settings > Personal access tokens)."
    )
    assert pat[:20] not in str(info.value)
    with pytest.raises(InvalidTokenError, match="is empty"):
        store.set_token(URL, " \n")
    with pytest.raises(InvalidTokenError, match="has characters a PAT never has"):
        store.set_token(URL, pat + "é")


def test_a_write_that_does_not_read_back_is_an_error() -> None:
    with pytest.raises(KeyringUnavailableError, match="accepted the PAT but does not return it"):
        TokenStore(ForgetfulKeyring(), environ={}).set_token(URL, new_pat())


# --------------------------------------------------------------------------- precedence


def test_precedence_file_then_env_then_keyring(tmp_path: Path) -> None:
    backend = MemoryKeyring()
    in_keyring, in_env, in_file = new_pat(), new_pat(), new_pat()
    TokenStore(backend, environ={}).set_token(URL, in_keyring)
    path = pat_file(tmp_path, in_file + "\n")

    both = TokenStore(backend, environ={"GPUCI_PAT_FILE": str(path), "GPUCI_PAT": in_env})
    env_only = TokenStore(backend, environ={"GPUCI_PAT": in_env, "GPUCI_PAT_FILE": ""})
    keyring_only = TokenStore(backend, environ={"GPUCI_PAT": "  "})

    assert (both.get_token(URL), both.source_of_token(URL)) == (in_file, "file")
    assert (env_only.get_token(URL), env_only.source_of_token(URL)) == (in_env, "env")
    assert (keyring_only.get_token(URL), keyring_only.source_of_token(URL)) == (
        in_keyring,
        "keyring",
    )


def test_environment_overrides_need_no_keyring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pat = new_pat()
    monkeypatch.setenv("GPUCI_PAT", f"\t{pat}\n")
    store = TokenStore(fail.Keyring())
    assert store.get_token(URL) == pat
    monkeypatch.setenv("GPUCI_PAT_FILE", str(pat_file(tmp_path, f"\n{pat}\n\n")))
    assert (store.get_token(URL), store.source_of_token(URL)) == (pat, "file")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "The PAT in GPUCI_PAT_FILE is empty"),
        ("abc def\n", "The PAT in GPUCI_PAT_FILE has spaces or line breaks inside"),
        ("line-one\nline-two\n", "The PAT in GPUCI_PAT_FILE has spaces or line breaks inside"),
    ],
)
def test_bad_pat_file_content(tmp_path: Path, content: str, message: str) -> None:
    store = TokenStore(
        MemoryKeyring(), environ={"GPUCI_PAT_FILE": str(pat_file(tmp_path, content))}
    )
    with pytest.raises(InvalidTokenError, match=message):
        store.get_token(URL)


def test_pat_file_problems(tmp_path: Path) -> None:
    def error(path: Path) -> str:
        with pytest.raises(TokenFileError) as info:
            TokenStore(MemoryKeyring(), environ={"GPUCI_PAT_FILE": str(path)}).get_token(URL)
        return str(info.value)

    assert error(tmp_path / "missing") == (
        f"GPUCI_PAT_FILE names {tmp_path}/missing, which does not exist; create it (the PAT on "
        "one line, chmod 600) or unset GPUCI_PAT_FILE."
    )
    assert error(tmp_path) == (
        f"GPUCI_PAT_FILE names {tmp_path}, which is not a regular file; point it at the PAT file."
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # must not block waiting for a writer
    assert error(fifo).endswith("which is not a regular file; point it at the PAT file.")
    big = tmp_path / "big"
    big.write_bytes(b"x" * (secrets.PAT_FILE_MAX + 1))
    assert error(big).endswith("which is too large to hold a PAT; point it at the PAT file.")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe")
    assert error(binary).endswith("which is not text; it must hold only the PAT.")


def test_pat_file_open_to_others_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pat = new_pat()
    path = pat_file(tmp_path, pat, mode=0o644)
    store = TokenStore(MemoryKeyring(), environ={"GPUCI_PAT_FILE": str(path)})
    with caplog.at_level(logging.WARNING, logger="gpuci_tui.core.secrets"):
        assert store.get_token(URL) == pat
        assert store.get_token(URL) == pat
    assert [r.getMessage() for r in caplog.records] == [
        f"GPUCI_PAT_FILE {path} is open to group or others (mode 0644); restrict it: chmod 600 {path}"
    ]
    caplog.clear()
    path.chmod(0o600)
    with caplog.at_level(logging.WARNING, logger="gpuci_tui.core.secrets"):
        store.get_token(URL)
    assert caplog.records == []


# --------------------------------------------------------------------------- unsafe keyrings


def test_no_keyring_explains_the_headless_options() -> None:
    store = TokenStore(fail.Keyring(), environ={})
    with pytest.raises(KeyringUnavailableError) as info:
        store.get_token(URL)
    message = str(info.value)
    assert message.startswith("No keyring is available in this session. Over SSH")
    for hint in ("dbus-run-session", "gnome-keyring-daemon --unlock", "encrypted file store",
                 "GPUCI_PAT_FILE"):  # fmt: skip
        assert hint in message
    with pytest.raises(KeyringUnavailableError):
        store.set_token(URL, new_pat())
    status = diagnose_keyring(fail.Keyring())
    assert (status.usable, status.kind, status.backend_name) == (
        False, "absent", "keyring.backends.fail.Keyring",
    )  # fmt: skip


def test_null_keyring_is_absent() -> None:
    status = diagnose_keyring(null.Keyring())
    assert (status.usable, status.kind) == (False, "absent")
    with pytest.raises(KeyringUnavailableError, match="disabled"):
        TokenStore(null.Keyring(), environ={}).set_token(URL, new_pat())


@pytest.mark.parametrize("module", ["keyrings.alt.file", "keyrings.cryptfile.file"])
def test_plaintext_keyrings_are_refused(module: str, tmp_path: Path) -> None:
    plaintext_class = __import__(module, fromlist=["PlaintextKeyring"]).PlaintextKeyring
    backend = plaintext_class()
    backend.file_path = str(tmp_path / "plain.cfg")
    store = TokenStore(backend, environ={})

    with pytest.raises(PlaintextKeyringRefusedError) as info:
        store.set_token(URL, new_pat())
    with pytest.raises(PlaintextKeyringRefusedError):
        store.get_token(URL)

    assert str(info.value).startswith(f"The selected keyring ({module}.PlaintextKeyring) stores")
    assert "GPUCI_PAT_FILE" in str(info.value)
    assert not (tmp_path / "plain.cfg").exists()
    status = diagnose_keyring(backend)
    assert (status.usable, status.kind) == (False, "plaintext")


@pytest.mark.usefixtures("no_prompt")
def test_locked_cryptfile_never_prompts(tmp_path: Path) -> None:
    from keyrings.cryptfile.cryptfile import CryptFileKeyring

    backend = CryptFileKeyring()
    backend.file_path = str(tmp_path / "store.cfg")
    store = TokenStore(backend, environ={})
    for call in (lambda: store.get_token(URL), lambda: store.set_token(URL, new_pat())):
        with pytest.raises(KeyringLockedError) as info:
            call()
        assert str(info.value).startswith(
            "The encrypted file store is locked: it needs its passphrase."
        )
    status = diagnose_keyring(backend)
    assert (status.usable, status.kind) == (False, "cryptfile")
    assert not (tmp_path / "store.cfg").exists()


@pytest.mark.usefixtures("no_prompt")
@pytest.mark.parametrize("module", ["keyrings.alt.file", "keyrings.cryptfile.file"])
def test_password_prompting_file_stores_are_refused(module: str, tmp_path: Path) -> None:
    backend = __import__(module, fromlist=["EncryptedKeyring"]).EncryptedKeyring()
    backend.file_path = str(tmp_path / "enc.cfg")
    with pytest.raises(KeyringUnavailableError, match="would ask for its password on the terminal"):
        TokenStore(backend, environ={}).get_token(URL)
    assert diagnose_keyring(backend).kind == "other"


@pytest.mark.usefixtures("no_prompt")
def test_a_chain_is_narrowed_to_its_first_backend(
    default_keyring: Callable[..., None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from keyrings.cryptfile.cryptfile import CryptFileKeyring

    memory, locked = MemoryKeyring(), CryptFileKeyring()
    locked.file_path = str(tmp_path / "store.cfg")
    default_keyring(chainer.ChainerBackend())

    # Asking the whole chain would fall through from the empty memory store to the
    # locked file store, which prompts; only the first backend is asked.
    monkeypatch.setattr(chainer.ChainerBackend, "backends", [memory, locked])
    with pytest.raises(TokenMissingError):
        TokenStore(environ={}).get_token(URL)
    assert secrets.default_backend() is memory

    monkeypatch.setattr(chainer.ChainerBackend, "backends", [locked, memory])
    with pytest.raises(KeyringLockedError):
        TokenStore(environ={}).get_token(URL)
    assert diagnose_keyring().kind == "cryptfile"

    monkeypatch.setattr(chainer.ChainerBackend, "backends", [])
    assert diagnose_keyring().kind == "absent"


@pytest.mark.parametrize(
    ("error", "expected", "message"),
    [
        (keyring.errors.KeyringLocked("Failed to unlock the collection!"), KeyringLockedError,
         "Cannot read the PAT from the keyring: it is locked (Failed to unlock the collection!). "
         "Unlock it, or use the encrypted file store or GPUCI_PAT_FILE."),
        (keyring.errors.InitError("Prompt dismissed"), KeyringLockedError,
         "Cannot read the PAT from the keyring: it is locked (Prompt dismissed). Unlock it, or "
         "use the encrypted file store or GPUCI_PAT_FILE."),
        (RuntimeError("D-Bus went away"), KeyringUnavailableError,
         "Cannot read the PAT from the keyring (tests.core.test_secrets.FailingKeyring): D-Bus "
         "went away."),
    ],
)  # fmt: skip
def test_backend_failures_become_plain_errors(
    error: Exception, expected: type[Exception], message: str
) -> None:
    with pytest.raises(expected) as info:
        TokenStore(FailingKeyring(error), environ={}).get_token(URL)
    assert str(info.value) == message
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize(
    ("error", "kind"),
    [(keyring.errors.KeyringLocked("locked"), "locked"), (keyring.errors.InitError("x"), "locked"),
     (RuntimeError("boom"), "other")],
)  # fmt: skip
def test_diagnose_probes_a_backend_that_looks_usable(error: Exception, kind: str) -> None:
    status = diagnose_keyring(FailingKeyring(error))
    assert (status.usable, status.kind) == (False, kind)
    assert status.advice
    healthy = diagnose_keyring(MemoryKeyring())
    assert (healthy.usable, healthy.kind) == (True, "other")


# --------------------------------------------------------------------------- redaction


@pytest.fixture
def log_output() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(SecretRedactor())
    logger = logging.getLogger(f"test.redaction.{uuid.uuid4().hex}")
    logger.addHandler(handler)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)


def test_registered_secrets_are_redacted_from_messages_and_args(
    log_output: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = log_output
    pat = new_pat()
    register_secret(pat)
    basic = base64.b64encode(f":{pat}".encode()).decode()

    logger.warning("token %s in args", pat)
    logger.warning(f"token {pat} in the message")  # noqa: G004 - the case being tested
    logger.warning("header %(h)s", {"h": f"Basic {basic}"})
    logger.warning("object %r", {"pat": pat})

    assert pat not in stream.getvalue() and basic not in stream.getvalue()
    assert stream.getvalue().splitlines() == [
        "WARNING token *** in args",
        "WARNING token *** in the message",
        "WARNING header Basic ***",
        "WARNING object {'pat': '***'}",
    ]


def test_tracebacks_are_redacted(log_output: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = log_output
    pat = new_pat()
    register_secret(pat)
    try:
        raise ValueError(f"bad token {pat}")
    except ValueError:
        logger.exception("request failed")
    text = stream.getvalue()
    assert "ValueError: bad token ***" in text
    assert "Traceback (most recent call last)" in text
    assert pat not in text


def test_get_token_registers_the_pat(log_output: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = log_output
    pat = new_pat()
    backend = MemoryKeyring()
    backend.items[("gpuci-tui", URL)] = pat
    logger.warning("after: %s", TokenStore(backend, environ={}).get_token(URL))
    assert stream.getvalue() == "WARNING after: ***\n"


def test_stack_info_and_cached_exception_text_are_redacted() -> None:
    pat = new_pat()
    register_secret(pat)
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "plain", None, None)
    record.stack_info = f"Stack (most recent call last):\n  call({pat})"
    record.exc_text = f"Traceback ...\nKeyError: {pat}"
    assert SecretRedactor().filter(record) is True
    assert (record.stack_info, record.exc_text) == (
        "Stack (most recent call last):\n  call(***)",
        "Traceback ...\nKeyError: ***",
    )
    assert record.getMessage() == "plain"


def test_redact_and_short_values() -> None:
    pat = new_pat()
    assert redact(f"x{pat}y") == f"x{pat}y"
    register_secret(f"  {pat}\n")
    assert redact(f"x{pat}y") == "x***y"
    register_secret("short")  # would garble ordinary text: ignored
    assert redact("a short note") == "a short note"


def test_mask_token_shows_only_the_length() -> None:
    pat = new_pat()
    masked = mask_token(pat)
    assert masked == "<PAT, 52 chars>"
    assert not any(chunk in masked for chunk in (pat[:4], pat[-4:]))
