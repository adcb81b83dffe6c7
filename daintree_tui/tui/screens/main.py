"""MainScreen: tasks and worktrees on the left, the selected session's terminal on the right, events and diff
below. All service work runs in thread workers that post messages back; this screen only arranges results."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Label, TabbedContent, TabPane
from textual.worker import Worker, get_current_worker

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.worktrees import Facts
from daintree_tui.sessions.manager import SessionInfo
from daintree_tui.tui.messages import (
    DiffLoaded,
    DiskLoaded,
    EventsAppended,
    FactsLoaded,
    FilesChanged,
    OperationDone,
    SessionsPolled,
    SnapshotLoaded,
)
from daintree_tui.tui.widgets.diff_view import DiffView
from daintree_tui.tui.widgets.events_log import EventsLog
from daintree_tui.tui.widgets.session_title import SessionTitle
from daintree_tui.tui.widgets.task_table import TaskTable
from daintree_tui.tui.widgets.terminal import TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable

if TYPE_CHECKING:
    from daintree_tui.tui.app import DaintreeApp
    from daintree_tui.tui.screens.bakeoff_new import BakeoffRequest
    from daintree_tui.tui.screens.commit import CommitChoice
    from daintree_tui.tui.screens.merge import MergeChoice
    from daintree_tui.tui.screens.new_task import NewTask
    from daintree_tui.tui.screens.remove import RemoveChoice

POLL_INTERVAL = 1.0
IDLE_POLL_INTERVAL = 2.0
ATTACH_DELAY = 0.12
IGNORED_STATE_DIRS = (".logs", ".tmp", ".trash", ".sessions", ".journal")


def when_given(action: Callable[..., object], *args: object) -> Callable[[Any], None]:
    """A dialog callback that runs `action(*args, result)` only when the dialog returned something truthy."""

    def callback(result: Any) -> None:
        if result:
            action(*args, result)

    return callback


class MainScreen(Screen[None]):
    """The dashboard."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "new_task", "New", id="new_task"),
        Binding("enter", "open_session", "Open", id="open_session"),
        Binding("s", "start_session", "Session", id="start_session"),
        Binding("k", "keep", "Keep", id="keep"),
        Binding("x", "remove", "Remove", id="remove"),
        Binding("d", "diff", "Diff", id="diff"),
        Binding("C", "commit", "Commit", id="commit", show=False),
        Binding("m", "merge", "Merge", id="merge"),
        Binding("p", "pr", "PR", id="pr", show=False),
        Binding("i", "inject_task", "Send task", id="inject_task", show=False),
        Binding("c", "copy_path", "Copy path", id="copy_path", show=False),
        Binding("e", "events", "Events", id="events", show=False),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("left_square_bracket", "cycle_session(-1)", "Prev", id="prev_session", show=False),
        Binding("right_square_bracket", "cycle_session(1)", "Next", id="next_session", show=False),
        *[Binding(f"alt+{n}", f"jump_session({n})", f"Session {n}", id=f"jump_session_{n}", show=False)
          for n in range(1, 10)],
        Binding("b", "bakeoff", "Bake-off", id="bakeoff", show=False),
        Binding("a", "toggle_auto", "Auto", id="auto_queue", show=False),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("q", "quit_dashboard", "Quit", id="quit"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.tasks: tuple = ()
        self.entries: tuple[WorktreeEntry, ...] = ()
        self.facts: dict[str, Facts] = {}
        self.sessions: dict[str, SessionInfo] = {}
        self.previews: dict[str, str] = {}
        self.filter_text = ""
        self._events_offset = 0
        self._stop_watching = threading.Event()
        self._attach_timer: object | None = None
        self._started = False
        self.disk: dict[str, int] = {}
        self.auto_queue = False
        self._seen_requests: set[int] = set()

    @property
    def dashboard(self) -> DaintreeApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield Input(placeholder="filter…", id="filter")
                yield Label("Tasks", classes="pane-title")
                yield TaskTable(id="tasks")
                yield Label("Worktrees", classes="pane-title")
                yield WorktreeTable(id="worktrees")
            with Vertical(id="main"):
                yield SessionTitle(id="session-title")
                yield TerminalView(id="terminal")
                with TabbedContent(id="bottom", initial="events-tab"):
                    with TabPane("Events", id="events-tab"):
                        yield EventsLog(id="events", clock_format=self.dashboard.clock_format)
                    with TabPane("Diff", id="diff-tab"):
                        yield DiffView(id="diff")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "daintree"
        self.sub_title = str(self.dashboard.backend.project.root)
        self.query_one("#filter", Input).display = False
        self.query_one(WorktreeTable).focus()
        self.update_title()
        self.startup()

    # -- workers ---------------------------------------------------------------------------------------------

    @work(thread=True, exit_on_error=False, exclusive=True, group="startup", description="reconcile and load")
    def startup(self) -> None:
        backend = self.dashboard.backend
        # Paint what is on disk first; reconcile after, and show its repairs if it made any.
        self.post_message(SnapshotLoaded(backend.snapshot()))
        fixes = backend.startup()
        if fixes:
            self.post_message(SnapshotLoaded(backend.snapshot()))
        untrusted = backend.untrusted_hooks()
        if untrusted:
            self.app.call_from_thread(self.ask_trust, untrusted)
        if fixes:
            self.app.call_from_thread(self.notify, f"Reconciled {len(fixes)} problem(s) left by a crash",
                                      title="doctor --fix")
        records, offset = backend.read_events(0)
        self._events_offset = offset
        self.post_message(EventsAppended(records[-200:]))

    @work(thread=True, exit_on_error=False, exclusive=True, group="snapshot", description="read tasks and index")
    def load_snapshot(self) -> None:
        self.post_message(SnapshotLoaded(self.dashboard.backend.snapshot()))

    @work(thread=True, exit_on_error=False, exclusive=True, group="facts", description="git facts")
    def load_facts(self, entries: tuple[WorktreeEntry, ...]) -> None:
        self.post_message(FactsLoaded(self.dashboard.backend.facts(entries)))

    @work(thread=True, exit_on_error=False, exclusive=True, group="poll", description="poll sessions")
    def poll_sessions(self, preview: list[str]) -> None:
        backend = self.dashboard.backend
        if self.auto_queue:
            report = backend.queue.step()
            if report.started:
                self.app.call_from_thread(self.notify, f"Auto: started {', '.join(report.started)}")
        infos, previews = backend.poll_sessions(preview)
        self.post_message(SessionsPolled(infos, previews, backend.approvals.records("pending")))

    @work(thread=True, exit_on_error=False, exclusive=True, group="disk", description="disk use")
    def load_disk(self, entries: tuple[WorktreeEntry, ...]) -> None:
        self.post_message(DiskLoaded(self.dashboard.backend.disk.measure(list(entries))))

    @work(thread=True, exit_on_error=False, exclusive=True, group="events", description="tail events")
    def load_events(self) -> None:
        records, self._events_offset = self.dashboard.backend.read_events(self._events_offset)
        if records:
            self.post_message(EventsAppended(records))

    @work(thread=True, exit_on_error=False, exclusive=True, group="watch", description="watch state files")
    def monitor_files(self) -> None:
        from watchfiles import watch

        project = self.dashboard.backend.project
        project.tasks_dir.mkdir(exist_ok=True)
        project.state_dir.mkdir(exist_ok=True)
        roots = [project.tasks_dir, project.state_dir]
        worktrees_root = project.worktrees_root
        if not worktrees_root.is_relative_to(project.state_dir) and worktrees_root.is_dir():
            roots.append(worktrees_root)
        worker = get_current_worker()
        for changes in watch(*roots, debounce=150, step=50, stop_event=self._stop_watching,
                             watch_filter=lambda _, path: not any(f"/{d}/" in path or path.endswith(f"/{d}")
                                                                  for d in IGNORED_STATE_DIRS)):
            if worker.is_cancelled:
                return
            state, touched = False, set()
            for _, raw in changes:
                path = Path(raw)
                if path.parent in (project.tasks_dir, project.state_dir):
                    state = True
                elif path.is_relative_to(worktrees_root):
                    rel = path.relative_to(worktrees_root).parts
                    if rel:
                        touched.add(rel[0])
            self.post_message(FilesChanged(state, frozenset(touched)))

    # -- message handlers ------------------------------------------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # Worker.StateChanged does not bubble: the screen that runs the workers hands failures to the app.
        self.dashboard.report_worker_failure(event)

    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        self.tasks = message.snapshot.tasks
        self.entries = message.snapshot.entries
        self.refresh_tables()
        if self._started:
            self.load_facts(self.entries)
            return
        self._started = True
        # Paint the lists first; the slow facts (a few git calls per worktree), the file watcher and the session
        # poll start once that frame is out, so they do not compete with it for the CPU.
        self.call_after_refresh(self.after_first_paint)

    def after_first_paint(self) -> None:
        # Everything built so far (Textual's widgets, styles, our modules) lives as long as the app: move it out
        # of the collector's reach so a full collection during an output flood stays short.
        gc.freeze()
        self.load_facts(self.entries)
        self.monitor_files()
        self.schedule_poll(0)
        self.schedule_attach()

    def on_facts_loaded(self, message: FactsLoaded) -> None:
        self.facts.update(message.facts)
        self.refresh_tables()
        self.load_disk(self.entries)

    def on_disk_loaded(self, message: DiskLoaded) -> None:
        self.disk.update(message.disk)
        self.refresh_tables()

    def on_files_changed(self, message: FilesChanged) -> None:
        if message.state_changed:
            self.load_snapshot()
            self.load_events()
        elif message.worktrees_touched:
            touched = tuple(e for e in self.entries if e.name in message.worktrees_touched)
            if touched:
                self.load_facts(touched)

    def on_events_appended(self, message: EventsAppended) -> None:
        self.query_one(EventsLog).add(message.records)

    def on_sessions_polled(self, message: SessionsPolled) -> None:
        before = self.sessions
        self.sessions = {s.name: s for s in message.sessions}
        changed = before != self.sessions or any(self.previews.get(k) != v for k, v in message.previews.items())
        self.previews.update(message.previews)
        for name, info in self.sessions.items():
            old = before.get(name)
            if old is not None and old.status != info.status and str(info.status) in ("waiting", "exited"):
                self.dashboard.announce(name, info)
        for request in message.approvals:
            if request["id"] not in self._seen_requests:
                self._seen_requests.add(int(request["id"]))  # type: ignore[call-overload]
                self.ask_approval(request)
        vanished = [n for n in before if n not in self.sessions]
        if vanished and not self.sessions:
            self.check_server(vanished)
        if changed:
            self.refresh_tables()
            self.update_title()
        # 1 Hz while something moves, 0.5 Hz once all is quiet: idle sessions should cost next to nothing.
        self.schedule_poll(POLL_INTERVAL if changed else IDLE_POLL_INTERVAL)
        terminal = self.query_one(TerminalView)
        selected = self.selected_worktree()
        if selected and selected in self.sessions and terminal.worktree != selected:
            self.schedule_attach()

    def on_operation_done(self, message: OperationDone) -> None:
        if message.message:
            self.notify(message.message)
        self.load_snapshot()
        self.schedule_poll(0)
        if message.focus:
            self.query_one(WorktreeTable).select_name(message.focus)
            self.call_after_refresh(self.attach_and_focus, message.focus)

    def on_diff_loaded(self, message: DiffLoaded) -> None:
        self.query_one(DiffView).show(message.name, message.diff)

    @on(TerminalView.Left)
    def leave_terminal(self) -> None:
        self.query_one(WorktreeTable).focus()
        self.update_title()

    @on(TerminalView.Detached)
    def terminal_detached(self, message: TerminalView.Detached) -> None:
        self.update_title()
        self.schedule_poll(0)

    @on(DataTable.RowHighlighted, "#worktrees")
    def worktree_highlighted(self) -> None:
        self.schedule_attach()
        self.update_title()

    @on(DataTable.RowSelected)
    def row_selected(self) -> None:
        self.action_open_session()

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.refresh_tables()

    @on(Input.Submitted, "#filter")
    def filter_done(self) -> None:
        self.query_one(WorktreeTable).focus()

    # -- view ------------------------------------------------------------------------------------------------

    def session_order(self) -> list[str]:
        """Worktrees that have a session, in table order: what alt+N and [ ] move through."""
        return [e.name for e in self.entries if e.name in self.sessions]

    def refresh_tables(self) -> None:
        numbers = {name: i for i, name in enumerate(self.session_order(), start=1)}
        self.query_one(TaskTable).show(self.tasks, self.filter_text)
        self.query_one(WorktreeTable).show(self.entries, self.facts, self.sessions, numbers, self.filter_text,
                                           self.previews, self.disk)

    def entry(self, name: str | None) -> WorktreeEntry | None:
        return next((e for e in self.entries if e.name == name), None)

    def selected_worktree(self) -> str | None:
        """The worktree the keys act on: the focused terminal's, the focused task's, or the table's cursor."""
        terminal = self.query_one(TerminalView)
        if terminal.has_focus and terminal.worktree:
            return terminal.worktree
        tasks = self.query_one(TaskTable)
        if tasks.has_focus:
            task_id = tasks.selected_task_id
            task = next((t for t in self.tasks if t.id == task_id), None)
            return task.worktree or None if task else None
        return self.query_one(WorktreeTable).selected_name

    def update_title(self) -> None:
        terminal = self.query_one(TerminalView)
        name = terminal.worktree or self.query_one(WorktreeTable).selected_name
        self.query_one("#main").set_class(terminal.has_focus, "terminal-focused")
        self.query_one(SessionTitle).show(self.entry(name), self.sessions.get(name or ""), terminal.has_focus,
                                          self.dashboard.backend.persistent_sessions)

    def schedule_poll(self, delay: float) -> None:
        """Poll again `delay` seconds after the last poll finished (never overlapping)."""
        if delay <= 0:
            self.poll_off_screen()
        else:
            self.set_timer(delay, self.poll_off_screen)

    def poll_off_screen(self) -> None:
        """Poll every session; preview those the terminal is not showing."""
        shown = self.query_one(TerminalView).worktree
        self.poll_sessions([n for n in self.sessions if n != shown])

    def schedule_attach(self) -> None:
        if self._attach_timer is not None:
            self._attach_timer.stop()  # type: ignore[attr-defined]
        self._attach_timer = self.set_timer(ATTACH_DELAY, self.attach_selected)

    def attach_selected(self) -> None:
        self._attach_timer = None
        terminal = self.query_one(TerminalView)
        if terminal.has_focus:
            return
        name = self.query_one(WorktreeTable).selected_name
        if name and name in self.sessions:
            if terminal.worktree != name:
                self.dashboard.attach(terminal, name)
        elif terminal.worktree is not None:
            terminal.detach()
        self.update_title()

    def attach_and_focus(self, name: str) -> None:
        terminal = self.query_one(TerminalView)
        if terminal.worktree != name:
            self.dashboard.attach(terminal, name)
        terminal.focus()
        self.update_title()

    # -- actions ---------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        needs_worktree = ("keep", "remove", "diff", "copy_path", "start_session", "commit", "merge", "pr",
                          "inject_task")
        if action in needs_worktree and not self.selected_worktree():
            return None
        return True

    def action_new_task(self) -> None:
        from daintree_tui.tui.screens.new_task import NewTaskScreen

        backend = self.dashboard.backend
        self.app.push_screen(NewTaskScreen(backend.agents(), backend.default_agent()), self.new_task_done)

    def new_task_done(self, result: NewTask | None) -> None:
        if result is not None:
            self.create_task(result)

    @work(thread=True, exit_on_error=False, group="ops", description="create task")
    def create_task(self, new: NewTask) -> None:
        backend = self.dashboard.backend
        if not new.start:
            task = backend.tasks.create(new.subject, new.description)
            self.post_message(OperationDone(f"Created task {task.id}"))
            return
        size = self.app.call_from_thread(self.terminal_size)
        task, entry, info = backend.quick_create(new.subject, new.description, new.agent, new.base, size)
        self.post_message(OperationDone(f"Task {task.id} → worktree {entry.name}"
                                        + (f" with {info.agent}" if info else ""), focus=entry.name))

    def terminal_size(self) -> tuple[int, int]:
        width, height = self.query_one(TerminalView).size
        return max(width, 40), max(height, 10)

    def action_open_session(self) -> None:
        tasks = self.query_one(TaskTable)
        if tasks.has_focus:
            task = next((t for t in self.tasks if t.id == tasks.selected_task_id), None)
            if task is None:
                return
            if not task.worktree:
                self.start_for_task(task.id)
                return
            name: str | None = task.worktree
        else:
            name = self.query_one(WorktreeTable).selected_name
        if not name:
            return
        if name in self.sessions and str(self.sessions[name].status) != "exited":
            self.query_one(WorktreeTable).select_name(name)
            self.attach_and_focus(name)
        else:
            self.start_session(name, None, restart=name in self.sessions)

    @work(thread=True, exit_on_error=False, group="ops", description="start task")
    def start_for_task(self, task_id: int) -> None:
        backend = self.dashboard.backend
        task = backend.tasks.get(task_id)
        size = self.app.call_from_thread(self.terminal_size)
        entry = backend.worktrees.create(backend.unique_name(task.subject), task_id=task.id)
        info = backend.start_session(entry.name, None, size)
        self.post_message(OperationDone(f"Task {task.id} → worktree {entry.name} with {info.agent}",
                                        focus=entry.name))

    @work(thread=True, exit_on_error=False, group="ops", description="start session")
    def start_session(self, name: str, agent: str | None, restart: bool) -> None:
        size = self.app.call_from_thread(self.terminal_size)
        info = self.dashboard.backend.start_session(name, agent, size, restart=restart)
        self.post_message(OperationDone(f"Started {info.agent} in {name}", focus=name))

    def action_start_session(self) -> None:
        from daintree_tui.tui.screens.agent_picker import AgentPickerScreen

        name = self.selected_worktree()
        if not name:
            return
        backend = self.dashboard.backend
        restart = name in self.sessions

        def picked(agent: str | None) -> None:
            if agent:
                terminal = self.query_one(TerminalView)
                if terminal.worktree == name:
                    terminal.detach()
                self.start_session(name, agent, restart)

        self.app.push_screen(AgentPickerScreen(name, backend.agents(), backend.default_agent(), restart), picked)

    def action_keep(self) -> None:
        name = self.selected_worktree()
        if name:
            self.keep_worktree(name)

    @work(thread=True, exit_on_error=False, group="ops", description="keep")
    def keep_worktree(self, name: str) -> None:
        self.dashboard.backend.keep(name)
        self.post_message(OperationDone(f"Kept {name}"))

    def action_remove(self) -> None:
        name = self.selected_worktree()
        if name:
            self.prepare_remove(name)

    @work(thread=True, exit_on_error=False, group="ops", description="check for uncommitted work")
    def prepare_remove(self, name: str) -> None:
        from daintree_tui.tui.screens.remove import RemoveScreen

        dirty = self.dashboard.backend.dirty_files(name)
        entry = self.entry(name)
        has_task = entry is not None and entry.task_id is not None

        def push() -> None:
            self.app.push_screen(RemoveScreen(name, dirty, has_task), lambda choice: self.remove_chosen(name, choice))

        self.app.call_from_thread(push)

    def remove_chosen(self, name: str, choice: RemoveChoice | None) -> None:
        if choice is None:
            return
        terminal = self.query_one(TerminalView)
        if terminal.worktree == name:
            terminal.detach()
        self.remove_worktree(name, choice)

    @work(thread=True, exit_on_error=False, group="ops", description="remove")
    def remove_worktree(self, name: str, choice: RemoveChoice) -> None:
        result = self.dashboard.backend.remove(name, choice.force, choice.complete_task)
        warnings = "; ".join(result.warnings)
        self.post_message(OperationDone(result.message + (f" ({warnings})" if warnings else "")))

    def action_diff(self) -> None:
        name = self.selected_worktree()
        if name:
            self.query_one("#bottom", TabbedContent).active = "diff-tab"
            self.load_diff(name)

    @work(thread=True, exit_on_error=False, exclusive=True, group="diff", description="diff")
    def load_diff(self, name: str) -> None:
        self.post_message(DiffLoaded(name, self.dashboard.backend.diff(name)))

    def action_commit(self) -> None:
        name = self.selected_worktree()
        if name:
            self.prepare_commit(name)

    @work(thread=True, exit_on_error=False, group="ops", description="check changes")
    def prepare_commit(self, name: str) -> None:
        from daintree_tui.tui.screens.commit import CommitScreen

        backend = self.dashboard.backend
        dirty = backend.dirty_files(name)
        entry = self.entry(name)
        task = next((t for t in self.tasks if entry and t.id == entry.task_id), None)
        suggestion = task.subject if task else ""

        def push() -> None:
            self.app.push_screen(CommitScreen(name, dirty, suggestion),
                                 when_given(self.commit_worktree, name))

        self.app.call_from_thread(push)

    @work(thread=True, exit_on_error=False, group="ops", description="commit")
    def commit_worktree(self, name: str, choice: CommitChoice) -> None:
        result = self.dashboard.backend.commit(name, choice.message, choice.all_changes)
        self.post_message(OperationDone(f"Committed {len(result['files'])} file(s) in {name}"))  # type: ignore[arg-type]

    def action_merge(self) -> None:
        name = self.selected_worktree()
        if name:
            self.prepare_merge(name)

    @work(thread=True, exit_on_error=False, group="ops", description="merge target")
    def prepare_merge(self, name: str) -> None:
        from daintree_tui.tui.screens.merge import MergeScreen

        target = self.dashboard.backend.merge_target(name)
        self.app.call_from_thread(self.app.push_screen, MergeScreen(name, target),
                                  when_given(self.merge_worktree, name))

    @work(thread=True, exit_on_error=False, group="ops", description="merge")
    def merge_worktree(self, name: str, choice: MergeChoice) -> None:
        self.app.call_from_thread(self.notify, f"Merging {name} ({choice.strategy})…")
        if choice.remove:
            self.app.call_from_thread(self.detach_if_showing, name)
        result = self.dashboard.backend.merge(name, choice.strategy, choice.into, choice.remove,
                                              choice.complete_task)
        self.post_message(OperationDone(result.message + (f"; removed {name}" if result.removed else "")))

    def detach_if_showing(self, name: str) -> None:
        terminal = self.query_one(TerminalView)
        if terminal.worktree == name:
            terminal.detach()

    def action_pr(self) -> None:
        from daintree_tui.tui.screens.confirm import ConfirmScreen

        name = self.selected_worktree()
        if not name:
            return
        body = f"Push {name}'s branch and open a pull request with gh?"
        self.app.push_screen(ConfirmScreen("Open a pull request", body, yes="Push and open PR"),
                             when_given(lambda _: self.open_pr(name)))

    @work(thread=True, exit_on_error=False, group="ops", description="pull request")
    def open_pr(self, name: str) -> None:
        self.app.call_from_thread(self.notify, f"Pushing {name}…")
        result = self.dashboard.backend.pr(name)
        self.post_message(OperationDone(f"Opened {result['url']}"))

    def action_inject_task(self) -> None:
        name = self.selected_worktree()
        if name and name in self.sessions:
            self.inject_task(name)

    @work(thread=True, exit_on_error=False, group="ops", description="send task")
    def inject_task(self, name: str) -> None:
        self.dashboard.backend.inject_task(name)
        self.post_message(OperationDone(f"Sent the task to {name}"))

    @work(thread=True, exit_on_error=False, group="server", description="check the tmux server")
    def check_server(self, vanished: list[str]) -> None:
        lost = self.dashboard.backend.lost_sessions(vanished)
        if lost:
            self.app.call_from_thread(self.offer_restart, lost)

    def offer_restart(self, lost: dict[str, str]) -> None:
        from daintree_tui.tui.screens.confirm import ConfirmScreen

        self.notify(f"The tmux server stopped: {len(lost)} session(s) ended", severity="error", timeout=10)
        body = ("The sessions' tmux server is gone (killed or crashed). Their worktrees and any uncommitted work "
                "are untouched.\n\n" + "\n".join(f"  {n} ({a})" for n, a in lost.items())
                + "\n\nStart them again with the same agents?")
        self.app.push_screen(ConfirmScreen("The tmux server stopped", body, yes="Restart sessions", no="Not now"),
                             when_given(lambda _: self.restart_sessions(lost)))

    @work(thread=True, exit_on_error=False, group="ops", description="restart sessions")
    def restart_sessions(self, lost: dict[str, str]) -> None:
        size = self.app.call_from_thread(self.terminal_size)
        for name, agent in lost.items():
            self.dashboard.backend.start_session(name, agent, size)
        self.post_message(OperationDone(f"Restarted {len(lost)} session(s)"))

    def ask_approval(self, request: Mapping[str, object]) -> None:
        from daintree_tui.tui.screens.confirm import ConfirmScreen

        argv = request["argv"] if isinstance(request["argv"], list) else []
        body = (f"The agent in {request['worktree']} (role {request.get('role') or '-'}) asks to run:\n\n"
                f"  daintree {' '.join(map(str, argv))}\n")
        request_id = int(str(request["id"]))

        def decided(yes: bool | None) -> None:
            self.resolve_request(request_id, bool(yes))

        self.app.push_screen(ConfirmScreen(f"Approve {request['action']} from {request['worktree']}?", body,
                                           yes="Approve and run", no="Reject"), decided)

    @work(thread=True, exit_on_error=False, group="ops", description="approval")
    def resolve_request(self, request_id: int, approve: bool) -> None:
        backend = self.dashboard.backend
        if approve:
            outcome = backend.run_approved(request_id)
            self.post_message(OperationDone(f"Approved request {request_id}: {outcome}"))
        else:
            backend.approvals.resolve(request_id, approve=False)
            self.post_message(OperationDone(f"Rejected request {request_id}"))

    def action_toggle_auto(self) -> None:
        self.auto_queue = not self.auto_queue
        self.sub_title = f"{self.dashboard.backend.project.root}" + ("  [auto queue on]" if self.auto_queue else "")
        self.notify("Auto queue " + ("on: ready tasks with an agent start by themselves" if self.auto_queue
                                     else "off"))
        self.schedule_poll(0)

    def action_bakeoff(self) -> None:
        from daintree_tui.tui.screens.bakeoff_new import BakeoffNewScreen

        tasks = self.query_one(TaskTable)
        task = next((t for t in self.tasks if t.id == tasks.selected_task_id), None)
        if task is None:
            self.notify("Select a task first (in the tasks list)", severity="warning")
            return
        backend = self.dashboard.backend
        self.app.push_screen(BakeoffNewScreen(task.subject, backend.agents(), backend.default_agent()),
                             when_given(self.start_bakeoff, task.id))

    @work(thread=True, exit_on_error=False, group="ops", description="bake-off")
    def start_bakeoff(self, task_id: int, request: BakeoffRequest) -> None:
        record = self.dashboard.backend.bakeoffs.create(task_id, request.agents, score=request.score)
        self.post_message(OperationDone(f"Bake-off {record['id']}: {', '.join(record['candidates'])}"))
        self.app.call_from_thread(self.open_bakeoff, record)

    def open_bakeoff(self, record: dict[str, Any]) -> None:
        from daintree_tui.tui.screens.bakeoff import BakeoffScreen

        self.app.push_screen(BakeoffScreen(record))

    def ask_trust(self, commands: list[str]) -> None:
        from daintree_tui.tui.screens.confirm import ConfirmScreen

        body = ("This repository's .daintree.toml defines hooks that run shell commands:\n\n"
                + "\n".join(f"  {c}" for c in commands)
                + "\n\nTrust it? (recorded for you only, outside the repository; a change asks again)")
        self.app.push_screen(ConfirmScreen("Trust this repository's hooks?", body, yes="Trust", no="Not now"),
                             when_given(lambda _: self.trust_config()))

    @work(thread=True, exit_on_error=False, group="ops", description="trust")
    def trust_config(self) -> None:
        self.dashboard.backend.trust()
        self.post_message(OperationDone("Trusted .daintree.toml: its hooks will run"))

    def action_events(self) -> None:
        self.query_one("#bottom", TabbedContent).active = "events-tab"

    def action_copy_path(self) -> None:
        entry = self.entry(self.selected_worktree())
        if entry:
            self.copy_path(entry.path)

    @work(thread=True, exit_on_error=False, group="clipboard", description="copy path")
    def copy_path(self, path: str) -> None:
        import pyperclip

        try:
            pyperclip.copy(path)
        except pyperclip.PyperclipException:
            self.app.call_from_thread(self.app.copy_to_clipboard, path)
            self.app.call_from_thread(self.notify, f"No system clipboard; sent to the terminal's clipboard: {path}")
            return
        self.app.call_from_thread(self.notify, f"Copied {path}")

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def key_escape(self) -> None:
        box = self.query_one("#filter", Input)
        if box.display:
            box.value = ""
            box.display = False
            self.query_one(WorktreeTable).focus()

    def action_cycle_session(self, step: int) -> None:
        order = self.session_order()
        if not order:
            return
        current = self.selected_worktree()
        index = order.index(current) if current in order else -1
        self.jump_to(order[(index + step) % len(order)])

    def action_jump_session(self, number: int) -> None:
        order = self.session_order()
        if 1 <= number <= len(order):
            self.jump_to(order[number - 1])

    def jump_to(self, name: str) -> None:
        self.query_one(WorktreeTable).select_name(name)
        self.attach_and_focus(name)

    def action_help(self) -> None:
        from daintree_tui.tui.screens.help import HelpScreen

        self.app.push_screen(HelpScreen(self.dashboard.keymap))

    def action_quit_dashboard(self) -> None:
        self.dashboard.quit_dashboard()

    def on_unmount(self) -> None:
        self._stop_watching.set()
