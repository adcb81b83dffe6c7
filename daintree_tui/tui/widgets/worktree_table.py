"""WorktreeTable: the worktrees pane (number, name, session status, dirty count, ahead/behind, predicted
conflicts, CI checks, output, port, disk, branch).

Columns hide by priority when the pane is narrow: the name and session status always show, then the session
number, the dirty count, ahead/behind, the conflicts (a column only while the radar predicts any) and the CI
checks of the pull request (a column only while some worktree has them), the latest output, the port, disk use and
the branch. The cursor follows the screen's current worktree (`selected`); moving
it posts `Picked`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.worktrees import Facts
from daintree_tui.tui.agents_view import status_source_glyph
from daintree_tui.tui.hosts import LOCAL, is_remote, matches, remote_cells, row_host, shown_name
from daintree_tui.tui.widgets.conflicts_bar import Found
from daintree_tui.tui.widgets.rows import GAP, Cell, Row, RowTable, window
from daintree_tui.tui.widgets.worktree_cells import activity_cell, ci_cell, conflicts_cell, disk_text, session_cell


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int
    priority: int
    """Lower shows first when space is short."""


COLUMNS = (
    Column("n", "#", 1, 2),
    Column("name", "Worktree", 0, 0),  # width: the longest name, within NAME_WIDTH
    Column("host", "Host", 10, 2),  # only while remote hosts have rows
    Column("session", "Status", 10, 1),  # the agent's status (its name is in the header above the terminal)
    Column("source", "S", 1, 3),  # where status comes from (agents_view.STATUS_SOURCE_GLYPH); before ± on a tie
    Column("dirty", "±", 4, 3),
    Column("ab", "↑↓", 7, 4),
    Column("conflicts", "⚠", 3, 4),  # only while the radar predicts a conflict: how many it conflicts with
    Column("ci", "CI", 3, 4),  # only while a worktree's pull request has checks (`gh pr checks`)
    Column("activity", "Latest output", 0, 5),  # width: what is left, within ACTIVITY_WIDTH
    Column("port", "Port", 5, 6),
    Column("disk", "Disk", 6, 7),
    Column("branch", "Branch", 16, 8),
)

if TYPE_CHECKING:
    from daintree_tui.services.ci import ChecksReport
    from daintree_tui.sessions.manager import SessionInfo

__all__ = ["WorktreeTable", "activity_cell", "fit_columns", "session_cell"]  # the cells: worktree_cells.py

NAME_WIDTH = (8, 24)
ACTIVITY_WIDTH = (12, 48)
PADDING = GAP  # between two columns (and at the table's edges, DataTable's padding of one cell a side)


def fit_columns(available: int, name_width: int, hosts: bool = False, conflicts: bool = False,
                ci: bool = False) -> list[tuple[Column, int]]:
    """The columns that fit in `available` cells, by priority, in display order, with their widths (the host
    column only with `hosts`, the conflicts column only with `conflicts`, the CI column only with `ci`)."""
    chosen: dict[str, int] = {}
    used = 0
    wanted = {"host": hosts, "conflicts": conflicts, "ci": ci}
    columns = [c for c in COLUMNS if wanted.get(c.key, True)]
    # A long name gives way (down to NAME_WIDTH's minimum) to the status and the session number: the number is
    # the digit that jumps to the session.
    essential = sum(c.width + PADDING for c in columns if c.key != "name" and c.priority <= 2)
    name_width = max(NAME_WIDTH[0], min(name_width, available - essential - PADDING))
    for column in sorted(columns, key=lambda c: c.priority):
        width = name_width if column.key == "name" else column.width
        if column.key == "activity":
            width = min(ACTIVITY_WIDTH[1], available - used - PADDING)
            if width < ACTIVITY_WIDTH[0]:
                continue
        if used + width + PADDING > available and column.priority > 1:
            continue
        chosen[column.key] = width
        used += width + PADDING
    if "activity" in chosen:  # the output column takes what the lower-priority columns left over
        chosen["activity"] = min(ACTIVITY_WIDTH[1], chosen["activity"] + available - used)
    return [(c, chosen[c.key]) for c in COLUMNS if c.key in chosen]


class WorktreeTable(RowTable):
    """Live worktrees, one row each, keyed by name."""

    DEFAULT_CSS = "WorktreeTable { overflow-x: hidden; }"

    # Nothing is painted from these directly: render_rows repaints exactly the rows whose cells changed.
    entries: reactive[tuple[WorktreeEntry, ...]] = reactive(tuple, init=False, repaint=False)
    facts: reactive[dict[str, Facts]] = reactive(dict, init=False, repaint=False)
    sessions: reactive[dict[str, SessionInfo]] = reactive(dict, init=False, repaint=False)
    previews: reactive[dict[str, str]] = reactive(dict, init=False, repaint=False)
    disk: reactive[dict[str, int]] = reactive(dict, init=False, repaint=False)
    conflicts: reactive[Found] = reactive(dict, init=False, repaint=False)
    """Per worktree, the worktrees and branches the radar predicts its work conflicts with, and in which files."""
    checks: reactive[dict[str, ChecksReport]] = reactive(dict, init=False, repaint=False)
    """Per worktree with a pull request, its CI checks as gh last said."""
    filter_text: reactive[str] = reactive("", init=False, repaint=False)
    selected: reactive[str | None] = reactive(None, init=False, repaint=False)
    """The screen's current worktree: the cursor sits on it when it is shown."""

    class Picked(Message):
        """The user moved the cursor to another worktree."""

        def __init__(self, table: WorktreeTable, name: str | None) -> None:
            super().__init__()
            self.table = table
            self.name = name

        @property
        def control(self) -> WorktreeTable:
            return self.table

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, zebra_stripes=False)
        self._pending = False
        self._syncing = False

    def on_mount(self) -> None:
        self._relayout()

    def on_resize(self, event: events.Resize) -> None:
        self._relayout()
        self._changed()  # a taller table shows rows that have no cells yet

    def _relayout(self) -> None:
        if not self.size.width:
            return  # not laid out yet: the columns (and rows) come with the first size, all built once
        names = [len(shown_name(e)) + (7 if e.status == "kept" else 0) for e in self.entries]
        name_width = max(NAME_WIDTH[0], min(NAME_WIDTH[1], max(names, default=0)))
        layout = fit_columns(max(self.size.width, 30), name_width, any(is_remote(e.name) for e in self.entries),
                             any(self.conflicts.values()), bool(self.checks))
        self._syncing = True
        try:
            changed = self.set_columns([(column.key, column.label, width) for column, width in layout])
        finally:
            self._syncing = False
        if changed:
            self.render_rows()

    def _changed(self) -> None:
        if not self._pending:
            self._pending = True
            self.call_later(self.render_rows)

    watch_facts = watch_sessions = watch_previews = watch_disk = watch_filter_text = _changed

    def watch_conflicts(self, old: Found, new: Found) -> None:
        if any(old.values()) != any(new.values()):
            self._relayout()  # the column comes with the first predicted conflict and goes with the last
        self._changed()

    def watch_checks(self, old: dict[str, ChecksReport], new: dict[str, ChecksReport]) -> None:
        if bool(old) != bool(new):
            self._relayout()  # the column comes with the first pull request's checks and goes with the last
        self._changed()

    def watch_entries(self) -> None:
        self._relayout()
        self._changed()

    def watch_selected(self) -> None:
        self._follow_selected()

    def render_rows(self) -> None:
        """Show the rows in order; build cells only for those on screen (and only when what they show changed),
        so 200 worktrees cost what 20 do. Scrolling builds the rows that come into view."""
        self._pending = False
        if not self.column_keys:
            return  # no columns before the table has a size (see _relayout)
        numbers = {name: i for i, name in enumerate((e.name for e in self.entries if e.name in self.sessions), 1)}
        keys = self.column_keys
        # A cursor the user moved (a key, a click, `select_name`) whose RowHighlighted has not come yet: the
        # rows are shown again under it, not under `selected`. Following `selected` here put the cursor back on
        # the old worktree before that message came, and the move was lost (a poll's render in between: seen
        # under load, the terminal stayed on the old worktree).
        moving = self.cursor_name() if self.show_cursor and self.cursor_name() != self.selected else None
        shown = [e for e in self.entries if not self.filter_text or matches(self.filter_text, e)]
        on_screen = window(self, len(shown))
        rows: list[Row] = []
        for index, entry in enumerate(shown):
            if index not in on_screen:
                rows.append((entry.name, None))
                continue
            name = entry.name
            inputs = (entry, self.facts.get(name), self.sessions.get(name), self.previews.get(name),
                      self.disk.get(name), numbers.get(name), keys, self.conflicts.get(name), self.checks.get(name))
            rows.append((name, self.row_line(name, inputs, partial(self._build_cells, entry, numbers, keys))))
        self._syncing = True
        try:
            self.show_rows(rows, self._placeholder)
        finally:
            self._syncing = False
        self._follow_selected(moving)

    def _build_cells(self, entry: WorktreeEntry, numbers: dict[str, int], keys: tuple[str, ...]) -> tuple[Cell, ...]:
        fact = self.facts.get(entry.name)
        info = self.sessions.get(entry.name)
        name = Text(shown_name(entry), style="bold" if entry.status == "active" else "italic")
        if entry.status == "kept":
            name.append(" (kept)", style="dim")
        cells: dict[str, Cell] = {
            "n": str(numbers.get(entry.name, "")),
            "name": name,
            "session": session_cell(info, short=True),
            "source": status_source_glyph(info.status_source if info else None),
            "port": str(entry.ports[0]) if entry.ports else "-",
            "dirty": Text("…", style="dim") if fact is None else (
                Text("gone", style="red") if not fact.exists else
                Text(str(fact.dirty), style="yellow" if fact.dirty else "dim")),
            "ab": Text("", style="dim") if fact is None else Text(f"↑{fact.ahead}↓{fact.behind}", style="dim"),
            "conflicts": conflicts_cell(self.conflicts.get(entry.name, ())),
            "ci": ci_cell(self.checks.get(entry.name)),
            "disk": Text(disk_text(self.disk.get(entry.name)), style="dim"),
            "branch": Text(entry.branch, style="dim"),
            "activity": activity_cell(info, self.previews.get(entry.name, "")),
            "host": Text(row_host(entry), style="dim" if row_host(entry) == LOCAL else "cyan"),
        }
        if is_remote(entry.name):
            remote_cells(entry, cells)
        return tuple(cells[k] for k in keys)

    def _placeholder(self, name: str) -> tuple[Cell, ...]:
        """A row not yet on screen: its name only, until it scrolls into view."""
        return tuple(name if key == "name" else "" for key in self.column_keys)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if int(old) != int(new):
            self._changed()  # rows coming into view get their cells

    def _follow_selected(self, moving: str | None = None) -> None:
        """Put the cursor on the current worktree (or on `moving`, where the user just moved it); with it not
        listed yet, show no cursor. A filter that hides the current worktree makes its first match current (what
        is shown is what the keys act on)."""
        target = moving if moving is not None and moving in self.rows else self.selected
        index = next((i for i, key in enumerate(self.rows) if key.value == target), None)
        if index is None and self.filter_text and self.row_count:
            self.post_message(self.Picked(self, self.cursor_name()))
        self.show_cursor = index is not None
        if index is not None and index != self.cursor_row:
            self._syncing = True
            try:
                self.move_cursor(row=index, animate=False)
            finally:
                self._syncing = False

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if self._syncing or not self.show_cursor:
            return
        name = self.cursor_name()
        if name is not None and name != self.selected:
            self.show_cursor = True
            self.post_message(self.Picked(self, name))

    def visible_names(self) -> list[str]:
        """The worktrees whose rows are on screen now: only those get previews (200 rows cost what 20 do)."""
        first = int(self.scroll_offset.y)
        height = max(self.scrollable_content_region.height, 1)
        return [str(row.key.value) for row in self.ordered_rows[first:first + height]]

    def cursor_name(self) -> str | None:
        """The worktree under the cursor (None for an empty table)."""
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return str(key.value) if key.value is not None else None

    @property
    def selected_name(self) -> str | None:
        return self.cursor_name()

    def _reveal(self) -> bool:
        """The cursor was hidden (the current worktree is not listed): the first move shows it where it is."""
        if self.show_cursor or not self.row_count:
            return False
        self.show_cursor = True
        self.post_message(self.Picked(self, self.cursor_name()))
        return True

    def action_cursor_down(self) -> None:
        if not self._reveal():
            super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if not self._reveal():
            super().action_cursor_up()

    def on_mouse_down(self) -> None:
        self.show_cursor = True

    def select_name(self, name: str) -> None:
        """Move the cursor to `name` as the user would (the screen's selection follows)."""
        for index, key in enumerate(self.rows):
            if key.value == name:
                self.move_cursor(row=index)
                return
