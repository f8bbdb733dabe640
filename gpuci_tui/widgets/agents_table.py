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
    cut_text,
    duration,
    exit_label,
    gpu_use_text,
    gpus_label,
    job_label,
    standby_text,
    state_text,
)
from gpuci_tui.widgets.keyed_table import Column, KeyedTable, fit_text

FIGURES_OVER = 35
"""Columns below this priority collapse to show the jobs' GPU figures (GPU ids, last exit…)."""
JOB_IDEAL_MAX = 48
"""The most cells of a job label other columns collapse for (a longer one is cut at a word)."""

#: The columns, most important kept longest; the job takes the spare room.
COLUMNS: tuple[Column, ...] = (
    Column("slot", "#", 1, priority=90),
    Column("agent", "Agent", 8, max_width=28, priority=80),
    Column("state", "State", 7, max_width=17, priority=85),
    Column("standby", "Standby", 7, priority=40),
    Column("job", "Job", 16, priority=70, grow=True),
    Column("uptime", "Up", 6, priority=50),
    Column("gpus", "GPU", 3, max_width=8, priority=30),
    Column("exit", "Last exit", 14, max_width=40, priority=20),
    Column("container", "Container", 12, priority=10),
    Column("message", "Message", 20, max_width=60, priority=5),
)


def job_cell(slot: SlotSnapshot, width: int | None, *, figures: bool) -> Text:
    """The job, and with ``figures`` (a busy row of a GPU-measuring supervisor) its GPU use now.

    The figures are right-aligned at the end of the cell, so they line up from row
    to row. The job's name comes first: the table shows the figures only where every
    job's label fits whole beside them (`AgentsTable.fit_cell`); the detail line
    under the table tells them anyway. ``width`` None: the whole cell.
    """
    if slot.job is None or not figures:
        return Text(job_label(slot.job, width))
    use = gpu_use_text(slot.gpu_memory_bytes, slot.gpu_util_percent)
    if width is None:
        width = len(job_label(slot.job)) + 1 + GPU_USE_WIDTH
    room = width - GPU_USE_WIDTH - 1
    text = Text(job_label(slot.job, room).ljust(room + 1 + GPU_USE_WIDTH - len(use.plain)))
    text.append_text(use)
    return text


def label_width(slot: SlotSnapshot) -> int:
    """Cells of the slot's job label alone (``-`` without a job)."""
    return len(job_label(slot.job))


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
        "job": job_cell(slot, None, figures=measured and slot.job is not None),
        "uptime": Text(duration(uptime), justify="right"),
        "gpus": Text(gpus_label(slot.gpus)),
        "exit": exit_label(slot.last_exit),
        "container": Text((slot.container_id or "-")[:12], style="bright_black"),
        "message": Text(slot.message or "-", style="" if slot.message else "bright_black"),
    }


def fitted_columns(
    rows: Sequence[tuple[str, dict[str, Text]]], names: Sequence[str], labels: int = 0
) -> tuple[Column, ...]:
    """`COLUMNS` with minimum widths fitted to what the rows hold.

    A narrow screen must never cut the agents' names ("ceo-fl1…" for every
    slot) while the Job column keeps 16 cells for a ``-``: the Agent column is at
    least as wide as the longest name, the Job column asks for its 16 only while
    a job runs, and GPU is shown whole or collapsed (never "no…"). ``labels``: the
    widest job label (figures aside): the columns less important than the job
    give way until every label shows whole ('train - main' 20261122.3, not 'trai…').
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
            column = replace(
                column,
                min_width=min(column.min_width, max(widest["job"], 3)),
                ideal=min(labels, JOB_IDEAL_MAX),
                # The GPU figures beside the whole labels: worth the last exit's and the
                # container's room (the detail line tells both), not the uptime's.
                roomy=(min(labels, JOB_IDEAL_MAX) + 1 + GPU_USE_WIDTH, FIGURES_OVER),
            )
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
        slots = [self._slots[key] for key in keys]
        rows = [(slot.key, row_cells(slot, now, measured=self._measured)) for slot in slots]
        labels = max((label_width(slot) for slot in slots), default=0)
        self.COLUMNS = fitted_columns(rows, [slot.name for slot in slots], labels)
        self.set_rows(rows)

    def fit_cell(self, row: str, column: str, cell: Text, width: int) -> Text:
        """The job cell is laid out anew: the job's label whole first, then its GPU figures.

        The figures show only where every busy row's label fits whole beside them,
        so they line up; they end where the longest job's figures end (or at the
        column's edge), not at the far end of a wide column, away from their job.
        """
        slot = self._slots.get(row)
        if column != "job" or slot is None or slot.job is None:
            return fit_text(cell, width)
        widest = max(cells["job"].cell_len for cells in self.natural_rows.values())
        figures = self._measured and width >= self._widest_label() + 1 + GPU_USE_WIDTH
        return job_cell(slot, min(width, widest) if figures else width, figures=figures)

    def _widest_label(self) -> int:
        return max((label_width(s) for s in self._slots.values() if s.job is not None), default=0)


#: Collapsed columns the detail line tells anyway, so it does not repeat them.
_IN_DETAIL = {"Agent", "State", "Job", "Last exit", "Message"}


def slot_detail(slot: SlotSnapshot, now: float, collapsed: Sequence[tuple[str, Text]] = ()) -> Text:
    """Everything about one slot in a line: the table may be too narrow for it.

    ``collapsed``: ``(label, cell)`` of the table's collapsed columns, told right
    after the job, its GPU use and the message, so a narrow screen still shows
    them, and the job first.
    """
    text = Text.assemble((slot.name, "bold"), " ", state_text(slot, now), no_wrap=True)
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
    for label, cell in collapsed:
        if label not in _IN_DETAIL:
            # "GPU 0,1" would read like the GPU use told above: say which GPUs.
            text.append(f" · {'GPUs' if label == 'GPU' else label} ", style="bright_black")
            text.append_text(cell)
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
        return cut_text(slot_detail(self.slot, self._clock(), self.collapsed), self.size.width)
