"""Parse Azure DevOps answers (JSON bodies and headers) into plain values; no I/O here.

Azure DevOps omits absent fields instead of sending ``null``, writes
timestamps with up to seven fraction digits and sends enums as camelCase
strings (older servers: numbers). Everything here treats "missing" and "null"
alike and never raises on an odd field; only an object without the identity a
dataclass cannot do without (an ``id``, a ``name``) is rejected.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from gpuci_tui.core.azure.demands import wire_demands, wire_matched
from gpuci_tui.core.protocols import Agent, JobRequest, Pool

LOG = logging.getLogger("gpuci_tui.azure")

T = TypeVar("T")

# Numeric values of the enums, for servers that send numbers instead of names
# (TaskAgentInterfaces.ts in microsoft/azure-devops-node-api).
_AGENT_STATUS = {1: "offline", 2: "online"}
_TASK_RESULT = {
    0: "succeeded",
    1: "succeededWithIssues",
    2: "failed",
    3: "canceled",
    4: "skipped",
    5: "abandoned",
}
_POOL_TYPE = {1: "automation", 2: "deployment"}

_FRACTION = re.compile(r"\.(\d+)")


class MalformedError(ValueError):
    """An object lacks a field the dataclass cannot do without."""


# --------------------------------------------------------------------------- scalars


def opt_str(value: object) -> str | None:
    """A non-empty string, or None."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def opt_int(value: object) -> int | None:
    """An int (also from a numeric string), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def opt_bool(value: object, default: bool) -> bool:
    """A bool (also from ``"true"``/``"false"``), or ``default``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return default


def enum_name(value: object, numbers: Mapping[int, str]) -> str | None:
    """An enum as its camelCase name (``SucceededWithIssues`` → ``succeededWithIssues``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return numbers.get(value, str(value))
    text = opt_str(value)
    if text is None:
        return None
    if text.isupper():
        return text.lower()
    return text[0].lower() + text[1:]


def as_mapping(value: object) -> Mapping[str, Any] | None:
    """``value`` if it is a JSON object."""
    return value if isinstance(value, Mapping) else None


def parse_timestamp(value: object) -> datetime | None:
    """An Azure DevOps timestamp as an aware UTC datetime.

    Accepts a ``Z`` or offset suffix, none (taken as UTC), and any number of
    fraction digits (the service sends up to seven; Python keeps six). The
    "unset" date ``0001-01-01T00:00:00`` is None.

    Args:
        value: e.g. ``2022-09-28T11:20:29.5033333Z``.
    """
    text = opt_str(value)
    if text is None:
        return None
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    text = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], text, count=1)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.year <= 1:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


# --------------------------------------------------------------------------- objects


def _required_int(obj: Mapping[str, Any], key: str, what: str) -> int:
    value = opt_int(obj.get(key))
    if value is None:
        raise MalformedError(f"{what} without a numeric {key!r}")
    return value


def parse_pool(obj: object) -> Pool:
    """A ``TaskAgentPool`` JSON object as a `Pool`.

    Raises:
        MalformedError: No object, id or name.
    """
    pool = as_mapping(obj)
    if pool is None:
        raise MalformedError("pool is not an object")
    name = opt_str(pool.get("name"))
    if name is None:
        raise MalformedError("pool without a name")
    return Pool(
        id=_required_int(pool, "id", "pool"),
        name=name,
        size=opt_int(pool.get("size")),
        is_hosted=opt_bool(pool.get("isHosted"), False),
        pool_type=enum_name(pool.get("poolType"), _POOL_TYPE),
    )


def parse_job_request(obj: object) -> JobRequest:
    """A ``TaskAgentJobRequest`` JSON object as a `JobRequest`.

    Raises:
        MalformedError: No object or no ``requestId``.
    """
    req = as_mapping(obj)
    if req is None:
        raise MalformedError("job request is not an object")
    definition = as_mapping(req.get("definition")) or {}
    owner = as_mapping(req.get("owner")) or {}
    reserved = as_mapping(req.get("reservedAgent")) or {}
    return JobRequest(
        request_id=_required_int(req, "requestId", "job request"),
        queue_time=opt_str(req.get("queueTime")),
        assign_time=opt_str(req.get("assignTime")),
        receive_time=opt_str(req.get("receiveTime")),
        finish_time=opt_str(req.get("finishTime")),
        result=enum_name(req.get("result"), _TASK_RESULT),
        plan_type=opt_str(req.get("planType")),
        definition_id=opt_int(definition.get("id")),
        definition_name=opt_str(definition.get("name")),
        owner_name=opt_str(owner.get("name")),
        reserved_agent_id=opt_int(reserved.get("id")),
        reserved_agent_name=opt_str(reserved.get("name")),
        demands=wire_demands(req.get("demands")),
        matched_agents=wire_matched(req.get("matchedAgents")),
        job_name=opt_str(req.get("jobName")),
    )


def parse_agent(obj: object) -> Agent:
    """A ``TaskAgent`` JSON object as an `Agent`.

    An ``assignedRequest`` or ``lastCompletedRequest`` that cannot be read is dropped
    (with a warning) rather than losing the whole agent.

    Raises:
        MalformedError: No object, id or name.
    """
    agent = as_mapping(obj)
    if agent is None:
        raise MalformedError("agent is not an object")
    name = opt_str(agent.get("name"))
    if name is None:
        raise MalformedError("agent without a name")
    assigned = _request_of(agent, "assignedRequest", "assigned request", name)
    capabilities = as_mapping(agent.get("systemCapabilities")) or {}
    return Agent(
        id=_required_int(agent, "id", "agent"),
        name=name,
        enabled=opt_bool(agent.get("enabled"), True),
        status=enum_name(agent.get("status"), _AGENT_STATUS) or "offline",
        version=opt_str(agent.get("version")),
        created_on=opt_str(agent.get("createdOn")),
        status_changed_on=opt_str(agent.get("statusChangedOn")),
        assigned_request=assigned,
        system_capabilities={
            str(k): v if isinstance(v, str) else json.dumps(v)
            for k, v in capabilities.items()
            if v is not None
        },
        last_completed_request=_request_of(
            agent, "lastCompletedRequest", "last completed request", name
        ),
    )


def _request_of(agent: Mapping[str, Any], key: str, what: str, name: str) -> JobRequest | None:
    """The job request an agent carries under ``key``; an unreadable one is dropped, logged."""
    if agent.get(key) is None:
        return None
    try:
        return parse_job_request(agent[key])
    except MalformedError as exc:
        LOG.warning("Ignoring the unreadable %s of agent %r: %s", what, name, exc)
        return None


def collection(body: object) -> list[object]:
    """The items of a ``{"count": N, "value": [...]}`` envelope (or of a bare list).

    Raises:
        MalformedError: Neither an envelope nor a list.
    """
    if isinstance(body, list):
        return list(body)
    envelope = as_mapping(body)
    if envelope is not None:
        value = envelope.get("value")
        if isinstance(value, list):
            return list(value)
        if value is None and opt_int(envelope.get("count")) == 0:
            return []
    raise MalformedError("expected a list of items ({count, value})")


def parse_items(items: list[object], parser: Callable[[object], T], what: str) -> list[T]:
    """Parse every item, skipping (and logging) the ones that cannot be read."""
    parsed: list[T] = []
    for item in items:
        try:
            parsed.append(parser(item))
        except MalformedError as exc:
            LOG.warning("Ignoring an unreadable %s in Azure DevOps' answer: %s", what, exc)
    return parsed


# --------------------------------------------------------------------------- headers and errors

THROTTLE_WINDOW = 60.0
"""How long callers should stay slow after a delayed answer that names no reset time."""


@dataclass(frozen=True)
class RateLimitState:
    """What Azure DevOps last said about this PAT's user's rate limit.

    All times are seconds since the epoch of the client's clock. A field is
    None until a response carried the matching header.
    """

    remaining: float | None = None
    """``X-RateLimit-Remaining``: TSTUs left in the 5-minute window."""
    limit: float | None = None
    """``X-RateLimit-Limit``: the window's TSTU budget."""
    delay_s: float | None = None
    """``X-RateLimit-Delay`` of the latest answer (None: it was not delayed)."""
    reset_at: float | None = None
    """``X-RateLimit-Reset``: when usage falls back under the limit."""
    resource: str | None = None
    """``X-RateLimit-Resource``: which limit is being hit."""
    throttled_until: float | None = None
    """Callers should poll less often until then (set by delays and 429s)."""
    updated_at: float | None = None
    """When any of the above last changed."""

    def throttled(self, now: float) -> bool:
        """Whether callers should still slow down at ``now``."""
        return self.throttled_until is not None and now < self.throttled_until

    def updated(self, headers: Mapping[str, str], now: float) -> RateLimitState:
        """This state advanced by an answer's ``X-RateLimit-*`` headers.

        Azure DevOps first *delays* answers of a user over the limit (still
        200, with ``X-RateLimit-Delay``) and only later blocks with 429. A delay
        therefore marks the user as throttled until ``X-RateLimit-Reset`` (or,
        lacking one, for `THROTTLE_WINDOW` seconds), so callers slow down before
        the 429s start.

        Args:
            headers: The answer's headers.
            now: The current time, seconds since the epoch.
        """
        remaining = header_float(headers, "X-RateLimit-Remaining")
        limit = header_float(headers, "X-RateLimit-Limit")
        delay = header_float(headers, "X-RateLimit-Delay")
        reset = header_float(headers, "X-RateLimit-Reset")
        if remaining is None and limit is None and delay is None and reset is None:
            return self
        throttled_until = self.throttled_until
        if delay is not None:
            until = reset if reset is not None and reset > now else now + THROTTLE_WINDOW
            throttled_until = max(throttled_until or 0.0, until, now + delay)
        return RateLimitState(
            remaining=remaining if remaining is not None else self.remaining,
            limit=limit if limit is not None else self.limit,
            delay_s=delay,
            reset_at=reset if reset is not None else self.reset_at,
            resource=headers.get("X-RateLimit-Resource") or self.resource,
            throttled_until=throttled_until,
            updated_at=now,
        )

    def throttled_to(self, until: float, now: float) -> RateLimitState:
        """This state throttled until at least ``until`` (after a 429)."""
        current = self.throttled_until or 0.0
        return replace(self, throttled_until=max(current, until), updated_at=now)


def header_float(headers: Mapping[str, str], name: str) -> float | None:
    """A numeric header, or None when absent or not a number."""
    value = headers.get(name)
    if value is None:
        return None
    try:
        return float(value.strip())
    except ValueError:
        return None


def parse_retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or an HTTP date), else ``X-RateLimit-Reset``.

    Args:
        headers: The answer's headers.
        now: The current time, seconds since the epoch.

    Returns:
        A non-negative delay, or None when neither header says anything usable.
    """
    raw = headers.get("Retry-After")
    if raw is not None:
        raw = raw.strip()
        try:
            return max(0.0, float(raw))
        except ValueError:
            pass
        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            when = None
        if when is not None:
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            return max(0.0, when.timestamp() - now)
    reset = header_float(headers, "X-RateLimit-Reset")
    if reset is not None and reset > now:
        return reset - now
    return None


def server_message(content: bytes, max_len: int = 300) -> str:
    """The ``message`` of a VSS JSON error body, on one line and shortened.

    Returns:
        The message, or "" when the body is not a VSS error.
    """
    try:
        body = json.loads(content)
    except ValueError:
        return ""
    message = opt_str(body.get("message")) if isinstance(body, Mapping) else None
    if not message:
        return ""
    text = " ".join(message.split())
    return text if len(text) <= max_len else text[: max_len - 1] + "…"
