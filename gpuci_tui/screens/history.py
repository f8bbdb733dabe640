"""`h`: the finished jobs of a supervisor's history, sortable and filterable, with a trend.

The rows come from a `HistorySource`: on the daemon's host, its history file
read read-only (`FileHistory`), so the view works beside a running daemon
(SQLite WAL: readers never block the writer), with none, and in ``--readonly``;
in a fleet console, the host's daemon asked over ssh (`RemoteHistory`),
read-only and bounded there. Every read runs in a thread worker with a LIMIT
and is repeated every few seconds, so jobs that land while the view is open
appear without a key press. The filters are the core's `JobQuery`; sorting is
done on the rows shown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, Static
from textual.worker import Worker

from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.store.history import JobQuery, JobRecord
from gpuci_tui.core.store.history_source import FileHistory, HistorySource
from gpuci_tui.core.wording import plural
from gpuci_tui.screens.help import navigation, show_help
from gpuci_tui.widgets.history_table import HistoryTable
from gpuci_tui.widgets.history_trend import TREND_RUNS, HistoryTrend

if TYPE_CHECKING:
    from gpuci_tui.services import Services

HISTORY_ROWS = 500
"""Newest jobs read per refresh: enough to sort and scroll, cheap to re-read every few seconds."""

RESULT_FILTERS = ("all", "failed", "succeeded")
"""What `f` cycles through."""

HISTORY_NOTE = (
    "A click on a column's header sorts by it (again: the other way). Columns that do not "
    "fit are told for the selected job beside +N cols at the table's foot."
)


@dataclass
class HistoryLoaded(Message):
    """A read of the history finished: its rows, or why there are none."""

    rows: list[JobRecord]
    problem: str = ""
    """Set when nothing could be shown (no file yet, unreadable file)."""


@dataclass
class TrendLoaded(Message):
    """The last runs of one pipeline, newest first."""

    pipeline: str
    rows: list[JobRecord]


class HistoryScreen(Screen[None]):
    """Finished jobs, newest first, with filters and the selected pipeline's trend."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="history.back", tooltip="Back to the dashboard"),
        # q goes back a step here, as Escape does: it never asks to quit from a sub-screen.
        Binding("q", "back", "Back", id="history.q_back", show=False,
                tooltip="Back to the dashboard"),
        Binding("s", "sort", "Sort", id="history.sort",
                tooltip="Sort by the next column (or click a column header; again reverses)"),
        Binding("f", "result_filter", "Result", id="history.result",
                tooltip="Show all jobs, only failed ones, or only succeeded ones"),
        Binding("slash", "filter", "Filter", id="history.filter",
                tooltip="Type part of a pipeline name to show only its jobs"),
        Binding("question_mark", "help", "Help", id="history.help",
                tooltip="The keys of the history"),
    ]  # fmt: skip
    NAVIGATION = (
        navigation("↑ ↓ pgup pgdn", "Select", "Pick a job: its pipeline's trend shows below",
                   "up", "down", "pageup", "pagedown"),
    )  # fmt: skip

    def __init__(self, services: Services, source: HistorySource | None = None) -> None:
        """The view of ``source``; by default of ``services.history_path`` (None: no history)."""
        super().__init__(id="history")
        self.services = services
        self.path: Path | None = services.history_path
        if source is None and self.path is not None:
            source = FileHistory(self.path)
        self.source = source
        self.result_filter = "all"
        self.pipeline_filter = ""
        self.rows: list[JobRecord] = []
        self.problem = ""
        self.loads = 0
        """Reads of the history shown so far (tests wait on it)."""
        self.trend_loads = 0
        self._table_read: Worker[None] | None = None
        """The newest read of the table. Only it holds the refresh back: a trend read
        replaced by a newer one (an exclusive group) is cancelled, and Textual can leave
        such a thread worker in RUNNING for good, which stopped every refresh."""
        """The last history and trend reads started (a tick waits for them)."""

    def compose(self) -> Iterable[Widget]:
        """Status line, filters, table, trend, footer."""
        yield Static("reading the job history…", id="history-status", markup=False)
        with Horizontal(id="history-filters"):
            yield Input(placeholder="pipeline contains… (/)", id="history-filter", compact=True)
            yield Static("", id="history-result", markup=False)
        yield HistoryTable(id="history-table")
        yield HistoryTrend(id="history-trend")
        yield Footer(compact=True, show_command_palette=False)

    @property
    def table(self) -> HistoryTable:
        """The jobs table."""
        return self.query_one("#history-table", HistoryTable)

    @property
    def trend(self) -> HistoryTrend:
        """The selected pipeline's sparklines."""
        return self.query_one("#history-trend", HistoryTrend)

    def on_mount(self) -> None:
        """First read now, then every ``services.history_interval`` seconds."""
        where = self.source.where if self.source is not None else ""
        self.table.border_title = f"Finished jobs on {where}" if where else "Finished jobs"
        self.table.focus()
        self._show_result_filter()
        self._load()
        self.set_interval(self.services.history_interval, self._refresh)

    # ------------------------------------------------------------------ reading

    def job_query(self) -> JobQuery:
        """The `JobQuery` of the filters as set now."""
        return JobQuery(
            pipeline_contains=self.pipeline_filter.strip() or None,
            failed_only=self.result_filter == "failed",
            succeeded_only=self.result_filter == "succeeded",
            limit=HISTORY_ROWS,
        )

    def _refresh(self) -> None:
        """The periodic re-read, skipped while the last read still runs.

        A thread worker cannot be stopped: on a slow disk or a busy host, reads started
        on every tick pile up, each slower than the last (six at once were seen, and the
        screen fell seconds behind). A filter change still reads at once (`_load`).
        """
        if self._table_read is not None and not self._table_read.is_finished:
            return
        self._load()

    def _load(self) -> None:
        self._table_read = self._read(self.job_query())

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def _read(self, query: JobQuery) -> None:
        source = self.source
        if source is None:
            self.post_message(
                HistoryLoaded(
                    [], "This console has no job history (it is not on the daemon's host)."
                )
            )
            return
        try:
            rows = source.read(query)
        except GpuciError as exc:  # damaged file, no permission, a host that did not answer
            self.post_message(HistoryLoaded([], str(exc)))
            return
        if rows is None:
            self.post_message(HistoryLoaded([], source.nothing_yet))
            return
        self.post_message(HistoryLoaded(rows))

    @work(thread=True, exclusive=True, group="trend", exit_on_error=False)
    def _read_trend(self, pipeline: str) -> None:
        if self.source is None:
            return
        try:
            rows = self.source.read(JobQuery(pipeline=pipeline, limit=TREND_RUNS))
        except GpuciError:
            rows = []  # the table's read says why
        self.post_message(TrendLoaded(pipeline, rows or []))

    @on(HistoryLoaded)
    def _on_loaded(self, message: HistoryLoaded) -> None:
        self.rows, self.problem = message.rows, message.problem
        self.table.show(message.rows)
        self.loads += 1
        self._show_status()
        # Always re-read the trend: a refresh may have brought a new run of the pipeline.
        self._selection_changed(force=True)

    @on(TrendLoaded)
    def _on_trend(self, message: TrendLoaded) -> None:
        selected = self.table.selected
        if selected is not None and selected.pipeline == message.pipeline:
            self.trend.show(message.pipeline, message.rows)
        self.trend_loads += 1

    # ------------------------------------------------------------------ showing

    def _show_status(self) -> None:
        status = self.query_one("#history-status", Static)
        if self.problem:
            status.update(Text(self.problem, style="yellow"))
            return
        count = len(self.rows)
        if count == 0:
            words = "No jobs match the filters." if self._filtered() else "No jobs recorded yet."
        else:
            newest = f" (the newest {HISTORY_ROWS})" if count >= HISTORY_ROWS else ""
            words = f"{plural(count, 'job')}{newest} · sorted by {self.table.sort_description}"
        status.update(Text(words))

    def _filtered(self) -> bool:
        return bool(self.pipeline_filter.strip()) or self.result_filter != "all"

    def _show_result_filter(self) -> None:
        label = {"all": "all results", "failed": "failed only", "succeeded": "succeeded only"}
        self.query_one("#history-result", Static).update(
            Text.assemble(("Result: ", "bright_black"), label[self.result_filter], " (f)")
        )

    def _selection_changed(self, *, force: bool = False) -> None:
        selected = self.table.selected
        pipeline = selected.pipeline if selected is not None else None
        if pipeline is None:
            self.trend.show(None, [])
            return
        if force or pipeline != self.trend.pipeline:
            self._read_trend(pipeline)

    @on(DataTable.RowHighlighted, "#history-table")
    def _on_highlighted(self) -> None:
        self._selection_changed()

    @on(DataTable.HeaderSelected, "#history-table")
    def _on_header(self, event: DataTable.HeaderSelected) -> None:
        self.table.toggle_sort(str(event.column_key.value))
        self._show_status()

    @on(Input.Changed, "#history-filter")
    def _on_filter(self, event: Input.Changed) -> None:
        self.pipeline_filter = event.value
        self._load()

    @on(Input.Submitted, "#history-filter")
    def _on_filter_done(self) -> None:
        self.table.focus()

    # ------------------------------------------------------------------ actions

    def action_back(self) -> None:
        """Leave the filter box, or go back to the dashboard."""
        if isinstance(self.focused, Input):
            self.table.focus()
            return
        self.dismiss(None)

    def action_sort(self) -> None:
        """Sort by the next column."""
        self.table.cycle_sort()
        self._show_status()

    def action_result_filter(self) -> None:
        """Cycle all → failed → succeeded."""
        index = RESULT_FILTERS.index(self.result_filter)
        self.result_filter = RESULT_FILTERS[(index + 1) % len(RESULT_FILTERS)]
        self._show_result_filter()
        self._load()

    def action_filter(self) -> None:
        """Focus the pipeline filter box."""
        self.query_one("#history-filter", Input).focus()

    def action_help(self) -> None:
        """The keys of the history, as bound now."""
        show_help(self, "Keys of the history", extra=self.NAVIGATION, note=HISTORY_NOTE)
