"""Follow one agent slot's container output.

The runtime only offers "the last N lines" (`logs_tail`), so every poll fetches
a tail and only the lines after the overlap with the previous tail are appended.
When the slot's container is replaced (one job per container), the view goes on
with the new container under a separator, so an operator can watch a slot across
jobs. Polling runs in a thread worker and is re-armed only after the previous
poll finished, so a slow engine delays polls instead of stacking them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from textual import on, work
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Footer, Log, Static

from gpuci_tui.screens.help import navigation, show_help
from gpuci_tui.ui_messages import LogTailFetched

TAIL_LINES = 500
"""Lines fetched per poll; more output than this between two polls is reported as a gap."""
MAX_LINES = 10_000
"""Lines kept in the view."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|\r")


class LogSource(Protocol):
    """Where a container's last lines come from: the container runtime, or a remote daemon."""

    def logs_tail(self, container_id: str, lines: int = 20) -> list[str]:
        """The container's last ``lines`` (blocking)."""
        ...


def clean(line: str) -> str:
    """Drop colour codes and carriage returns: the view shows plain text."""
    return _ANSI.sub("", line)


def new_tail_lines(previous: Sequence[str], current: Sequence[str]) -> tuple[list[str], bool]:
    """Lines of ``current`` that come after what ``previous`` already showed.

    Returns:
        ``(new_lines, gap)``: ``gap`` is True when the tails do not overlap at all,
        i.e. more lines were written between two polls than one tail holds.
    """
    if not previous:
        return list(current), False
    longest = min(len(previous), len(current))
    for size in range(longest, 0, -1):
        if list(previous[-size:]) == list(current[:size]):
            return list(current[size:]), False
    return list(current), bool(current)


class LogScreen(Screen[None]):
    """Full-screen, following view of a slot's container output."""

    BINDINGS = [
        Binding("escape,q", "close", "Close", id="logs.close", tooltip="Back to the dashboard"),
        Binding(
            "f",
            "toggle_follow",
            "Follow",
            id="logs.follow",
            tooltip="Pause/resume following new lines",
        ),
        Binding("question_mark", "help", "Help", id="logs.help", tooltip="The keys of the logs"),
    ]
    NAVIGATION = (
        navigation("↑ ↓ pgup pgdn home end", "Scroll", "Scroll the lines (f pauses following)",
                   "up", "down", "pageup", "pagedown", "home", "end"),
    )  # fmt: skip

    def __init__(
        self,
        *,
        slot_name: str,
        container_of: Callable[[], str | None],
        runtime: LogSource,
        interval: float,
        earlier_lines: Sequence[str] = (),
    ) -> None:
        """Create the view.

        Args:
            slot_name: The agent slot's name (title).
            container_of: Returns the slot's current container id (None: no container).
            runtime: Where the logs come from (blocking; called from a thread).
            interval: Seconds between polls.
            earlier_lines: Last lines of the previous container, shown when none runs.
        """
        super().__init__()
        self.slot_name = slot_name
        self._container_of = container_of
        self._runtime = runtime
        self._interval = interval
        self._earlier = list(earlier_lines)
        self._container: str | None = None
        self._previous: list[str] = []
        self._gone_noted = False
        self._timer: Timer | None = None
        self.following = True

    def compose(self) -> Iterable[Widget]:
        """Title line, the log, the footer."""
        yield Static("", id="log-title", markup=False)
        yield Log(id="log-view", max_lines=MAX_LINES, auto_scroll=True)
        yield Footer(compact=True, show_command_palette=False)

    @property
    def log_view(self) -> Log:
        """The log widget."""
        return self.query_one("#log-view", Log)

    def on_mount(self) -> None:
        """Show what is known at once, then start polling."""
        self._container = self._container_of()
        if self._container is None:
            if self._earlier:
                self.log_view.write_line(
                    "── no container runs now; last lines of the previous one ──"
                )
                self.log_view.write_lines([clean(line) for line in self._earlier])
            else:
                self.log_view.write_line(
                    "── no container runs in this slot now; waiting for one ──"
                )
        self._update_title()
        self.log_view.focus()
        self._poll()

    def _update_title(self) -> None:
        container = self._container[:12] if self._container else "no container"
        state = "following" if self.following else "paused (f to follow)"
        self.query_one("#log-title", Static).update(
            f"Logs · {self.slot_name} · {container} · {state}"
        )

    def _poll(self) -> None:
        current = self._container_of()
        if current != self._container and current is not None:
            self.log_view.write_line(f"── new container {current[:12]} ──")
            self._container = current
            self._previous = []
            self._gone_noted = False
            self._update_title()
        if self._container is None:
            self._timer = self.set_timer(self._interval, self._poll)
            return
        self._fetch(self._container)

    @work(thread=True, exclusive=True, group="logs", exit_on_error=False)
    def _fetch(self, container_id: str) -> None:
        try:
            lines = self._runtime.logs_tail(container_id, TAIL_LINES)
        except Exception as exc:  # noqa: BLE001 - shown in the view, polling goes on
            self.post_message(
                LogTailFetched(container_id, [], error=str(exc) or type(exc).__name__)
            )
            return
        self.post_message(LogTailFetched(container_id, lines))

    @on(LogTailFetched)
    def _on_tail(self, message: LogTailFetched) -> None:
        if message.container_id == self._container:
            self._merge(message)
        self._timer = self.set_timer(self._interval, self._poll)

    def _merge(self, message: LogTailFetched) -> None:
        log = self.log_view
        if message.error:
            log.write_line(f"── could not read the logs: {message.error} ──")
            return
        if not message.lines:
            if self._previous and not self._gone_noted:
                log.write_line("── the container has exited (no more output) ──")
                self._gone_noted = True
            return
        lines, gap = new_tail_lines(self._previous, message.lines)
        if gap:
            log.write_line("── … earlier lines skipped (more output than one poll holds) ──")
        if lines:
            log.write_lines([clean(line) for line in lines], scroll_end=self.following)
        self._previous = list(message.lines)

    def action_toggle_follow(self) -> None:
        """Pause or resume scrolling to new lines (they are still collected)."""
        self.following = not self.following
        self.log_view.auto_scroll = self.following
        if self.following:
            self.log_view.scroll_end(animate=False)
        self._update_title()

    def action_help(self) -> None:
        """The keys of the log view, as bound now."""
        show_help(self, f"Keys of the logs of {self.slot_name}", extra=self.NAVIGATION)

    def action_close(self) -> None:
        """Back to the dashboard; polling stops with the screen."""
        if self._timer is not None:
            self._timer.stop()
        self.dismiss(None)
