"""The PAT store: unsafe keyrings refused or explained, and log redaction."""

from __future__ import annotations

import base64
import io
import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import keyring
import keyring.errors
import pytest
from keyring.backends import chainer, fail, null

from gpuci_tui.core.secrets import token_store as secrets
from gpuci_tui.core.secrets.token_store import (
    KeyringLockedError,
    KeyringUnavailableError,
    PlaintextKeyringRefusedError,
    SecretRedactor,
    TokenMissingError,
    TokenStore,
    diagnose_keyring,
    mask_token,
    redact,
    register_secret,
)
from tests.core.secrets_helpers import (
    URL,
    FailingKeyring,
    new_pat,
)
from tests.keyring_fakes import MemoryKeyring

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
        # What a service does instead, never "enter it in gpuci-tui" (the command that failed).
        assert str(info.value).startswith(
            "There is no Secret Service in this session, and the encrypted file store needs "
            "its passphrase, which is asked on a terminal. A service gets the PAT from a file "
            "instead: a systemd credential (in its unit LoadCredential=gpuci-pat:"
        )
        assert "GPUCI_PAT_FILE" in str(info.value)
        assert "in gpuci-tui" not in str(info.value)
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
         "Cannot read the PAT from the keyring (tests.core.secrets_helpers.FailingKeyring): D-Bus "
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
