"""MainScreen: tasks and worktrees on the left, the current worktree's terminal on the right, events and diff
below.

The screen holds the dashboard's state as reactives, which flow down to its widgets (`Sidebar`, `SessionPane`)
with `data_bind`, and the parts that do its work, each given a narrow view of the screen (a Protocol in its
module): `DashboardStartup` starts the rest in turn, `FeedIntake` and `HostRows` take in what `DashboardFeed` and
`HostsWatch` find, `CurrentWorktree` says which worktree is current, `WorktreeActions` and `HostRows` act on it,
`DashboardLayout` arranges the screen. `ChecksWatch` reads the CI checks of the worktrees' pull requests. The
screen itself is the table of keys and the messages it takes in, each routed to the part that does the work.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Header, Static
from textual.worker import Worker

from daintree_tui.core.models import Task, WorktreeEntry
from daintree_tui.core.worktrees import Facts
from daintree_tui.tui.bindings import DASHBOARD_BINDINGS
from daintree_tui.tui.checks_watch import ChecksWatch
from daintree_tui.tui.feed import DashboardFeed
from daintree_tui.tui.hosts import HostsChanged, HostsWatch, is_remote
from daintree_tui.tui.keymap import shown_leave_key
from daintree_tui.tui.messages import (
    ChecksLoaded,
    DiskLoaded,
    EventsAppended,
    FactsLoaded,
    Notice,
    RadarLoaded,
    SessionsPolled,
    SnapshotLoaded,
    TrustNeeded,
)
from daintree_tui.tui.screens import keys, prompts
from daintree_tui.tui.screens.actions import WorktreeActions
from daintree_tui.tui.screens.current import CurrentWorktree
from daintree_tui.tui.screens.hosts import HostRows
from daintree_tui.tui.screens.intake import FeedIntake
from daintree_tui.tui.screens.keys import on_actions, on_layout, on_local_view, on_worktree
from daintree_tui.tui.screens.layout import FULL_DIFF, ZOOMED, DashboardLayout
from daintree_tui.tui.screens.startup import DashboardStartup
from daintree_tui.tui.widgets.conflicts_bar import Found
from daintree_tui.tui.widgets.session_pane import SessionPane
from daintree_tui.tui.widgets.sidebar import Sidebar
from daintree_tui.tui.widgets.terminal import TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable

if TYPE_CHECKING:
    from daintree_tui.services.ci import ChecksReport
    from daintree_tui.services.hosts_feed import HostState
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.tui.app import DaintreeApp
    from daintree_tui.tui.away import ResumeOffered
    from daintree_tui.tui.backend import Backend


class MainScreen(Screen[None]):
    """The dashboard. Keys: see `daintree_tui.tui.bindings` (the help screen lists them)."""

    BINDINGS: ClassVar[list[BindingType]] = DASHBOARD_BINDINGS

    # The screen draws none of this itself (its widgets do, through data_bind): a repaint of the screen would
    # redraw every widget on it, once per poll.
    tasks: reactive[tuple[Task, ...]] = reactive(tuple, repaint=False)
    """Every task, as on disk."""
    entries: reactive[tuple[WorktreeEntry, ...]] = reactive(tuple, repaint=False)
    """Live worktrees, as in the index (a remote host's after the local ones)."""
    facts: reactive[dict[str, Facts]] = reactive(dict, repaint=False)
    """Git facts per worktree (dirty count, ahead/behind)."""
    sessions: reactive[dict[str, SessionInfo]] = reactive(dict, repaint=False)
    """Every session, status settled (see `StatusHysteresis`)."""
    sessions_known: reactive[bool] = reactive(False, repaint=False)
    """Whether a poll has said which sessions there are: until then none is "no session" (they may be starting)."""
    previews: reactive[dict[str, str]] = reactive(dict, repaint=False)
    """The screen text of sessions not on display."""
    disk: reactive[dict[str, int]] = reactive(dict, repaint=False)
    """Disk use per worktree in bytes."""
    hosts: reactive[dict[str, HostState]] = reactive(dict, repaint=False)
    """Each remote host's last state."""
    radar: reactive[Found] = reactive(dict, repaint=False)
    """The conflict radar's prediction: per worktree, with which others (and its base's tip), in which files."""
    checks: reactive[dict[str, ChecksReport]] = reactive(dict, repaint=False)
    """The CI checks of each worktree's pull request, as gh last said (none without gh or a pull request)."""
    selected: reactive[str | None] = reactive(None, repaint=False)
    """The current worktree: the header, the terminal, events, diff and every action follow it."""
    terminal_focused: reactive[bool] = reactive(False, repaint=False)
    """Whether keys go to the agent now."""
    auto_queue: reactive[bool] = reactive(False, repaint=False)
    """Whether ready tasks start by themselves."""
    zoom: reactive[str] = reactive("", repaint=False)
    """"zoomed" (the terminal takes the whole window), "full-diff" (the diff does) or "" (the lists show)."""

    def __init__(self) -> None:
        super().__init__()
        backend, app = self.backend, self.dashboard
        self.started = False
        self.rest_started = False
        self.feed = DashboardFeed(backend)
        self.hosts_watch = HostsWatch()
        self.checks_watch = ChecksWatch(backend)
        self.sidebar = Sidebar(id="sidebar")
        self.pane = SessionPane(backend.project, app.attach, persistent=backend.persistent_sessions,
                                leave_key=shown_leave_key(backend.project.config.keys), id="main")
        self.current = CurrentWorktree(self)
        self.actions = WorktreeActions(self)
        self.remote = HostRows(self)
        self.layout_part = DashboardLayout(self, MainScreen.selected, self.actions.diff, app.clock_format)
        self.intake = FeedIntake(self, self.remote, self.layout_part, since=time.time())
        self.hysteresis = self.intake.hysteresis
        self.startup = DashboardStartup(self)
        # What a flow calls as it goes (`Dashboard`), straight to the part that does it.
        self.attach_and_focus = self.current.attach_and_focus
        self.operation_done = self.current.operation_done
        self.reattach = self.current.reattach
        self.release, self.attach_selected = self.pane.release, self.pane.attach_selected
        self.show_diff = self.layout_part.show_diff
        self.checks_now = self.checks_watch.read_now

    def compose(self) -> ComposeResult:
        screen = MainScreen
        yield Header(show_clock=False)
        yield self.feed
        yield self.hosts_watch
        yield self.checks_watch
        with Horizontal(id="body"):
            yield self.sidebar.data_bind(screen.tasks, screen.entries, screen.facts, screen.sessions,
                                         screen.previews, screen.disk, screen.selected, screen.radar, screen.checks)
            yield self.pane.data_bind(screen.selected, screen.entries, screen.sessions, screen.sessions_known,
                                      screen.hosts, screen.zoom, screen.radar, screen.checks,
                                      focused=screen.terminal_focused)
        yield Static(id="footer-slot")  # blank until the footer comes (see later.py)

    # -- what the parts and the flows see ------------------------------------------------------------------------

    @property
    def dashboard(self) -> DaintreeApp:
        return self.app  # type: ignore[return-value]

    @property
    def backend(self) -> Backend:
        return self.dashboard.backend

    @property
    def terminal(self) -> TerminalView:
        return self.query_one(TerminalView)  # NoMatches once the app is closing

    @property
    def later_mounted(self) -> bool:
        """Whether the events and diff tabs and the footer are mounted (`DashboardLayout.mount`)."""
        return self.layout_part.mounted

    @property
    def focus_chain(self) -> list[Widget]:
        """What tab and shift+tab go round: the lists and the tabs below, not the terminal. Tabbing into it put
        the user in the agent's prompt without asking (and there tab is the agent's key, so there was no tabbing
        out); the terminal takes the keys only when asked: enter, s, z or a click."""
        return [widget for widget in super().focus_chain if not isinstance(widget, TerminalView)]

    def entry(self, name: str | None) -> WorktreeEntry | None:
        return next((e for e in self.entries if e.name == name), None)

    def terminal_size(self) -> tuple[int, int]:
        width, height = self.terminal.size
        return max(width, 40), max(height, 10)

    def run_flow(self, flow: Coroutine[Any, Any, None], description: str) -> None:
        self.run_worker(flow, group="ops", exit_on_error=False, description=description)

    # -- start-up (startup.py): the lists, then each session's status, then the rest ----------------------------

    def on_mount(self) -> None:
        self.startup.mount()

    def after_first_paint(self) -> None:
        self.startup.first_paint()

    async def after_first_status(self) -> None:
        await self.startup.first_status()

    # -- what the feed and the hosts found -----------------------------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # Worker.StateChanged does not bubble: the screen that runs the flows hands failures to the app.
        self.dashboard.report_worker_failure(event)

    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        self.startup.snapshot(message.snapshot)

    def on_facts_loaded(self, message: FactsLoaded) -> None:
        self.facts = {**self.facts, **message.facts}

    def on_radar_loaded(self, message: RadarLoaded) -> None:
        if message.found != self.radar:
            self.radar = message.found

    def on_disk_loaded(self, message: DiskLoaded) -> None:
        self.disk = {**self.disk, **message.disk}

    def on_checks_loaded(self, message: ChecksLoaded) -> None:
        self.checks = message.checks

    def on_events_appended(self, message: EventsAppended) -> None:
        self.intake.events(message.records)

    def on_notice(self, message: Notice) -> None:
        self.notify(message.text, title=message.title)

    def on_trust_needed(self, message: TrustNeeded) -> None:
        self.run_flow(prompts.trust(self, message.commands), "trust")

    def on_resume_offered(self, message: ResumeOffered) -> None:
        from daintree_tui.tui import away

        self.run_flow(away.offer_resume(self, message.lost), "resume after a restart")

    def on_sessions_polled(self, message: SessionsPolled) -> None:
        if self.intake.sessions_polled(message):
            self.startup.status_painted()

    def on_hosts_changed(self, message: HostsChanged) -> None:
        self.remote.take(message.states)

    def on_resize(self, event: events.Resize) -> None:
        self.layout_part.fit_footer(event.size.width)

    # -- following the state -------------------------------------------------------------------------------------

    def watch_entries(self, old: tuple[WorktreeEntry, ...], new: tuple[WorktreeEntry, ...]) -> None:
        self.current.entries_changed(old, new)

    def watch_selected(self, name: str | None) -> None:
        self.layout_part.follow(name)

    def watch_terminal_focused(self) -> None:
        self.refresh_bindings()  # the footer: the lists' keys, or only the leave key while typing to the agent

    def watch_zoom(self, zoom: str) -> None:
        self.set_class(zoom == ZOOMED, ZOOMED)
        self.set_class(zoom == FULL_DIFF, FULL_DIFF)

    @on(WorktreeTable.Picked)
    def worktree_picked(self, message: WorktreeTable.Picked) -> None:
        if message.name is not None:
            self.selected = message.name

    @on(DataTable.RowHighlighted, "#tasks")
    def task_highlighted(self) -> None:
        self.current.follow_task()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self.current.focused(event.widget)

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        if isinstance(event.widget, TerminalView):
            self.terminal_focused = False

    @on(SessionPane.LetGo)
    def back_to_the_lists(self) -> None:
        self.sidebar.worktree_table.focus()

    @on(TerminalView.Left)
    def leave_terminal(self) -> None:
        self.layout_part.unzoom()

    @on(TerminalView.Detached)
    def terminal_detached(self) -> None:
        self.feed.poll_now()

    @on(DataTable.RowSelected)
    def row_selected(self) -> None:
        self.action_open_session()

    # -- the keys (bindings.py): each action is the method of the part that does it -----------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.terminal_focused and self.terminal.owns_keys:
            return False  # every key goes to the agent (or is held for it): the footer shows only the leave key
        method = getattr(self, f"action_{action}", None)
        if getattr(method, "needs_worktree", False) and not self.selected:
            return None
        return True

    action_start_session = on_worktree(WorktreeActions.start_session)
    action_stop_session = on_worktree(WorktreeActions.stop_session)
    action_keep = on_worktree(WorktreeActions.keep, HostRows.keep)
    action_remove = on_worktree(WorktreeActions.remove, HostRows.remove)
    action_commit = on_worktree(WorktreeActions.commit)
    action_merge = on_worktree(WorktreeActions.merge)
    action_pr = on_worktree(WorktreeActions.pr)
    action_inject_task = on_worktree(WorktreeActions.inject_task)
    action_copy_path = on_worktree(WorktreeActions.copy_path)
    action_copy_link = on_worktree(WorktreeActions.copy_link, remote_too=True)
    action_review_comment = on_worktree(WorktreeActions.review_comment)
    action_review_send = on_worktree(WorktreeActions.review_send)
    action_review_send_ci = on_worktree(WorktreeActions.review_send_ci)
    action_diff = on_local_view(DashboardLayout.diff_tab, "diff")
    action_full_diff = on_local_view(DashboardLayout.full_diff, "diff")
    action_checkpoints = on_worktree(WorktreeActions.checkpoints)
    action_bakeoff = on_actions(WorktreeActions.bakeoff)
    action_zoom = on_layout(DashboardLayout.toggle_zoom)
    action_events = on_layout(DashboardLayout.events_tab)
    action_filter = on_layout(DashboardLayout.open_filter)
    key_escape = on_layout(DashboardLayout.escape)

    def action_new_task(self) -> None:
        (self.remote if self.remote.configured else self.actions).new_task()  # with hosts: here or where?

    def action_open_session(self) -> None:
        if is_remote(self.selected):  # from the tasks list too: a task placed on a host has its row current
            self.remote.open_session(str(self.selected))
        else:
            self.actions.open_session()

    def action_cycle_session(self, step: int) -> None:
        self.current.cycle(step)

    def action_jump_session(self, number: int) -> None:
        self.current.jump(number)

    def action_train(self) -> None:
        from daintree_tui.tui.screens.train import run_train  # a dialog: imported when first opened

        self.run_flow(run_train(self), "merge train")

    def action_toggle_auto(self) -> None:
        self.actions.toggle_auto()
        self.remote.follow_auto_queue(self.auto_queue)

    action_help, help_rows, every_binding = keys.show_help, keys.help_rows, keys.screen_bindings

    def action_quit_dashboard(self) -> None:
        self.dashboard.quit_dashboard()
