"""The HTTP side of the metrics: ``/metrics`` served by one thread, whatever the clients do.

The port is reachable by every local user (and, on a non-loopback address, by
the network), so a client must not be able to cost the daemon more than a
bounded share of its file descriptors or threads: one background thread runs
its own asyncio loop (never the supervisor's, so a slow scrape cannot delay
it), at most `serving.MAX_CLIENTS` connections are served at once and any more
are closed as soon as they are accepted, a request must arrive complete within
`serving.REQUEST_TIMEOUT` seconds, and each connection answers one request.
What scrapes read (`metrics.Metrics`) is either thread-safe (counters,
histograms) or an immutable snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import threading

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from gpuci_tui.core.config.observe import parse_listen
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.host.control.serving import MAX_CLIENTS, REQUEST_TIMEOUT, BoundedListener

log = logging.getLogger("gpuci_tui.metrics")

#: The most a request head may hold (a scraper sends a few hundred bytes).
MAX_HEAD = 8192


class MetricsListenError(GpuciError):
    """The metrics endpoint could not listen on its address (port taken, no permission, …)."""


class MetricsServer:
    """Serves ``/metrics`` of one registry on ``[metrics] listen``."""

    def __init__(
        self,
        registry: CollectorRegistry,
        listen: str,
        *,
        max_clients: int = MAX_CLIENTS,
        timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        """Serve ``registry`` on ``listen`` (``HOST:PORT``, validated by the configuration)."""
        self.registry = registry
        self.listen = listen
        self.address, self.port = parse_listen(listen)
        self.max_clients = max_clients
        self.timeout = timeout
        self._listener: BoundedListener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def clients(self) -> int:
        """Connections being served now."""
        return self._listener.clients if self._listener is not None else 0

    @property
    def rejected(self) -> int:
        """Connections closed at once because `max_clients` were being served."""
        return self._listener.rejected if self._listener is not None else 0

    @property
    def url(self) -> str:
        """Where Prometheus scrapes, e.g. ``http://127.0.0.1:9464/metrics``."""
        return f"http://{self.address}:{self.port}/metrics"

    def start(self) -> None:
        """Bind here (so a taken port fails now) and serve from one daemon thread.

        Raises:
            MetricsListenError: the address cannot be bound, with what to do about it.
        """
        family = socket.AF_INET6 if ":" in self.address else socket.AF_INET
        try:
            sock = socket.create_server((self.address, self.port), family=family, backlog=128)
        except OSError as exc:
            raise MetricsListenError(_bind_advice(self.listen, exc)) from None
        self.port = sock.getsockname()[1]
        loop = self._loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(loop, sock, started), name="metrics-http", daemon=True
        )
        self._thread.start()
        started.wait(10.0)
        log.info("Prometheus metrics on %s", self.url)

    def _run(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, started: threading.Event
    ) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve_forever(sock, started))
        finally:
            loop.close()

    async def _serve_forever(self, sock: socket.socket, started: threading.Event) -> None:
        self._stopped = asyncio.Event()
        listener = self._listener = BoundedListener(
            sock,
            self._client,
            what=f"metrics endpoint {self.listen}",
            max_clients=self.max_clients,
            limit=MAX_HEAD,
        )
        listener.start()
        started.set()
        try:
            await self._stopped.wait()
        finally:
            listener.close()
            await asyncio.gather(*listener.tasks, return_exceptions=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self.timeout):
                head = await reader.readuntil(b"\r\n\r\n")
                status, body, kind = self._answer(head)
                writer.write(
                    f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + (b"" if head.startswith(b"HEAD ") else body)
                )
                await writer.drain()
        except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # gone, too slow or too big: nothing to tell a client that does not listen
        finally:
            _abort(writer)

    def _answer(self, head: bytes) -> tuple[str, bytes, str]:
        text = "text/plain; charset=utf-8"
        method, _, rest = head.partition(b" ")
        target = rest.split(b" ", 1)[0].split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            return "405 Method Not Allowed", b"only GET and HEAD\n", text
        if target not in (b"/metrics", b"/"):
            return "404 Not Found", b"metrics are at /metrics\n", text
        return "200 OK", generate_latest(self.registry), CONTENT_TYPE_LATEST

    def close(self) -> None:
        """Stop serving and release the port (waits for the serving thread)."""
        loop, stopped, thread = self._loop, self._stopped, self._thread
        if loop is None or thread is None:
            return
        if stopped is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stopped.set)
        thread.join(5.0)
        self._loop = self._thread = self._stopped = None


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close now, without waiting for the peer (it may never read)."""
    transport = writer.transport
    if not transport.is_closing():
        transport.abort()


def _bind_advice(listen: str, exc: OSError) -> str:
    where = f"[metrics] listen = {listen!r}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot serve metrics on {listen}: the port is already in use (another exporter, "
            f"or another gpuci-tui run). Choose a free port in {where} of the configuration, "
            "or remove the line to run without metrics."
        )
    if exc.errno == errno.EACCES:
        return (
            f"cannot serve metrics on {listen}: permission denied (ports below 1024 need "
            f"privileges). Choose a port from 1024 up in {where}."
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"cannot serve metrics on {listen}: this machine has no such address. Use "
            f"127.0.0.1, or one of this machine's addresses, in {where}."
        )
    return f"cannot serve metrics on {listen}: {exc.strerror or exc}. Check {where}."
