"""The demo's keyring: the simulated organisation's PAT, kept in the demo's own folder.

``gpuci-tui token check`` (and ``set``, ``delete``, ``check-config --live``, the
wizard) on the demo's configuration must neither read nor write the operator's
real keyring: a Secret Service entry for a simulated organisation would outlive
the demo. The demo's instance therefore names this backend in
``PYTHON_KEYRING_BACKEND`` (`demo_instance.DemoInstance.environ`), and every
gpuci-tui process on that instance stores its secrets in a JSON file of the
demo's data directory, removed with the rest of the demo.

Stored unencrypted (in a 0600 file of a 0700 folder): the only secrets in it are
the demo's generated PAT and client secret, which open nothing but the simulated
organisation on 127.0.0.1, and which end with it. It is never chosen by keyring
itself: it is viable only where ``PYTHON_KEYRING_BACKEND`` names it.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

__all__ = ["BACKEND_NAME", "DemoKeyring", "keyring_file"]

BACKEND_NAME = "gpuci_tui.demo_keyring.DemoKeyring"
"""What ``PYTHON_KEYRING_BACKEND`` says in the demo's instance."""
FILE_NAME = "demo-keyring.json"


def keyring_file() -> Path:
    """The file of the demo's keyring: in the (demo's) gpuci-tui data directory."""
    from gpuci_tui.core.config.paths import data_dir

    return data_dir() / FILE_NAME


class _DemoOnly:
    """keyring's ``priority`` class property: a backend whose priority raises is not viable."""

    def __get__(self, instance: object, owner: type | None = None) -> float:
        if os.environ.get("PYTHON_KEYRING_BACKEND") != BACKEND_NAME:
            raise RuntimeError("only a gpuci-tui demo instance uses this keyring")
        return 1.0


class DemoKeyring(KeyringBackend):
    """A keyring backend over one JSON file of the demo's instance (see the module)."""

    _lock = threading.Lock()
    priority = _DemoOnly()
    """Viable only where the demo's environment names it (never keyring's own pick)."""

    def __init__(self) -> None:
        """A backend over `keyring_file` (found again at each call: the XDG directories)."""
        super().__init__()  # type: ignore[no-untyped-call]

    def get_password(self, service: str, username: str) -> str | None:
        """The stored secret, or None."""
        with self._lock:
            return self._read().get(service, {}).get(username)

    def set_password(self, service: str, username: str, password: str) -> None:
        """Store ``password`` (the file is rewritten whole, 0600)."""
        with self._lock:
            data = self._read()
            data.setdefault(service, {})[username] = password
            self._write(data)

    def delete_password(self, service: str, username: str) -> None:
        """Remove the secret; keyring's error when there is none."""
        with self._lock:
            data = self._read()
            if data.get(service, {}).pop(username, None) is None:
                raise PasswordDeleteError(f"no secret for {username} in the demo's keyring")
            self._write(data)

    @staticmethod
    def _read() -> dict[str, dict[str, str]]:
        try:
            loaded = json.loads(keyring_file().read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return loaded if isinstance(loaded, dict) else {}

    @staticmethod
    def _write(data: dict[str, dict[str, str]]) -> None:
        path = keyring_file()
        fresh = path.with_name(f".{FILE_NAME}.{os.getpid()}")
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(fresh, path)
