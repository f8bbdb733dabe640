"""The agents table: one keyed row per slot, updated cell by cell.

Rows are keyed by slot number and only changed cells are rewritten, so a new
snapshot never flickers the table and the cursor stays on the slot the operator
selected (the selection *is* the cursor row).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from rich.text import Text
from textual.widget import Widget

from gpuci_tui.core.formatting import image_label
from gpuci_tui.core.models import SlotSnapshot, SlotState, SupervisorSnapshot
from gpuci_tui.core.wording import plural
from gpuci_tui.widgets.format import (
    GPU_USE_WIDTH,
    clock_time,
    duration,
    exit_label,
    gpu_use_text,
    gpus_label,
    job_label,
    standby_text,
    state_text,
)
from gpuci_tui.widgets.keyed_table import Column, KeyedTable, fit_text

#: The columns, most important kept longest; the job takes the spare room.
COLUMNS: tuple[Column, ...] = (
    Column("slot", "#", 1, priority=90),
    Column("agent", "Agent", 8, max_width=28, priority=80),
    Column("state", "State", 7, max_width=17, priority=85),
    Column("standby", "Standby", 7, priority=40),
    Column("job", "Job", 16, priority=70, grow=True, ideal=25),
    Column("uptime", "Up", 6, priority=50),
    Column("gpus", "GPU", 3, max_width=8, priority=30),
    Column("exit", "Last exit", 14, max_width=40, priority=20),
    Column("container", "Container", 12, priority=10),
    Column("message", "Message", 20, max_width=60, priority=5),
)


def job_cell(slot: SlotSnapshot, width: int | None, *, measured: bool) -> Text:
    """The job, and on a busy row of a GPU-measuring supervisor its GPU figures now.

    The figures are right-aligned at the end of the cell and the job label gives
    way to them (the detail line under the table shows the job in full): job,
    container and GPU use belong on one row. ``width`` None: the whole label.
    """
    if slot.job is None or not measured:
        return Text(job_label(slot.job, width))
    use = gpu_use_text(slot.gpu_memory_bytes, slot.gpu_util_percent)
    if width is None:
        width = len(job_label(slot.job)) + 1 + GPU_USE_WIDTH
    room = width - GPU_USE_WIDTH - 1
    text = Text(job_label(slot.job, room).ljust(room + 1 + GPU_USE_WIDTH - len(use.plain)))
    text.append_text(use)
    return text


def row_cells(slot: SlotSnapshot, now: float, *, measured: bool = False) -> dict[str, Text]:
    """The cells of one slot's row at their natural width (pure; used by the table and the tests).

    ``measured``: the supervisor measures GPU use per job (`SupervisorSnapshot.gpu_accounting`).
    """
    uptime = None if slot.started_at is None else now - slot.started_at
    agent = Text(slot.name)
    # With hot standby, a busy agent is disabled on purpose (its next container is the
    # standby); only without it is a disabled agent something to point out.
    if (
        slot.agent_enabled is False
        and slot.state not in (SlotState.DRAINING, SlotState.DRAINED)
        and slot.standby in ("", "off")
    ):
        agent.append(" (disabled)", style="magenta")
    return {
        "slot": Text(slot.key, justify="right"),
        "agent": agent,
        "state": state_text(slot, now),
        "standby": standby_text(slot),
        "job": job_cell(slot, None, measured=measured),
        "uptime": Text(duration(uptime), justify="right"),
        "gpus": Text(gpus_label(slot.gpus)),
        "exit": exit_label(slot.last_exit),
        "container": Text((slot.container_id or "-")[:12], style="bright_black"),
        "message": Text(slot.message or "-", style="" if slot.message else "bright_black"),
    }


def fitted_columns(
    rows: Sequence[tuple[str, dict[str, Text]]], names: Sequence[str]
) -> tuple[Column, ...]:
    """`COLUMNS` with minimum widths fitted to what the rows hold.

    A narrow screen must never cut the agents' names ("ceo-fl1…" for every
    slot) while the Job column keeps 16 cells for a ``-``: the Agent column is at
    least as wide as the longest name, the Job column asks for its 16 only while
    a job runs, and GPU is shown whole or collapsed (never "no…").
    """
    widest = {
        key: max((cells[key].cell_len for _, cells in rows), default=0) for key in ("job", "gpus")
    }
    longest = max((len(name) for name in names), default=0)
    fitted = []
    for column in COLUMNS:
        if column.key == "agent":
            column = replace(column, min_width=max(column.min_width, min(longest, 28)))
        elif column.key == "job":
            column = replace(column, min_width=min(column.min_width, max(widest["job"], 3)))
        elif column.key == "gpus":
            column = replace(column, min_width=max(column.min_width, min(widest["gpus"], 8)))
        fitted.append(column)
    return tuple(fitted)


def _order(key: str) -> tuple[str, int]:
    """Rows by group, then by slot number."""
    group, _, number = key.rpartition("/")
    return group, int(number)


class AgentsTable(KeyedTable):
    """Table of agent slots; the cursor row is the selected slot."""

    COLUMNS = COLUMNS

    def __init__(self, *, clock: Callable[[], float], id: str | None = None) -> None:
        """Create the table.

        Args:
            clock: Wall clock for uptimes and backoff countdowns.
            id: Widget id.
        """
        super().__init__(id=id)
        self._clock = clock
        self._slots: dict[str, SlotSnapshot] = {}
        self._measured = False
        self.border_title = "Agents"

    @property
    def selected_slot(self) -> int | None:
        """The slot number under the cursor, or None when the table is empty."""
        key = self.selected_key
        return None if key is None else int(key.rpartition("/")[2])

    def show_snapshot(self, snapshot: SupervisorSnapshot) -> None:
        """Bring the rows in line with ``snapshot``, touching only what changed."""
        self._measured = snapshot.gpu_accounting
        self._slots = {slot.key: slot for slot in snapshot.slots}
        self.tick()

    def tick(self) -> None:
        """Re-render the time-dependent cells (uptime, backoff countdown)."""
        now = self._clock()
        keys = sorted(self._slots, key=_order)
        rows = [(key, row_cells(self._slots[key], now, measured=self._measured)) for key in keys]
        self.COLUMNS = fitted_columns(rows, [self._slots[key].name for key in keys])
        self.set_rows(rows)

    def fit_cell(self, row: str, column: str, cell: Text, width: int) -> Text:
        """The job cell is laid out anew so its GPU figures stay whole and line up.

        They end where the longest job's figures end (or at the column's edge),
        not at the far end of a wide column, away from their job.
        """
        slot = self._slots.get(row)
        if column == "job" and slot is not None and self._measured and slot.job is not None:
            widest = max(cells["job"].cell_len for cells in self.natural_rows.values())
            return job_cell(slot, min(width, widest), measured=True)
        return fit_text(cell, width)


#: Collapsed columns the detail line tells anyway, so it does not repeat them.
_IN_DETAIL = {"Agent", "State", "Job", "Last exit", "Message"}


def slot_detail(slot: SlotSnapshot, now: float, collapsed: Sequence[tuple[str, Text]] = ()) -> Text:
    """Everything about one slot in a line: the table may be too narrow for it.

    ``collapsed``: ``(label, cell)`` of the table's collapsed columns, told right
    after the state so a narrow screen still shows them.
    """
    text = Text.assemble((slot.name, "bold"), " ", state_text(slot, now), no_wrap=True)
    for label, cell in collapsed:
        if label not in _IN_DETAIL:
            # "GPU 0,1" would read like the GPU use told below: say which GPUs.
            text.append(f" · {'GPUs' if label == 'GPU' else label} ", style="bright_black")
            text.append_text(cell)
    job = job_label(slot.job) if slot.job is not None else ""
    if job and job not in slot.message:
        text.append(f" · {job}")
    if slot.job is not None and (
        slot.gpu_memory_bytes is not None or slot.gpu_util_percent is not None
    ):
        text.append(" · GPU ")
        text.append_text(gpu_use_text(slot.gpu_memory_bytes, slot.gpu_util_percent))
    if slot.message and slot.message != str(slot.state):  # "drained · drained" says it twice
        text.append(f" · {slot.message}")
    if slot.last_exit is not None:
        text.append(" · last exit ", style="bright_black")
        text.append_text(exit_label(slot.last_exit))
        if slot.last_exit.at:
            text.append(f" at {clock_time(slot.last_exit.at)}", style="bright_black")
    if slot.jobs_done:
        text.append(f" · {plural(slot.jobs_done, 'job')} done", style="bright_black")
    standby = next((a for a in slot.agents if a.role == "standby"), None)
    if standby is not None:
        text.append(f" · standby {standby.name} {standby.phase}", style="bright_black")
    if slot.image_id:
        # Last: the least urgent fact, the first one a narrow screen cuts.
        row = next((a for a in slot.agents if a.lane == slot.lane and a.image), None)
        runs = row.image if row is not None else slot.image
        text.append(" · image ", style="bright_black")
        text.append(image_label(runs, slot.image_id, slot.repo_digest))
        if slot.image and runs != slot.image:
            text.append(f" (configured: {slot.image})", style="yellow")
        # Whether its agent waits for the daemon's go (new registrations need no idle slot).
        gate = "yes" if row is not None and row.start_gate else "no"
        text.append(f" · start gate {gate}", style="bright_black")
    return text


class SlotDetail(Widget):
    """One line under the table: the selected slot in full (message, last exit)."""

    def __init__(self, *, clock: Callable[[], float], id: str | None = None) -> None:
        """Create an empty detail line."""
        super().__init__(id=id)
        self._clock = clock
        self.slot: SlotSnapshot | None = None
        self.collapsed: list[tuple[str, Text]] = []

    def show(self, slot: SlotSnapshot | None, collapsed: Sequence[tuple[str, Text]] = ()) -> None:
        """Describe ``slot`` (None: nothing selected) and the table's collapsed cells of its row."""
        self.slot = slot
        self.collapsed = list(collapsed)
        self.refresh()

    def render(self) -> Text:
        """The detail line, cut to the width."""
        if self.slot is None:
            return Text("no agent selected", style="bright_black")
        text = slot_detail(self.slot, self._clock(), self.collapsed)
        text.truncate(max(1, self.size.width), overflow="ellipsis")
        return text
