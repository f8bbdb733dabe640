"""A container's output over the control socket: the daemon's own containers only, redacted, bounded.

A fleet console follows a remote agent's output by asking its daemon, through
the bridge, for the last lines of that agent's container again and again (the
log view merges the overlapping tails). The daemon answers only for containers
of its own slots (never any container of the host), passes every line through
the one redactor (`secrets.redaction`), and bounds the answer: at most
`MAX_TAIL` lines of at most `MAX_LINE_CHARS` characters, `MAX_BYTES` in all, and
one answer per `MIN_INTERVAL` per connection, however fast a console asks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gpuci_tui.core.models import SupervisorSnapshot
from gpuci_tui.core.secrets.redaction import redact

MAX_TAIL = 500
"""Most lines one answer carries."""
MAX_LINE_CHARS = 2000
"""Longer lines are cut (a progress bar without newlines is one "line")."""
MAX_BYTES = 256 * 1024
"""Most bytes of lines in one answer (the oldest lines go first)."""
MIN_INTERVAL = 0.5
"""Seconds between two answers on one connection: a console's poll rate is bounded here."""
TIMEOUT = 10.0
"""Seconds the container engine has to give the lines."""

LogsTail = Callable[[str, int], list[str]]
"""The container runtime's ``logs_tail(container_id, lines)`` (blocking)."""


def own_containers(snapshot: SupervisorSnapshot) -> set[str]:
    """Every container id of the daemon's slots and their agents, now."""
    found: set[str] = set()
    for slot in snapshot.slots:
        if slot.container_id:
            found.add(slot.container_id)
        found.update(agent.container_id for agent in slot.agents if agent.container_id)
    return found


def bounded(lines: list[str], tail: int) -> list[str]:
    """The last ``tail`` lines, each redacted and cut, within `MAX_BYTES`."""
    kept: list[str] = []
    size = 0
    for line in reversed(lines[-tail:]):
        clean = redact(line)
        if len(clean) > MAX_LINE_CHARS:
            clean = clean[: MAX_LINE_CHARS - 1] + "…"
        size += len(clean.encode()) + 1
        if size > MAX_BYTES:
            break
        kept.append(clean)
    kept.reverse()
    return kept


async def logs_answer(
    request: dict[str, Any], snapshot: SupervisorSnapshot, logs_tail: LogsTail | None
) -> dict[str, Any]:
    """The answer to one ``logs`` request (see the module's bounds)."""
    container = request.get("container")
    tail = request.get("tail", 200)
    if not isinstance(container, str) or not container:
        return {"ok": False, "error": 'bad request: "container" must be a container id'}
    if not isinstance(tail, int) or isinstance(tail, bool) or tail < 1:
        return {"ok": False, "error": 'bad request: "tail" must be a whole number from 1'}
    if logs_tail is None:
        return {"ok": False, "error": "this daemon serves no container logs"}
    if container not in own_containers(snapshot):
        # Gone (replaced after its job), or never ours: no lines, as for an exited container;
        # nothing is read from a container that is not one of this daemon's agents.
        return {"ok": True, "lines": [], "gone": True}
    try:
        lines = await asyncio.wait_for(
            asyncio.to_thread(logs_tail, container, min(tail, MAX_TAIL)), TIMEOUT
        )
    except TimeoutError:
        return {"ok": False, "error": f"the container engine gave no logs within {TIMEOUT:.0f} s"}
    except Exception as exc:  # noqa: BLE001 - the engine's reason goes to the console
        return {"ok": False, "error": redact(f"cannot read the container's logs: {exc}")}
    return {"ok": True, "lines": bounded(list(lines), min(tail, MAX_TAIL))}
