"""SessionPane: the current worktree's side of the dashboard: the title bar over its terminal, the terminal kept on
its session.

The screen binds its state down (`data_bind`: the current worktree, the sessions, the remote hosts' states). The
pane attaches the terminal to the current worktree's session a moment after that changes (scrolling through the
list stays cheap), says what the terminal shows while no session is attached, and records the terminal's size for
the sessions started elsewhere. The events and diff tabs mount below the terminal later (screens/later.py), in
the place `#bottom-slot` keeps for them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import Worker

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.tui.hosts import last_update, split_key
from daintree_tui.tui.keymap import shown_key
from daintree_tui.tui.widgets.checks_bar import ChecksBar
from daintree_tui.tui.widgets.conflicts_bar import ConflictsBar, Found
from daintree_tui.tui.widgets.session_title import SessionTitle
from daintree_tui.tui.widgets.terminal import LOOKING, NO_SESSION, TerminalView

if TYPE_CHECKING:
    from daintree_tui.services.ci import ChecksReport
    from daintree_tui.services.hosts_feed import HostState
    from daintree_tui.sessions.manager import SessionInfo

ATTACH_DELAY = 0.12
SIZE_RECORD_DELAY = 1.0


class SessionPane(Vertical):
    """The title and the terminal of the current worktree."""

    class LetGo(Message):
        """The terminal let go of the session it showed while it had the keys: they go back to the lists."""

    # Bound from the screen. The pane draws none of them itself (its title and terminal do).
    selected: reactive[str | None] = reactive(None, init=False, repaint=False)
    """The current worktree."""
    entries: reactive[tuple[WorktreeEntry, ...]] = reactive(tuple, init=False, repaint=False)
    """Live worktrees (the title names only those)."""
    sessions: reactive[dict[str, SessionInfo]] = reactive(dict, init=False, repaint=False)
    """Every session, status settled."""
    sessions_known: reactive[bool] = reactive(False, init=False, repaint=False)
    """Whether a poll has said which sessions there are: until then none is "no session" (they may be starting)."""
    hosts: reactive[dict[str, HostState]] = reactive(dict, init=False, repaint=False)
    """Each remote host's last state: what the terminal of a remote row says, and when it attaches again."""
    focused: reactive[bool] = reactive(False, init=False, repaint=False)
    """Keys go to the agent now."""
    zoom: reactive[str] = reactive("", init=False, repaint=False)
    """The screen's layout: "zoomed" or "full-diff" is a passing size, not the one sessions should start at."""
    radar: reactive[Found] = reactive(dict, init=False, repaint=False)
    """The conflict radar's prediction: the current worktree's conflicts show under its title."""
    checks: reactive[dict[str, ChecksReport]] = reactive(dict, init=False, repaint=False)
    """The CI checks of the worktrees' pull requests: the current worktree's show under its title."""

    def __init__(self, project: Project, attach: Callable[[TerminalView, str], None], *, persistent: bool,
                 leave_key: str, id: str | None = None) -> None:
        """Args:
            project: Where the pane size is recorded (`sessions/pane_size.py`).
            attach: Shows a session in a terminal (the app's `attach`: tmux, the PTY host, or a host's ssh).
            persistent: Whether sessions outlive the dashboard (tmux); the title warns when not.
            leave_key: The key that leaves the terminal, as the user set it.
        """
        super().__init__(id=id)
        self.project = project
        self.attach = attach
        self.persistent = persistent
        self.leave_key = leave_key
        self._attach_timer: Timer | None = None
        self._size_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        pane = SessionPane
        yield SessionTitle(id="session-title", persistent=self.persistent, leave_key=self.leave_key).data_bind(
            pane.entries, pane.sessions, pane.sessions_known, pane.selected, pane.focused)
        yield ConflictsBar(id="conflicts-bar").data_bind(pane.radar, pane.selected)
        send_key = shown_key(self.project.config.keys, "review_send_ci")
        yield ChecksBar(send_key=send_key, id="checks-bar").data_bind(pane.checks, pane.selected)
        terminal = TerminalView(id="terminal")
        terminal.set_reactive(TerminalView.placeholder, LOOKING)  # the first poll says which there are
        yield terminal
        # Blank until the events and diff tabs come (see later.py): a bare Widget draws its own name,
        # `Widget#bottom-slot`, and the first frame showed it for a second.
        yield Static(id="bottom-slot")

    @property
    def terminal(self) -> TerminalView:
        return self.query_one(TerminalView)

    def _terminal(self) -> TerminalView | None:
        """The terminal; None while the app is closing (its widgets go before the last timers and messages)."""
        return next(iter(self.query(TerminalView)), None)

    # -- following the screen's state ----------------------------------------------------------------------------

    def watch_selected(self, name: str | None) -> None:
        terminal = self._terminal()
        if terminal is not None:
            terminal.no_worktree = name is None
            self.schedule_attach()

    def watch_sessions(self) -> None:
        terminal = self._terminal()
        if terminal is not None and self.selected in self.sessions and terminal.worktree != self.selected:
            self.schedule_attach()

    def watch_sessions_known(self, known: bool) -> None:
        if known:
            self.explain_unattached(self.selected)  # no longer "looking" for a worktree that has none

    def watch_hosts(self, before: dict[str, HostState], states: dict[str, HostState]) -> None:
        host, _ = split_key(self.selected)
        state = states.get(host) if host else None
        terminal = self._terminal()
        if state is None or terminal is None:
            return
        self.explain_unattached(self.selected)
        was = before.get(state.name)
        if state.status == "ok" and (was is None or was.status != "ok") and terminal.worktree != self.selected:
            self.schedule_attach()  # the host came back: show its session again

    def watch_focused(self, focused: bool) -> None:
        self.set_class(focused, "terminal-focused")

    # -- the terminal on the current session -------------------------------------------------------------------

    def schedule_attach(self) -> None:
        if self._attach_timer is not None:
            self._attach_timer.stop()
        self._attach_timer = self.set_timer(ATTACH_DELAY, self.attach_selected)

    def attach_selected(self) -> None:
        """Show the current worktree's session (after a short delay, so scrolling through the list is cheap)."""
        self._attach_timer = None
        terminal = self._terminal()
        if terminal is None:
            return
        name = self.selected
        if terminal.worktree == name:
            pass  # attached already (a session just started may not be in a poll yet)
        elif name and name in self.sessions:
            self.attach(terminal, name)
        elif terminal.worktree is not None:
            self.let_go(terminal)
        self.explain_unattached(name)

    def attach_and_focus(self, name: str) -> None:
        """Show `name` (the current worktree now) and give it the keys."""
        terminal = self.terminal
        if terminal.worktree != name:
            self.attach(terminal, name)
        terminal.focus()

    def release(self, name: str) -> None:
        """Stop showing `name` (before its session is stopped or its worktree removed)."""
        terminal = self.terminal
        if terminal.worktree == name:
            self.let_go(terminal)

    def reattach(self, name: str) -> None:
        """Show `name` again after a refused restart, remove or merge released it (when it is still current)."""
        terminal = self.terminal
        if self.selected == name and terminal.worktree is None and name in self.sessions:
            self.attach(terminal, name)

    def let_go(self, terminal: TerminalView) -> None:
        if terminal.has_focus:
            self.post_message(self.LetGo())
        terminal.detach()

    def explain_unattached(self, key: str | None) -> None:
        """What the terminal says when it shows nothing: for a remote row whose host does not answer, that."""
        terminal = self._terminal()
        if terminal is None:
            return
        host, _ = split_key(key)
        state = self.hosts.get(host) if host else None
        if state is not None and state.status == "error":
            # Its words were typed and escaped by host_answers (or are ours): safe to show as they are.
            terminal.placeholder = (f"{state.error} ({last_update(state)}). Its agents keep running there; this "
                                    "terminal reattaches when it answers well again.")
        elif state is not None and state.status != "ok":
            terminal.placeholder = (f"Host {state.name} does not answer ({last_update(state)}). Its agents keep "
                                    "running there; this terminal reattaches when it is back.")
        elif state is not None:
            terminal.placeholder = f"No session on host {state.name} for this worktree."
        elif not self.sessions_known:
            terminal.placeholder = LOOKING
        elif key in self.sessions:
            terminal.placeholder = "Opening its session…"  # until it is attached
        else:
            terminal.placeholder = NO_SESSION

    # -- the size sessions start at ----------------------------------------------------------------------------

    @on(TerminalView.Resized)
    def terminal_resized(self, message: TerminalView.Resized) -> None:
        if self.zoom:
            return  # a passing layout: sessions should start at the everyday size
        if self._size_timer is not None:
            self._size_timer.stop()
        self._size_timer = self.set_timer(SIZE_RECORD_DELAY, partial(self.record_size, message.cols,
                                                                     message.rows))

    def record_size(self, cols: int, rows: int) -> None:
        """Sessions started from the CLI start at the size the dashboard will show them at."""
        from daintree_tui.sessions.pane_size import save_pane_size

        # A thread worker, not a coroutine around to_thread: one cancelled before it ran (the app quitting) left
        # that coroutine never awaited.
        self.run_worker(partial(save_pane_size, self.project, cols, rows), thread=True, group="size",
                        exclusive=True, exit_on_error=False, description="record the pane size")

    @on(Worker.StateChanged)
    def worker_changed(self, event: Worker.StateChanged) -> None:
        # Worker.StateChanged does not bubble: a failure to record the size is told from here.
        report = getattr(self.app, "report_worker_failure", None)
        if report is not None:
            report(event)
