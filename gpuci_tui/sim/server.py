r"""`SimServer`: a `SimOrg` over real HTTP on a loopback address.

The public ``_apis`` endpoints answer with the shapes and behaviours of Azure
DevOps (see azure-devops-api.md §7 and wire.py); the emulator's endpoints live
under ``/_sim/`` (private_api.py). URLs may carry the organisation segment
(``/simorg/_apis/...``) or not.

Run standalone (tmux and shell-script tests)::

    python -m gpuci_tui.sim.server --pat-file F --pool gpu [--port 0] \\
        [--jobs-per-minute N] [--job-seconds A:B]

prints the URL as its first stdout line and serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ipaddress
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from gpuci_tui.sim.foreign import add_foreign_agents
from gpuci_tui.sim.handler import SimRequestHandler
from gpuci_tui.sim.jobs import JobFeeder
from gpuci_tui.sim.org import SimOrg


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], sim: SimServer) -> None:
        self.sim = sim
        self.connections: set[socket.socket] = set()
        self.busy = 0
        """Requests being answered (a keep-alive connection between requests is not busy)."""
        self._cuts: dict[Any, threading.Event] = {}
        """Per connection answering a request: set when `drop_connections` cuts it."""
        self._conn_lock = threading.Lock()
        super().__init__(address, SimRequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conn_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def request_started(self) -> None:
        """A request is being answered (see `wait_answered`)."""
        with self._conn_lock:
            self.busy += 1

    def request_done(self) -> None:
        """Its answer is written."""
        with self._conn_lock:
            self.busy -= 1

    def wait_answered(self, timeout: float) -> None:
        """Let requests under way (long polls just woken) write their answers first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._conn_lock:
                if self.busy == 0:
                    return
            time.sleep(0.01)

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    @contextlib.contextmanager
    def cut_signal(self, connection: Any) -> Iterator[threading.Event]:
        """An event set if ``connection`` is cut while its request is being answered."""
        cut = threading.Event()
        with self._conn_lock:
            self._cuts[connection] = cut
        try:
            yield cut
        finally:
            with self._conn_lock:
                self._cuts.pop(connection, None)

    def drop_connections(self) -> None:
        """Cut open (keep-alive, long-poll) connections, as a network outage would.

        A long poll waiting inside the organisation on a cut connection ends too
        (its `cut_signal`): left waiting, it would take the first job queued after
        the outage and lose it, its answer having nowhere to go.
        """
        with self._conn_lock:
            conns = list(self.connections)
            cuts = [self._cuts[c] for c in conns if c in self._cuts]
        for cut in cuts:
            cut.set()
        if cuts:
            self.sim.org.wake()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: object, client_address: object) -> None:
        """Clients hanging up mid-answer are normal here (killed agents); stay quiet."""


class SimServer:
    """Serve a `SimOrg` over HTTP on 127.0.0.1 (or another loopback address).

    Args:
        org: The organisation.
        host: A loopback address; anything else is refused.
        port: 0 picks a free port; the same port is kept across "unreachable" faults.

    Attributes:
        log_lines: One line per request (method, path, status, time), in memory only.
    """

    def __init__(self, org: SimOrg, host: str = "127.0.0.1", port: int = 0) -> None:
        if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"SimServer only listens on loopback addresses, not {host}")
        self.org = org
        self.host = host
        self.port = port
        self.log_lines: collections.deque[str] = collections.deque(maxlen=20_000)
        self.stopping = threading.Event()
        """Set by `stop`; it also ends pending long polls."""
        self._httpd: _HTTPServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._monitor: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ life cycle

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (the organisation segment is optional in paths)."""
        return f"http://{self.host}:{self.port}"

    @property
    def org_url(self) -> str:
        """The URL with the organisation segment, like ``https://dev.azure.com/ORG``."""
        return f"{self.url}/{self.org.name}"

    @property
    def listening(self) -> bool:
        """False while an "unreachable" fault holds the port closed."""
        return self._httpd is not None

    def start(self) -> SimServer:
        """Bind and serve in background threads; returns self."""
        self._bind()
        self._monitor = threading.Thread(target=self._watch_faults, name="sim-faults", daemon=True)
        self._monitor.start()
        return self

    def stop(self) -> None:
        """Stop serving and end pending long polls."""
        self.stopping.set()
        self.org.wake()
        self._unbind(answer_first=True)
        if self._monitor is not None:
            self._monitor.join(2)

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _bind(self) -> None:
        with self._lock:
            if self._httpd is not None:
                return
            httpd = _HTTPServer((self.host, self.port), self)
            self.port = httpd.server_address[1]
            thread = threading.Thread(
                target=httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"sim-http-{self.port}",
                daemon=True,
            )
            self._httpd, self._serve_thread = httpd, thread
            thread.start()

    def _unbind(self, answer_first: bool = False) -> None:
        with self._lock:
            httpd = self._httpd
            if httpd is not None:
                httpd.shutdown()
                httpd.server_close()  # closing the listening socket: connection refused
                if answer_first:  # stopping, not an outage: woken polls get their answer
                    httpd.wait_answered(2.0)
                httpd.drop_connections()
                self._httpd = None

    def _watch_faults(self) -> None:
        """Close the port while an "unreachable" fault is armed; re-bind the same port after."""
        while not self.stopping.wait(0.02):
            down = self.org.faults.unreachable_now()
            if down and self._httpd is not None:
                self._unbind()
            elif not down and self._httpd is None:
                try:
                    self._bind()
                except OSError:
                    continue  # port briefly busy; try again on the next tick

    def log(self, line: str) -> None:
        """Keep one request log line."""
        self.log_lines.append(line)


# --------------------------------------------------------------------------- command line


def _duration_range(text: str) -> tuple[float, float]:
    low, _, high = text.partition(":")
    try:
        lo, hi = float(low), float(high or low)
    except ValueError:
        raise argparse.ArgumentTypeError("use A:B seconds, e.g. 20:90") from None
    if lo < 0 or hi < lo:
        raise argparse.ArgumentTypeError("use A:B with 0 <= A <= B")
    return lo, hi


def main(argv: list[str] | None = None) -> int:
    """Run a simulated organisation until SIGTERM/SIGINT; print its URL first."""
    parser = argparse.ArgumentParser(
        prog="python -m gpuci_tui.sim.server",
        description="Serve a simulated Azure DevOps organisation on 127.0.0.1.",
    )
    parser.add_argument("--pat-file", required=True, type=Path, help="file holding the valid PAT")
    parser.add_argument("--pool", action="append", help="pool name (repeatable; default gpu)")
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--org", default="simorg", help="organisation name")
    parser.add_argument("--jobs-per-minute", type=float, default=0.0, help="queue jobs steadily")
    parser.add_argument(
        "--job-seconds", type=_duration_range, default=(20.0, 90.0), help="job length A:B"
    )
    parser.add_argument("--heartbeat-timeout", type=float, default=6.0)
    parser.add_argument(
        "--foreign-agents", type=int, default=0, help="agents of other hosts in the first pool"
    )
    args = parser.parse_args(argv)
    try:
        pat = args.pat_file.read_text().strip()
    except OSError as exc:
        print(f"error: cannot read the PAT file {args.pat_file}: {exc.strerror}", file=sys.stderr)
        return 2
    if not pat:
        print(f"error: the PAT file {args.pat_file} is empty", file=sys.stderr)
        return 2
    org = SimOrg(args.org, heartbeat_timeout=args.heartbeat_timeout)
    org.add_pat(pat)
    pool_ids = [org.add_pool(name) for name in args.pool or ["gpu"]]
    add_foreign_agents(org, pool_ids[0], max(0, args.foreign_agents))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server = SimServer(org, port=args.port).start()
    except OSError as exc:
        print(f"error: cannot listen on 127.0.0.1:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2
    print(server.url, flush=True)
    feeder = None
    if args.jobs_per_minute > 0:
        feeder = JobFeeder(org, pool_ids[0], args.jobs_per_minute, args.job_seconds).start()
    while not stop.wait(0.5):
        pass
    if feeder is not None:
        feeder.stop()
    server.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess
    sys.exit(main())
