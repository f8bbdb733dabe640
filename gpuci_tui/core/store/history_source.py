"""Where a history view takes its rows from: this host's file, or another host's daemon.

The history view (``h``) shows the finished jobs of the supervisor it is
about. On the daemon's own host it reads the history file itself, read-only
and with no daemon needed (`FileHistory`); a fleet console asks the host's
daemon for them over ssh (`gpuci_tui.core.fleet.remote_history`). Both
answer the same `JobQuery`, so one view serves both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from gpuci_tui.core.store.history import JobQuery, JobRecord, read_history


class HistorySource(Protocol):
    """Finished jobs of one supervisor, for the history view."""

    @property
    def where(self) -> str:
        """The host the rows come from, for the view's title (empty: this one)."""
        ...

    @property
    def nothing_yet(self) -> str:
        """What the view says when `read` finds no history at all yet."""
        ...

    def read(self, query: JobQuery) -> list[JobRecord] | None:
        """The jobs matching ``query``, newest first; None when no history exists yet.

        Blocking (a file or a network read): call it from a thread.

        Raises:
            GpuciError: the history cannot be read, saying why.
        """
        ...


class FileHistory:
    """The history file on this host, read-only (`read_history`)."""

    where = ""

    def __init__(self, path: Path) -> None:
        """Read ``path`` (it may not exist yet; it is never created here)."""
        self.path = path

    @property
    def nothing_yet(self) -> str:
        """Where the rows will be written."""
        return (
            "No jobs recorded yet: the supervisor daemon writes one row per finished job "
            f"to {self.path}."
        )

    def read(self, query: JobQuery) -> list[JobRecord] | None:
        """The file's jobs matching ``query`` (None: no file yet)."""
        return read_history(self.path, query)
