"""Parsing Azure DevOps JSON and headers: absent fields, timestamps, enums, rate limits."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from gpuci_tui.core.azure.errors import no_pool_message
from gpuci_tui.core.azure.parse import (
    MalformedError,
    RateLimitState,
    collection,
    parse_agent,
    parse_items,
    parse_job_request,
    parse_pool,
    parse_retry_after,
    parse_timestamp,
    server_message,
)

NOW = 1_800_000_000.0


# --------------------------------------------------------------------------- timestamps


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2022-09-28T11:20:29.5033333Z", datetime(2022, 9, 28, 11, 20, 29, 503333, UTC)),
        ("2022-09-28T11:19:49.89Z", datetime(2022, 9, 28, 11, 19, 49, 890000, UTC)),
        ("2022-09-28T11:19:49Z", datetime(2022, 9, 28, 11, 19, 49, tzinfo=UTC)),
        ("2022-09-28T13:19:49.1+02:00", datetime(2022, 9, 28, 11, 19, 49, 100000, UTC)),
        ("2022-09-28T11:19:49.123456789", datetime(2022, 9, 28, 11, 19, 49, 123456, UTC)),
        ("0001-01-01T00:00:00", None),
        ("yesterday", None),
        ("", None),
        (None, None),
        (17, None),
    ],
)
def test_timestamps(text: object, expected: datetime | None) -> None:
    assert parse_timestamp(text) == expected


# --------------------------------------------------------------------------- objects


def test_missing_and_null_fields_are_the_same() -> None:
    nulls = {
        "id": 3,
        "name": "a",
        "enabled": None,
        "status": None,
        "version": None,
        "createdOn": None,
        "assignedRequest": None,
        "systemCapabilities": None,
    }
    assert parse_agent(nulls) == parse_agent({"id": 3, "name": "a"})
    job_nulls = {
        "requestId": 5,
        "result": None,
        "definition": None,
        "owner": None,
        "reservedAgent": None,
    }
    assert parse_job_request(job_nulls) == parse_job_request({"requestId": 5})


def test_enums_are_camel_case_names_whatever_the_server_sends() -> None:
    assert parse_agent({"id": 1, "name": "a", "status": "Online"}).status == "online"
    assert parse_agent({"id": 1, "name": "a", "status": 2}).status == "online"
    assert parse_agent({"id": 1, "name": "a", "status": 1}).status == "offline"
    assert parse_job_request({"requestId": 1, "result": "SucceededWithIssues"}).result == (
        "succeededWithIssues"
    )
    assert parse_job_request({"requestId": 1, "result": 2}).result == "failed"
    assert parse_job_request({"requestId": 1, "result": "canceled"}).result == "canceled"
    assert parse_pool({"id": 1, "name": "p", "poolType": 2}).pool_type == "deployment"
    assert parse_pool({"id": 1, "name": "p", "poolType": "AUTOMATION"}).pool_type == "automation"


def test_job_request_from_the_keda_sample() -> None:
    request = parse_job_request(
        {
            "requestId": 890659,
            "queueTime": "2022-09-28T11:19:49.89Z",
            "assignTime": "2022-09-28T11:20:29.5033333Z",
            "receiveTime": "2022-09-28T11:20:32.0530499Z",
            "lockedUntil": "2022-09-28T11:30:32.07Z",
            "planType": "Build",
            "demands": ["cuda", "Agent.Version -gtVersion 2.182.1"],
            "reservedAgent": {"id": 11735, "name": "gpu-agent-3f9c", "status": "online"},
            "definition": {"id": 4869, "name": "base - main"},
            "owner": {"id": 673584, "name": "20220928.2"},
            "data": {"ParallelismTag": "Private"},
        }
    )
    assert request.request_id == 890659
    assert (request.definition_id, request.definition_name) == (4869, "base - main")
    assert request.owner_name == "20220928.2"
    assert (request.reserved_agent_id, request.reserved_agent_name) == (11735, "gpu-agent-3f9c")
    assert request.plan_type == "Build"
    assert request.finish_time is None and request.result is None


def test_numbers_sent_as_strings_are_read() -> None:
    pool = parse_pool({"id": "42", "name": "gpu", "size": "3", "isHosted": "false"})
    assert (pool.id, pool.size, pool.is_hosted) == (42, 3, False)


def test_capabilities_become_strings() -> None:
    agent = parse_agent(
        {"id": 1, "name": "a", "systemCapabilities": {"HOSTNAME": "c0ffee", "n": 3, "gone": None}}
    )
    assert dict(agent.system_capabilities) == {"HOSTNAME": "c0ffee", "n": "3"}


def test_an_unreadable_assigned_request_does_not_lose_the_agent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="gpuci_tui.azure"):
        agent = parse_agent({"id": 1, "name": "a", "assignedRequest": {"planType": "Build"}})
    assert agent.assigned_request is None
    assert "assigned request" in caplog.text


@pytest.mark.parametrize(
    ("parser", "obj"),
    [
        (parse_pool, {"name": "no id"}),
        (parse_pool, {"id": 1}),
        (parse_agent, {"id": "x", "name": "a"}),
        (parse_agent, []),
        (parse_job_request, {"id": 1}),
        (parse_job_request, None),
    ],
)
def test_objects_without_identity_are_rejected(parser: object, obj: object) -> None:
    with pytest.raises(MalformedError):
        parser(obj)  # type: ignore[operator]


def test_collections() -> None:
    assert collection({"count": 2, "value": [1, 2]}) == [1, 2]
    assert collection([3]) == [3]
    assert collection({"count": 0}) == []
    with pytest.raises(MalformedError):
        collection({"message": "x"})
    with pytest.raises(MalformedError):
        collection("x")


def test_unreadable_items_are_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gpuci_tui.azure"):
        pools = parse_items([{"id": 1, "name": "a"}, {"id": 2}, "junk"], parse_pool, "pool")
    assert [p.id for p in pools] == [1]
    assert caplog.text.count("Ignoring an unreadable pool") == 2


# --------------------------------------------------------------------------- headers


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "30"}, 30.0),
        ({"Retry-After": " 1.5 "}, 1.5),
        ({"Retry-After": "-4"}, 0.0),
        ({"Retry-After": "Fri, 15 Jan 2027 08:00:30 GMT"}, 30.0),
        ({"Retry-After": "Fri, 15 Jan 2027 07:00:00 GMT"}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({"X-RateLimit-Reset": str(int(NOW) + 45)}, 45.0),
        ({"Retry-After": "soon", "X-RateLimit-Reset": str(int(NOW) + 45)}, 45.0),
        ({"X-RateLimit-Reset": str(int(NOW) - 45)}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert datetime(2027, 1, 15, 8, 0, tzinfo=UTC).timestamp() == NOW
    assert parse_retry_after(headers, NOW) == expected


def test_rate_limit_state_follows_the_headers() -> None:
    state = RateLimitState()
    assert state.updated({"Content-Type": "application/json"}, NOW) is state
    state = state.updated({"X-RateLimit-Remaining": "120", "X-RateLimit-Limit": "200"}, NOW)
    assert (state.remaining, state.limit, state.delay_s, state.throttled_until) == (
        120,
        200,
        None,
        None,
    )
    # A delayed answer without a reset time throttles for a while.
    state = state.updated({"X-RateLimit-Delay": "2.5", "X-RateLimit-Remaining": "0"}, NOW + 1)
    assert state.delay_s == 2.5
    assert state.throttled_until == NOW + 1 + 60
    assert state.remaining == 0 and state.limit == 200
    # The next, undelayed answer keeps the throttle but clears the delay.
    later = state.updated({"X-RateLimit-Remaining": "5"}, NOW + 2)
    assert later.delay_s is None and later.throttled_until == state.throttled_until
    assert later.throttled(NOW + 30) and not later.throttled(NOW + 62)
    # A reset time further out extends the throttle to it.
    reset = state.updated({"X-RateLimit-Delay": "1", "X-RateLimit-Reset": str(NOW + 200)}, NOW + 3)
    assert reset.throttled_until == NOW + 200
    assert reset.throttled_to(NOW + 500, NOW + 4).throttled_until == NOW + 500
    assert reset.throttled_to(NOW + 10, NOW + 4).throttled_until == NOW + 200


def test_server_message() -> None:
    assert server_message(b'{"message": "TF400813:  not\\n authorized", "typeKey": "X"}') == (
        "TF400813: not authorized"
    )
    assert server_message(b"<html>") == ""
    assert server_message(b'["x"]') == ""
    assert len(server_message(('{"message": "%s"}' % ("x" * 1000)).encode())) == 300


# --------------------------------------------------------------------------- messages


def test_no_pool_message_variants() -> None:
    assert no_pool_message("gpu", "contoso", None) == (
        "No agent pool named 'gpu' in contoso. Check the name in Organization settings → Agent pools."
    )
    assert "can see no pools at all" in no_pool_message("gpu", "contoso", [])
    many = [f"pool-{n:02d}" for n in range(20)]
    text = no_pool_message("gpu", "contoso", many)
    assert "pool-14 (and 5 more)." in text
    assert "pool-15" not in text
    assert "Did you mean" not in text
