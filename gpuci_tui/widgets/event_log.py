"""The last supervisor events, newest at the bottom."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual import events
from textual.widgets import RichLog

from gpuci_tui.core.formatting import wrap_words
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


def event_line(
    event: SupervisorEvent, slot_names: dict[int, str], width: int | None = None
) -> Text:
    """``12:03:04 gpuhost-2 job_finished  'train' 20261122.3 succeeded``.

    With ``width``, a message that does not fit goes on under itself, broken between
    whole words (`wrap_words`): never cut, never under the time.
    """
    # The agent the event is about, not the slot's current one: lanes take turns.
    who = event.agent
    if not who and event.slot is not None:
        who = slot_names.get(event.slot, f"slot {event.slot}")
    style = _KIND_STYLES.get(event.kind, "")
    if not style and ("error" in event.kind or "fail" in event.kind):
        style = "red"
    line = Text.assemble(
        (clock_time(event.at), "bright_black"),
        " ",
        (f"{who:<12}" if who else " " * 12, "bold"),
        " ",
        (f"{event.kind:<16}", style or "bright_black"),
        " ",
        no_wrap=True,
    )
    indent = line.cell_len
    if width is None or indent + len(event.message) <= width:
        line.append(event.message)
        return line
    under = "\n" + " " * indent
    line.append(under.join(wrap_words(event.message, width - indent)))
    return line


class EventLog(RichLog):
    """A scrolling log of supervisor events (markup off: messages are literal).

    Events added with `add` wrap at whole words to the log's width, and wrap anew
    when it changes (they are kept, up to `MAX_EVENTS`, to be laid out again).
    """

    def __init__(self, *, id: str | None = None) -> None:
        """Create an empty log."""
        super().__init__(id=id, max_lines=MAX_EVENTS, wrap=False, markup=False, highlight=False)
        self.border_title = "Events"
        self.count = 0
        self._events: deque[tuple[SupervisorEvent, dict[int, str]]] = deque(maxlen=MAX_EVENTS)
        self._laid_out_at = 0

    def add(self, event: SupervisorEvent, slot_names: dict[int, str]) -> None:
        """Append one event."""
        self.count += 1
        self._events.append((event, dict(slot_names)))
        self.write(event_line(event, slot_names, self._width()))

    def _width(self) -> int | None:
        # The scrollbar's room is kept from the start: it appears with the first event
        # that does not fit, and the lines written before must not be wider than what
        # is left then.
        width = self.content_region.width - self.styles.scrollbar_size_vertical
        self._laid_out_at = width
        return width if width > 0 else None

    def on_resize(self, event: events.Resize) -> None:
        """A new width: the events wrap anew."""
        super().on_resize(event)
        room = self.content_region.width - self.styles.scrollbar_size_vertical
        if self._events and room != self._laid_out_at:
            self.clear()
            width = self._width()
            for item, names in self._events:
                self.write(event_line(item, names, width))
