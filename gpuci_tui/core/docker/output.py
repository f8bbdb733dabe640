"""Following a container's output line by line, without keeping it.

Docker's log stream (``logs(stream=True, follow=True)``) blocks in a socket read
until the container writes or ends, and docker-py switches the socket's timeout
off for it. So a follower is ended from outside: `OpenStreams` remembers each
open stream with its caller's ``stop`` event, and one helper thread, alive only
while some stream is open, closes a stream soon after its ``stop`` is set (which
ends the blocked read). `lines_of` turns the stream's chunks into lines and
keeps nothing but the current, unfinished line, cut at `MAX_LINE_BYTES`.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Iterable, Iterator

log = logging.getLogger("gpuci_tui.runtime")

#: Bytes of one line kept (a job may print megabytes without a newline; the rest is dropped).
MAX_LINE_BYTES = 4096
#: How often the helper thread looks for streams to close.
CLOSE_POLL = 0.2


def lines_of(chunks: Iterable[bytes], stop: threading.Event) -> Iterator[str]:
    """The lines in ``chunks`` (each without its end of line), until ``stop`` is set.

    Only the unfinished line is kept between chunks, cut at `MAX_LINE_BYTES`.
    """
    partial = b""
    cut = False
    for chunk in chunks:
        if stop.is_set():
            return
        *done, rest = chunk.split(b"\n")
        for piece in done:
            line = partial + piece if not cut else partial
            partial, cut = b"", False
            yield line[:MAX_LINE_BYTES].decode("utf-8", "replace").rstrip("\r")
        if not cut:
            partial += rest
            if len(partial) > MAX_LINE_BYTES:
                partial, cut = partial[:MAX_LINE_BYTES], True
    if partial and not stop.is_set():
        yield partial.decode("utf-8", "replace").rstrip("\r")


class OpenStreams:
    """The log streams being followed, each closed soon after its ``stop`` is set."""

    def __init__(self, poll: float = CLOSE_POLL) -> None:
        """Close streams within ``poll`` seconds of their stop (thread-safe)."""
        self._poll = poll
        self._lock = threading.Lock()
        self._open: dict[int, tuple[threading.Event, object]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, stop: threading.Event, stream: object) -> int:
        """Watch ``stream``; returns the token to `remove` it with."""
        with self._lock:
            token = next(self._ids)
            self._open[token] = (stop, stream)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="gpuci-docker-logs", daemon=True
                )
                self._thread.start()
        return token

    def remove(self, token: int) -> None:
        """Stop watching (the follower ended); the stream is closed here."""
        with self._lock:
            entry = self._open.pop(token, None)
        if entry is not None:
            close_quietly(entry[1])

    def _watch(self) -> None:
        while True:
            stopped: list[object] = []
            with self._lock:
                if not self._open:
                    self._thread = None
                    return
                for token, (stop, stream) in list(self._open.items()):
                    if stop.is_set():
                        stopped.append(stream)
                        del self._open[token]
            for stream in stopped:
                close_quietly(stream)
            time.sleep(self._poll)


def close_quietly(stream: object) -> None:
    """Close a docker-py stream; a failure (already closed, engine gone) is no error."""
    close = getattr(stream, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            close()
