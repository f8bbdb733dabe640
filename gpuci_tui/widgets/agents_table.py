"""The agents table: one keyed row per slot, updated cell by cell.

Rows are keyed by slot number and only changed cells are rewritten, so a new
snapshot never flickers the table and the cursor stays on the slot the operator
selected (the selection *is* the cursor row).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.widget import Widget
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist, RowKey

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
    truncate,
)

#: (key, label, fixed width or None for "fit the content").
COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("slot", "#", None),
    ("agent", "Agent", None),
    ("state", "State", 15),
    ("standby", "Standby", 8),
    ("job", "Job", 26),
    ("uptime", "Up", 6),
    ("gpus", "GPU", 4),
    ("exit", "Last exit", 22),
    ("container", "Container", 12),
    ("message", "Message", None),
)

_MESSAGE_WIDTH = 60


def job_cell(slot: SlotSnapshot, width: int, *, measured: bool) -> Text:
    """The job, and on a busy row of a GPU-measuring supervisor its GPU figures now.

    The figures are right-aligned at the end of the cell and the job label gives
    way to them (the detail line under the table shows the job in full): at 80
    columns there is no room for another column, and job, container and GPU use
    belong on one row.
    """
    if slot.job is None or not measured:
        return Text(job_label(slot.job, width))
    use = gpu_use_text(slot.gpu_memory_bytes, slot.gpu_util_percent)
    room = width - GPU_USE_WIDTH - 1
    text = Text(job_label(slot.job, room).ljust(room + 1 + GPU_USE_WIDTH - len(use.plain)))
    text.append_text(use)
    return text


def row_cells(slot: SlotSnapshot, now: float, *, measured: bool = False) -> dict[str, Text]:
    """The cells of one slot's row (pure; used by the table and the tests).

    ``measured``: the supervisor measures GPU use per job (`SupervisorSnapshot.gpu_accounting`).
    """
    widths = {key: width for key, _, width in COLUMNS}
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
    exit_text = exit_label(slot.last_exit)
    exit_text.truncate(widths["exit"] or 0, overflow="ellipsis")
    return {
        "slot": Text(slot.key, justify="right"),
        "agent": agent,
        "state": state_text(slot, now),
        "standby": standby_text(slot),
        "job": job_cell(slot, widths["job"] or 0, measured=measured),
        "uptime": Text(duration(uptime) if uptime is not None else "-", justify="right"),
        "gpus": Text(gpus_label(slot.gpus)),
        "exit": exit_text,
        "container": Text((slot.container_id or "-")[:12], style="bright_black"),
        "message": Text(truncate(slot.message, _MESSAGE_WIDTH)),
    }


def _order(key: str) -> tuple[str, int]:
    """Rows by group, then by slot number."""
    group, _, number = key.rpartition("/")
    return group, int(number)


class AgentsTable(DataTable[Text]):
    """DataTable of agent slots; the cursor row is the selected slot."""

    def __init__(self, *, clock: Callable[[], float], id: str | None = None) -> None:
        """Create the table.

        Args:
            clock: Wall clock for uptimes and backoff countdowns.
            id: Widget id.
        """
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self._clock = clock
        self._cells: dict[str, dict[str, Text]] = {}
        self._slots: dict[str, SlotSnapshot] = {}
        self._measured = False
        self.border_title = "Agents"

    def on_mount(self) -> None:
        """Create the columns once; rows come and go with the snapshots."""
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    @property
    def selected_key(self) -> str | None:
        """The key (``SLOT`` or ``GROUP/SLOT``) of the slot under the cursor, or None."""
        if self.row_count == 0:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:  # noqa: BLE001 - the cursor is outside the rows
            return None
        return None if key.value is None else str(key.value)

    @property
    def selected_slot(self) -> int | None:
        """The slot number under the cursor, or None when the table is empty."""
        key = self.selected_key
        return None if key is None else int(key.rpartition("/")[2])

    def show_snapshot(self, snapshot: SupervisorSnapshot) -> None:
        """Bring the rows in line with ``snapshot``, touching only what changed."""
        now = self._clock()
        self._measured = snapshot.gpu_accounting
        selected = self.selected_key
        wanted = {slot.key: slot for slot in snapshot.slots}
        for key in [k for k in self._cells if k not in wanted]:
            self.remove_row(key)
            del self._cells[key]
            self._slots.pop(key, None)
        appended_out_of_order = False
        for key in sorted(wanted, key=_order):
            slot = wanted[key]
            self._slots[key] = slot
            cells = row_cells(slot, now, measured=self._measured)
            old = self._cells.get(key)
            if old is None:
                if self._cells and _order(key) < max(map(_order, self._cells)):
                    appended_out_of_order = True
                self.add_row(*(cells[name] for name, _, _ in COLUMNS), key=key)
            else:
                self._update_changed(key, old, cells)
            self._cells[key] = cells
        if appended_out_of_order:
            self.sort("slot", key=lambda text: _order(text.plain))
            self._move_to(selected)
        elif selected is not None and selected in wanted and self.selected_key != selected:
            self._move_to(selected)

    def tick(self) -> None:
        """Re-render the time-dependent cells (uptime, backoff countdown)."""
        now = self._clock()
        for key, slot in self._slots.items():
            old = self._cells.get(key)
            if old is None:
                continue
            cells = row_cells(slot, now, measured=self._measured)
            self._update_changed(key, old, cells)
            self._cells[key] = cells

    def _update_changed(self, row: str, old: dict[str, Text], new: dict[str, Text]) -> None:
        for key, _, width in COLUMNS:
            if old.get(key) != new[key]:
                self.update_cell(row, key, new[key], update_width=width is None)

    def _move_to(self, key: str | None) -> None:
        if key is None:
            return
        try:
            row = self.get_row_index(RowKey(key))
        except RowDoesNotExist:
            return
        self.move_cursor(row=row, animate=False)


def slot_detail(slot: SlotSnapshot, now: float) -> Text:
    """Everything about one slot in a line: the table may be too narrow for it."""
    text = Text.assemble((slot.name, "bold"), " ", state_text(slot, now), no_wrap=True)
    job = job_label(slot.job) if slot.job is not None else ""
    if job and job not in slot.message:
        text.append(f" · {job}")
    if slot.job is not None and (
        slot.gpu_memory_bytes is not None or slot.gpu_util_percent is not None
    ):
        text.append(" · GPU ")
        text.append_text(gpu_use_text(slot.gpu_memory_bytes, slot.gpu_util_percent))
    if slot.message:
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
    return text


class SlotDetail(Widget):
    """One line under the table: the selected slot in full (message, last exit)."""

    def __init__(self, *, clock: Callable[[], float], id: str | None = None) -> None:
        """Create an empty detail line."""
        super().__init__(id=id)
        self._clock = clock
        self.slot: SlotSnapshot | None = None

    def show(self, slot: SlotSnapshot | None) -> None:
        """Describe ``slot`` (None: nothing selected)."""
        self.slot = slot
        self.refresh()

    def render(self) -> Text:
        """The detail line, cut to the width."""
        if self.slot is None:
            return Text("no agent selected", style="bright_black")
        text = slot_detail(self.slot, self._clock())
        text.truncate(max(1, self.size.width), overflow="ellipsis")
        return text
