"""Event rows name the agent the event is about, not the slot's current agent."""

from __future__ import annotations

from gpuci_tui.core.models import SupervisorEvent
from gpuci_tui.widgets.event_log import event_line


def test_an_event_of_the_standby_lane_names_the_standby() -> None:
    event = SupervisorEvent(
        at=0.0,
        kind="container_started",
        message="demo-gpu-0-b started (0123456789ab)",
        slot=0,
        agent="demo-gpu-0-b",
    )
    line = event_line(event, {0: "demo-gpu-0"}).plain
    assert line.split()[1] == "demo-gpu-0-b", line


def test_an_event_without_an_agent_names_the_slot() -> None:
    event = SupervisorEvent(at=0.0, kind="drained", message="drained", slot=0)
    assert event_line(event, {0: "demo-gpu-0"}).plain.split()[1] == "demo-gpu-0"


def test_a_long_message_wraps_under_itself_at_whole_words() -> None:
    message = "exit 137 (OOM) after 'inference-bench - main' 20261128.12: killed by the kernel"
    event = SupervisorEvent(at=0.0, kind="container_exited", message=message, slot=0)
    lines = event_line(event, {0: "demo-gpu-0"}, width=76).plain.split("\n")
    indent = len(lines[0]) - len(lines[0].split("container_exited ", 1)[1])
    assert len(lines) == 3 and all(len(line) <= 76 for line in lines)
    assert all(line[:indent].isspace() for line in lines[1:]), "under the message, not the time"
    assert " ".join(line[indent:] for line in lines) == message, "every word whole, in order"
    assert "\n" not in event_line(event, {0: "demo-gpu-0"}, width=200).plain


async def test_the_events_wrap_anew_when_the_terminal_is_resized() -> None:
    from gpuci_tui.app import make_app
    from tests.ui.fakes import FakeHandle, make_services
    from tests.ui.helpers import ready, screen_text, wait_for
    from tests.ui.scenarios import measured_snapshot

    handle = FakeHandle(measured_snapshot())
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(80, 30)) as pilot:
        await ready(pilot)
        handle.push(
            SupervisorEvent(
                at=0.0, kind="command", message="drain gpuhost-4 [asked from the console]", slot=3
            )
        )
        await wait_for(pilot, lambda: "console]" in screen_text(app), what="the wrapped event")
        lines = screen_text(app).splitlines()
        first = next(i for i, line in enumerate(lines) if "drain gpuhost-4 [asked" in line)
        assert "console]" not in lines[first] and "console]" in lines[first + 1]
        await pilot.resize_terminal(120, 30)
        await wait_for(
            pilot, lambda: "[asked from the console]" in screen_text(app), what="one line at 120"
        )
