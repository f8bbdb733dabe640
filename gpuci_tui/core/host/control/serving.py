"""Limits shared by the daemon's two servers (control socket, metrics endpoint).

Both are reachable by processes the daemon does not trust to behave: the metrics
port by every local user, the control socket by any process of the owner. Each
server therefore caps its clients, reads requests with deadlines and a size
limit, and never spends a thread or an unbounded amount of memory per
connection; a client over the cap is closed at once (`BoundedListener`). Accept
failures (the process is out of file descriptors) are logged at most once a
minute, with a count, so a flood cannot fill the disk through the log; the
supervisor keeps running meanwhile.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
import time
from collections.abc import Awaitable, Callable

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


#: accept() errors that mean "out of resources, try again later", not a broken listener.
_EXHAUSTED = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
#: Seconds a listener pauses after such an error (asyncio's own choice, too).
ACCEPT_PAUSE = 1.0


class BoundedListener:
    """Accepts connections on a listening socket for an asyncio handler, never more than a cap.

    asyncio's own servers accept up to their backlog in one go and hand each
    connection to a task that runs later, so a burst of connections holds that
    many descriptors before any handler could refuse one. Here a connection over
    the cap is closed in the same step that accepted it (after ``busy`` had its
    say, without blocking), so the listener never holds more than ``max_clients``
    descriptors. Out of descriptors, it pauses for `ACCEPT_PAUSE` and logs at
    most once a minute.
    """

    def __init__(
        self,
        sock: socket.socket,
        handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
        *,
        what: str,
        max_clients: int = MAX_CLIENTS,
        limit: int = 1 << 16,
        busy: Callable[[socket.socket], object] | None = None,
    ) -> None:
        """Serve ``sock`` (bound and listening) with ``handler``; ``what`` names it in the log."""
        self.sock = sock
        self.handler = handler
        self.what = what
        self.max_clients = max_clients
        self.limit = limit
        self.busy = busy
        self.rejected = 0
        """Connections closed at once because `max_clients` were being served."""
        self.tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._busy_log = RateLimitedLog(log)
        self.accept_errors = RateLimitedLog(log)

    @property
    def clients(self) -> int:
        """Connections being served now."""
        return len(self.tasks)

    def start(self) -> None:
        """Begin accepting (from the running loop)."""
        self._loop = asyncio.get_running_loop()
        self.sock.setblocking(False)
        self._loop.add_reader(self.sock.fileno(), self._ready)

    def close(self) -> None:
        """Stop accepting, close the listening socket and cancel the clients."""
        if self._loop is not None and self.sock.fileno() >= 0:
            self._loop.remove_reader(self.sock.fileno())
        self.sock.close()
        for task in list(self.tasks):
            task.cancel()

    def _ready(self) -> None:
        assert self._loop is not None
        for _ in range(64):  # then let the loop run the rest of the daemon
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno not in _EXHAUSTED:
                    raise
                self.accept_errors.warning(
                    "%s cannot accept connections: %s. They wait until descriptors are free; "
                    "raise the daemon's file limit (LimitNOFILE=) if this persists.",
                    self.what,
                    exc,
                )
                self._loop.remove_reader(self.sock.fileno())
                self._loop.call_later(ACCEPT_PAUSE, self._resume)
                return
            if len(self.tasks) >= self.max_clients:
                self._refuse(conn)
                continue
            task = self._loop.create_task(self._serve(conn))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def _resume(self) -> None:
        if self._loop is not None and self.sock.fileno() >= 0:
            self._loop.add_reader(self.sock.fileno(), self._ready)

    def _refuse(self, conn: socket.socket) -> None:
        self.rejected += 1
        self._busy_log.warning(
            "%s: %d clients already connected; closing new connections (%d so far)",
            self.what,
            self.max_clients,
            self.rejected,
        )
        conn.setblocking(False)
        try:
            if self.busy is not None:
                self.busy(conn)
        except OSError:
            pass  # it does not read: closing is all it gets
        finally:
            conn.close()

    async def _serve(self, conn: socket.socket) -> None:
        try:
            if conn.family == socket.AF_UNIX:
                reader, writer = await asyncio.open_unix_connection(sock=conn, limit=self.limit)
            else:
                reader, writer = await asyncio.open_connection(sock=conn, limit=self.limit)
        except OSError:
            conn.close()
            return
        await self.handler(reader, writer)


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
