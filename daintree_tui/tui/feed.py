"""DashboardFeed: the dashboard's non-visual data source.

It reads the project (tasks, index, git facts, disk use, events), polls the sessions and watches the state files,
and posts what it finds as messages that bubble to the screen. It owns exactly one poll timer: asking for a poll
while one is scheduled replaces that timer, and a poll asked for while one runs is folded into the next, so however
often operations call `poll_now()` there is one poll chain.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.timer import Timer
from textual.widget import Widget
from textual.worker import Worker, WorkerState

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.tui.facts_pass import FactsPass
from daintree_tui.tui.file_watch import Stamp, state_stamp
from daintree_tui.tui.messages import (
    EventsAppended,
    FilesChanged,
    Notice,
    SessionsPolled,
    SnapshotLoaded,
    TrustNeeded,
    WatchInPlace,
)

if TYPE_CHECKING:
    from daintree_tui.tui.backend import Backend
    from daintree_tui.tui.file_watch import FileWatch


class DashboardFeed(Widget):
    """Polls sessions on one timer and watches files; posts SnapshotLoaded, SessionsPolled and friends."""

    DEFAULT_CSS = "DashboardFeed { display: none; }"

    poll_interval = 1.0
    """Seconds between polls while something changes."""
    idle_interval = 2.0
    """Seconds between polls once all is quiet: idle sessions should cost next to nothing."""
    today_interval = 10.0
    """Seconds between readings of today's usage total (it reads every session's usage record)."""

    def __init__(self, backend: Backend, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.backend = backend
        self.shown_session: Callable[[], str | None] | None = None
        """The session on screen, asked at each poll (set by the screen): it is not previewed (the terminal
        already shows it)."""
        self.auto_queue = False
        self.polls = 0
        """How many polls ran (the poll-chain test counts them)."""
        self.entries: tuple[WorktreeEntry, ...] = ()
        self._timer: Timer | None = None
        self._generation = 0
        self._polling = False
        self._poll_again = False
        self._last_poll: Any = None
        self._known: list[str] = []
        self.rows_on_screen: Callable[[], list[str]] | None = None
        """The worktrees whose rows are on screen (set by the screen): only those are previewed."""
        self._today_read_at = float("-inf")
        self._events_offset = 0
        self._events_lock = threading.Lock()
        self._watch: FileWatch | None = None
        self._stamp: Stamp | None = None
        self._live_lock = threading.Lock()
        self._unmounted = False
        self._looked = False
        self.reads_started = False
        self._backlog_read = False
        self._facts_due = False
        """An operation ran: the next snapshot reads every worktree's git facts again, changed list or not."""
        self.facts_pass = FactsPass()

    # -- the poll chain ----------------------------------------------------------------------------------

    def poll_now(self) -> None:
        """Poll as soon as possible (after an operation): replaces the scheduled poll, never adds a chain."""
        self._schedule(0)

    def _schedule(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.stop()
        # A timer that already fired has its callback queued, and stop() cannot take that back: the generation
        # tells the callback of a replaced timer to do nothing.
        self._generation += 1
        self._timer = self.set_timer(max(delay, 0.001), partial(self._start_poll, self._generation), name="poll")

    def _start_poll(self, generation: int) -> None:
        if generation != self._generation:
            return
        self._timer = None
        if self._polling:
            self._poll_again = True  # folded into the poll that runs now: it schedules the next one
            return
        self._polling = True
        self.polls += 1
        visible = self.rows_on_screen() if self.rows_on_screen is not None else None
        shown = self.shown_session() if self.shown_session is not None else None
        self.poll_sessions([shown] if shown else [], visible)

    @work(thread=True, exit_on_error=False, group="poll", description="poll sessions")
    def poll_sessions(self, shown: list[str], visible: list[str] | None = None) -> bool:
        backend = self.backend
        # The first poll takes one pure look (a listing and one capture for all) and the control client starts
        # after its answer is posted: starting the client (importing it, a fork, its first listing) took ~75 ms
        # that the first useful screen waited for.
        first_look = not self._looked and backend.live is None
        self._looked = True
        if not first_look and not self._unmounted and backend.live is None:
            self._go_live()
        if self.auto_queue:
            report = backend.services.queue.step()
            if report.started:
                self.post_message(Notice(f"Auto: started {', '.join(report.started)}"))
        candidates = self._known if visible is None else [n for n in visible if n in self._known]
        wanted = [n for n in candidates if n not in shown]
        infos, previews = backend.first_look(wanted) if first_look else backend.poll_sessions(wanted)
        self._known = [i.name for i in infos]
        approvals = backend.services.approvals.records("pending")
        state = (infos, previews)
        changed = state != self._last_poll
        self._last_poll = state
        today = None
        if not first_look and time.monotonic() - self._today_read_at >= self.today_interval:  # the header's total
            self._today_read_at = time.monotonic()
            today = backend.usage_today()
        self.post_message(SessionsPolled(infos, previews, approvals, today))
        self._stamp_seen()
        if not first_look and not self.app.is_web:  # a browser's page shows no terminal notification
            from daintree_tui.tui.away import terminal_notices  # after the first frame: not a start-up import

            notices = terminal_notices(backend)
            if notices is not None:
                self.post_message(notices)
        if first_look and not self._unmounted:
            self._go_live()
        return changed

    def _stamp_seen(self) -> None:
        """Read the lists again when the index, the event log or the tasks changed since they were last read and
        the watch did not say so (`state_stamp`); a change it told of may be read twice, which costs a
        millisecond."""
        if self._watch is None:
            return
        stamp = state_stamp(self.backend.project)
        before, self._stamp = self._stamp, stamp
        if before is not None and stamp != before:
            lists, log = stamp[::2] != before[::2], stamp[1] != before[1]
            self.post_message(FilesChanged(lists, frozenset(), events_changed=log))

    @on(Worker.StateChanged)
    def poll_finished(self, event: Worker.StateChanged) -> None:
        # Worker.StateChanged does not bubble: failures of the feed's workers go to the app from here.
        report = getattr(self.app, "report_worker_failure", None)
        if report is not None:
            report(event)
        worker = event.worker
        if worker.group != "poll" or event.state not in (WorkerState.SUCCESS, WorkerState.ERROR,
                                                         WorkerState.CANCELLED):
            return
        self._polling = False
        if event.state != WorkerState.SUCCESS:
            self.start_reads()  # no status to paint first: do not hold the facts back for it
        if self._poll_again:
            self._poll_again = False
            self._schedule(0)
        else:
            self._schedule(self.poll_interval if worker.result else self.idle_interval)

    # -- loading -----------------------------------------------------------------------------------------

    def first_snapshot(self) -> SnapshotLoaded:
        """Tasks and worktrees as on disk, read on the event loop before the first frame: the read takes about a
        millisecond, far less than painting an empty screen first and then the lists (two full renders)."""
        self._stamp = state_stamp(self.backend.project)  # before the read: a change during it is read again
        snapshot = self.backend.snapshot()
        self.entries = snapshot.entries
        return SnapshotLoaded(snapshot)

    @work(thread=True, exit_on_error=False, exclusive=True, group="startup", description="reconcile and load")
    def startup(self) -> None:
        backend = self.backend
        # What is on disk is painted first (`first_snapshot`); reconcile once the status is out too, and show its
        # repairs if it made any.
        fixes = backend.services.startup()
        if fixes:
            self.post_message(SnapshotLoaded(backend.snapshot()))
            self.post_message(Notice(f"Reconciled {len(fixes)} problem(s) left by a crash", title="doctor --fix"))
        untrusted = backend.services.untrusted_hooks()
        if untrusted:
            self.post_message(TrustNeeded(untrusted))
        from daintree_tui.tui.away import look_after_restart

        after_restart = look_after_restart(backend)  # sessions a reboot took: resumed, or offered
        if after_restart is not None:
            self.post_message(after_restart)
        self.post_message(EventsAppended(self._new_events()))

    def start_polling(self) -> None:
        """The poll chain, started with the screen: its first poll starts the control client (`_go_live`) and
        brings the sessions' status, which is what the first useful screen needs; being mostly a wait on tmux,
        it costs the first frame little. Git facts and the file watcher start once that status is on screen
        (`start_reads`)."""
        self.poll_now()

    def _go_live(self) -> None:
        """Session status by events from one tmux control client, not by polling each session: a status change
        (recorded off the event loop, in batches) asks for a poll, which then reads from memory. Called from the
        first poll's thread: starting the client (a fork and its first answer) stays off the event loop."""
        with self._live_lock:
            if not self._unmounted:
                self.backend.start_live(on_change=lambda _: self.app.call_from_thread(self.poll_now))

    def start_reads(self) -> None:
        """Git facts and the file watcher (once). The sessions' status is what the first useful screen needs;
        `git status` in every worktree and the watcher's walk of every worktree's folders (slow on a big
        repository) would compete with it for the CPU, so the screen calls this once that status is painted."""
        if self.reads_started:
            return
        self.reads_started = True
        self.want_facts(None)
        self.monitor_files()

    @work(thread=True, exit_on_error=False, exclusive=True, group="snapshot", description="read tasks and index")
    def load_snapshot(self) -> None:
        self._stamp = state_stamp(self.backend.project)  # before the read: a change during it is read again
        self.post_message(SnapshotLoaded(self.backend.snapshot()))

    def files_touched(self, names: frozenset[str] | None) -> None:
        """Note worktrees whose files changed (None: all) for the radar's next pass."""
        self.facts_pass.touched(names)

    def want_facts(self, names: frozenset[str] | None) -> None:
        """Read the git facts of the worktrees `names` (None: all) in the next load, and start one."""
        self.facts_pass.want(names)
        self.load_facts()

    @work(thread=True, exit_on_error=False, exclusive=True, group="facts", description="git facts")
    def load_facts(self) -> None:
        """One pass (`FactsPass`): each load takes every request made before it ran, its own and those of loads
        cancelled before they started (the group is exclusive)."""
        self.facts_pass.run(self.entries, self.backend, self.post_message)

    @work(thread=True, exit_on_error=False, exclusive=True, group="events", description="tail events")
    def load_events(self) -> None:
        records = self._new_events()
        if records:
            self.post_message(EventsAppended(records))

    def _new_events(self) -> list[dict[str, object]]:
        """Event records not read yet: the last 200 on the first read. The start-up read and a file change's read
        run in threads of their own, possibly at once: one at a time, each record is read once."""
        with self._events_lock:
            first = self._events_offset == 0
            records, self._events_offset = self.backend.read_events(self._events_offset)
        return records[-200:] if first else records

    def refresh_all(self) -> None:
        """After an operation: read the project again and poll."""
        self._facts_due = True
        self.load_snapshot()
        self.load_events()
        self.poll_now()

    @on(SnapshotLoaded)
    def snapshot_loaded(self, message: SnapshotLoaded) -> None:
        # Git facts again for every worktree only when the list changed or after an operation (it may have moved
        # a branch): each is a few confined git calls, and a session's status change rewrites state files.
        # A worktree's own changes reach the facts through the watcher (`files_changed`).
        changed = message.snapshot.entries != self.entries
        self.entries = message.snapshot.entries
        if changed and self._watch is not None:
            self._watch.watch_worktrees((e.name, e.path) for e in self.entries if e.live)
        if self.reads_started and (changed or self._facts_due):
            self._facts_due = False
            self.want_facts(None)

    @on(FilesChanged)
    def files_changed(self, message: FilesChanged) -> None:
        self.files_touched(message.worktrees_touched)
        if message.state_changed:
            self._facts_due = self._facts_due or bool(message.worktrees_touched)
            self.load_snapshot()
            self.load_events()
        else:
            if message.events_changed:
                self.load_events()
            if any(e.name in message.worktrees_touched for e in self.entries):
                self.want_facts(message.worktrees_touched)
        message.stop()

    @on(WatchInPlace)
    def watch_in_place(self, message: WatchInPlace) -> None:
        self.load_facts()
        message.stop()

    @on(EventsAppended)
    def events_appended(self, message: EventsAppended) -> None:
        """What another process did (a merge, a worktree made or removed) can move any worktree's ahead/behind:
        facts again for all, then. A session's status changes (`session.*`, most of the log) move none."""
        backlog, self._backlog_read = not self._backlog_read, True  # the first read: the log's tail, old news
        if backlog or not self.reads_started:
            return
        if any(not str(r.get("event", "")).startswith("session.") for r in message.records):
            self.want_facts(None)

    @property
    def watching(self) -> bool:
        """Whether the file watch was started (`start_reads`)."""
        return self._watch is not None

    @property
    def watch_ready(self) -> bool:
        """Whether the file watch is in place and has told of what changed while it was being set up."""
        return self._watch is not None and self._watch.ready

    def monitor_files(self) -> None:
        """Watch the state and tasks folders' files and the worktrees (`FileWatch`); its threads post
        `FilesChanged`."""
        from daintree_tui.tui.file_watch import FileWatch

        def changed(state: bool, events: bool, touched: frozenset[str]) -> None:
            self.post_message(FilesChanged(state, touched, events_changed=events))

        def in_place(by: float, worktrees: frozenset[str]) -> None:
            self.facts_pass.watch_in_place(by, worktrees)
            self.post_message(WatchInPlace())

        self._watch = FileWatch(self.backend.project, changed, in_place)
        self._watch.start()
        self._watch.watch_worktrees((e.name, e.path) for e in self.entries if e.live)

    def on_unmount(self) -> None:
        if self._watch is not None:
            self._watch.close()
        if self._timer is not None:
            self._timer.stop()
        with self._live_lock:  # a poll starting the control client now sees this and leaves it unstarted
            self._unmounted = True
            self.backend.stop_live()
