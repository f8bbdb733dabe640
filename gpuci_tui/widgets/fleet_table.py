"""The fleet overview's widgets: one row per host, the whole fleet in a line, the selected host in full.

Rows come from `gpuci_tui.core.fleet.rows` (problems first, then by name).
Rows are keyed by the host's position in the fleet. Until the operator moves
the cursor it stays on the top row (the host that most needs attention);
after that it stays on the host they chose when the order changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual import events
from textual.widget import Widget

from gpuci_tui.core.fleet.labels import short_label, target_around
from gpuci_tui.core.fleet.link import LinkState
from gpuci_tui.core.fleet.rows import FleetTotals, HostRow, Severity
from gpuci_tui.core.formatting import cut_words, duration
from gpuci_tui.core.host_readings import queued_words
from gpuci_tui.core.models import HealthState
from gpuci_tui.widgets.format import ago, until
from gpuci_tui.widgets.keyed_table import Column, KeyedTable, fit_text

#: The columns, most important kept longest; Problems takes the spare room and the
#: detail line under the table shows the selected host's problems in full.
COLUMNS: tuple[Column, ...] = (
    Column("host", "Host", 8, max_width=24, priority=90),
    Column("link", "Link", 6, priority=80),
    Column("busy", "Busy", 4, priority=70),
    Column("idle", "Idle", 4, priority=65),
    Column("standby", "Stby", 4, priority=40),
    Column("parked", "Park", 4, priority=60),
    Column("drained", "Drain", 5, priority=35),
    Column("queued", "Queue", 5, priority=50),
    Column("gpus", "GPU", 3, max_width=8, priority=30),
    Column("azure", "Azure", 7, priority=45),
    # Only while some host says (`FleetTable.show_rows`): its calls to the organisation.
    Column("calls", "API/m", 5, priority=32),
    # Only while some host has agents on their way (`FleetTable.show_rows`); last of
    # the counts, so that the others keep the places operators know them by.
    Column("starting", "Start", 5, priority=62),
    Column("problems", "Problems", 8, max_width=120, priority=25, grow=True),
)

_OPTIONAL = {"starting", "calls"}
"""Columns shown only while some row has something to say in them."""

_AZURE_CELLS: dict[HealthState, tuple[str, str]] = {
    HealthState.OK: ("✓ ok", "green"),
    HealthState.AUTH_FAILED: ("✗ PAT", "bold red"),
    HealthState.UNREACHABLE: ("✗ down", "bold red"),
    HealthState.ERROR: ("✗ error", "bold red"),
    HealthState.RATE_LIMITED: ("⏳ limit", "yellow"),
    HealthState.UNKNOWN: ("…", "bright_black"),
}
_LINK_CELLS: dict[LinkState, tuple[str, str]] = {
    LinkState.UP: ("● up", "green"),
    LinkState.CONNECTING: ("… wait", "cyan"),
    LinkState.DOWN: ("✗ down", "bold red"),
}
_SEVERITY_STYLES = {Severity.DOWN: "red", Severity.ERROR: "red", Severity.WARNING: "yellow"}


def _count(value: int, row: HostRow, style: str = "") -> Text:
    if not row.seen:
        return Text("-", style="bright_black", justify="right")
    shown = style if value and not row.stale else ""
    return Text(str(value), style="bright_black" if row.stale else shown, justify="right")


def row_cells(row: HostRow) -> dict[str, Text]:
    """The cells of one host's row (pure; used by the table and the tests)."""
    link, link_style = _LINK_CELLS[row.link]
    azure, azure_style = _AZURE_CELLS.get(row.azure, ("?", ""))
    if not row.seen or row.stale:
        azure, azure_style = "-", "bright_black"
    problems = "; ".join(row.problems) or "-"
    queued = "-" if row.queued is None or not row.seen else str(row.queued)
    if row.queued_capped and row.seen:
        queued += "+"  # read at the service's cap: that many or more, never exactly
    calls = "-" if row.calls_per_minute is None or row.stale else str(row.calls_per_minute)
    dim = "bright_black" if row.stale else ""
    return {
        "host": Text(row.label, style="bold"),
        "link": Text(link, style=link_style),
        "busy": _count(row.busy, row, "bold yellow"),
        "idle": _count(row.idle, row, "green"),
        "starting": _count(row.starting, row, "cyan"),
        "standby": _count(row.standby, row, "cyan"),
        "parked": _count(row.parked, row, "bold red"),
        "drained": _count(row.drained, row, "magenta"),
        "queued": Text(queued, justify="right", style=dim),
        "gpus": Text(row.gpus_busy or "-", justify="right", style=dim),
        "azure": Text(azure, style=azure_style),
        "calls": Text(calls, justify="right", style=dim),
        "problems": Text(problems, style=_SEVERITY_STYLES.get(row.severity, "bright_black")),
    }


class FleetTable(KeyedTable):
    """Table of hosts; the cursor row is the selected host."""

    COLUMNS = COLUMNS

    def __init__(self, *, id: str | None = None) -> None:
        """Create the table (columns come with the first rows)."""
        super().__init__(id=id)
        self.border_title = "Hosts"
        self._host_order: list[int] = []
        self.labels: list[str] = []
        """Every host's label: a label is cut by what it shares with the others."""
        self.chosen = False
        """The operator moved the cursor (keys or mouse): it follows their host from now on."""

    def on_key(self, event: events.Key) -> None:
        """Any key that reaches the table (arrows, page keys) means a host was chosen."""
        self.chosen = True

    def on_click(self, event: events.Click) -> None:
        """A click chooses a host too."""
        self.chosen = True

    @property
    def selected(self) -> int | None:
        """The fleet index of the host under the cursor (None when there is none)."""
        key = self.selected_key
        return None if key is None else int(key)

    def show_rows(self, rows: Sequence[tuple[int, HostRow]]) -> None:
        """Show ``(fleet index, row)`` in this order, keeping the cursor on its host."""
        order = [index for index, _ in rows]
        cursor_to = None
        if order != self._host_order:
            # A new order: the top row (the host most in need) unless a host was chosen.
            selected = self.selected
            keep = selected if self.chosen and selected is not None else None
            first = order[0] if order else None
            target = keep if keep is not None else first
            cursor_to = None if target is None else str(target)
            self._host_order = order
        self.labels = [row.label for _, row in rows]
        # A host whose agents all start must not read like an empty one ("0 0 0 …"):
        # the Start column counts them, while there are any (else it only takes room);
        # API/m while some daemon counts its calls (an older one does not).
        shown = {
            "starting": any(row.starting for _, row in rows),
            "calls": any(row.calls_per_minute is not None for _, row in rows),
        }
        self.COLUMNS = tuple(c for c in COLUMNS if c.key not in _OPTIONAL or shown[c.key])
        self.set_rows([(str(index), row_cells(row)) for index, row in rows], cursor_to=cursor_to)

    def fit_cell(self, row: str, column: str, cell: Text, width: int) -> Text:
        """A long host label loses what it shares with the others first (`short_label`)."""
        if column == "host" and cell.cell_len > width:
            return Text(short_label(cell.plain, self.labels, width), style=cell.style)
        if column == "problems" and cell.cell_len > width:
            return Text(cut_words(cell.plain, width), style=cell.style)
        return fit_text(cell, width)

    @property
    def host_width(self) -> int | None:
        """The host column's width now (None before the first layout)."""
        return dict(self.layout_now.widths).get("host")


def totals_line(totals: FleetTotals, *, readonly: bool, width: int) -> Text:
    """``gpuci-tui fleet · 2/3 hosts up · 5 busy · 3 idle · 2 standby · 1 parked``.

    Too narrow, whole parts go (the title first, then the counts from the end),
    so no count is ever cut mid-word ("1 p…"); the read-only badge always stays.
    """
    down = totals.hosts - totals.up
    parts = [(f"{totals.up}/{totals.hosts} hosts up", "bold red" if down else "bold")]
    for value, word, style in (
        (totals.busy, "busy", "yellow"),
        (totals.idle, "idle", "green"),
        (totals.starting, "starting", "cyan"),
        (totals.standby, "standby", "cyan"),
        (totals.parked, "parked", "bold red"),
    ):
        if word == "starting" and not value:
            continue  # said only while agents are on their way
        parts.append((f"{value} {word}", style if value else ""))
    if totals.calls_per_minute is not None:
        # Every host of the fleet may sign in as one identity: one budget, their sum.
        parts.append((f"{totals.calls_per_minute} API calls/min", ""))
    badge = Text(" READ-ONLY ", style="bold black on yellow") if readonly else Text()
    room = max(0, width - badge.cell_len - 1)
    title = True

    def assemble() -> Text:
        left = Text(no_wrap=True)
        if title:
            left.append("gpuci-tui fleet", style="bold")
            left.append("  ")
        for index, (words, style) in enumerate(parts):
            if index:
                left.append(" · ", style="bright_black")
            left.append(words, style=style)
        return left

    left = assemble()
    while left.cell_len > room and (title or len(parts) > 1):
        if title:
            title = False
        else:
            parts.pop()
        left = assemble()
    left.truncate(room, overflow="ellipsis")  # only the hosts' count is left by then
    gap = max(1, width - left.cell_len - badge.cell_len)
    return Text.assemble(left, " " * gap, badge, no_wrap=True)


def uptimes(row: HostRow, now: float) -> list[str]:
    """``daemon pid 4321 up 3h02m`` and ``link up 1m35s``: each its own age, named.

    The daemon's uptime comes from the daemon (`rows.daemon_started`); a daemon that
    does not send its start shows its pid alone. The link's age is how long this
    console's connection to it has been up, which a dropped ssh link resets.
    """
    parts: list[str] = []
    daemon = "daemon" if row.pid is None else f"daemon pid {row.pid}"
    if row.daemon_since is not None:
        parts.append(f"{daemon} up {duration(now - row.daemon_since)}")
    elif row.pid is not None:
        parts.append(daemon)
    if row.since is not None:
        parts.append(f"link up {duration(now - row.since)}")
    return parts


def host_name(label: str, target: str) -> Text:
    """The host named once (``ci@gpu3:2222``, ``gpu3`` in bold), or an alias and its target."""
    around = target_around(label, target)
    if around is None:
        return Text.assemble((label, "bold"), (f" {target}", "bright_black"))
    before, after = around
    return Text.assemble((before, "bright_black"), (label, "bold"), (after, "bright_black"))


def host_detail(row: HostRow, now: float, collapsed: Sequence[tuple[str, Text]] = ()) -> Text:
    """The selected host in full: target, since when, its problems (whole: they come
    before the rest), the table's collapsed columns (``collapsed``: label and cell),
    daemon and link ages, agents and queue.
    """
    text = host_name(row.label, row.target)
    if row.link is LinkState.DOWN:
        text.append(f" · down since {ago(row.since, now)}", style="red")
        text.append(f", retry {until(row.retry_at, now)}" if row.retry_at else ", retrying…")
    style = _SEVERITY_STYLES.get(row.severity, "green")
    for problem in row.problems:
        text.append(" · ")
        text.append(problem, style=style)
    for label, cell in collapsed:
        if label not in ("Host", "Problems"):
            text.append(f" · {label} ", style="bright_black")
            text.append_text(cell)
    if row.link is LinkState.UP:
        for part in uptimes(row, now):
            text.append(f" · {part}", style="bright_black")
    if row.seen:
        text.append(f" · agents {row.slots}/{row.desired}")
        if row.stale:
            text.append(" (last known)", style="bright_black")
        elif row.queue_read_at is not None:
            # The queue is read less often than the agents: say how old it is.
            queue = queued_words(row.queued or 0, row.queued_capped)
            text.append(f" · queue {queue} read {ago(row.queue_read_at, now)}")
        if row.stale_registrations:
            # Only when some are left: its dashboard's x lists them and removes them.
            text.append(" · stale registrations ", style="bright_black")
            text.append(str(row.stale_registrations), style="yellow")
    if not row.problems:
        text.append(" · ")
        text.append("all well", style="green")
    return text


class FleetSummary(Widget):
    """The header line: the whole fleet at a glance."""

    def __init__(self, *, readonly: bool, id: str | None = None) -> None:
        """Create an empty header."""
        super().__init__(id=id)
        self._readonly = readonly
        self.totals = FleetTotals(0, 0, 0, 0, 0, 0)

    def show(self, totals: FleetTotals) -> None:
        """Render new totals."""
        self.totals = totals
        self.refresh()

    def render(self) -> Text:
        """One line sized to the width; the badge never gets cut."""
        return totals_line(self.totals, readonly=self._readonly, width=max(20, self.size.width))


class FleetDetail(Widget):
    """One line under the table: the selected host in full."""

    def __init__(self, *, clock: Callable[[], float], id: str | None = None) -> None:
        """Create an empty detail line."""
        super().__init__(id=id)
        self._clock = clock
        self.row: HostRow | None = None
        self.collapsed: list[tuple[str, Text]] = []

    def show(self, row: HostRow | None, collapsed: Sequence[tuple[str, Text]] = ()) -> None:
        """Describe ``row`` (None: no host) and the table's collapsed cells of its row."""
        self.row = row
        self.collapsed = list(collapsed)
        # As tall as the text: a long reason takes another line (Textual keeps the
        # content height per width, so it must be forgotten when the text changes).
        self.clear_cached_dimensions()
        self.refresh(layout=True)

    def render(self) -> Text:
        """The detail line, wrapped to the width at word boundaries (three lines at most)."""
        if self.row is None:
            return Text("no host selected", style="bright_black")
        return host_detail(self.row, self._clock(), self.collapsed)
