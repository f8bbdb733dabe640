"""The finished-jobs table of the history view: cells, sort orders and the table itself.

Rows come from `gpuci_tui.core.store.history` (already filtered by its `JobQuery`);
sorting happens here, on the rows shown, so a click on a header never costs a
query. Rows are keyed by their history id so the cursor stays on the same job
across refreshes and re-sorts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rich.text import Text
from textual.widgets.data_table import ColumnKey

from gpuci_tui.core.formatting import job_result, memory_short, short_id
from gpuci_tui.core.store.history import JobRecord
from gpuci_tui.widgets.format import duration, level_style
from gpuci_tui.widgets.keyed_table import Column, KeyedTable


@dataclass(frozen=True)
class HistoryColumn(Column):
    """One column: its sizing and how its rows sort (None: not sortable)."""

    sort_key: Callable[[JobRecord], Any] | None = None
    descending: bool = True
    """The first direction of a sort by this column (newest / biggest first)."""


def _text_key(value: str | None) -> tuple[bool, str]:
    return value is None, (value or "").lower()


#: Sized to their content; the pipeline takes the spare room, slot and GPUs collapse first.
COLUMNS: tuple[HistoryColumn, ...] = (
    HistoryColumn("ended", "Ended", 11, priority=90, sort_key=lambda r: r.ended_at),
    HistoryColumn(
        "pipeline",
        "Pipeline",
        12,
        priority=85,
        grow=True,
        ideal=24,
        sort_key=lambda r: _text_key(r.pipeline),
        descending=False,
    ),
    HistoryColumn(
        "run",
        "Run",
        11,
        max_width=24,
        priority=75,
        sort_key=lambda r: _text_key(r.run),
        descending=False,
    ),
    HistoryColumn("duration", "Took", 6, priority=70, sort_key=lambda r: r.duration_s),
    HistoryColumn("memory", "Mem", 5, priority=65, sort_key=lambda r: r.peak_gpu_memory_mib),
    HistoryColumn("util", "Util", 5, priority=55, sort_key=lambda r: r.mean_util_pct),
    HistoryColumn(
        "result",
        "Result",
        7,
        max_width=16,
        priority=80,
        sort_key=lambda r: (r.failed, _text_key(job_result(r, short=True))),
    ),
    HistoryColumn(
        "slot", "Slot", 4, max_width=12, priority=30, sort_key=lambda r: (r.instance, r.slot)
    ),
    HistoryColumn("gpus", "GPU", 3, max_width=12, priority=20),
    # The image id the job ran on, as `docker images` prints it; the first to collapse.
    HistoryColumn("image", "Image", 5, max_width=12, priority=10, sort_key=lambda r: r.image_id),
    # Energy, throttling, ECC/Xid, peak temperature ("412 kJ · thermal 12 s · 83 °C"): a
    # post-mortem's detail, so it yields its room before any other column.
    HistoryColumn("facts", "GPU facts", 9, max_width=48, priority=5, sort_key=lambda r: r.energy_j),
)
SORTABLE = tuple(c.key for c in COLUMNS if c.sort_key is not None)
PIPELINE_IDEAL_MAX = 48
"""The most cells of a pipeline name other columns collapse for."""


def column(key: str) -> HistoryColumn:
    """The column named ``key``."""
    return next(c for c in COLUMNS if c.key == key)


def sort_rows(rows: Sequence[JobRecord], key: str, descending: bool) -> list[JobRecord]:
    """``rows`` by column ``key``; rows without a value always go last, ties newest first."""
    get = column(key).sort_key
    if get is None:
        return list(rows)
    newest_first = sorted(rows, key=lambda r: (r.ended_at, r.id or 0), reverse=True)
    known = [r for r in newest_first if get(r) is not None]
    unknown = [r for r in newest_first if get(r) is None]
    # sorted() is stable, so equal values keep the newest-first order in both directions.
    return sorted(known, key=get, reverse=descending) + unknown


def row_cells(r: JobRecord) -> dict[str, Text]:
    """The cells of one job (pure; used by the table and the tests)."""
    util = r.mean_util_pct
    result = job_result(r, short=True)
    return {
        "ended": Text(time.strftime("%m-%d %H:%M", time.localtime(r.ended_at))),
        "pipeline": Text(r.pipeline or "-"),
        "run": Text(r.run or "-"),
        "duration": Text(duration(r.duration_s), justify="right"),
        "memory": Text(memory_short(r.peak_gpu_memory_mib), justify="right"),
        "util": Text(
            "-" if util is None else f"{util:.0f}%", style=level_style(util), justify="right"
        ),
        "result": Text(result, style="red" if r.failed else "green"),
        "slot": Text(str(r.slot), justify="right"),
        "gpus": Text(",".join(str(i) for i in r.gpus) or "-"),
        "image": Text(short_id(r.image_id) if r.image_id else "-", style="bright_black"),
        "facts": (
            Text("recorded after a restart", style="bright_black")
            if r.reconciled
            else Text(r.gpu_facts or "-", style="red" if r.xid or r.ecc_uncorrected else "")
        ),
    }


class HistoryTable(KeyedTable):
    """The jobs, sorted by one column; the cursor row is the selected job."""

    COLUMNS = COLUMNS
    VALUES_IN_MARKER = True

    def __init__(self, *, id: str | None = None) -> None:
        """An empty table sorted newest first."""
        super().__init__(id=id, zebra_stripes=True)
        self.sort_key = "ended"
        self.descending = True
        self.rows_shown: list[JobRecord] = []

    def column_label(self, column: Column) -> Text:
        """The sorted column's header carries the direction: ``Took▼``."""
        if column.key == self.sort_key:
            return Text(f"{column.label}{'▼' if self.descending else '▲'}")
        return Text(column.label)

    @property
    def selected(self) -> JobRecord | None:
        """The job under the cursor, or None when there are no rows."""
        if not self.rows_shown or not 0 <= self.cursor_row < len(self.rows_shown):
            return None
        return self.rows_shown[self.cursor_row]

    def show(self, rows: Sequence[JobRecord]) -> None:
        """Replace the rows (sorted as chosen), keeping the cursor on the same job."""
        self.rows_shown = sort_rows(rows, self.sort_key, self.descending)
        # The pipeline's name gets its width first: the columns less important than it
        # collapse until the longest name shows whole (up to a point; then it is cut
        # after a whole word).
        longest = max((len(r.pipeline or "-") for r in self.rows_shown), default=0)
        self.COLUMNS = tuple(
            replace(c, ideal=max(c.ideal, min(longest, PIPELINE_IDEAL_MAX)))
            if c.key == "pipeline"
            else c
            for c in COLUMNS
        )
        self.set_rows(
            [(str(r.id or f"#{index}"), row_cells(r)) for index, r in enumerate(self.rows_shown)]
        )

    def sort_by(self, key: str, descending: bool | None = None) -> None:
        """Sort by column ``key``; None picks the column's first direction."""
        self.sort_key = key
        self.descending = column(key).descending if descending is None else descending
        self._label_sorted_column()
        self.show(self.rows_shown)

    def cycle_sort(self) -> None:
        """Sort by the next sortable column (``s``)."""
        index = SORTABLE.index(self.sort_key) if self.sort_key in SORTABLE else -1
        self.sort_by(SORTABLE[(index + 1) % len(SORTABLE)])

    def toggle_sort(self, key: str) -> None:
        """A header was clicked: sort by it, or reverse when it is the sorted column already."""
        if column(key).sort_key is None:
            return
        if key == self.sort_key:
            self.sort_by(key, not self.descending)
        else:
            self.sort_by(key)

    @property
    def sort_description(self) -> str:
        """``Took ▼``: what the rows are sorted by."""
        return f"{column(self.sort_key).label} {'▼' if self.descending else '▲'}"

    def _label_sorted_column(self) -> None:
        for item in COLUMNS:
            if item.key in self.columns:
                self.columns[ColumnKey(item.key)].label = self.column_label(item)
        self.refresh()
