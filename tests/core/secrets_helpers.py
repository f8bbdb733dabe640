"""Helpers shared by the secrets tests."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.keyring_fakes import MemoryKeyring

URL = "https://dev.azure.com/acme"


def new_pat() -> str:
    """A unique 52-character PAT-like value (each test registers its own)."""
    return (uuid.uuid4().hex + uuid.uuid4().hex)[:52]


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


def pat_file(tmp_path: Path, content: str, mode: int = 0o600) -> Path:
    path = tmp_path / "pat"
    path.write_text(content)
    path.chmod(mode)
    return path
