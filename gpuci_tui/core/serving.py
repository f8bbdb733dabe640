"""Limits shared by the daemon's two servers (control socket, metrics endpoint).

Both are reachable by processes the daemon does not trust to behave: the metrics
port by every local user, the control socket by any process of the owner. Each
server therefore caps its clients, reads requests with deadlines and a size
limit, and never spends a thread or an unbounded amount of memory per
connection; a client over the cap is closed at once. Accept failures (the
process is out of file descriptors) are logged at most once a minute, with a
count, so a flood cannot fill the disk through the log; the supervisor keeps
running meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("gpuci_tui.serving")

#: Clients one server serves at once; more are closed as soon as they are accepted.
MAX_CLIENTS = 32
#: Seconds a client has to complete a request (or its first request) once connected.
REQUEST_TIMEOUT = 5.0
#: Seconds a connection may sit between two complete requests (a console's channel).
IDLE_TIMEOUT = 60.0
#: Nesting accepted in a JSON request (the protocol needs 4).
MAX_DEPTH = 32


class RateLimitedLog:
    """Logs one line per ``interval`` for a repeated condition, with how often it happened."""

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Report through ``logger`` at most once per ``interval`` seconds."""
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._last: float | None = None
        self._missed = 0
        self.total = 0

    def warning(self, message: str, *args: object) -> bool:
        """Log ``message`` now, or count it if a line went out less than ``interval`` ago.

        Returns True when a line was written.
        """
        self.total += 1
        now = self.clock()
        if self._last is not None and now - self._last < self.interval:
            self._missed += 1
            return False
        if self._missed:
            message += " (%d more like this in the last %.0f s)"
            args = (*args, self._missed, now - self._last if self._last is not None else 0.0)
        self.logger.warning(message, *args)
        self._last = now
        self._missed = 0
        return True


_ACCEPT_FAILED = "socket.accept() out of system resource"


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, what: str) -> RateLimitedLog:
    """Make ``loop`` report accept failures once a minute, without a traceback.

    asyncio retries a failed ``accept`` every second and, by default, logs each
    failure with its traceback; out of file descriptors, that is a line a second
    per server for as long as the condition lasts. Everything else still goes to
    the loop's previous handler.
    """
    limited = RateLimitedLog(log)
    previous = loop.get_exception_handler()

    def handler(the_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == _ACCEPT_FAILED:
            exc = context.get("exception")
            limited.warning(
                "%s cannot accept connections: %s. Connections wait until descriptors are "
                "free; raise the daemon's file limit (LimitNOFILE=) if this persists.",
                what,
                exc,
            )
            return
        if previous is not None:
            previous(the_loop, context)
        else:
            the_loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    return limited


def raise_nofile_limit() -> tuple[int, int, int]:
    """Raise the soft limit on open files to the hard limit; ``(before, after, hard)``.

    Every Docker call, agent log and client needs a descriptor; a service
    manager's default soft limit (often 1,024) is the first to run out.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft >= hard:
        return soft, soft, hard
    target = hard
    if hard == resource.RLIM_INFINITY:
        target = max(soft, 1 << 20) if soft != resource.RLIM_INFINITY else soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, soft, hard
    return soft, target, hard


class LineTooLongError(Exception):
    """A client sent more than the limit without a newline."""


class LineReader:
    """Newline-terminated requests from a stream, with a size limit and deadlines.

    Unlike ``StreamReader.readline``, a half-sent line is bounded in time: it must
    be completed within ``partial`` seconds of its first byte, while a connection
    between requests may stay silent for ``idle`` seconds.
    """

    def __init__(self, reader: asyncio.StreamReader, limit: int) -> None:
        """Read from ``reader``; lines longer than ``limit`` bytes are refused."""
        self.reader = reader
        self.limit = limit
        self._buffer = bytearray()
        self._deadline: float | None = None

    async def next(self, idle: float, partial: float) -> bytes | None:
        """The next line (with its newline), the unterminated rest at end of input, or None.

        Raises:
            TimeoutError: nothing came within ``idle`` s, or a line was not finished in time.
            LineTooLongError: the line exceeds the limit.
        """
        loop = asyncio.get_running_loop()
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                self._deadline = loop.time() + partial if self._buffer else None
                return line
            if len(self._buffer) > self.limit:
                self._buffer.clear()
                raise LineTooLongError
            left = idle if self._deadline is None else self._deadline - loop.time()
            timeout = max(0.0, left)
            chunk = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not chunk:
                rest = bytes(self._buffer)
                self._buffer.clear()
                return rest or None
            if not self._buffer:
                self._deadline = loop.time() + partial
            self._buffer += chunk


def too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    """True when ``value`` (parsed JSON) nests lists/objects deeper than ``limit``."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False
