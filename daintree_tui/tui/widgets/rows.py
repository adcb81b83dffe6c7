"""Row diffing shared by the dashboard's tables: update exactly the rows and cells that changed."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable

Cell = str | Text


def sync_rows(table: DataTable[Cell], rows: Sequence[tuple[str, tuple[Cell, ...]]]) -> None:
    """Make `table` show `rows` (key, cells) in their order, touching only what differs.

    New rows are appended, which keeps the order when lists grow at the end (tasks by id, worktrees by
    creation); rows coming back from under a filter would land out of place, so then the table is rebuilt.
    """
    wanted = dict(rows)
    existing = [str(key.value) for key in table.rows]
    for key in existing:
        if key not in wanted:
            table.remove_row(key)
    present = {str(key.value) for key in table.rows}
    columns = list(table.columns)
    # Only an auto-width column needs re-measuring when a cell changes: for a fixed one, Textual would measure
    # every cell of the column whenever one gets shorter (the previews of 40 busy agents: 40 x rows a second).
    auto_width = {key: column.auto_width for key, column in table.columns.items()}
    for key, cells in rows:
        if key not in present:
            table.add_row(*cells, key=key)
            continue
        current = table.get_row(key)
        for column, old, new in zip(columns, current, cells, strict=False):
            if not _same(old, new):
                table.update_cell(key, column, new, update_width=auto_width.get(column, True))
    if [str(k.value) for k in table.rows] != [key for key, _ in rows]:
        table.clear()
        for key, cells in rows:
            table.add_row(*cells, key=key)


def _same(old: Cell, new: Cell) -> bool:
    """Whether a cell shows the same: for Text its style too (a row greyed out keeps its words)."""
    if isinstance(new, Text):
        return isinstance(old, Text) and (old.plain, old.style, old.spans) == (new.plain, new.style, new.spans)
    return str(old) == str(new)
