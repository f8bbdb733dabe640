"""Keeps secrets out of logs: a registry of secrets and a `logging.Filter` that redacts them.

`secrets.TokenStore` registers every PAT it hands out, so any later log line,
argument or traceback that contains it (or its HTTP Basic-auth encoding) shows
``***`` instead.
"""

from __future__ import annotations

import base64
import logging
import re
import threading

REDACTED = "***"
MIN_SECRET_LENGTH = 8
"""Shorter values are not PATs, and redacting them would garble ordinary log text."""

_registry_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def register_secret(value: str) -> None:
    """Redact ``value`` (and its HTTP Basic-auth encodings) from every later log line."""
    global _pattern
    value = value.strip()
    if len(value) < MIN_SECRET_LENGTH:
        return
    forms = {value} | {base64.b64encode(f.encode()).decode() for f in (value, f":{value}")}
    with _registry_lock:
        if forms <= _secrets:
            return
        _secrets.update(forms)
        ordered = sorted(_secrets, key=len, reverse=True)  # longest first: no partial leftovers
        _pattern = re.compile("|".join(re.escape(s) for s in ordered))


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``***``."""
    pattern = _pattern
    return pattern.sub(REDACTED, text) if pattern is not None else text


def mask_token(pat: str) -> str:
    """What the UI shows for a PAT: its length only, never any of its characters."""
    return f"<PAT, {len(pat.strip())} chars>"


class SecretRedactor(logging.Filter):
    """Replaces registered secrets by ``***`` in a record's message, arguments and traceback.

    Attach it to every handler (``handler.addFilter(SecretRedactor())``): a
    filter on a logger does not see records propagated from child loggers.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; never drops it."""
        if _pattern is None:
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string: logging reports it, redacted
            message = f"{record.msg} {record.args}"
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info:
            # Keep only the redacted text: a formatter that renders the exception
            # itself (or its local variables) could print the secret again.
            text = record.exc_text or logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
            record.exc_text = redact(text)
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
