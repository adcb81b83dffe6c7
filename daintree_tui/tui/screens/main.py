"""MainScreen: tasks and worktrees on the left, the current worktree's terminal on the right, events and diff
below.

The screen only shows. A non-visual `DashboardFeed` reads the project and polls sessions and posts the results;
dialog flows (`flows.py`) and prompts (`prompts.py`) are coroutines run as async workers. The screen's state is
reactive and flows down to the widgets with `data_bind`; `selected` is the one current worktree that the header,
the terminal, the events, the diff and every action follow.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.widget import MountError
from textual.widgets import DataTable, Header, Input, Label, Static
from textual.worker import Worker

from daintree_tui.core.models import Task, WorktreeEntry
from daintree_tui.core.worktrees import Facts
from daintree_tui.sessions.last_words import telling_line, with_last_words
from daintree_tui.sessions.status import SessionStatus, StatusHysteresis
from daintree_tui.tui.agents_view import BudgetAlerts, unsandboxed_notice, usage_text
from daintree_tui.tui.bindings import DASHBOARD_BINDINGS
from daintree_tui.tui.feed import DashboardFeed
from daintree_tui.tui.hosts import HostsWatch, is_remote
from daintree_tui.tui.keymap import shown_leave_key
from daintree_tui.tui.messages import (
    DiskLoaded,
    EventsAppended,
    FactsLoaded,
    Notice,
    RadarLoaded,
    SessionsPolled,
    SnapshotLoaded,
    TrustNeeded,
)
from daintree_tui.tui.screens import prompts
from daintree_tui.tui.screens.current import CurrentWorktreeScreen
from daintree_tui.tui.widgets.conflicts_bar import ConflictsBar, Found
from daintree_tui.tui.widgets.session_title import SessionTitle
from daintree_tui.tui.widgets.task_table import TaskTable
from daintree_tui.tui.widgets.terminal import LOOKING, TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable

if TYPE_CHECKING:
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.tui.away import ResumeOffered

REST_AT_THE_LATEST = 2.0
"""Seconds after the first frame by which what waits for the first status starts, however late it is."""


class MainScreen(CurrentWorktreeScreen):
    """The dashboard. Keys: see `daintree_tui.tui.bindings` (the help screen lists them)."""

    BINDINGS: ClassVar[list[BindingType]] = DASHBOARD_BINDINGS

    # The screen draws none of this itself (its widgets do, through data_bind): a repaint of the screen would
    # redraw every widget on it, once per poll.
    tasks: reactive[tuple[Task, ...]] = reactive(tuple, repaint=False)
    """Every task, as on disk."""
    entries: reactive[tuple[WorktreeEntry, ...]] = reactive(tuple, repaint=False)
    """Live worktrees, as in the index."""
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
    radar: reactive[Found] = reactive(dict, repaint=False)
    """The conflict radar's prediction: per worktree, with which others (and its base's tip), in which files."""
    filter_text: reactive[str] = reactive("", repaint=False)
    """What the filter box holds."""
    selected: reactive[str | None] = reactive(None, repaint=False)
    """The current worktree: the header, the terminal, events, diff and every action follow it."""
    terminal_focused: reactive[bool] = reactive(False, repaint=False)
    """Whether keys go to the agent now."""
    auto_queue: reactive[bool] = reactive(False, repaint=False)
    """Whether ready tasks start by themselves."""

    def __init__(self) -> None:
        super().__init__()
        self.started = False
        self._announced: dict[str, SessionStatus] = {}
        self._seen_requests: set[int] = set()
        self._last_words: dict[tuple[str, float], str] = {}
        self.restarted_failed = set()
        self.hysteresis = StatusHysteresis()
        self.budget_alerts = BudgetAlerts(since=time.time())
        self.rest_started = False
        self.early_events: list[dict[str, object]] = []
        """Event records that came before the events log was mounted (see `mount_later`)."""

    def compose(self) -> ComposeResult:
        screen = MainScreen
        yield Header(show_clock=False)
        yield DashboardFeed(self.backend)
        yield HostsWatch()
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield Input(placeholder="filter…", id="filter")
                yield Label("Tasks", classes="pane-title")
                yield TaskTable(id="tasks").data_bind(screen.tasks, screen.filter_text)
                yield Label("Worktrees", classes="pane-title")
                yield WorktreeTable(id="worktrees").data_bind(
                    screen.entries, screen.facts, screen.sessions, screen.previews, screen.disk,
                    screen.filter_text, screen.selected, conflicts=screen.radar)
            with Vertical(id="main"):
                yield SessionTitle(id="session-title", persistent=self.backend.persistent_sessions,
                                   leave_key=shown_leave_key(self.backend.project.config.keys)).data_bind(
                    screen.entries, screen.sessions, screen.sessions_known, screen.selected,
                    focused=screen.terminal_focused)
                yield ConflictsBar(id="conflicts-bar").data_bind(screen.radar, screen.selected)
                terminal = TerminalView(id="terminal")
                terminal.set_reactive(TerminalView.placeholder, LOOKING)  # the first poll says which there are
                yield terminal
                # Blank until the events and diff tabs come (see later.py): a bare Widget draws its own name,
                # `Widget#bottom-slot`, and the first frame showed it for a second.
                yield Static(id="bottom-slot")
        yield Static(id="footer-slot")  # and so does the footer

    async def mount_later(self) -> None:
        """Mount the events and diff tabs and the footer in their slots (once). Run from the screen's own
        message loop (a timer, `call_later`, `call_after_refresh`): the tabs bind to the screen's `selected`."""
        if self.later_mounted:
            return
        self.later_mounted = True
        from daintree_tui.tui.screens import later  # not a start-up import: see later.py

        tabs = later.bottom_tabs(MainScreen.selected, self.dashboard.clock_format, self.early_events)
        self.early_events = []
        try:
            mounting = [self.query_one("#main").mount(tabs, after="#terminal"),
                        self.mount(later.footer(self.size.width))]
            self.query("#bottom-slot, #footer-slot").remove()
            for mounted in mounting:
                await mounted
        except MountError:
            return  # the dashboard is closing
        self.refresh_bindings()  # the footer shows the keys once told they are there

    def on_resize(self, event: events.Resize) -> None:
        if self.later_mounted:
            from daintree_tui.tui.screens import later  # loaded with the footer

            later.fit_footer(self, event.size.width)

    def on_mount(self) -> None:
        self.title = "daintree"
        self.sub_title = str(self.backend.project.root)
        self.query_one("#filter", Input).display = False
        self.query_one(WorktreeTable).focus()
        self.feed.rows_on_screen = self.query_one(WorktreeTable).visible_names
        self.on_snapshot_loaded(self.feed.first_snapshot())
        self.feed.start_polling()

    # -- what the feed found ---------------------------------------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # Worker.StateChanged does not bubble: the screen that runs the flows hands failures to the app.
        self.dashboard.report_worker_failure(event)

    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        self.tasks = message.snapshot.tasks
        self.entries = self.merged_entries(message.snapshot.entries)
        if not self.started:
            self.started = True
            # The first frame shows the lists (read before it, see on_mount). The session poll started with the
            # screen; the rest waits for its status (`after_first_status`).
            self.call_after_refresh(self.after_first_paint)

    def after_first_paint(self) -> None:
        # Everything built so far lives as long as the app: move it out of the collector's reach so a full
        # collection during an output flood stays short.
        gc.freeze()
        self.set_timer(REST_AT_THE_LATEST, self.after_first_status)  # should the status be late

    async def after_first_status(self) -> None:
        """The first useful screen (the lists with each session's status) is out: what it did not need starts
        now, so that none of it competes with that screen for the CPU: reconciling, the trust check and the
        events; the git facts and the file watcher (slow on a big repository); the remote hosts' poller; the
        tabs and the footer."""
        if self.rest_started:
            return
        self.rest_started = True
        self.feed.startup()
        self.feed.start_reads()
        self.hosts_watch.start()
        if self.dashboard.keymap:
            self.check_keymap()
        await self.mount_later()

    def on_facts_loaded(self, message: FactsLoaded) -> None:
        self.facts = {**self.facts, **message.facts}

    def on_radar_loaded(self, message: RadarLoaded) -> None:
        if message.found != self.radar:
            self.radar = message.found

    def on_disk_loaded(self, message: DiskLoaded) -> None:
        self.disk = {**self.disk, **message.disk}

    def on_events_appended(self, message: EventsAppended) -> None:
        if self.later_mounted:
            from daintree_tui.tui.screens import later  # loaded with the events log

            log = later.events_log(self)
            if log is not None:
                log.add(message.records)
        else:
            self.early_events.extend(message.records)
        for text, severity in self.budget_alerts.new(message.records):
            self.notify(text, title="Budget", severity=severity, timeout=15)
        for record in message.records:
            ts = record.get("ts")
            unsandboxed = unsandboxed_notice(record) if isinstance(ts, int | float) and \
                ts >= self.budget_alerts.since else None
            if unsandboxed:
                self.notify(unsandboxed, title="Sandbox", severity="warning", timeout=15)

    def on_notice(self, message: Notice) -> None:
        self.notify(message.text, title=message.title)

    def on_trust_needed(self, message: TrustNeeded) -> None:
        self.run_flow(prompts.trust(self, message.commands), "trust")

    def on_resume_offered(self, message: ResumeOffered) -> None:
        from daintree_tui.tui import away

        self.run_flow(away.offer_resume(self, message.lost), "resume after a restart")

    def on_sessions_polled(self, message: SessionsPolled) -> None:
        try:
            terminal = self.terminal
        except NoMatches:
            return  # the app is closing: its widgets went before the feed's last poll arrived (seen under load)
        before = {name: info for name, info in self.sessions.items() if not is_remote(name)}
        now = time.monotonic()
        settled = {}
        for info in message.sessions:
            status = self.hysteresis.settle(info.name, info.status, now)
            settled[info.name] = info if status == info.status else _with_status(info, status)
        self.hysteresis.forget(set(before) - set(settled))
        first = not self.sessions_known
        self.sessions_known = True
        self.sessions = self.merged_sessions(settled)
        if first:
            self.explain_unattached(self.selected)  # no longer "looking" for a worktree that has none
        previews = dict(message.previews)
        if terminal.attached and terminal.worktree in settled:
            # The session on screen is not captured (the terminal shows it): its row follows the terminal.
            previews[terminal.worktree] = terminal.screen_text()
        for name, text in previews.items():
            ended = settled.get(name)
            if ended is not None and ended.status == SessionStatus.EXITED and ended.log:
                previews[name] = with_last_words(text, self.last_words(name, ended))
        if previews:
            self.previews = {**self.previews, **previews}
        if message.today is not None:  # the header: what all agents spent today
            spent = usage_text(message.today)
            self.title = f"daintree · today {spent}" if spent else "daintree"
        self.dashboard.announce([(name, info) for name, info in settled.items() if self.to_announce(name, info)])
        if not self.rest_started:
            # The status first: the rest once the worktree table has painted it (it renders on its own loop; a
            # callback it is asked for runs after its pending render and the next frame).
            self.query_one(WorktreeTable).call_after_refresh(self.after_first_status)
        for request in message.approvals:
            request_id = int(str(request["id"]))
            if request_id not in self._seen_requests:
                self._seen_requests.add(request_id)
                self.run_flow(prompts.approval(self, request), "approval")
        vanished = [n for n in before if n not in settled]
        if vanished and not settled:
            self.run_flow(prompts.server_lost(self, {n: before[n].started_at for n in vanished}),
                          "check the tmux server")

    def last_words(self, name: str, info: SessionInfo) -> str:
        """The line that says why an exited agent ended, of its last ones (its log is read once per run: it ends
        with the agent)."""
        run = (name, info.started_at)
        if run not in self._last_words:
            self._last_words[run] = telling_line(Path(info.log))
        return self._last_words[run]

    def to_announce(self, name: str, info: SessionInfo) -> bool:
        """Waiting, stalled or exited, once per change, including a session already waiting when first seen; never
        for the session being typed into."""
        status = info.status
        if status not in (SessionStatus.WAITING, SessionStatus.EXITED, SessionStatus.STALLED):
            self._announced.pop(name, None)
            return False
        if self._announced.get(name) == status:
            return False
        self._announced[name] = status
        typing_here = self.terminal_focused and self.terminal.worktree == name
        return not (status == SessionStatus.WAITING and typing_here)

    @on(DataTable.RowSelected)
    def row_selected(self) -> None:
        self.action_open_session()

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value

    @on(Input.Submitted, "#filter")
    def filter_done(self) -> None:
        self.query_one(WorktreeTable).focus()


def _with_status(info: SessionInfo, status: SessionStatus) -> SessionInfo:
    from dataclasses import replace

    return replace(info, status=status)

