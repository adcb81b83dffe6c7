"""TaskTable: the tasks pane (status glyph, id, subject, bound worktree)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from rich.text import Text
from textual import events
from textual.reactive import reactive

from daintree_tui.core.models import Task
from daintree_tui.tui.hosts import task_filter
from daintree_tui.tui.widgets.rows import Cell, Row, RowTable, window

STATUS_GLYPH = {
    "pending": Text("○", style="dim"),
    "in_progress": Text("◐", style="bold yellow"),
    "completed": Text("●", style="green"),
}


class TaskTable(RowTable):
    """Tasks, one row each, keyed by id."""

    DEFAULT_CSS = """
    TaskTable { height: auto; max-height: 50%; overflow-x: hidden; }
    """

    # Nothing is painted from these directly: show() repaints exactly the rows whose cells changed.
    tasks: reactive[tuple[Task, ...]] = reactive(tuple, init=False, repaint=False)
    filter_text: reactive[str] = reactive("", init=False, repaint=False)

    def on_mount(self) -> None:
        self.add_columns_for_width()

    subject_width = 30
    """Subjects are cut to this many cells so the worktree column stays in view (set from the pane's width)."""

    worktree_width = 16
    """The worktree column's width; 0 hides it (narrow panes: the worktrees list names them anyway)."""

    def on_resize(self, event: events.Resize) -> None:
        width = event.size.width
        worktree = 16 if width >= 44 else 0
        # status (1) and id (3) with their padding, and the worktree column, leave the rest to the subject
        subject = max(12, min(60, width - 9 - (worktree + 2 if worktree else 0) - 1))
        if (subject, worktree) != (self.subject_width, self.worktree_width):
            self.subject_width, self.worktree_width = subject, worktree
            self.add_columns_for_width()
        self.show(self.tasks, self.filter_text)  # new widths, or a taller table with rows not built yet

    def add_columns_for_width(self) -> None:
        columns = [("status", " ", 1), ("id", "#", 3), ("subject", "Task", self.subject_width)]
        if self.worktree_width:
            columns.append(("worktree", "Worktree", self.worktree_width))
        self.set_columns(columns)

    def watch_tasks(self) -> None:
        self.show(self.tasks, self.filter_text)

    def watch_filter_text(self) -> None:
        self.show(self.tasks, self.filter_text)

    def show(self, tasks: Sequence[Task], filter_text: str = "") -> None:
        """Show the tasks that pass the filter, in order; cells are built only for the rows on screen (and only
        when what they show changed). Scrolling builds the rows that come into view."""
        needle = task_filter(filter_text).lower()  # tasks are local: `host:` words do not filter them
        open_ids = {t.id for t in tasks if str(t.status) != "completed"}
        shown = [t for t in tasks if not needle or needle in f"{t.subject} {t.where} {t.id}".lower()]
        on_screen = window(self, len(shown))
        rows: list[Row] = []
        for index, task in enumerate(shown):
            key = str(task.id)
            if index not in on_screen:
                rows.append((key, None))
                continue
            blockers = tuple(b for b in task.blockedBy if b in open_ids)
            rows.append((key, self.row_line(key, (task, blockers), partial(self._build_cells, task, blockers))))
        self.show_rows(rows, self._placeholder)

    def _build_cells(self, task: Task, blockers: tuple[int, ...]) -> tuple[Cell, ...]:
        # cut to the column (with an ellipsis) where the row is laid out: compose_line
        subject = Text(task.subject, style="dim strike" if str(task.status) == "completed" else "")
        if blockers:
            subject.append(f" ⧗{','.join(map(str, blockers))}", style="dim red")
        where = task.where  # a host's worktree as NAME@HOST (placed there by the host queue)
        worktree = Text(where or "-", style="cyan" if where else "dim")
        cells: tuple[Cell, ...] = (STATUS_GLYPH[str(task.status)], str(task.id), subject)
        return cells + ((worktree,) if self.worktree_width else ())

    def _placeholder(self, key: str) -> tuple[Cell, ...]:
        """A row not yet on screen: its id only, until it scrolls into view."""
        return ("", key, "") + (("",) if self.worktree_width else ())

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if int(old) != int(new):
            self.show(self.tasks, self.filter_text)  # rows coming into view get their cells

    @property
    def selected_task_id(self) -> int | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return int(str(key.value)) if key.value is not None else None
