"""Access tokens, private keys and client secrets are redacted wherever the PAT is."""

from __future__ import annotations

import logging
from pathlib import Path

import jwt
import pytest

from gpuci_tui.core.secrets.entra_secrets import EntraSecretStore
from gpuci_tui.core.secrets.redaction import SecretRedactor, redact
from tests.keyring_fakes import MemoryKeyring

TOKEN = jwt.encode({"appid": "x", "exp": 2_000_000_000}, "k" * 32, algorithm="HS256")
KEY = (
    "-----BEGIN ENCRYPTED PRIVATE KEY-----\n"
    "MIIFHzBJBgkqhkiG9w0BBQ0wPDAbBgkqhkiG9w0BBQwwDgQI\n"
    "-----END ENCRYPTED PRIVATE KEY-----\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Authorization: Bearer {TOKEN}", "Authorization: Bearer ***"),
        (f"token={TOKEN}&x=1", "token=***&x=1"),
        (f"key:\n{KEY}done", "key:\n***\ndone"),
        ("-----BEGIN PRIVATE KEY-----\nMIIE (cut off", "***"),
        ("eyJ but not a token.at all", "eyJ but not a token.at all"),
    ],
)
def test_tokens_and_keys_are_recognised_by_their_shape(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_a_client_secret_handed_out_is_redacted_from_later_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "Q~redact-me-0123456789abcdefghijklmnopq"
    store = EntraSecretStore(environ={"GPUCI_CLIENT_SECRET": secret})
    assert store.get_secret("https://dev.azure.com/acme", "client-secret", "c") == secret
    logger = logging.getLogger("test.entra.redaction")
    caplog.handler.addFilter(SecretRedactor())
    with caplog.at_level(logging.INFO, logger="test.entra.redaction"):
        logger.info("signing in with %s and %s", secret, TOKEN)
    assert caplog.records[-1].getMessage() == "signing in with *** and ***"


def test_a_secret_file_is_read_like_the_pat_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "Q~file-secret-0123456789abcdefghijklmnopq"
    path = tmp_path / "client-secret"
    path.write_text(secret + "\n")
    path.chmod(0o640)
    store = EntraSecretStore(environ={"GPUCI_CLIENT_SECRET_FILE": str(path)})
    with caplog.at_level(logging.WARNING):
        assert store.get_secret("https://dev.azure.com/acme", "client-secret", "c") == secret
    assert "chmod 600" in caplog.text, "open to the group: warned, as GPUCI_PAT_FILE is"


@pytest.mark.parametrize(
    ("what", "credential"),
    [("client-secret", "gpuci-client-secret"), ("certificate-passphrase", "gpuci-cert-passphrase")],
)
def test_a_systemd_credential_gives_the_secret(tmp_path: Path, what: str, credential: str) -> None:
    value = "Q~credential-0123456789abcdefghijklmnopq"
    (tmp_path / credential).write_text(value + "\n")
    store = EntraSecretStore(MemoryKeyring(), environ={"CREDENTIALS_DIRECTORY": str(tmp_path)})
    assert store.get_secret("https://dev.azure.com/acme", what, "c") == value
    assert not store.secret_keyring_needed(what)
    other = EntraSecretStore(
        MemoryKeyring(), environ={"CREDENTIALS_DIRECTORY": str(tmp_path / "x")}
    )
    assert other.secret_keyring_needed(what)
    assert other.get_secret("https://dev.azure.com/acme", what, "c") is None


def test_a_keys_lines_are_registered_with_one_rebuild_of_the_pattern(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pattern holds every registered form, so each rebuild costs more as the registry
    grows: one per line of a key was 20 s in a process with 7,700 forms."""
    import re

    from gpuci_tui.core.secrets import redaction
    from gpuci_tui.core.secrets.entra_secrets import load_certificate
    from tests.sim.test_entra import _certificate

    pem, _ = _certificate(passphrase=None)
    path = tmp_path / "sp.pem"
    path.write_text(pem)
    path.chmod(0o600)
    rebuilds: list[int] = []
    compile_ = re.compile

    def compile_counted(pattern: str, flags: int = 0) -> re.Pattern[str]:
        rebuilds.append(1)
        return compile_(pattern, flags)

    monkeypatch.setattr(redaction.re, "compile", compile_counted)
    load_certificate(str(path), None)
    monkeypatch.undo()
    assert len(rebuilds) == 1
    body = pem.split("-----BEGIN PRIVATE KEY-----\n", 1)[1].splitlines()
    assert len(body) > 20 and redact(f"leaked {body[3]}") == "leaked ***"
