"""Access tokens, private keys and client secrets are redacted wherever the PAT is."""

from __future__ import annotations

import logging
from pathlib import Path

import jwt
import pytest

from gpuci_tui.core.secrets.entra_secrets import EntraSecretStore
from gpuci_tui.core.secrets.redaction import SecretRedactor, redact

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
