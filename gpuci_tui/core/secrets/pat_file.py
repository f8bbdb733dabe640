"""The PAT as a file: ``GPUCI_PAT_FILE``, or the systemd credential ``gpuci-pat``.

A service has no terminal to unlock a keyring on, so it gets the PAT from a
file only its user can read: the one ``GPUCI_PAT_FILE`` names, or the systemd
credential `CREDENTIAL_NAME` (``LoadCredential=gpuci-pat:PATH`` or
``LoadCredentialEncrypted=`` in the unit; systemd hands it over as
``$CREDENTIALS_DIRECTORY/gpuci-pat``, readable by the service alone).
`SERVICE_ADVICE` says so in the words every "no terminal" message uses.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuci_tui.core.errors import GpuciError

log = logging.getLogger(__name__)

PAT_FILE_MAX = 64 * 1024
CREDENTIAL_NAME = "gpuci-pat"
"""The systemd credential gpuci-tui reads the PAT from (``$CREDENTIALS_DIRECTORY/gpuci-pat``)."""
SERVICE_ADVICE = (
    "A service gets the PAT from a file instead: a systemd credential (in its unit "
    f"LoadCredential={CREDENTIAL_NAME}:/etc/gpuci-tui/pat, or LoadCredentialEncrypted=; "
    f"gpuci-tui reads $CREDENTIALS_DIRECTORY/{CREDENTIAL_NAME}), or GPUCI_PAT_FILE naming "
    'a file that holds the PAT on one line (chmod 600). See docs/identity.md, "The PAT".'
)


class TokenFileError(GpuciError):
    """``GPUCI_PAT_FILE`` (or the systemd credential) names a file that cannot be used."""


@dataclass(frozen=True)
class SecretFile:
    """The file a secret is read from, and what named it (for messages)."""

    path: Path
    named_by: str
    """Its variable (``GPUCI_PAT_FILE``) or ``the systemd credential gpuci-pat``."""

    @property
    def subject(self) -> str:
        """How a message about the file begins: what names it, and the file."""
        if self.named_by.startswith("the "):
            return f"{self.named_by[0].upper()}{self.named_by[1:]} ({self.path})"
        return f"{self.named_by} names {self.path}, which"


def secret_file(environ: Mapping[str, str], variable: str, credential: str) -> SecretFile | None:
    """The file named by ``variable``, else the systemd credential ``credential``; or None.

    The credential counts only when its file exists: a unit may load other
    credentials (a client secret) and not this one.
    """
    named = environ.get(variable, "").strip()
    if named:
        return SecretFile(Path(named).expanduser(), variable)
    directory = environ.get("CREDENTIALS_DIRECTORY", "").strip()
    if directory and os.path.lexists(Path(directory) / credential):
        return SecretFile(Path(directory) / credential, f"the systemd credential {credential}")
    return None


def pat_file(environ: Mapping[str, str]) -> SecretFile | None:
    """The PAT's file: ``GPUCI_PAT_FILE``, else the systemd credential ``gpuci-pat``."""
    return secret_file(environ, "GPUCI_PAT_FILE", CREDENTIAL_NAME)


class PatFileReader:
    """Reads the PAT's file; warns once per file and mode when others may read it."""

    def __init__(self) -> None:
        self._warned: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def read(self, source: SecretFile) -> str:
        """The file's text (not yet checked as a PAT).

        Raises:
            TokenFileError: missing, unreadable, not a regular file, too large or not text.
        """
        path = source.path
        where = source.subject
        unset = "unset GPUCI_PAT_FILE" if source.named_by == "GPUCI_PAT_FILE" else "fix the unit"
        try:
            # O_NONBLOCK: a FIFO must not hang us; it is rejected as "not a regular file".
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise TokenFileError(
                f"{where} does not exist; create it (the PAT on one line, chmod 600) or {unset}."
            ) from None
        except OSError as exc:
            raise TokenFileError(
                f"{where} cannot be read ({exc.strerror}); make it readable by this user "
                "(owned by you, chmod 600)."
            ) from None
        try:
            info = os.fstat(fd)
            regular = stat.S_ISREG(info.st_mode)
            data = _read_up_to(fd, PAT_FILE_MAX + 1) if regular else b""
        finally:
            os.close(fd)
        if not regular:
            raise TokenFileError(f"{where} is not a regular file; point it at the PAT file.")
        if len(data) > PAT_FILE_MAX:
            raise TokenFileError(f"{where} is too large to hold a PAT; point it at the PAT file.")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            with self._lock:
                first = (str(path), mode) not in self._warned
                self._warned.add((str(path), mode))
            if first:
                log.warning(
                    "%s %s is open to group or others (mode %04o); restrict it: chmod 600 %s",
                    source.named_by,
                    path,
                    mode,
                    path,
                )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise TokenFileError(f"{where} is not text; it must hold only the PAT.") from None


def _read_up_to(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size < limit and (chunk := os.read(fd, limit - size)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
