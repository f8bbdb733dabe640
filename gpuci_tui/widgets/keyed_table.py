"""A DataTable of keyed rows whose columns are sized to their content and the screen.

The agents, hosts and history tables share it. Each column has a minimum, a
natural width (its widest cell or label, capped by ``max_width``) and a
priority. When the table is too narrow for every column at its minimum, the
lowest-priority columns collapse: they leave the table, the border says so
(``+2 cols ›``) and `hidden_cells` gives their values for the detail line under
the table, so nothing is cut without a sign. Spare room goes first to the
columns below their natural width, then to the ``grow`` column (the job).

Rows are keyed; while the layout and the row order stay the same only changed
cells are rewritten, so a new snapshot never flickers the table. A new layout
(resize, a wider cell, a row more or less) rebuilds the rows and puts the cursor
back on the row it was on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowDoesNotExist, RowKey

from gpuci_tui.widgets.format import cut_text, cut_words


@dataclass(frozen=True)
class Column:
    """How one column is sized.

    ``priority``: higher stays longer when the table is narrow. ``grow``: takes
    the room left over once every column has its natural width; ``ideal`` is the
    width it is worth collapsing lower-priority columns for (the job's label
    matters more than the container id, which the detail line shows anyway).
    ``roomy``: then a wider width, worth collapsing only the columns below a
    priority (``(width, priority)``): the job's GPU figures beside its whole label
    are worth the container id's room, not the uptime's.
    """

    key: str
    label: str
    min_width: int
    max_width: int | None = None
    priority: int = 0
    grow: bool = False
    ideal: int = 0
    roomy: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Layout:
    """The columns shown, their widths, and the collapsed ones (in table order)."""

    widths: tuple[tuple[str, int], ...]
    hidden: tuple[str, ...]


def plan_layout(
    columns: Sequence[Column], natural: dict[str, int], room: int | None, padding: int = 1
) -> Layout:
    """Fit ``columns`` into ``room`` cells (None: unlimited, every column at its natural width).

    Pure, so the sizing rules are tested without a screen.
    """
    want = {
        c.key: max(c.min_width, min(natural.get(c.key, 0), c.max_width or 10**6)) for c in columns
    }
    if room is None:
        return Layout(tuple((c.key, want[c.key]) for c in columns), ())
    shown = list(columns)

    def drop_least() -> None:
        shown.remove(min(shown, key=lambda c: (c.priority, -shown.index(c))))

    # Drop the least important columns until every one left fits at its minimum.
    while len(shown) > 1 and sum(c.min_width + 2 * padding for c in shown) > room:
        drop_least()
    widths = _share(shown, want, room, padding)
    grower = next((c for c in shown if c.grow), None)
    # Then make the grow column roomy, at the cost of columns less important than it
    # (for its ideal), then of the columns below its ``roomy`` priority.
    wishes = [] if grower is None else [(grower.ideal, grower.priority), grower.roomy]
    for wish, above in wishes:
        assert grower is not None
        while (
            widths[grower.key] < min(wish, want[grower.key])
            and min(c.priority for c in shown) < above
        ):
            drop_least()
            widths = _share(shown, want, room, padding)
    hidden = tuple(c.key for c in columns if c not in shown)
    return Layout(tuple((c.key, widths[c.key]) for c in shown), hidden)


def _share(
    shown: Sequence[Column], want: dict[str, int], room: int, padding: int
) -> dict[str, int]:
    """Minimum widths, then up to natural by priority; what is left goes to the grow column."""
    widths = {c.key: c.min_width for c in shown}
    spare = room - sum(w + 2 * padding for w in widths.values())
    for col in sorted(shown, key=lambda c: -c.priority):
        extra = min(max(0, spare), want[col.key] - widths[col.key])
        widths[col.key] += extra
        spare -= extra
    grower = next((c for c in shown if c.grow), None)
    if grower is not None and spare > 0:
        widths[grower.key] += spare
    return widths


def fit_text(cell: Text, width: int) -> Text:
    """``cell`` cut after a whole word to ``width`` with an ellipsis (the cell is left alone)."""
    return cut_text(cell, width)


class KeyedTable(DataTable[Text]):
    """Rows keyed by a string; columns sized by `plan_layout`; cursor row = selection."""

    COLUMNS: tuple[Column, ...] = ()
    VALUES_IN_MARKER = False
    """Tell the selected row's collapsed values next to ``+N cols ›`` (no detail line below)."""

    def __init__(self, *, id: str | None = None, zebra_stripes: bool = False) -> None:
        """An empty table; rows arrive with `set_rows`."""
        super().__init__(id=id, cursor_type="row", zebra_stripes=zebra_stripes)
        self._natural: dict[str, dict[str, Text]] = {}
        self._order: list[str] = []
        self._shown: dict[str, dict[str, Text]] = {}
        self.layout_now = Layout((), ())

    # ------------------------------------------------------------------ hooks

    def column_label(self, column: Column) -> Text:
        """The header of ``column`` (the history table marks the sorted one)."""
        return Text(column.label)

    def fit_cell(self, row: str, column: str, cell: Text, width: int) -> Text:
        """``cell`` fitted to ``width``; a subclass may lay a cell out anew instead of cutting it."""
        return fit_text(cell, width)

    # ------------------------------------------------------------------ rows

    @property
    def selected_key(self) -> str | None:
        """The key of the row under the cursor, or None."""
        if self.row_count == 0:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:  # noqa: BLE001 - the cursor is outside the rows
            return None
        return None if key.value is None else str(key.value)

    def set_rows(
        self, rows: Sequence[tuple[str, dict[str, Text]]], *, cursor_to: str | None = None
    ) -> None:
        """Show ``rows`` (key, cells at their natural content) in this order.

        ``cursor_to``: the row to put the cursor on (default: the row it is on now).
        """
        keep = self.selected_key if cursor_to is None else cursor_to
        self._natural = dict(rows)
        order = [key for key, _ in rows]
        layout = self._plan()
        shown_before = [key for key, _ in self.layout_now.widths]
        if not self.columns or [key for key, _ in layout.widths] != shown_before:
            self._rebuild(layout, order, keep)
            return
        if layout.widths != self.layout_now.widths:
            self._apply_widths(layout)
        for key in [k for k in self._order if k not in self._natural]:
            self.remove_row(key)
            del self._shown[key]
        self._order = [k for k in self._order if k in self._natural]
        widths = dict(layout.widths)
        for key in order:
            new = self._fitted(key, widths)
            old = self._shown.get(key)
            if old is None:
                self.add_row(*new.values(), key=key)
                self._order.append(key)
            else:
                for column, cell in new.items():
                    if old.get(column) != cell:
                        self.update_cell(key, column, cell)
            self._shown[key] = new
        if self._order != order:
            self._rebuild(layout, order, keep)
            return
        if keep is not None and self.selected_key != keep:
            self.move_to(keep)
        self._mark_collapsed()

    def _apply_widths(self, layout: Layout) -> None:
        """New widths for the same columns, in place: the rows stay, the cursor stays."""
        for key, width in layout.widths:
            column = self.columns[ColumnKey(key)]
            column.width = width
            column.auto_width = False
        self.layout_now = layout
        self._mark_collapsed()
        # DataTable has no public call for "a column's width changed"; these two
        # are what its own add_column does.
        self._require_update_dimensions = True
        self._clear_caches()
        self.refresh()

    @property
    def natural_rows(self) -> dict[str, dict[str, Text]]:
        """The cells of every row at their natural width (before fitting)."""
        return self._natural

    def hidden_cells(self, key: str | None) -> list[tuple[str, Text]]:
        """``(label, value)`` of the collapsed columns in row ``key``, for the detail line."""
        cells = self._natural.get(key or "", {})
        labels = {c.key: c.label for c in self.COLUMNS}
        return [(labels[c], cells[c]) for c in self.layout_now.hidden if c in cells]

    def relayout(self) -> None:
        """Size the columns again (the table was resized)."""
        if self._natural:
            self.set_rows(list(self._natural.items()))

    def _on_resize(self, event: events.Resize) -> None:
        super()._on_resize(event)
        self.call_after_refresh(self.relayout)

    # ------------------------------------------------------------------ internals

    def _room(self) -> int | None:
        # Worked out from the rows about to be shown, not read from
        # scrollable_content_region: that region narrows only once the vertical
        # scrollbar has appeared, which comes after these rows are added, and no
        # Resize follows it, so the columns would be planned on a width that depends
        # on whether a repaint came in between.
        region = self.content_region
        if region.width <= 0:
            return None
        lines = (self.header_height if self.show_header else 0) + len(self._natural)
        overflow = self.styles.overflow_y
        scrolls = overflow == "scroll" or (overflow == "auto" and lines > region.height)
        width = region.width - (self.styles.scrollbar_size_vertical if scrolls else 0)
        return width if width > 0 else None

    def _plan(self) -> Layout:
        natural: dict[str, int] = {}
        for col in self.COLUMNS:
            widest = max((cells[col.key].cell_len for cells in self._natural.values()), default=0)
            natural[col.key] = max(widest, self.column_label(col).cell_len)
        return plan_layout(self.COLUMNS, natural, self._room(), self.cell_padding)

    def _fitted(self, key: str, widths: dict[str, int]) -> dict[str, Text]:
        cells = self._natural[key]
        return {c: self.fit_cell(key, c, cells[c], w) for c, w in widths.items()}

    def _rebuild(self, layout: Layout, order: list[str], keep: str | None) -> None:
        row_before = self.cursor_row
        self.clear(columns=True)
        columns = {c.key: c for c in self.COLUMNS}
        widths = dict(layout.widths)
        for key, width in layout.widths:
            self.add_column(self.column_label(columns[key]), key=key, width=width)
        self._shown = {}
        for key in order:
            self._shown[key] = self._fitted(key, widths)
            self.add_row(*self._shown[key].values(), key=key)
        self._order = order
        self.layout_now = layout
        self._mark_collapsed()
        if not self.move_to(keep) and order:
            # The row has gone (filters, retention): the cursor stays where it was.
            self.move_cursor(row=min(row_before, len(order) - 1), animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """A new row under the cursor: its collapsed values in the marker."""
        self._mark_collapsed()

    def _mark_collapsed(self) -> None:
        count = len(self.layout_now.hidden)
        marker = f"+{count} col{'s' if count > 1 else ''} ›" if count else ""
        if count and self.VALUES_IN_MARKER:
            values = " · ".join(
                f"{label} {cell.plain}" for label, cell in self.hidden_cells(self.selected_key)
            )
            # The values give way (after a whole word), never the marker: the border's
            # corners and the title's spacing take 6 cells.
            room = self.size.width - 6 - len(marker) - 2 if self.size.width else len(values)
            values = cut_words(values, room)
            marker = f"{values}  {marker}" if values else marker
        self.border_subtitle = marker

    def move_to(self, key: str | None) -> bool:
        """Put the cursor on row ``key``; False when there is no such row."""
        if key is None:
            return False
        try:
            row = self.get_row_index(RowKey(key))
        except RowDoesNotExist:
            return False
        self.move_cursor(row=row, animate=False)
        return True
