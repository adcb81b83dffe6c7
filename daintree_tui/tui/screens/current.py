"""The current worktree: which one it is, following the lists' cursor and focus, a neighbour when it goes, the one
an operation just made.

A part the main screen holds (`MainScreen.current`). The screen owns `selected` (the header, the terminal, the
events, the diff and every action follow it) and routes here its `entries` watcher, the lists' focus and cursor
messages, and what a finished operation asks for. The terminal follows `selected` by itself (`SessionPane`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from textual.notifications import SeverityLevel
from textual.widget import Widget

from daintree_tui.core.models import Task, WorktreeEntry
from daintree_tui.tui.widgets.task_table import TaskTable
from daintree_tui.tui.widgets.terminal import TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable

if TYPE_CHECKING:
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.tui.feed import DashboardFeed
    from daintree_tui.tui.widgets.session_pane import SessionPane
    from daintree_tui.tui.widgets.sidebar import Sidebar


class CurrentView(Protocol):
    """What the current-worktree part reads and sets on its screen."""

    selected: str | None
    entries: tuple[WorktreeEntry, ...]
    terminal_focused: bool

    @property
    def tasks(self) -> tuple[Task, ...]: ...

    @property
    def sessions(self) -> dict[str, SessionInfo]: ...

    @property
    def sidebar(self) -> Sidebar: ...

    @property
    def pane(self) -> SessionPane: ...

    @property
    def feed(self) -> DashboardFeed: ...

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...


class CurrentWorktree:
    """Keeps `selected` on a live worktree the user is looking at."""

    def __init__(self, view: CurrentView) -> None:
        self.view = view
        self.arriving: str | None = None
        """A worktree an operation just made current that the lists do not show yet."""

    def entries_changed(self, old: tuple[WorktreeEntry, ...], new: tuple[WorktreeEntry, ...]) -> None:
        view = self.view
        names = [e.name for e in new]
        if self.arriving in names:
            self.arriving = None
        if view.selected is None or view.selected in names or view.selected == self.arriving:
            if view.selected is None and names and not view.terminal_focused:
                view.selected = view.sidebar.worktree_table.cursor_name() or names[0]
            return
        # The current worktree went away (removed here or elsewhere): its neighbour becomes current.
        old_names = [e.name for e in old]
        index = old_names.index(view.selected) if view.selected in old_names else 0
        survivors = [n for n in old_names[index + 1:] + old_names[:index][::-1] if n in names]
        view.selected = survivors[0] if survivors else (names[0] if names else None)

    def follow_task(self) -> None:
        """In the tasks list, the task under the cursor's worktree is the current one (none: no worktree); a task
        the host queue placed on a host has that host's row (`NAME@HOST`)."""
        view = self.view
        tasks = view.sidebar.task_table
        if tasks.has_focus:
            task = next((t for t in view.tasks if t.id == tasks.selected_task_id), None)
            live = {e.name for e in view.entries}
            view.selected = task.where if task and task.where in live else None

    def focused(self, widget: Widget | None) -> None:
        """Focus moved to `widget`: the terminal takes the keys, or a list's cursor names the current worktree."""
        view = self.view
        view.terminal_focused = isinstance(widget, TerminalView)
        if isinstance(widget, TaskTable):
            self.follow_task()
        elif isinstance(widget, WorktreeTable) and widget.cursor_name():
            view.selected = widget.cursor_name()

    def session_order(self) -> list[str]:
        """Worktrees that have a session, in table order: what the digits, alt+N and [ ] move through."""
        return [e.name for e in self.view.entries if e.name in self.view.sessions]

    def cycle(self, step: int) -> None:
        order = self.session_order()
        if order:
            index = order.index(self.view.selected) if self.view.selected in order else -1
            self.view.selected = order[(index + step) % len(order)]

    def jump(self, number: int) -> None:
        order = self.session_order()
        if 1 <= number <= len(order):
            self.view.selected = order[number - 1]

    def attach_and_focus(self, name: str) -> None:
        """Make `name` the current worktree and give its session the keys."""
        self.view.selected = name
        self.view.pane.attach_and_focus(name)

    def reattach(self, name: str) -> None:
        """Show `name` again after an operation that released it was refused."""
        self.view.pane.reattach(name)
        self.view.feed.poll_now()

    def operation_done(self, message: str, focus: str | None = None, removed: str | None = None) -> None:
        """A flow finished: say so, read the project again, and make `focus` the current worktree."""
        view = self.view
        if message:
            view.notify(message)
        if removed is not None:
            view.entries = tuple(e for e in view.entries if e.name != removed)
        view.feed.refresh_all()
        if focus:
            # Only a worktree not listed yet is arriving: one already listed (a session started on it) stayed
            # "arriving" until it went away, and then stayed current though gone.
            if focus not in {e.name for e in view.entries}:
                self.arriving = focus
            self.attach_and_focus(focus)
