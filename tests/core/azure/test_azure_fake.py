"""A scripted HTTP server on 127.0.0.1 for precise fault injection in the Azure client tests.

`FakeAzure` answers each (method, path[, query]) route with the replies a test
scripted, in order (the last one repeats), and records every request it saw.
It can also hang (to provoke timeouts) or drop the connection without an
answer. The simulated organisation (`gpuci_tui.sim`) covers realistic
behaviour; this server covers the exact wire cases.

The tests at the bottom check the fake itself, so a broken fake cannot make
the client tests pass vacuously.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

PAT = "s3cretpat0123456789abcdefghijklmnopqrstuvwxyzABCDEF"
"""A PAT-shaped secret that must never leak."""


@dataclass
class Reply:
    """One scripted answer."""

    status: int = 200
    body: object = None
    """JSON-serialisable, or bytes sent as is; None sends an empty body."""
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json; charset=utf-8"
    hang: bool = False
    """Send nothing until the server stops (provokes a client timeout)."""
    drop: bool = False
    """Close the connection without any answer."""
    stall_body: bool = False
    """Send the headers and half the body, then nothing until the server stops."""


@dataclass(frozen=True)
class Seen:
    """One request the fake received."""

    method: str
    path: str
    """Below the organisation, e.g. ``_apis/distributedtask/pools``."""
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def q(self, name: str) -> str | None:
        """The single value of query parameter ``name``."""
        values = self.query.get(name)
        return values[0] if values else None


@dataclass
class _Route:
    method: str
    path: str
    query: Mapping[str, str]
    replies: list[Reply]
    served: int = 0


class FakeAzure:
    """A scripted Azure DevOps on 127.0.0.1 (random port), organisation ``/org``."""

    ORG = "org"

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self._routes: list[_Route] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass  # keep test output clean

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                prefix = f"/{FakeAzure.ORG}/"
                path = parts.path[len(prefix) :] if parts.path.startswith(prefix) else parts.path
                seen = Seen(
                    method=self.command,
                    path=path,
                    query=parse_qs(parts.query),
                    headers=dict(self.headers.items()),
                    body=body,
                )
                reply = fake._record_and_pick(seen)
                if reply.drop:
                    self.close_connection = True
                    return
                if reply.hang:
                    fake._release.wait(10)
                    self.close_connection = True
                    return
                payload = (
                    reply.body
                    if isinstance(reply.body, bytes)
                    else b""
                    if reply.body is None
                    else json.dumps(reply.body).encode()
                )
                self.send_response(reply.status)
                if payload:
                    self.send_header("Content-Type", reply.content_type)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if reply.stall_body:
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    fake._release.wait(10)
                    self.close_connection = True
                    return
                self.wfile.write(payload)

            do_GET = do_PATCH = do_DELETE = do_POST = do_PUT = _serve  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        """The listening port."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The organisation URL."""
        return f"http://127.0.0.1:{self.port}/{self.ORG}"

    def start(self) -> FakeAzure:
        """Start serving in a thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hanging handlers and stop."""
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def on(
        self, method: str, path: str, *replies: Reply, query: Mapping[str, str] | None = None
    ) -> None:
        """Script the replies to a route; later routes win over earlier ones."""
        with self._lock:
            self._routes.insert(
                0, _Route(method.upper(), path, dict(query or {}), list(replies or [Reply()]))
            )

    def requests_to(self, path: str) -> list[Seen]:
        """The requests received for ``path``."""
        with self._lock:
            return [s for s in self.seen if s.path == path]

    def _record_and_pick(self, seen: Seen) -> Reply:
        with self._lock:
            self.seen.append(seen)
            for route in self._routes:
                if route.method != seen.method or route.path != seen.path:
                    continue
                if any(seen.q(k) != v for k, v in route.query.items()):
                    continue
                reply = route.replies[min(route.served, len(route.replies) - 1)]
                route.served += 1
                return reply
        return Reply(404, {"message": f"no route for {seen.method} {seen.path}"})


def envelope(*items: object) -> dict[str, object]:
    """A ``{count, value}`` collection."""
    return {"count": len(items), "value": list(items)}


class FakeClock:
    """A clock that only moves when the client sleeps (or the test says so)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:  # 2027-01-15 08:00 UTC
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (connection refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    sock.close()
    return port


@pytest.fixture
def fake() -> Iterator[FakeAzure]:
    """A started `FakeAzure`, stopped afterwards."""
    server = FakeAzure().start()
    yield server
    server.stop()


# --------------------------------------------------------------------------- checks of the fake itself


def test_fake_serves_scripted_replies_in_order_and_records(fake: FakeAzure) -> None:
    fake.on("GET", "_apis/x", Reply(500), Reply(200, {"ok": 1}))
    first = requests.get(f"{fake.url}/_apis/x?a=1", timeout=5)
    second = requests.get(f"{fake.url}/_apis/x", timeout=5)
    third = requests.get(f"{fake.url}/_apis/x", timeout=5)
    assert [first.status_code, second.status_code, third.status_code] == [500, 200, 200]
    assert second.json() == {"ok": 1}
    assert [s.q("a") for s in fake.requests_to("_apis/x")] == ["1", None, None]


def test_fake_matches_query_and_answers_404_otherwise(fake: FakeAzure) -> None:
    fake.on("GET", "_apis/y", Reply(200, {"which": "filtered"}), query={"k": "v"})
    assert requests.get(f"{fake.url}/_apis/y?k=v", timeout=5).json() == {"which": "filtered"}
    assert requests.get(f"{fake.url}/_apis/y", timeout=5).status_code == 404


def test_closed_port_refuses() -> None:
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{closed_port()}/", timeout=5)
