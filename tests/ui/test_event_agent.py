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
