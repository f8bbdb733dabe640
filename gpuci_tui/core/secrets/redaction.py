"""The one redactor: every secret, in every form, becomes ``***`` wherever text leaves us.

`secrets.TokenStore` registers every PAT it hands out (and `entra_secrets` every
client secret, certificate passphrase and line of a private key), and access
tokens (JWTs) and PEM private keys are recognised by their shape, so any later log line,
argument or traceback that contains it (or its HTTP Basic-auth encoding) shows
``***`` instead. The same rule is applied to everything that leaves the daemon:
container log tails as they are read, every line written to the control socket
(status, events, the fleet bridge), history rows, the Azure DevOps client's and
the Docker runtime's error messages (which pass the secret explicitly, in case it
was not registered), and the CLI's output.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections.abc import Iterable

REDACTED = "***"
SHAPES = re.compile(
    # A JWT (an Entra access token, a certificate assertion): header.payload.signature,
    # each base64url; the header always starts with '{"' encoded, i.e. "eyJ".
    r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    # A private key in PEM, whole (a certificate's key printed by mistake).
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)
"""Secrets recognised by their shape rather than registered one by one: access tokens
change every hour, and registering each would grow the registry for ever."""
MIN_SECRET_LENGTH = 8
"""Shorter values are not PATs, and redacting them would garble ordinary log text."""

_registry_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None


def secret_forms(value: str) -> set[str]:
    """The forms a secret takes in text: itself and its HTTP Basic-auth encodings.

    Empty for a value shorter than `MIN_SECRET_LENGTH` (not a PAT; masking it
    would garble ordinary text).
    """
    value = value.strip()
    if len(value) < MIN_SECRET_LENGTH:
        return set()
    return {value} | {base64.b64encode(f.encode()).decode() for f in (value, f":{value}")}


def register_secret(value: str) -> None:
    """Redact ``value`` (and its HTTP Basic-auth encodings) from every later log line."""
    register_secrets((value,))


def register_secrets(values: Iterable[str]) -> None:
    """Redact each of ``values`` (see `register_secret`), with one rebuild of the pattern.

    The pattern is rebuilt from every registered form, so its cost grows with the
    registry: a private key's 26 lines registered one by one rebuilt it 26 times
    (20 s in a test process whose registry held 7,700 forms; one rebuild is 1/26 of it).
    """
    global _pattern
    forms = set().union(*(secret_forms(value) for value in values))
    if not forms:
        return
    with _registry_lock:
        if forms <= _secrets:
            return
        _secrets.update(forms)
        ordered = sorted(_secrets, key=len, reverse=True)  # longest first: no partial leftovers
        _pattern = re.compile("|".join(re.escape(s) for s in ordered))


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with every registered secret, and each of ``secrets``, replaced by ``***``.

    Pass a secret explicitly where it may not be registered (a client given its
    token directly); the registered ones are always applied.
    """
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    if "eyJ" in text or "PRIVATE KEY" in text:  # cheap test first: most text has neither
        text = SHAPES.sub(REDACTED, text)
    extra = set().union(*(secret_forms(s) for s in secrets if s)) if secrets else set()
    for form in sorted(extra, key=len, reverse=True):  # longest first: no partial leftovers
        text = text.replace(form, REDACTED)
    return text


def redact_lines(lines: Iterable[str]) -> tuple[str, ...]:
    """Each line redacted (log tails)."""
    return tuple(redact(line) for line in lines)


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
