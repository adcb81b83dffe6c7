"""Row diffing shared by the dashboard's tables: update exactly the rows and cells that changed, and build the
cells of the rows on screen only.

Textual's `DataTable.update_cell` counts every update as a change of the whole table (its render caches are keyed
by that count) and repaints the whole table, so a changed cell re-renders every row on screen (a line of a
10-column table costs 1-3 ms here: ten busy agents' previews made the table redraw 40 rows a second). Only public
Textual API is used to avoid that: a `RowTable` stores the values with `update_cell` and repaints only the rows
that changed (`refresh_row`), leaving the other rows on screen as they are, which is what they still show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Self

from rich.text import Text
from textual.geometry import Region
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

Cell = str | Text
Row = tuple[str, tuple[Cell, ...] | None]
"""A row's key and its cells; None: the row is off screen, leave what it shows (a placeholder if it is new)."""


def sync_rows(table: DataTable[Cell], rows: Sequence[Row], placeholder: Callable[[str], tuple[Cell, ...]]) -> None:
    """Make `table` show `rows` (key, cells) in their order, touching only what differs.

    New rows are appended, which keeps the order when lists grow at the end (tasks by id, worktrees by
    creation); rows coming back from under a filter would land out of place, so then the table is rebuilt.
    A row given without cells keeps what it shows; a new one shows `placeholder(key)` until it is on screen.
    """
    rows = [(key, _as_text(cells) if cells is not None else None) for key, cells in rows]
    wanted = dict(rows)
    for key in [str(key.value) for key in table.rows]:
        if key not in wanted:
            table.remove_row(key)
    present = {str(key.value) for key in table.rows}
    columns = list(table.columns)
    changes: dict[str, dict[ColumnKey, Cell]] = {}
    for key, cells in rows:
        if key not in present:
            table.add_row(*(cells if cells is not None else _as_text(placeholder(key))), key=key)
            continue
        if cells is None:
            continue
        current = table.get_row(key)
        changed = {column: new for column, old, new in zip(columns, current, cells, strict=False)
                   if not _same(old, new)}
        if changed:
            changes[key] = changed
    if changes:
        update_cells(table, changes)
    if [str(k.value) for k in table.rows] != [key for key, _ in rows]:
        kept = {str(k.value): table.get_row(k) for k in table.rows}
        table.clear()
        for key, cells in rows:
            table.add_row(*(cells if cells is not None else kept.get(key) or _as_text(placeholder(key))), key=key)


class RowTable(DataTable[Cell]):
    """A DataTable whose changed cells repaint their own rows only (see `update_cells`)."""

    _narrowing = False
    """True while `update_cells` stores values: the whole-table repaints they ask for are left out."""

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> Self:
        if self._narrowing and not (regions or layout or recompose):
            return self  # update_cell's repaint of the whole table: update_cells repaints the changed rows instead
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def update_cells(self, changes: dict[str, dict[ColumnKey, Cell]]) -> None:
        """Put new values in cells (row key -> column -> value) and repaint only their rows.

        `update_cell` stores a value, makes all of the table's cached renders stale (they are keyed by a
        table-wide count) and asks for a repaint of the whole table. The rows that did not change still show what
        they hold, so that repaint is left out and only the changed rows are repainted, rendered again from the
        new values. Where an auto-width column changes, the layout may too: the whole table repaints, as asked."""
        auto_width = {key for key, column in self.columns.items() if column.auto_width}
        narrow = not any(auto_width & set(cells) for cells in changes.values())
        self._narrowing = narrow
        try:
            for key, cells in changes.items():
                for column, value in cells.items():
                    self.update_cell(key, column, value, update_width=column in auto_width)
        finally:
            self._narrowing = False
        if narrow:
            for key in changes:
                self.refresh_row(self.get_row_index(key))  # a repaint of that row, if it is on screen


def update_cells(table: DataTable[Cell], changes: dict[str, dict[ColumnKey, Cell]]) -> None:
    """Put new values in cells (row key -> column -> value): a `RowTable` repaints only the changed rows, another
    DataTable the whole table (once, on the next frame, however many cells changed)."""
    if isinstance(table, RowTable):
        table.update_cells(changes)
        return
    auto_width = {key for key, column in table.columns.items() if column.auto_width}
    for key, cells in changes.items():
        for column, value in cells.items():
            table.update_cell(key, column, value, update_width=column in auto_width)


def window(table: DataTable[Cell], count: int, margin: int = 2) -> range:
    """The indexes, among `count` rows, of those on screen (and `margin` rows either side): the rows worth
    building cells for. Before the table has a size, a screenful of the app."""
    height = table.scrollable_content_region.height
    if height <= 0:
        height = table.app.size.height
    first = max(int(table.scroll_offset.y) - margin, 0)
    return range(first, min(count, first + height + 2 * margin))


class RowCells:
    """The cells of each row, built again only when what they are built from changed."""

    def __init__(self) -> None:
        self._built: dict[str, tuple[object, tuple[Cell, ...]]] = {}

    def get(self, key: str, inputs: object, build: Callable[[], tuple[Cell, ...]]) -> tuple[Cell, ...]:
        cached = self._built.get(key)
        if cached is not None and cached[0] == inputs:
            return cached[1]
        cells = build()
        self._built[key] = (inputs, cells)
        return cells

    def forget(self, keep: set[str]) -> None:
        for key in [k for k in self._built if k not in keep]:
            del self._built[key]

    def clear(self) -> None:
        self._built.clear()


def _as_text(cells: tuple[Cell, ...]) -> tuple[Text, ...]:
    """Cells as Text. DataTable parses a str cell as Rich markup: a `[` in it would be read as a style, and the
    first one loads Rich's emoji table (~6 ms of the dashboard's start-up)."""
    return tuple(cell if isinstance(cell, Text) else Text(cell) for cell in cells)


def _same(old: Cell, new: Cell) -> bool:
    """Whether a cell shows the same: for Text its style too (a row greyed out keeps its words)."""
    if old is new:
        return True
    if isinstance(new, Text):
        return isinstance(old, Text) and (old.plain, old.style, old.spans) == (new.plain, new.style, new.spans)
    return str(old) == str(new)
