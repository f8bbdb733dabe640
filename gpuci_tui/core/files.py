"""The one atomic file writer: the config, the saved intent, the GPU faults and the PAT file.

Temp file in the same directory, fsync, rename, fsync the directory: a crash
or a power cut leaves the old file or the new one under the final name, never
a half-written one, and the rename itself survives the power cut.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(target: Path, data: bytes | str, *, mode: int = 0o600) -> None:
    """Replace ``target`` with ``data``, atomically and durably, readable as ``mode``.

    The temp file is created with ``mode`` (0600 by default) before a byte is
    written, so a secret is never readable by others, even for a moment; a
    symlink at the temp name cannot exist (``mkstemp`` creates it exclusively).

    Args:
        target: The file to replace; its directory must exist.
        data: The whole new content (``str`` is written as UTF-8).
        mode: The permission bits of the new file.

    Raises:
        OSError: the directory cannot be written (the old file is left as it was).
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    directory = target.parent
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (some filesystems refuse, which is harmless)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
