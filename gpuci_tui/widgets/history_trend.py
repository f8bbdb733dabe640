"""The selected pipeline's last runs as two sparklines: peak GPU memory and duration.

One bar per run, oldest on the left, with the min, max and last value beside it,
so a regression (a job that suddenly needs twice the memory or time) shows at a
glance. Runs that lack a figure (no GPU process seen) are left out of that line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from rich.text import Text
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Sparkline, Static

from gpuci_tui.core.formatting import memory_short
from gpuci_tui.core.store.history import JobRecord
from gpuci_tui.widgets.format import duration

TREND_RUNS = 30
"""How many of the pipeline's last runs the sparklines show."""


def series(rows: Sequence[JobRecord], value: Callable[[JobRecord], float | None]) -> list[float]:
    """The known values of ``rows`` (newest first, as queried), oldest first for plotting."""
    return [v for v in (value(r) for r in reversed(rows)) if v is not None]


def summary(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    """``min 1.2G  max 7.8G  last 7.5G``, or why there is no line (fits 37 cells at 80 columns)."""
    if not values:
        return "not measured"
    return f"min {fmt(min(values))}  max {fmt(max(values))}  last {fmt(values[-1])}"


class HistoryTrend(Vertical):
    """Peak GPU memory and duration of one pipeline's last `TREND_RUNS` runs."""

    def __init__(self, *, id: str | None = None) -> None:
        """An empty trend (no pipeline selected)."""
        super().__init__(id=id)
        self.pipeline: str | None = None
        self.memory: list[float] = []
        """Peak GPU memory (MiB) per run, oldest first."""
        self.durations: list[float] = []
        """Duration (s) per run, oldest first."""
        self.border_title = "Trend"

    def compose(self) -> Iterable[Widget]:
        """Two labelled sparklines."""
        with Horizontal(classes="trend-row"):
            yield Static("Peak mem", classes="trend-label")
            yield Sparkline([], id="trend-memory", classes="trend-spark")
            yield Static("", id="trend-memory-summary", classes="trend-summary")
        with Horizontal(classes="trend-row"):
            yield Static("Duration", classes="trend-label")
            yield Sparkline([], id="trend-duration", classes="trend-spark")
            yield Static("", id="trend-duration-summary", classes="trend-summary")

    def show(self, pipeline: str | None, rows: Sequence[JobRecord]) -> None:
        """Plot ``rows`` (the pipeline's last runs, newest first); None clears the trend."""
        self.pipeline = pipeline
        self.memory = series(rows, lambda r: r.peak_gpu_memory_mib)
        self.durations = series(rows, lambda r: r.duration_s)
        if pipeline is None:
            self.border_title = "Trend: select a job of a named pipeline"
        else:
            runs = "run" if len(rows) == 1 else "runs"
            # Text, not str: a pipeline name is not markup.
            self.border_title = Text(f"Trend of '{pipeline}': last {len(rows)} {runs}")
        self.query_one("#trend-memory", Sparkline).data = self.memory
        self.query_one("#trend-duration", Sparkline).data = self.durations
        self.query_one("#trend-memory-summary", Static).update(summary(self.memory, memory_short))
        self.query_one("#trend-duration-summary", Static).update(summary(self.durations, duration))
