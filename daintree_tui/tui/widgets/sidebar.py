"""Sidebar: the dashboard's lists, the tasks and the worktrees, under the filter box.

The screen binds its state down (`data_bind`); the sidebar holds what the filter box says and binds that to both
lists. The box is hidden until asked for (`open_filter`: the `/` key); enter goes back to the worktrees, esc
clears and closes it (`close_filter`). Which worktree the lists point at is the screen's to follow (their cursor
and focus messages bubble up to it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Input, Label

from daintree_tui.core.models import Task, WorktreeEntry
from daintree_tui.core.worktrees import Facts
from daintree_tui.tui.widgets.conflicts_bar import Found
from daintree_tui.tui.widgets.task_table import TaskTable
from daintree_tui.tui.widgets.worktree_table import WorktreeTable

if TYPE_CHECKING:
    from daintree_tui.services.ci import ChecksReport
    from daintree_tui.sessions.manager import SessionInfo


class Sidebar(Vertical):
    """The filter box, the tasks list and the worktrees list."""

    # Bound from the screen and passed on to the lists, which draw them.
    tasks: reactive[tuple[Task, ...]] = reactive(tuple, init=False, repaint=False)
    entries: reactive[tuple[WorktreeEntry, ...]] = reactive(tuple, init=False, repaint=False)
    facts: reactive[dict[str, Facts]] = reactive(dict, init=False, repaint=False)
    sessions: reactive[dict[str, SessionInfo]] = reactive(dict, init=False, repaint=False)
    previews: reactive[dict[str, str]] = reactive(dict, init=False, repaint=False)
    disk: reactive[dict[str, int]] = reactive(dict, init=False, repaint=False)
    selected: reactive[str | None] = reactive(None, init=False, repaint=False)
    """The current worktree (the worktrees list keeps its cursor on it)."""
    radar: reactive[Found] = reactive(dict, init=False, repaint=False)
    """The conflict radar's prediction, for the worktrees' conflicts column."""
    checks: reactive[dict[str, ChecksReport]] = reactive(dict, init=False, repaint=False)
    """The CI checks of the worktrees' pull requests, for the worktrees' CI column."""
    filter_text: reactive[str] = reactive("", init=False, repaint=False)
    """What the filter box holds: both lists show what matches (`hosts.matches`)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.filter_box = Input(placeholder="filter…", id="filter")
        self.task_table = TaskTable(id="tasks")
        self.worktree_table = WorktreeTable(id="worktrees")

    def compose(self) -> ComposeResult:
        bar = Sidebar
        yield self.filter_box
        yield Label("Tasks", classes="pane-title")
        yield self.task_table.data_bind(bar.tasks, bar.filter_text)
        yield Label("Worktrees", classes="pane-title")
        yield self.worktree_table.data_bind(bar.entries, bar.facts, bar.sessions, bar.previews, bar.disk,
                                            bar.filter_text, bar.selected, bar.checks, conflicts=bar.radar)

    def on_mount(self) -> None:
        self.filter_box.display = False

    def open_filter(self) -> None:
        box = self.filter_box
        box.display = True
        self.screen.set_focus(box)  # now, not on the next loop turn: `/cart` typed fast all goes to the box

    def close_filter(self) -> bool:
        """Clear and hide the filter box (the lists show everything again); False when it was not open."""
        box = self.filter_box
        if not box.display:
            return False
        box.value = ""
        box.display = False
        self.worktree_table.focus()
        return True

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value

    @on(Input.Submitted, "#filter")
    def filter_done(self) -> None:
        self.worktree_table.focus()
