"""The job history over the control socket: read-only, bounded, redacted.

A fleet console shows a remote host's finished jobs (``h`` in its dashboard)
by asking the host's daemon through the bridge, as it follows its agents'
logs (`log_serving`). The request carries the history view's filters (a
`JobQuery`); the daemon reads its own history file read-only (SQLite WAL: its
writer is never blocked) in a thread with a deadline, and answers at most
`MAX_ROWS` rows and `MAX_BYTES` of them (the newest first: older rows are left
out, and the answer says so). Every text passes the one redactor, as
everything the daemon sends does. A daemon started without a history file
answers with no rows, ``recorded`` false.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.host.control.client import ControlError
from gpuci_tui.core.secrets.redaction import redact
from gpuci_tui.core.store.history import JobQuery, JobRecord, read_history
from gpuci_tui.core.wire import from_dict

MAX_ROWS = 500
"""Most rows one answer carries (the history view reads as many)."""
MAX_BYTES = 512 * 1024
"""Most bytes of rows in one answer: well inside the protocol's 1 MiB line."""
TIMEOUT = 10.0
"""Seconds the history file has to give the rows."""

_FILTERS: dict[str, type] = {
    "pipeline": str,
    "pipeline_contains": str,
    "slot": int,
    "since": float,
    "failed_only": bool,
    "succeeded_only": bool,
    "limit": int,
}
"""The `JobQuery` fields a request may set, and their JSON types."""


def history_request(query: JobQuery) -> dict[str, Any]:
    """The ``history`` request for ``query`` (its filters that are set)."""
    filters = {name: getattr(query, name) for name in _FILTERS}
    return {"op": "history", "query": {k: v for k, v in filters.items() if v not in (None, False)}}


def query_of(request: dict[str, Any]) -> JobQuery:
    """The `JobQuery` of a ``history`` request; its ``limit`` is at most `MAX_ROWS`.

    Raises:
        ValueError: a filter is unknown or of the wrong type, with its name.
    """
    given = request.get("query")
    given = {} if given is None else given
    if not isinstance(given, dict):
        raise ValueError('"query" must be an object of filters')
    unknown = sorted(set(given) - set(_FILTERS))
    if unknown:
        raise ValueError(f"unknown filter {unknown[0]!r}; expected {', '.join(_FILTERS)}")
    values: dict[str, Any] = {}
    for name, value in given.items():
        kind = _FILTERS[name]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f'"{name}" must be {"a number" if kind is not str else "text"}')
        values[name] = value
    limit = values.pop("limit", MAX_ROWS)
    if limit < 1:
        raise ValueError('"limit" must be a whole number from 1')
    return JobQuery(**values, limit=min(limit, MAX_ROWS))


def record_to_dict(record: JobRecord) -> dict[str, Any]:
    """One row as JSON-ready values, every text redacted."""
    data = dataclasses.asdict(record)
    return {key: redact(value) if isinstance(value, str) else value for key, value in data.items()}


def record_from_dict(data: Any) -> JobRecord:
    """One row of an answer.

    Raises:
        ValueError: the row is malformed.
    """
    if not isinstance(data, dict):
        raise ValueError("a history row must be an object")
    fields = dict(data)
    throttle = fields.pop("throttle_s", None)
    record = from_dict(JobRecord, fields)
    if throttle is None:
        return record
    try:
        pairs = tuple((str(reason), float(seconds)) for reason, seconds in throttle)
    except (TypeError, ValueError):
        raise ValueError("JobRecord.throttle_s: expected [reason, seconds] pairs") from None
    return dataclasses.replace(record, throttle_s=pairs)


async def history_answer(request: dict[str, Any], path: Path | None) -> dict[str, Any]:
    """The answer to one ``history`` request, from the history file at ``path``."""
    try:
        query = query_of(request)
    except ValueError as exc:
        return {"ok": False, "error": f"bad request: {exc}"}
    if path is None:
        return {"ok": True, "rows": [], "recorded": False}
    try:
        rows = await asyncio.wait_for(asyncio.to_thread(read_history, path, query), TIMEOUT)
    except TimeoutError:
        return {"ok": False, "error": f"the job history gave no rows within {TIMEOUT:.0f} s"}
    except GpuciError as exc:  # HistoryError: damaged, unreadable; its words say what to do
        return {"ok": False, "error": redact(str(exc))}
    if rows is None:
        return {"ok": True, "rows": [], "recorded": False}
    kept: list[dict[str, Any]] = []
    size = 0
    for record in rows:  # newest first: what does not fit is the oldest
        row = record_to_dict(record)
        size += len(json.dumps(row, separators=(",", ":"))) + 1
        if size > MAX_BYTES:
            break
        kept.append(row)
    return {"ok": True, "rows": kept, "recorded": True, "truncated": len(kept) < len(rows)}


def history_reply(reply: dict[str, Any]) -> list[JobRecord] | None:
    """The rows of a ``history`` answer, newest first; None when the host has no history yet.

    Raises:
        ControlError: the daemon refused (an older one knows no such op) or the answer is
            malformed.
    """
    rows = reply.get("rows")
    if not reply.get("ok") or not isinstance(rows, list):
        error = str(reply.get("error", "the daemon sent no history"))
        if error.startswith("unknown op"):
            error = (
                "the host's gpuci-tui is older than this console's and serves no history "
                "over ssh: update it there"
            )
        raise ControlError(error)
    if reply.get("recorded") is False:
        return None
    try:
        return [record_from_dict(row) for row in rows]
    except ValueError as exc:
        raise ControlError(f"malformed history from the daemon: {exc}") from None
