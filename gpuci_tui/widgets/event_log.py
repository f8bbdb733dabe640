"""The last supervisor events, newest at the bottom."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

from gpuci_tui.core.models import SupervisorEvent
from gpuci_tui.widgets.format import clock_time

MAX_EVENTS = 500
"""Events kept in the log (older ones scroll away)."""

#: Kinds that deserve attention get a colour; everything else is plain.
_KIND_STYLES = {
    "container_exited": "",
    "job_assigned": "yellow",
    "job_finished": "green",
    "job_lost": "bold red",
    "name_taken": "bold red",
    "slot_parked": "bold red",
    "drained": "magenta",
    "azure_error": "red",
    "docker_error": "red",
    "start_failed": "red",
    "oom": "bold red",
    "command": "cyan",
    "gpu_held": "yellow",
    "gpu_quarantined": "bold red",
    "gpu_fault": "bold red",
    "gpu_released": "green",
    "gpu_fault_ended": "green",
    "gpu_cleared": "green",
    "disk": "yellow",
    "image_removed": "yellow",
    "pull_started": "cyan",
    "pull_done": "green",
    "image_wait": "yellow",
    "cuda_incompatible": "bold red",
    "cuda_compatible": "green",
    "registration_removed": "yellow",
    "agent_updating": "yellow",
    "agent_version": "yellow",
    "agent_package": "yellow",
    "agent_package_refused": "bold red",
}


def event_line(event: SupervisorEvent, slot_names: dict[int, str]) -> Text:
    """``12:03:04 gpuhost-2 job_finished  'train' 20261122.3 succeeded``."""
    # The agent the event is about, not the slot's current one: lanes take turns.
    who = event.agent
    if not who and event.slot is not None:
        who = slot_names.get(event.slot, f"slot {event.slot}")
    style = _KIND_STYLES.get(event.kind, "")
    if not style and ("error" in event.kind or "fail" in event.kind):
        style = "red"
    return Text.assemble(
        (clock_time(event.at), "bright_black"),
        " ",
        (f"{who:<12}" if who else " " * 12, "bold"),
        " ",
        (f"{event.kind:<16}", style or "bright_black"),
        " ",
        event.message,
        no_wrap=True,
    )


class EventLog(RichLog):
    """A scrolling log of supervisor events (markup off: messages are literal)."""

    def __init__(self, *, id: str | None = None) -> None:
        """Create an empty log."""
        super().__init__(id=id, max_lines=MAX_EVENTS, wrap=False, markup=False, highlight=False)
        self.border_title = "Events"
        self.count = 0

    def add(self, event: SupervisorEvent, slot_names: dict[int, str]) -> None:
        """Append one event."""
        self.count += 1
        self.write(event_line(event, slot_names))
