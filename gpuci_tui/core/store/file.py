"""The history file on disk: damaged ones are moved aside, replaced ones are reopened.

The history is a convenience, never a reason to stop supervising: a file that is
not a database (garbage written over it, a half-copied backup) is renamed to
``history.sqlite3.corrupt-YYYYmmddTHHMMSS`` (with its -wal and -shm files) and a
new one is started, and ``status`` and the console say so as long as the moved
file is there (`moved_aside`). A file replaced, deleted or truncated under a
running daemon is noticed before the next write (`FileIdentity`) and reopened,
so later jobs are not written into a file nobody will read again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from gpuci_tui.core.store import schema

log = logging.getLogger(__name__)

CORRUPT_SUFFIX = ".corrupt-"


def open_or_move_aside(path: Path) -> tuple[sqlite3.Connection, Path | None]:
    """Open (create, migrate) the history; a damaged file is moved aside first.

    Returns:
        The connection, and where a damaged file was moved (None when it opened).

    Raises:
        sqlite3.Error: even a new file cannot be opened (a full disk, no permission).
    """
    try:
        return schema.open_writer(path), None
    except sqlite3.DatabaseError as exc:
        if not path.exists() or isinstance(exc, sqlite3.OperationalError) and not _damaged(exc):
            raise
        moved = move_aside(path)
        log.warning(
            "the job history %s could not be opened (%s): moved to %s and a new one started",
            path, exc, moved,
        )  # fmt: skip
        return schema.open_writer(path), moved


def _damaged(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "disk image" in text


def move_aside(path: Path) -> Path:
    """Rename ``path`` (and its -wal/-shm) to ``path.corrupt-TIMESTAMP``; return the new name."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}{CORRUPT_SUFFIX}{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}{CORRUPT_SUFFIX}{stamp}-{n}")
    os.replace(path, target)
    for extra in ("-wal", "-shm"):
        side = path.with_name(path.name + extra)
        if side.exists():
            os.replace(side, target.with_name(target.name + extra))
    return target


def drop_stale_wal(path: Path) -> None:
    """Move aside the -wal left by a file that was replaced (and drop its -shm index).

    SQLite cannot tell that a WAL belongs to another database file: opening the
    new file beside the old WAL would replay the old file's pages into it.
    """
    wal = path.with_name(path.name + "-wal")
    with contextlib.suppress(OSError):
        if wal.stat().st_size > 0:
            os.replace(wal, wal.with_name(f"{wal.name}.stale-{time.strftime('%Y%m%dT%H%M%S')}"))
        else:
            wal.unlink()
    with contextlib.suppress(OSError):
        path.with_name(path.name + "-shm").unlink()


def moved_aside(path: Path) -> list[Path]:
    """Damaged histories moved aside next to ``path``, oldest first."""
    try:
        found = [
            p
            for p in path.parent.glob(f"{path.name}{CORRUPT_SUFFIX}*")
            if not p.name.endswith(("-wal", "-shm"))
        ]
    except OSError:
        return []
    return sorted(found)


def damage_notice(path: Path) -> str | None:
    """What ``status`` and the console say while a damaged history lies next to ``path``."""
    moved = moved_aside(path)
    if not moved:
        return None
    last = moved[-1]
    more = f" ({len(moved)} damaged files in all)" if len(moved) > 1 else ""
    return (
        f"the job history was damaged and moved to {last}{more}; a new one was started. "
        f"Inspect or delete the moved file (rm {last}) to clear this notice."
    )


@dataclass(frozen=True)
class FileIdentity:
    """Which file a connection writes to: device, inode, and the smallest size since."""

    device: int
    inode: int
    size: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity | None:
        """The identity of the file at ``path`` now (None: there is none)."""
        try:
            info = path.stat()
        except OSError:
            return None
        return cls(info.st_dev, info.st_ino, info.st_size)

    def replaced_by(self, now: FileIdentity | None) -> bool:
        """Whether ``now`` is another file, no file, or this one truncated.

        SQLite never shrinks the main file without VACUUM (which the history
        does not run), so a smaller file was truncated under us.
        """
        return (
            now is None
            or (now.device, now.inode) != (self.device, self.inode)
            or now.size < self.size
        )
