"""The current worktree: which one it is, following the lists' cursor and focus, and keeping the terminal on its
session.

A base of `MainScreen` (which declares the reactives) so the screen module keeps to composing widgets and taking
in what the feed found. `selected` is the one current worktree that the header, the terminal, the events, the
diff and every action follow.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from textual import on
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import DataTable

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.sessions.pane_size import save_pane_size
from daintree_tui.tui.screens.hosts import HostsScreen
from daintree_tui.tui.widgets.task_table import TaskTable
from daintree_tui.tui.widgets.terminal import TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable

ATTACH_DELAY = 0.12
SIZE_RECORD_DELAY = 1.0


class CurrentWorktreeScreen(HostsScreen):
    """Following and showing the current worktree; the state it reads is `MainScreen`'s reactives."""

    # Declared here for the type checker; MainScreen defines it as a reactive.
    terminal_focused: bool

    def __init__(self) -> None:
        super().__init__()
        self._attach_timer: Timer | None = None
        self._size_timer: Timer | None = None
        self._arriving: str | None = None

    @property
    def focus_chain(self) -> list[Widget]:
        """What tab and shift+tab go round: the lists and the tabs below, not the terminal. Tabbing into it put
        the user in the agent's prompt without asking (and there tab is the agent's key, so there was no tabbing
        out); the terminal takes the keys only when asked: enter, s, z or a click."""
        return [widget for widget in super().focus_chain if not isinstance(widget, TerminalView)]

    def watch_entries(self, old: tuple[WorktreeEntry, ...], new: tuple[WorktreeEntry, ...]) -> None:
        names = [e.name for e in new]
        if self._arriving in names:
            self._arriving = None
        if self.selected is None or self.selected in names or self.selected == self._arriving:
            if self.selected is None and names and not self.terminal_focused:
                self.selected = self.query_one(WorktreeTable).cursor_name() or names[0]
            return
        # The current worktree went away (removed here or elsewhere): its neighbour becomes current.
        old_names = [e.name for e in old]
        index = old_names.index(self.selected) if self.selected in old_names else 0
        survivors = [n for n in old_names[index + 1:] + old_names[:index][::-1] if n in names]
        self.selected = survivors[0] if survivors else (names[0] if names else None)

    def watch_selected(self, name: str | None) -> None:
        self.terminal.no_worktree = name is None
        self.schedule_attach()
        if name and self.later_mounted and self.diff_tab_shown():
            self.show_diff(name)

    def diff_tab_shown(self) -> bool:
        from daintree_tui.tui.screens import later  # loaded with the tabs (see `later_mounted`)

        return later.bottom_tab(self) == "diff-tab"

    def watch_terminal_focused(self) -> None:
        self.refresh_bindings()  # the footer: the lists' keys, or only the leave key while typing to the agent

    def watch_sessions(self) -> None:
        if self.selected in self.sessions and self.terminal.worktree != self.selected:
            self.schedule_attach()

    @on(WorktreeTable.Picked)
    def worktree_picked(self, message: WorktreeTable.Picked) -> None:
        if message.name is not None:
            self.selected = message.name

    @on(DataTable.RowHighlighted, "#tasks")
    def task_highlighted(self) -> None:
        self.follow_task()

    def follow_task(self) -> None:
        tasks = self.query_one(TaskTable)
        if tasks.has_focus:
            task = next((t for t in self.tasks if t.id == tasks.selected_task_id), None)
            live = {e.name for e in self.entries}
            self.selected = task.worktree if task and task.worktree in live else None

    def on_descendant_focus(self, event: Any) -> None:
        widget = event.widget if hasattr(event, "widget") else None
        self.terminal_focused = isinstance(widget, TerminalView)
        self.query_one("#main").set_class(self.terminal_focused, "terminal-focused")
        if isinstance(widget, TaskTable):
            self.follow_task()
        elif isinstance(widget, WorktreeTable) and widget.cursor_name():
            self.selected = widget.cursor_name()

    def on_descendant_blur(self, event: Any) -> None:
        if isinstance(getattr(event, "widget", None), TerminalView):
            self.terminal_focused = False
            self.query_one("#main").remove_class("terminal-focused")

    def schedule_attach(self) -> None:
        if self._attach_timer is not None:
            self._attach_timer.stop()
        self._attach_timer = self.set_timer(ATTACH_DELAY, self.attach_selected)

    def attach_selected(self) -> None:
        """Show the current worktree's session (after a short delay, so scrolling through the list is cheap)."""
        self._attach_timer = None
        if not self.query(TerminalView):  # the app is closing: its widgets went before this screen's timer
            return
        terminal = self.terminal
        name = self.selected
        if terminal.worktree == name:
            pass  # attached already (a session just started may not be in a poll yet)
        elif name and name in self.sessions:
            self.dashboard.attach(terminal, name)
        elif terminal.worktree is not None:
            if terminal.has_focus:
                self.query_one(WorktreeTable).focus()
            terminal.detach()
        self.feed.shown = terminal.worktree
        self.explain_unattached(name)

    def attach_and_focus(self, name: str) -> None:
        self.selected = name
        terminal = self.terminal
        if terminal.worktree != name:
            self.dashboard.attach(terminal, name)
        self.feed.shown = terminal.worktree
        terminal.focus()

    def release(self, name: str) -> None:
        """Stop showing `name` (before its session is stopped or its worktree removed)."""
        if self.terminal.worktree == name:
            if self.terminal.has_focus:
                self.query_one(WorktreeTable).focus()
            self.terminal.detach()

    def operation_done(self, message: str, focus: str | None = None, removed: str | None = None) -> None:
        """A flow finished: say so, read the project again, and make `focus` the current worktree."""
        if message:
            self.notify(message)
        if removed is not None:
            self.entries = tuple(e for e in self.entries if e.name != removed)
        self.feed.refresh_all()
        if focus:
            # Only a worktree not listed yet is arriving: one already listed (a session started on it) stayed
            # "arriving" until it went away, and then stayed current though gone.
            if focus not in {e.name for e in self.entries}:
                self._arriving = focus
            self.attach_and_focus(focus)

    @on(TerminalView.Left)
    def leave_terminal(self) -> None:
        self.unzoom()

    @on(TerminalView.Resized)
    def terminal_resized(self, message: TerminalView.Resized) -> None:
        if self.has_class("zoomed") or self.has_class("full-diff"):
            return  # a passing layout: sessions should start at the everyday size
        if self._size_timer is not None:
            self._size_timer.stop()
        self._size_timer = self.set_timer(SIZE_RECORD_DELAY, partial(self.record_pane_size, message.cols,
                                                                     message.rows))

    def record_pane_size(self, cols: int, rows: int) -> None:
        """Sessions started from the CLI start at the size the dashboard will show them at."""
        self.run_worker(asyncio.to_thread(save_pane_size, self.backend.project, cols, rows), group="size",
                        exclusive=True, exit_on_error=False, description="record the pane size")

    @on(TerminalView.Detached)
    def terminal_detached(self) -> None:
        self.feed.poll_now()
