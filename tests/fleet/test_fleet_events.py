"""The fleet's events: every host's merged by time, each once across reconnects, cut at words.

A daemon starts every subscription with its recent events (`ReplayHandle`
does the same), so a console that reconnects is sent them again.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuci_tui.app import make_app
from gpuci_tui.core.fleet.link import LinkState
from gpuci_tui.core.models import SupervisorEvent
from gpuci_tui.screens import dashboard
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.widgets.event_log import EventLog
from tests.fleet.fakes import (
    FAST,
    ReplayHandle,
    fleet_services,
    healthy_snapshot,
    member,
)
from tests.fleet.screen_helpers import open_host
from tests.ui.helpers import screen_text, wait_for
from tests.ui.scenarios import NOW

LONG = (
    "disabled on the server and stopped: its GPU 3 is held by a process that is not ours "
    "(pid 4242, python train.py)"
)


def backlog(offsets: list[float], name: str) -> list[SupervisorEvent]:
    return [
        SupervisorEvent(at=NOW - ago, kind="job_assigned", message=f"{name} {n}", slot=0, seq=n)
        for n, ago in enumerate(offsets, start=1)
    ]


def messages(log: EventLog) -> list[str]:
    return [entry.event.message for entry in log.events.entries]


def two_replaying_hosts() -> tuple[Any, ReplayHandle, ReplayHandle]:
    a = ReplayHandle(healthy_snapshot(), backlog([600, 300, 60], "a"))
    b = ReplayHandle(healthy_snapshot(pid=777), backlog([500, 200, 30], "b"))
    services = fleet_services(
        [member("gpu-a", "ci@gpu-a", a), member("gpu-b", "ci@gpu-b", b)], backoff=FAST
    )
    return make_app(services), a, b


@pytest.fixture(autouse=True)
def quick_dashboard_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host's dashboard reconnects its own stream quickly too."""
    monkeypatch.setattr(dashboard, "RECONNECT_BACKOFF", FAST)


async def test_backlogs_merge_by_time_and_a_reconnect_adds_only_what_is_new() -> None:
    app, a, b = two_replaying_hosts()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        await wait_for(pilot, lambda: screen.event_log.count == 6, what="both backlogs")
        assert messages(screen.event_log) == ["a 1", "b 1", "a 2", "b 2", "a 3", "b 3"]
        await pilot.pause()
        rows = [line for line in screen_text(app).splitlines() if "job_assigned" in line]
        assert [row.split("job_assigned")[1].strip(" │") for row in rows] == [
            "a 1", "b 1", "a 2", "b 2", "a 3", "b 3",
        ], "the newest at the bottom"  # fmt: skip

        # Host a's link drops (its ssh channel was killed) and comes back: the daemon sends
        # its recent events again, and one that happened meanwhile.
        a.drop()
        await wait_for(pilot, lambda: screen.statuses[0].state is not LinkState.UP, what="lost")
        a.recent.append(
            SupervisorEvent(at=NOW - 10, kind="job_finished", message="a 4", slot=0, seq=4)
        )
        a.restore()
        await wait_for(pilot, lambda: a.streams == 2, what="a reconnected")
        await wait_for(pilot, lambda: screen.statuses[0].state is LinkState.UP, what="a up")
        await wait_for(pilot, lambda: screen.event_log.count == 7, what="what was new")
        b.emit(NOW - 1, "b 4")
        await wait_for(pilot, lambda: screen.event_log.count == 8, what="b's new event")
        await pilot.pause()
        assert messages(screen.event_log) == [
            "a 1", "b 1", "a 2", "b 2", "a 3", "b 3", "a 4", "b 4",
        ]  # fmt: skip
        text = screen_text(app)
        assert text.count("a 3") == 1 and text.count("a 1") == 1, "each event once"


async def test_a_hosts_dashboard_keeps_each_event_once_across_its_reconnects() -> None:
    app, a, _ = two_replaying_hosts()
    async with app.run_test(size=(100, 30)) as pilot:
        dash = await open_host(pilot, "gpu-a")
        await wait_for(pilot, lambda: dash.event_log.count == 3, what="its backlog")
        streams = a.streams
        a.drop()
        await wait_for(pilot, lambda: not dash.reconnector.connected, what="its stream lost")
        a.restore()
        await wait_for(pilot, lambda: a.streams >= streams + 2, what="both streams back")
        a.emit(NOW - 2, "a 4")
        await wait_for(pilot, lambda: dash.event_log.count == 4, what="the new event")
        await pilot.pause()
        assert messages(dash.event_log) == ["a 1", "a 2", "a 3", "a 4"]


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_long_event_message_wraps_at_whole_words_under_itself(
    size: tuple[int, int],
) -> None:
    app, a, _ = two_replaying_hosts()
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        await wait_for(pilot, lambda: screen.event_log.count == 6, what="the backlogs")
        a.emit(NOW, LONG, kind="gpu_held")
        await wait_for(pilot, lambda: screen.event_log.count == 7, what="the long one")
        await pilot.pause()
        check_whole(screen_text(app), size[0])

        dash = await open_host(pilot, "gpu-a")
        await wait_for(pilot, lambda: dash.event_log.count == 4, what="its events")
        await pilot.pause()
        check_whole(screen_text(app), size[0])


def check_whole(text: str, width: int) -> None:
    """The long message is all there, broken between words, each part under the first."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if "gpu_held" in line)
    column = lines[first].index("gpu_held") + len("gpu_held".ljust(16)) + 1
    parts = []
    for line in lines[first:]:
        part = line[column:].rstrip(" │▁▃▅▇█")
        if not part or (parts and line[:column].strip(" │")):
            break  # the next event (or the border)
        parts.append(part.strip())
    assert " ".join(parts) == LONG, parts
    assert all(len(line) <= width for line in lines)
