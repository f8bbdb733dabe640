"""The last supervisor events, newest at the bottom: each once, in time order, wrapped at words.

The log keeps its events (`MergedEvents`), not only their lines: an event a
daemon sends again after a reconnect is not shown twice, one that belongs
further up (another host's, in the fleet) goes in its place by time, and when
the log's width changes every event is laid out again.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import events
from textual.widgets import RichLog

from gpuci_tui.core.fleet.event_merge import MergedEvents, Placed
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

    Events wrap at whole words to the log's width, and wrap anew when it changes
    (they are kept, up to `MAX_EVENTS`, to be laid out again).
    """

    def __init__(
        self, *, id: str | None = None, source_label: Callable[[int], Text] | None = None
    ) -> None:
        """Create an empty log.

        ``source_label``: the text that starts the lines of each source's events (the
        fleet's host column); None: they start with the time.
        """
        super().__init__(id=id, max_lines=MAX_EVENTS, wrap=False, markup=False, highlight=False)
        self.border_title = "Events"
        self.count = 0
        """Events shown (each once)."""
        self.events: MergedEvents[dict[int, str]] = MergedEvents(MAX_EVENTS)
        self._source_label = source_label
        self._laid_out_at = 0
        self._rewrite_due = False

    def add(self, event: SupervisorEvent, slot_names: dict[int, str], *, source: int = 0) -> bool:
        """Show one event of ``source`` in its place by time; False when it is shown already."""
        position = self.events.add(source, event, dict(slot_names))
        if position is None:
            return False
        self.count += 1
        if position == len(self.events) - 1 and not self._rewrite_due:
            self.write(self._lines(self.events.entries[position], self._width()))
        else:
            self._rewrite_soon()  # an earlier event: the ones after it move down
        return True

    def name_slots(self, slot_names: dict[int, str], *, source: int = 0) -> None:
        """Name the slots of ``source``'s events that came before any of its snapshots.

        A daemon sends its recent events before its snapshot: until then its slots
        have no names ("slot 6"); they are told once the snapshot says them.
        """
        unnamed = [e for e in self.events.entries if e.source == source and not e.extra]
        for entry in unnamed:
            entry.extra.update(slot_names)
        if unnamed and slot_names:
            self._rewrite_soon()

    def _width(self) -> int | None:
        # The scrollbar's room is kept from the start: it appears with the first event
        # that does not fit, and the lines written before must not be wider than what
        # is left then.
        width = self.content_region.width - self.styles.scrollbar_size_vertical
        self._laid_out_at = width
        return width if width > 0 else None

    def on_resize(self, event: events.Resize) -> None:
        """A new width: the events wrap anew."""
        room = self.content_region.width - self.styles.scrollbar_size_vertical
        if len(self.events) and room != self._laid_out_at:
            self._rewrite()

    def _rewrite_soon(self) -> None:
        # Once per batch: a host's whole backlog arriving costs one rewrite, not one per event.
        if not self._rewrite_due:
            self._rewrite_due = True
            self.call_after_refresh(self._rewrite)

    def _rewrite(self) -> None:
        self._rewrite_due = False
        self.clear()
        width = self._width()
        for entry in self.events.entries:
            self.write(self._lines(entry, width))

    def _lines(self, entry: Placed[dict[int, str]], width: int | None) -> Text:
        """The entry's line(s): its source's label first, its message wrapped under itself."""
        if self._source_label is None:
            return event_line(entry.event, entry.extra, width)
        label = self._source_label(entry.source)
        room = None if width is None else max(1, width - label.cell_len)
        text = Text(no_wrap=True)
        for index, line in enumerate(event_line(entry.event, entry.extra, room).split("\n")):
            if index:
                text.append("\n")
            text.append_text(label if index == 0 else Text(" " * label.cell_len))
            text.append_text(line)
        return text
