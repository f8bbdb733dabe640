"""A service principal's client secret in a real keyring (the encrypted file store), kept
apart from the PAT of the same organisation."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuci_tui.core.secrets.entra_secrets import CLIENT_SECRET, EntraSecretStore
from gpuci_tui.core.secrets.token_store import open_cryptfile

pytestmark = pytest.mark.keyring_real

URL = "https://dev.azure.com/acme"
CLIENT = "11111111-2222-4333-8444-555555555555"


def test_client_secret_round_trip_beside_the_pat(tmp_path: Path) -> None:
    path = tmp_path / "store" / "pat-store.cfg"
    secret = "Q~real.keyring-0123456789abcdefghijklmnop"
    store = EntraSecretStore(open_cryptfile("correct horse", path, fast_kdf=True), environ={})
    store.set_token(URL, "patpatpatpatpatpat0123456789")
    store.set_secret(URL, CLIENT_SECRET, CLIENT, secret)
    assert secret.encode() not in path.read_bytes()
    reopened = EntraSecretStore(open_cryptfile("correct horse", path, fast_kdf=True), environ={})
    assert reopened.get_secret(URL, CLIENT_SECRET, CLIENT) == secret
    assert reopened.get_token(URL) == "patpatpatpatpatpat0123456789"
    assert reopened.get_secret(URL, CLIENT_SECRET, "22222222-2222-4333-8444-555555555555") is None
