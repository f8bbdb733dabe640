"""HTTP request handling for `SimServer`: routing, auth, api-version, faults, answers.

What the handler needs of its server is said in `sim.serving` (`Served`, `Serving`),
not imported from `sim.server`, which imports this module: no import circle.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gpuci_tui.sim import jobrequests, locations, private_api, wire
from gpuci_tui.sim.demands import DemandSyntaxError, read_filter
from gpuci_tui.sim.org import MANAGE_SCOPE, READ_SCOPE
from gpuci_tui.sim.records import AgentRecord, PatRecord, SimAuthError, SimError, SimScopeError
from gpuci_tui.sim.registry import REGISTRY_HEADER, no_image_here
from gpuci_tui.sim.serving import Served, Serving

_P = "/_apis/distributedtask"
#: (regex, route template) — the template names the route in request stats.
ROUTES = [
    (re.compile(p, re.IGNORECASE), t)
    for p, t in (
        (r"/_apis/connectiondata", "/_apis/connectionData"),
        (r"/_apis", "/_apis"),
        (r"/_apis/resourceareas", "/_apis/ResourceAreas"),
        (_P + r"/pools", _P + "/pools"),
        (_P + r"/pools/(?P<pool>\d+)", _P + "/pools/{poolId}"),
        (_P + r"/pools/(?P<pool>\d+)/agents", _P + "/pools/{poolId}/agents"),
        (
            _P + r"/pools/(?P<pool>\d+)/agents/(?P<agent>\d+)",
            _P + "/pools/{poolId}/agents/{agentId}",
        ),
        (_P + r"/pools/(?P<pool>\d+)/jobrequests", _P + "/pools/{poolId}/jobrequests"),
        (
            _P + r"/pools/(?P<pool>\d+)/jobrequests/(?P<job>\d+)",
            _P + "/pools/{poolId}/jobrequests/{requestId}",
        ),
        (_P + r"/packages/agent", _P + "/packages/agent"),
    )
]
_API_VERSION = re.compile(r"^\d+\.\d+(-preview(\.\d+)?)?$")


class _Reply(Exception):  # noqa: N818 - control flow, not an error
    """Raised to answer a request early."""

    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


def _err(status: int, message: str, type_key: str) -> _Reply:
    return _Reply(status, wire.error(message, type_key))


class SimRequestHandler(BaseHTTPRequestHandler):
    """One request to the simulated organisation."""

    protocol_version = "HTTP/1.1"
    # The headers and the body go out in two writes: with Nagle's algorithm the body then
    # waited for the client's delayed ACK of the headers, 40 ms on every answer over a
    # kept-alive connection (a requests.Session: the daemon's client), 1.1 ms without.
    disable_nagle_algorithm = True
    server: Serving  # type: ignore[assignment]  # the stdlib types it as its base server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Quiet: the server keeps its own in-memory log."""

    def do_GET(self) -> None:  # noqa: D102, N802
        self._serve("GET")

    def do_HEAD(self) -> None:  # noqa: D102, N802
        self._serve("HEAD")

    def do_POST(self) -> None:  # noqa: D102, N802
        self._serve("POST")

    def do_PUT(self) -> None:  # noqa: D102, N802
        self._serve("PUT")

    def do_PATCH(self) -> None:  # noqa: D102, N802
        self._serve("PATCH")

    def do_DELETE(self) -> None:  # noqa: D102, N802
        self._serve("DELETE")

    def do_OPTIONS(self) -> None:  # noqa: D102, N802
        self._serve("OPTIONS")

    # ------------------------------------------------------------------ plumbing

    @property
    def sim(self) -> Served:
        """The server this request came to."""
        return self.server.sim

    def _serve(self, method: str) -> None:
        # Counted from here (not while a keep-alive connection waits for its next request),
        # so a stopping server lets a woken long poll write its answer first.
        self.server.request_started()
        try:
            self._answer(method)
        finally:
            self.server.request_done()

    def _answer(self, method: str) -> None:
        started = time.monotonic()
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        prefix = "/" + self.sim.org.name
        if path.lower().startswith(prefix.lower() + "/"):
            path = path[len(prefix) :]
        self.query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length > 0 else b""
        download = path.startswith("/_download/agent/")
        private = path.startswith("/_sim/")
        route = path if private else "/_download/agent" if download else "?"
        try:
            if path == "/v2" or path.startswith("/v2/"):  # Docker, pulling the demo's image
                reply = _Reply(*no_image_here(path), {REGISTRY_HEADER: "registry/2.0"})
            elif download:
                reply = self._download(path, method)
            elif private:
                route = path
                reply = self._private(path[len("/_sim/") :], method)
            else:
                route, params = self._route(path)
                reply = self._public(method, route, params)
        except _Reply as early:
            reply = early
        # The query tells a pool poll from a per-agent read (benchmarks count them apart).
        query = "" if private else parts.query
        data, headers = self._encode(reply)
        # A download is not an API request: it must not count against request budgets.
        self.sim.org.stats.record(
            method, route, reply.status, private=private or download, detail=query, size=len(data)
        )
        self.sim.log(
            f'{self.client_address[0]} "{method} {self.path}" {reply.status} '
            f"{(time.monotonic() - started) * 1000:.1f}ms"
        )
        self._send(method, reply, data, headers)

    @staticmethod
    def _encode(reply: _Reply) -> tuple[bytes, dict[str, str]]:
        """The answer's body and headers (the body's size is logged with the request)."""
        headers = {
            "ActivityId": str(uuid.uuid4()),
            "X-TFS-Session": str(uuid.uuid4()),
            "X-VSS-E2EID": str(uuid.uuid4()),
            **reply.headers,
        }
        if reply.body is None:
            data = b""
        elif isinstance(reply.body, bytes):
            data = reply.body
        elif isinstance(reply.body, str):
            data = reply.body.encode()
            headers.setdefault("Content-Type", "text/html; charset=utf-8")
        else:
            data = json.dumps(reply.body, separators=(",", ":")).encode()
            headers.setdefault("Content-Type", "application/json; charset=utf-8; api-version=7.1")
        return data, headers

    def _send(self, method: str, reply: _Reply, data: bytes, headers: dict[str, str]) -> None:
        try:
            self.send_response(reply.status)
            for key, value in headers.items():
                self.send_header(key, value)
            if reply.status != 204:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if method != "HEAD" and reply.status != 204:
                self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the client went away (e.g. a killed agent)

    def _pat(self) -> str | None:
        """The PAT or access token the request carries (Basic's password, or Bearer)."""
        auth = self.headers.get("Authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer":
            return value.strip() or None  # an Entra access token (`SimEntra`)
        if scheme.lower() != "basic":
            return None
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None

    def _route(self, path: str) -> tuple[str, dict[str, int]]:
        for pattern, template in ROUTES:
            m = pattern.fullmatch(path)
            if m:
                return template, {k: int(v) for k, v in m.groupdict().items()}
        raise _err(404, f"The resource {path} could not be found.", "ResourceNotFoundException")

    # ------------------------------------------------------------------ checks

    def _faults(self, private: bool, token: str | None) -> dict[str, str]:
        """Apply an armed fault; returns headers to add when the request goes on (delays)."""
        hit = self.sim.org.faults.match(private=private, token=token)
        if hit is None:
            return {}
        if hit.kind == "delay":
            time.sleep(hit.delay)
            if hit.retry_after < 0:  # throttled: Azure says so in headers
                return {
                    "X-RateLimit-Resource": "Core",
                    "X-RateLimit-Delay": f"{hit.delay:.3f}",
                    "X-RateLimit-Limit": "200",
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset": str(int(time.time()) + 300),
                }
            return {}
        if hit.kind == "html":
            raise _Reply(203, wire.SIGNIN_HTML)
        if hit.kind == "rate_limit":
            reply = _err(
                429,
                "TF400733: The request has been canceled: Request was blocked due to exceeding "
                "usage of resource 'Core' in namespace 'User'.",
                "RequestBlockedException",
            )
            reply.headers.update(
                {
                    "Retry-After": str(max(0, math.ceil(hit.retry_after))),
                    "X-RateLimit-Resource": "Core",
                    "X-RateLimit-Delay": f"{hit.retry_after:.3f}",
                    "X-RateLimit-Limit": "200",
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset": str(int(time.time() + hit.retry_after)),
                }
            )
            raise reply
        raise _err(
            hit.status,
            f"VS30063: The service is temporarily unavailable (HTTP {hit.status}). "
            "Please try again later.",
            "VssServiceException",
        )

    def _api_version(self, method: str) -> None:
        version = self.query.get("api-version")
        if version is None:
            m = re.search(r"api-version=([^;,\s]+)", self.headers.get("Accept", ""))
            version = m.group(1) if m else None
        if version is None:
            if method in ("GET", "HEAD"):
                return  # reads without api-version work in practice (KEDA, start.sh)
            raise _err(
                400,
                f'No api-version was supplied for the "{method}" request. The version must be '
                'supplied either as part of the Accept header (e.g. "application/json; '
                'api-version=1.0") or as a query parameter (e.g. "?api-version=1.0").',
                "VssVersionNotSpecifiedException",
            )
        if not _API_VERSION.match(version):
            raise _err(
                400,
                f"The requested REST API version of {version} is not valid.",
                "VssInvalidApiVersionException",
            )

    def _auth(self, token: str | None, scope: str | None) -> PatRecord:
        try:
            return self.sim.org.authenticate(token, scope)
        except SimScopeError as exc:
            # 401 for a PAT without the scope, 403 for a principal without the pool role.
            raise _err(exc.status, exc.message, exc.type_key) from None
        except SimAuthError as exc:
            if self.headers.get("X-TFS-FedAuthRedirect", "").lower() != "suppress":
                raise _Reply(203, wire.SIGNIN_HTML) from None  # the browser sign-in page
            reply = _err(401, exc.message, exc.type_key)
            reply.headers["WWW-Authenticate"] = (
                "Bearer authorization_uri=https://login.microsoftonline.com/"
                "00000000-0000-0000-0000-000000000000"
            )
            raise reply from None

    # ------------------------------------------------------------------ endpoints

    def _private(self, route: str, method: str) -> _Reply:
        if method != "POST":
            raise _Reply(405, private_api.render({"error": "use POST"}))
        token = self._pat() if route == "register" else None
        try:
            self._faults(True, token)
        except _Reply as fault:
            if fault.status == 203:
                raise
            detail = (fault.body or {}).get("message", "") if isinstance(fault.body, dict) else ""
            raise _Reply(
                fault.status, private_api.render({"error": f"HTTP {fault.status} {detail}"})
            ) from None
        fields = private_api.parse_lines(self.body)
        # A long poll whose connection an outage cuts must end, not take the next job.
        with self.server.cut_signal(self.connection) as cut:
            status, answer = private_api.handle(
                self.sim.org, route, fields, token, self.sim.stopping, cut
            )
        return _Reply(status, private_api.render(answer), {"Content-Type": "text/plain"})

    def _download(self, path: str, method: str) -> _Reply:
        """An agent tarball, anonymous like download.agent.dev.azure.com."""
        if method not in ("GET", "HEAD"):
            raise _Reply(405, "use GET")
        data = self.sim.org.packages.serve(path.rsplit("/", 1)[-1])
        if data is None:
            raise _Reply(404, "no such agent package")
        return _Reply(200, data, {"Content-Type": "application/gzip"})

    def _public(self, method: str, route: str, params: dict[str, int]) -> _Reply:
        token = self._pat()
        extra = self._faults(False, token)
        if route.endswith("/connectionData"):
            if method not in ("GET", "HEAD"):
                raise _err(405, "Method not allowed.", "InvalidRequestException")
            reply = _Reply(200, wire.connection_data(self.sim.org, self._auth(token, None)))
        elif route in ("/_apis", "/_apis/ResourceAreas"):
            # The SDK's first calls: where each resource lives (see `locations`).
            wanted = "OPTIONS" if route == "/_apis" else "GET"
            if method != wanted:
                raise _err(405, "Method not allowed.", "InvalidRequestException")
            self._auth(token, READ_SCOPE)
            body = locations.resource_locations() if route == "/_apis" else None
            reply = _Reply(200, body or locations.resource_areas(self.sim.org_url))
        else:
            scope = READ_SCOPE if method in ("GET", "HEAD") else MANAGE_SCOPE
            self.caller = self._auth(token, scope)
            self._api_version(method)
            try:
                reply = self._resource(method, route, params)
            except SimError as exc:
                raise _err(exc.status, exc.message, exc.type_key) from None
        reply.headers.update(extra)
        return reply

    def _flag(self, name: str) -> bool:
        return self.query.get(name, "false").lower() == "true"

    def _resource(self, method: str, route: str, params: dict[str, int]) -> _Reply:
        org, base = self.sim.org, self.sim.org_url
        allowed = (
            ("GET", "HEAD", "PATCH", "DELETE") if route.endswith("{agentId}") else ("GET", "HEAD")
        )
        if method not in allowed:
            raise _err(
                405, f"The {method} method is not supported here.", "InvalidRequestException"
            )
        if route.endswith("/pools"):
            pools = org.pools(self.query.get("poolName"), self.query.get("poolType"))
            caller = self.caller
            if (
                self.query.get("actionFilter") == "manage"
                and caller.service_principal
                and MANAGE_SCOPE not in caller.scopes
            ):
                pools = []  # only the pools the caller administers
            return _Reply(200, wire.envelope([wire.pool(p, org.pool_size(p.id)) for p in pools]))
        if route.endswith("{poolId}"):
            p = org.get_pool(params["pool"])
            return _Reply(200, wire.pool(p, org.pool_size(p.id)))
        if route.endswith("/agents"):
            try:
                wanted = read_filter(self.query.get("demands"))
            except DemandSyntaxError as exc:
                raise _err(
                    400, f"The demands filter cannot be read: {exc}.", "ArgumentException"
                ) from None
            agents = org.agents(params["pool"], self.query.get("agentName"), wanted)
            return _Reply(200, wire.envelope([self._agent_json(a, base) for a in agents]))
        if route.endswith("{agentId}"):
            return self._one_agent(method, params["pool"], params["agent"])
        if route.endswith("/jobrequests"):
            return self._job_requests(params["pool"])
        if route.endswith("{requestId}"):
            org.get_pool(params["pool"])
            return _Reply(200, wire.job(org, org.job(params["job"]), base))
        top = self.query.get("top") or self.query.get("$top")
        entries = org.packages.entries(
            self.query.get("platform"), int(top) if top else None, self.sim.url
        )
        return _Reply(200, wire.envelope(entries))

    def _agent_json(self, a: AgentRecord, base: str) -> wire.Json:
        return wire.agent(
            self.sim.org,
            a,
            base,
            capabilities=self._flag("includeCapabilities"),
            assigned=self._flag("includeAssignedRequest"),
            last_completed=self._flag("includeLastCompletedRequest"),
        )

    def _one_agent(self, method: str, pool_id: int, agent_id: int) -> _Reply:
        org, base = self.sim.org, self.sim.org_url
        if method == "DELETE":
            org.delete_agent(pool_id, agent_id)
            return _Reply(204, None)
        if method == "PATCH":
            try:
                patch = json.loads(self.body or b"null")
            except ValueError:
                patch = None
            if not isinstance(patch, dict):
                raise _err(
                    400, "The request body must be a TaskAgent JSON object.", "ArgumentException"
                )
            enabled = patch.get("enabled")
            if enabled is not None and not isinstance(enabled, bool):
                raise _err(400, "enabled must be true or false.", "ArgumentException")
            org.get_agent(pool_id, agent_id)
            if enabled is not None:
                org.set_agent_enabled(pool_id, agent_id, enabled)
        return _Reply(200, self._agent_json(org.get_agent(pool_id, agent_id), base))

    def _job_requests(self, pool_id: int) -> _Reply:
        try:
            values, headers = jobrequests.answer(
                self.sim.org, pool_id, self.query, self.sim.org_url
            )
        except ValueError:
            raise _err(400, "Query parameters must be numbers.", "ArgumentException") from None
        return _Reply(200, wire.envelope(values), headers)
