"""The emulator's private endpoints (``POST /_sim/...``), as plain ``key=value`` lines.

A busybox shell cannot parse JSON, so requests and answers are one ``key=value``
per line (``sed -n 's/^key=//p'`` reads them). Only ``register`` needs the PAT
(Basic auth, like ``config.sh``); later calls carry the session key it returns.

=========  ==========================================  ===================================
endpoint   request lines                               answer lines
=========  ==========================================  ===================================
register   pool, name, hostname, [version], cap.X=Y    agent_id, session, name
           (``config.sh``: the agent exists, offline)
session    agent_id, session                           ok=1
           (``run.sh`` starts: the agent is online)
poll       agent_id, session, [timeout] (≤ 20 s)       job=none | job, kind, duration_ms,
                                                        result, pipeline, run |
                                                        job=none + update=VERSION (the
                                                        server's AgentRefreshMessage)
heartbeat  agent_id, session, [request_id]             cancel=0|1
finish     agent_id, session, request_id, result       ok=1 | ok=0 (the job had ended)
offline    agent_id, session                           ok=1
require_   version, [bad_hash=0|1]                     ok=1, current
agent      (a control for demos and drills, not an agent call: the organisation now requires
           agent ``version``; ``bad_hash=1`` lists wrong SHA-256s for its packages)
pool_role  admin=0|1, [client_id]                      ok=1, changed
           (a control: take or give back the pools' Administrator role of a service
           principal, or of every one; a drill of issue 21)
=========  ==========================================  ===================================

Failures answer ``error=<plain reason>`` with 401 (PAT), 404 (pool), 409
(session replaced/ended/deleted) or 400 (bad request).

``register`` and ``session`` take the organisation's `AgentStartup` times
before they answer: the time the real ``config.sh`` and ``run.sh`` need.
"""

from __future__ import annotations

import threading

from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import (
    AgentUpdate,
    SimAuthError,
    SimError,
    SimForbiddenError,
    SimNotFoundError,
    SimSessionError,
)

MAX_POLL_SECONDS = 20.0
ROUTES = (
    "register",
    "session",
    "poll",
    "heartbeat",
    "finish",
    "offline",
    "require_agent",
    "pool_role",
)


def parse_lines(body: bytes) -> dict[str, str]:
    """``key=value`` lines (also ``&``-separated) into a dict; junk lines are ignored."""
    fields: dict[str, str] = {}
    for raw in body.decode("utf-8", "replace").replace("&", "\n").splitlines():
        key, sep, value = raw.strip().partition("=")
        if sep and key:
            fields[key] = value
    return fields


def render(fields: dict[str, object]) -> bytes:
    """A dict as ``key=value`` lines."""
    return "".join(f"{k}={v}\n" for k, v in fields.items()).encode()


def handle(
    org: SimOrg,
    route: str,
    fields: dict[str, str],
    pat: str | None,
    stopping: threading.Event,
    cut: threading.Event | None = None,
) -> tuple[int, dict[str, object]]:
    """Serve one private request; returns (HTTP status, answer fields).

    ``cut`` is set when the request's connection is dropped (an "unreachable" fault):
    a long poll then ends without taking a job.
    """
    try:
        if route == "require_agent":
            org.require_agent_version(fields.get("version", ""))
            org.packages.corrupt_hash(fields.get("bad_hash") == "1")
            return 200, {"ok": 1, "current": org.packages.current}
        if route == "pool_role":
            admin = fields.get("admin") == "1"
            changed = org.entra.set_pool_admin(admin, fields.get("client_id", ""))
            return 200, {"ok": 1, "changed": changed}
        if route == "register":
            if stopping.wait(org.startup.register):
                return 503, {"error": "the organisation is shutting down"}
            return 200, _register(org, fields, pat)
        agent_id = _int(fields, "agent_id")
        session = fields.get("session", "")
        if route == "session":
            if stopping.wait(org.startup.session):
                return 503, {"error": "the organisation is shutting down"}
            org.open_session(agent_id, session)
            return 200, {"ok": 1}
        if route == "poll":
            timeout = min(float(fields.get("timeout", MAX_POLL_SECONDS)), MAX_POLL_SECONDS)
            ticket = org.poll(agent_id, session, timeout, cancel=stopping, cut=cut)
            if ticket is None:
                return 200, {"job": "none"}
            if isinstance(ticket, AgentUpdate):
                return 200, {"job": "none", "update": ticket.version}
            return 200, {
                "job": ticket.request_id,
                "kind": ticket.kind,
                "duration_ms": round(ticket.duration * 1000),
                "result": ticket.result,
                "pipeline": ticket.pipeline,
                "run": ticket.run_name,
            }
        if route == "heartbeat":
            rid = _int(fields, "request_id") if fields.get("request_id") else None
            return 200, {"cancel": int(org.heartbeat(agent_id, session, rid))}
        if route == "finish":
            result = fields.get("result", "succeeded")
            return 200, {"ok": int(org.finish(_int(fields, "request_id"), result, session))}
        if route == "offline":
            org.offline(agent_id, session)
            return 200, {"ok": 1}
        return 404, {"error": f"unknown endpoint /_sim/{route}"}
    except SimForbiddenError as exc:  # a service principal without the pool's role
        return 403, {"error": exc.message}
    except SimAuthError:
        return 401, {
            "error": "the PAT was rejected (401); check the token and its Agent Pools scope"
        }
    except SimNotFoundError as exc:
        return 404, {"error": exc.message}
    except SimSessionError as exc:
        return 409, {"error": exc.message}
    except SimError as exc:
        return exc.status, {"error": exc.message}
    except ValueError as exc:
        return 400, {"error": f"bad request: {exc}"}


def _int(fields: dict[str, str], key: str) -> int:
    value = fields.get(key, "")
    if not value.isdigit():
        raise ValueError(f"{key} must be a number")
    return int(value)


def _register(org: SimOrg, fields: dict[str, str], pat: str | None) -> dict[str, object]:
    name = fields.get("name", "")
    pool = fields.get("pool", "")
    if not name or not pool:
        raise ValueError("pool and name are required")
    caps = {k[4:]: v for k, v in fields.items() if k.startswith("cap.") and len(k) > 4}
    agent_id, key = org.register(
        pool,
        name,
        pat or "",
        fields.get("hostname", ""),
        capabilities=caps,
        version=fields.get("version") or None,
        open_session=False,
    )
    return {"agent_id": agent_id, "session": key, "name": name}
