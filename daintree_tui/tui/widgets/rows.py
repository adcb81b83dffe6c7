"""Row tables shared by the dashboard's lists: each row drawn as one line of columns, and updates that touch
exactly the rows that changed, building lines only for the rows on screen.

Drawing: DataTable renders every cell on its own (a Rich `Padding` and `render_lines` each), which made the first
frame's ~320 cells (50 worktrees, 10 columns) cost 56-77 ms here; the same rows as one cell each, laid out in
columns by `compose_line`, cost 11-18 ms (`bench.dashboard`'s first paint). So a `RowTable` has one DataTable
column, and its own columns (key, label, width) live in `compose_line`: each cell cut to its width with an
ellipsis, padded, two cells apart (what DataTable's padding of one cell a side gave).

Updating: Textual's `DataTable.update_cell` counts every update as a change of the whole table (its render caches
are keyed by that count) and repaints the whole table, so a changed cell re-rendered every row on screen (ten
busy agents' previews made the table redraw 40 rows a second). Only public Textual API is used to avoid that: a
`RowTable` stores the values with `update_cell` and repaints only the rows that changed (`refresh_row`), leaving
the other rows on screen as they are, which is what they still show.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Self

from rich.text import Text
from textual.geometry import Region
from textual.widgets import DataTable

Cell = str | Text
Row = tuple[str, Text | None]
"""A row's key and its line; None: the row is off screen, leave what it shows (a placeholder if it is new)."""

GAP = 2
"""Cells between two columns."""

ROW_COLUMN = "row"
"""The key of the one DataTable column that holds each row's line."""


# Newlines and tabs (shown as spaces: a row is one line), and every other terminal control (shown as `?`): Textual
# writes a Text's ESC to the terminal as it is, and a cell holds what hosts and agents sent (a hostile host's
# branch `wt/\x1b]52;...` wrote the user's clipboard).
_UNDRAWN = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def compose_line(cells: Sequence[Cell], widths: Sequence[int]) -> Text:
    """One line of `cells` in columns of `widths`: each cut to its width (with an ellipsis) and padded, `GAP`
    cells apart. A cell's style stays on its own text, not on the padding (a WAITING badge is as wide as its
    word). Newlines and tabs show as spaces: a row is one line; other controls as `?`."""
    line = Text(no_wrap=True, end="")
    for index, (cell, width) in enumerate(zip(cells, widths, strict=True)):
        if index:
            line.append(" " * GAP)
        text = cell.copy() if isinstance(cell, Text) else Text(cell)
        if _UNDRAWN.search(text.plain):  # same length: the styles stay put
            text.plain = _UNDRAWN.sub(lambda m: " " if m.group() in "\n\t" else "?", text.plain)
        if text.cell_len > width:
            text.truncate(width, overflow="ellipsis")
        line.append_text(text)
        if text.cell_len < width:
            line.append(" " * (width - text.cell_len))
    return line


class RowTable(DataTable[Text]):
    """A DataTable of rows keyed by name, each drawn as one line of columns (see the module's docstring), whose
    changed rows repaint on their own."""

    _narrowing = False
    """True while `update_cell` stores values: the whole-table repaints it asks for are left out."""

    def __init__(self, *, id: str | None = None, zebra_stripes: bool = False) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=zebra_stripes)
        self._layout: tuple[tuple[str, int], ...] = ()
        self._built: dict[str, tuple[object, tuple[Cell, ...], Text]] = {}

    def set_columns(self, columns: Sequence[tuple[str, str, int]]) -> bool:
        """Show these columns (key, label, width), in this order; False if they are shown already. New columns
        clear the rows: the next `show_rows` lays them out again."""
        layout = tuple((key, width) for key, _, width in columns)
        if layout == self._layout:
            return False
        self._layout = layout
        widths = [width for _, width in layout]
        self.clear(columns=True)
        # Labels as Text: a str label is parsed as markup, and that loads Rich's emoji table (~6 ms of start-up).
        header = compose_line([Text(label) for _, label, _ in columns], widths)
        self.add_column(header, key=ROW_COLUMN, width=sum(widths) + GAP * max(len(widths) - 1, 0))
        return True

    @property
    def column_keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self._layout)

    @property
    def column_widths(self) -> dict[str, int]:
        """The cells each shown column has (what a longer cell is cut to)."""
        return dict(self._layout)

    def row_line(self, key: str, inputs: object, build: Callable[[], tuple[Cell, ...]]) -> Text:
        """The line of row `key`, built (cells by `build`, then laid out) only when `inputs` or the columns
        changed since it was last built."""
        cached = self._built.get(key)
        if cached is not None and cached[0] == (inputs, self._layout):
            return cached[2]
        cells = build()
        line = compose_line(cells, [width for _, width in self._layout])
        self._built[key] = ((inputs, self._layout), cells, line)
        return line

    def row_cells(self, key: str) -> dict[str, Cell]:
        """The cells row `key` shows, by column (none for a row not built: off screen, or not there)."""
        built = self._built.get(key)
        return dict(zip(self.column_keys, built[1], strict=True)) if built is not None else {}

    def cell_text(self, key: str, column: str) -> str:
        """What row `key` shows in `column` ("" for a row whose cells are not built)."""
        return str(self.row_cells(key).get(column, ""))

    def show_rows(self, rows: Sequence[Row], placeholder: Callable[[str], tuple[Cell, ...]]) -> None:
        """Show `rows` (key, line) in their order, touching only what differs.

        New rows are appended, which keeps the order when lists grow at the end (tasks by id, worktrees by
        creation); rows coming back from under a filter would land out of place, so then the table is rebuilt.
        A row given without a line keeps what it shows; a new one shows `placeholder(key)` until it is on screen.
        """
        for key in [k for k in self._built if k not in {key for key, _ in rows}]:
            del self._built[key]
        if not self._layout:
            return  # no columns yet (the table has no size): rows come with them
        widths = [width for _, width in self._layout]

        def stand_in(key: str) -> Text:
            return compose_line(placeholder(key), widths)

        wanted = dict(rows)
        for key in [str(key.value) for key in self.rows]:
            if key not in wanted:
                self.remove_row(key)
        present = {str(key.value) for key in self.rows}
        changed: dict[str, Text] = {}
        for key, line in rows:
            if key not in present:
                self.add_row(line if line is not None else stand_in(key), key=key)
            elif line is not None and not _same(self.get_cell(key, ROW_COLUMN), line):
                changed[key] = line
        if changed:
            self._update_rows(changed)
        if [str(k.value) for k in self.rows] != [key for key, _ in rows]:
            kept = {str(k.value): self.get_cell(k, ROW_COLUMN) for k in self.rows}
            self.clear()
            for key, line in rows:
                self.add_row(line if line is not None else kept.get(key) or stand_in(key), key=key)

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> Self:
        if self._narrowing and not (regions or layout or recompose):
            return self  # update_cell's repaint of the whole table: _update_rows repaints the changed rows instead
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def _update_rows(self, lines: dict[str, Text]) -> None:
        """Put new lines in rows and repaint only those rows.

        `update_cell` stores a value, makes all of the table's cached renders stale (they are keyed by a
        table-wide count) and asks for a repaint of the whole table. The rows that did not change still show what
        they hold, so that repaint is left out and only the changed rows are repainted, rendered again from the
        new values."""
        self._narrowing = True
        try:
            for key, line in lines.items():
                self.update_cell(key, ROW_COLUMN, line)
        finally:
            self._narrowing = False
        for key in lines:
            self.refresh_row(self.get_row_index(key))  # a repaint of that row, if it is on screen


def window(table: DataTable[Text], count: int, margin: int = 2) -> range:
    """The indexes, among `count` rows, of those on screen (and `margin` rows either side): the rows worth
    building lines for. Before the table has a size, a screenful of the app."""
    height = table.scrollable_content_region.height
    if height <= 0:
        height = table.app.size.height
    first = max(int(table.scroll_offset.y) - margin, 0)
    return range(first, min(count, first + height + 2 * margin))


def _same(old: Text, new: Text) -> bool:
    """Whether a line shows the same: its styles too (a row greyed out keeps its words)."""
    return old is new or (old.plain, old.style, old.spans) == (new.plain, new.style, new.spans)
