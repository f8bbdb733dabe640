"""Operator intent kept across restarts: the supervisor's seam and the daemon's file.

Drained slots, the slot count and pause survive a daemon restart: the supervisor
saves them through an `IntentStore` after every command; the daemon's store is a
small JSON file (`IntentFile`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Protocol

from gpuci_tui.core.files import atomic_write

__all__ = ["IntentFile", "IntentStore"]


class IntentStore(Protocol):
    """Keeps operator intent (count, paused, drained slots) across restarts.

    The protocol; `IntentFile` is the daemon's file-backed implementation.
    """

    def load(self) -> dict[str, Any] | None:
        """The saved intent, or None."""
        ...

    def save(self, data: dict[str, Any]) -> None:
        """Save ``data``."""
        ...


class IntentFile:
    """Operator intent as a small JSON file, written atomically."""

    def __init__(self, path: Path) -> None:
        """Keep the intent at ``path``."""
        self.path = path

    def load(self) -> dict[str, Any]:
        """The saved intent, or {} when there is none or it is unreadable."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, data: dict[str, Any]) -> None:
        """Replace the saved intent atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(self.path, json.dumps({**data, "saved_at": time.time()}))
