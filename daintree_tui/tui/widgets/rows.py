"""Row diffing shared by the dashboard's tables: update exactly the rows and cells that changed, and build the
cells of the rows on screen only.

Textual's `DataTable.update_cell` counts every update as a change of the whole table: its render caches are keyed
by that count, so one changed cell re-renders every row on screen (a line of a 10-column table costs 1-3 ms here:
ten busy agents' previews made the table redraw 40 rows a second). `sync_rows` instead swaps the changed cells in
and drops only their cached renders, then repaints only their rows.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

Cell = str | Text
Row = tuple[str, tuple[Cell, ...] | None]
"""A row's key and its cells; None: the row is off screen, leave what it shows (a placeholder if it is new)."""

_CACHES = ("_data", "_row_locations", "_update_count", "_cell_render_cache", "_row_render_cache",
           "_row_renderable_cache", "_line_cache")


def sync_rows(table: DataTable[Cell], rows: Sequence[Row], placeholder: Callable[[str], tuple[Cell, ...]]) -> None:
    """Make `table` show `rows` (key, cells) in their order, touching only what differs.

    New rows are appended, which keeps the order when lists grow at the end (tasks by id, worktrees by
    creation); rows coming back from under a filter would land out of place, so then the table is rebuilt.
    A row given without cells keeps what it shows; a new one shows `placeholder(key)` until it is on screen.
    """
    wanted = dict(rows)
    for key in [str(key.value) for key in table.rows]:
        if key not in wanted:
            table.remove_row(key)
    present = {str(key.value) for key in table.rows}
    columns = list(table.columns)
    changes: dict[str, dict[ColumnKey, Cell]] = {}
    for key, cells in rows:
        if key not in present:
            table.add_row(*(cells if cells is not None else placeholder(key)), key=key)
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
            table.add_row(*(cells if cells is not None else kept.get(key) or placeholder(key)), key=key)


def update_cells(table: DataTable[Cell], changes: dict[str, dict[ColumnKey, Cell]]) -> None:
    """Put new values in cells (row key -> column -> value) and repaint only their rows.

    Only the cached renders of these cells, rows and lines are dropped; DataTable's own `update_cell` would drop
    them all (and, for a fixed-width column, measure every cell of it again). Auto-width columns, or a DataTable
    without the caches this relies on (another Textual), take the documented path."""
    auto_width = {key for key, column in table.columns.items() if column.auto_width}
    if not all(hasattr(table, name) for name in _CACHES) or any(auto_width & set(c) for c in changes.values()):
        for key, cells in changes.items():
            for column, value in cells.items():
                table.update_cell(key, column, value, update_width=column in auto_width)
        return
    internals: Any = table
    cells_changed: set[tuple[Hashable, Hashable]] = set()
    rows_changed: set[Hashable] = set()
    lines_changed: set[int] = set()
    regions = []
    for key, cells in changes.items():
        row_key = RowKey(key)
        internals._data[row_key].update(cells)
        row_index = internals._row_locations.get(row_key)
        internals._row_renderable_cache.discard((internals._update_count, row_index))
        rows_changed.add(row_key)
        cells_changed.update((row_key, column) for column in cells)
        region = internals._get_row_region(row_index)
        lines_changed.update(range(region.y, region.y + region.height))
        regions.append(row_index)
    _discard(internals._cell_render_cache, lambda k: (k[0], k[1]) in cells_changed)
    _discard(internals._row_render_cache, lambda k: k[0] in rows_changed)
    _discard(internals._line_cache, lambda k: k[0] in lines_changed)
    for row_index in regions:
        table.refresh_row(row_index)  # a repaint of that row, if it is on screen


def _discard(cache: Any, stale: Callable[[Any], bool]) -> None:
    keys = cache.keys()  # an LRUCache: not iterable itself
    for cache_key in [k for k in keys if stale(k)]:
        cache.discard(cache_key)


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


def _same(old: Cell, new: Cell) -> bool:
    """Whether a cell shows the same: for Text its style too (a row greyed out keeps its words)."""
    if old is new:
        return True
    if isinstance(new, Text):
        return isinstance(old, Text) and (old.plain, old.style, old.spans) == (new.plain, new.style, new.spans)
    return str(old) == str(new)
