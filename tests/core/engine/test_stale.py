"""The stale-registration rule (`engine.stale`), by tables: what is removed and each "never"."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpuci_tui.core.engine.stale import (
    MARKER_HOST,
    MARKER_INSTANCE,
    Ownership,
    due_for_removal,
    stale_registrations,
    verdict,
)
from gpuci_tui.core.protocols import Agent, JobRequest

OURS = "a1b2c3d4e5f6"
OLD = "0ld0ld0ld0ld"
LIVE = "11ve11ve11ve"
HOST = "gpu-host-1"
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC).timestamp()
OWNER = Ownership(frozenset({OURS}), HOST, live=frozenset({LIVE}))
CURRENT = frozenset({"gpu-0", "gpu-0-b", "gpu-1", "gpu-1-b"})


def agent(
    name: str,
    *,
    instance: str | None = OURS,
    host: str = HOST,
    status: str = "offline",
    busy: bool = False,
    changed: str | None = "2026-11-20T12:00:00.1234567Z",
) -> Agent:
    caps = {"Agent.Name": name}
    if instance is not None:
        caps[MARKER_INSTANCE] = instance
        caps[MARKER_HOST] = host
    return Agent(
        id=abs(hash(name)) % 10_000,
        name=name,
        status=status,
        status_changed_on=changed,
        created_on="2026-11-01T00:00:00Z",
        assigned_request=JobRequest(request_id=7) if busy else None,
        system_capabilities=caps,
    )


@pytest.mark.parametrize(
    ("case", "registration", "stale", "why"),
    [
        ("scaled-away slot", agent("gpu-5"), True, "no lane uses the name"),
        ("old prefix, this host", agent("old-0", instance=OLD), True, "earlier name prefix"),
        # The "nevers": each is kept whatever else is true of it.
        ("online", agent("gpu-5", status="online"), False, "online agent is never removed"),
        ("busy", agent("gpu-5", busy=True), False, "busy"),
        ("no marker", agent("gpu-5", instance=None), False, "no gpuci-tui marker"),
        ("another host", agent("gpu-5", instance=OLD, host="gpu-host-2"), False, "gpu-host-2"),
        ("another host, our instance", agent("gpu-5", host="gpu-host-2"), False, "gpu-host-2"),
        ("a current lane, offline", agent("gpu-1"), False, "current lane"),
        ("a current standby lane", agent("gpu-0-b"), False, "current lane"),
        ("a live daemon's, this host", agent("x-0", instance=LIVE), False, "another daemon"),
        ("online and not ours", agent("z", instance=None, status="online"), False, "marker"),
    ],
)
def test_verdict(case: str, registration: Agent, stale: bool, why: str) -> None:
    judged = verdict(registration, OWNER, CURRENT)
    assert (judged.stale, why in judged.why) == (stale, True), (case, judged)


def test_another_hosts_agent_is_kept_even_offline_with_our_prefix() -> None:
    """Two hosts given one prefix in one pool share an instance id: the host marker decides."""
    other = agent("gpu-9", host="gpu-host-2", changed="2020-01-01T00:00:00Z")
    assert not stale_registrations([other], OWNER, CURRENT, NOW)


def test_the_list_is_oldest_first_with_how_long_offline() -> None:
    agents = [
        agent("gpu-5", changed="2026-11-25T12:00:00Z"),
        agent("old-0", instance=OLD, changed="2026-11-19T12:00:00.5Z"),
        agent("gpu-1"),  # a current lane: kept
        agent("gpu-6", status="online"),
    ]
    found = stale_registrations(agents, OWNER, CURRENT, NOW)
    assert [s.name for s in found] == ["old-0", "gpu-5"]
    assert found[0].offline_seconds == pytest.approx(7 * 86400 - 0.5)
    assert found[1].offline_seconds == pytest.approx(86400)
    assert (found[0].instance, found[0].status) == (OLD, "offline")


@pytest.mark.parametrize(
    ("changed", "created", "seconds"),
    [
        ("2026-11-26T11:00:00Z", None, 3600.0),
        (
            None,
            "2026-11-26T10:00:00",
            7200.0,
        ),  # no statusChangedOn: since registered; no offset: UTC
        ("0001-01-01T00:00:00", None, None),  # the service's "unset" date
        ("yesterday", None, None),
    ],
)
def test_offline_time(changed: str | None, created: str | None, seconds: float | None) -> None:
    registration = Agent(
        id=1,
        name="gpu-7",
        status_changed_on=changed,
        created_on=created,
        system_capabilities={MARKER_INSTANCE: OURS, MARKER_HOST: HOST},
    )
    (found,) = stale_registrations([registration], OWNER, CURRENT, NOW)
    assert found.offline_seconds == (None if seconds is None else pytest.approx(seconds))


def test_due_for_removal_is_offline_longer_than_the_setting() -> None:
    agents = [
        agent("gpu-5", changed="2026-11-18T12:00:00Z"),  # 8 days
        agent("gpu-6", changed="2026-11-20T12:00:00Z"),  # 6 days
        Agent(id=3, name="gpu-8", system_capabilities={MARKER_INSTANCE: OURS, MARKER_HOST: HOST}),
    ]
    found = stale_registrations(agents, OWNER, CURRENT, NOW)
    assert len(found) == 3
    due = due_for_removal(found, 7 * 86400)
    assert [s.name for s in due] == ["gpu-5"]  # an unknown offline time is never due
