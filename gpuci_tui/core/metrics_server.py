"""The HTTP side of the metrics: prometheus_client's WSGI server in a background thread.

Scrapes are served from that thread, never from the supervisor's event loop,
so a slow scraper cannot delay the supervisor; what they read (`metrics.Metrics`)
is either thread-safe (counters, histograms) or an immutable snapshot.
"""

from __future__ import annotations

import errno
import logging
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_wsgi_server

from .config_observe import parse_listen
from .protocols import GpuciError

log = logging.getLogger("gpuci_tui.metrics")


class MetricsListenError(GpuciError):
    """The metrics endpoint could not listen on its address (port taken, no permission, …)."""


class MetricsServer:
    """Serves ``/metrics`` of one registry on ``[metrics] listen``."""

    def __init__(self, registry: CollectorRegistry, listen: str) -> None:
        """Serve ``registry`` on ``listen`` (``HOST:PORT``, validated by the configuration)."""
        self.registry = registry
        self.listen = listen
        self.address, self.port = parse_listen(listen)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Where Prometheus scrapes, e.g. ``http://127.0.0.1:9464/metrics``."""
        return f"http://{self.address}:{self.port}/metrics"

    def start(self) -> None:
        """Bind and serve in a daemon thread.

        Raises:
            MetricsListenError: the address cannot be bound, with what to do about it.
        """
        try:
            self._server, self._thread = start_wsgi_server(
                self.port, addr=self.address, registry=self.registry
            )
        except OSError as exc:
            raise MetricsListenError(_bind_advice(self.listen, exc)) from None
        log.info("Prometheus metrics on %s", self.url)

    def close(self) -> None:
        """Stop serving and release the port (waits for the serving thread)."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5.0)
        self._server = self._thread = None


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
