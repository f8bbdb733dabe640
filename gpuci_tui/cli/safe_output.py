r"""Terminal-safe output for the CLI: control characters are shown, never obeyed.

Container log tails, agent names from the server and configuration values reach
``status``, ``history`` and error messages. An ESC or another control character in
them would be a command to the operator's terminal (move the cursor, rewrite what
is shown, set the window title, or worse on old terminals), so every text the CLI
writes passes `escape_controls`: C0 (but tab and newline), DEL and C1 become
visible ``\\xNN`` escapes. JSON output needs nothing more: ``json.dumps`` already
escapes them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import Any, TextIO

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    r"""``text`` with every control character but tab and newline shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class SafeText:
    """A text stream that escapes control characters in everything written to it."""

    def __init__(self, stream: TextIO) -> None:
        """Wrap ``stream`` (its other attributes are passed through)."""
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text`` with its control characters escaped."""
        self._stream.write(escape_controls(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        """Write each line, escaped."""
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def install() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` escape control characters (idempotent)."""
    if not isinstance(sys.stdout, SafeText):
        sys.stdout = SafeText(sys.stdout)
    if not isinstance(sys.stderr, SafeText):
        sys.stderr = SafeText(sys.stderr)
