"""What the dashboard's keys do on a local worktree and on the tasks list (`bindings.DASHBOARD_BINDINGS`).

A part the main screen holds (`MainScreen.actions`): the screen's `action_*` methods are the table of keys, and
the ones that act here call this part with the current worktree. Every action that asks or blocks starts a flow
from `flows.py` as an async worker. A remote row's actions are `HostRows`' (screens/hosts.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from textual.binding import Binding, BindingType

from daintree_tui.core.models import Task, TaskStatus
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.tui.hosts import is_remote
from daintree_tui.tui.screens import flows
from daintree_tui.tui.screens.dashboard import Dashboard
from daintree_tui.tui.widgets.terminal import TerminalView

if TYPE_CHECKING:
    from daintree_tui.services.ci import ChecksReport
    from daintree_tui.tui.feed import DashboardFeed
    from daintree_tui.tui.screens.layout import DashboardLayout
    from daintree_tui.tui.widgets.sidebar import Sidebar


def every_binding(screen: list[BindingType], app: list[BindingType], palette_key: str) -> list[BindingType]:
    """The dashboard's keys in help order: leaving the terminal, the screen's, the palette, the app's."""
    palette = Binding(palette_key, "command_palette", "Palette", id="command_palette",
                      tooltip="Command palette: every action by name")
    return [*TerminalView.BINDINGS, *screen, palette, *app]


class ActionsView(Dashboard, Protocol):
    """What the actions read and set besides what an operation sees: the tasks list, the auto queue's switch."""

    auto_queue: bool
    sub_title: str | None

    @property
    def checks(self) -> dict[str, ChecksReport]: ...

    @property
    def sidebar(self) -> Sidebar: ...

    @property
    def feed(self) -> DashboardFeed: ...

    @property
    def layout_part(self) -> DashboardLayout: ...


class WorktreeActions:
    """Each method is one key's work on the current worktree (or the task under the tasks list's cursor)."""

    def __init__(self, view: ActionsView) -> None:
        self.view = view
        self.restarted_failed: set[str] = set()
        """Worktrees whose failed agent enter started again: failing once more, enter shows why and asks (a loop)."""

    # The dialogs are imported when first opened: none is on the first screen, and their widgets (a text area, a
    # select) cost the dashboard's start-up tens of milliseconds of imports.

    def new_task(self) -> None:
        from daintree_tui.tui.screens.new_task import NewTaskScreen

        view = self.view
        backend = view.backend
        dialog = flows.ask(view, NewTaskScreen(backend.agent_facts(), backend.default_agent()))
        view.run_flow(flows.new_task(view, dialog), "create task")

    def open_session(self) -> None:
        """enter: in the tasks list, a task without a worktree gets one with its session; otherwise type into the
        current worktree's session, starting its agent when none runs."""
        view = self.view
        tasks = view.sidebar.task_table
        if tasks.has_focus:
            task = next((t for t in view.tasks if t.id == tasks.selected_task_id), None)
            if task is not None and not task.where:  # one placed on a host is not started here a second time
                view.run_flow(flows.start_for_task(view, task.id), "start task")
                return
            if task is not None and task.where != task.worktree and view.selected != task.where:
                view.notify(f"task {task.id} was placed on a host as {task.where}, which is not listed now",
                            severity="warning")
                return
        name = view.selected
        if not name:
            return
        info = view.sessions.get(name)
        if info is not None and info.status != SessionStatus.EXITED:
            view.attach_and_focus(name)
        elif info is not None and info.exit_code != 0 and name in self.restarted_failed:
            # It failed again after enter restarted it (no login, no network, a bad flag fail at once): say why and
            # ask, rather than restart it on every enter.
            view.run_flow(flows.restart_failed(view, name, info), "start session")
        else:
            if info is not None and info.exit_code not in (None, 0):
                self.restarted_failed.add(name)
            else:
                self.restarted_failed.discard(name)
            agent = info.agent if info is not None else None  # an exited session restarts with its own agent
            view.run_flow(flows.start_session(view, name, agent, restart=info is not None), "start session")

    def start_session(self, name: str) -> None:
        from daintree_tui.tui.screens.agent_picker import AgentPickerScreen

        view = self.view
        backend = view.backend
        self.restarted_failed.discard(name)  # an agent chosen anew
        info = view.sessions.get(name)
        failed = info is not None and info.status == SessionStatus.EXITED and info.exit_code not in (None, 0)
        picker = AgentPickerScreen(name, backend.agent_facts(), backend.default_agent(), restart=info is not None,
                                   current=info.agent if info else None, failed=failed)
        restart = info is not None
        dialog = flows.ask(view, picker)
        view.run_flow(flows.pick_agent(view, name, restart, dialog), "start session")

    def keep(self, name: str) -> None:
        self.view.run_flow(flows.keep(self.view, name), "keep")

    def remove(self, name: str) -> None:
        self.view.run_flow(flows.remove(self.view, name), "remove")

    def commit(self, name: str) -> None:
        self.view.run_flow(flows.commit(self.view, name), "commit")

    def merge(self, name: str) -> None:
        self.view.run_flow(flows.merge(self.view, name), "merge")

    def pr(self, name: str) -> None:
        self.view.run_flow(flows.pull_request(self.view, name), "pull request")

    def inject_task(self, name: str) -> None:
        info = self.view.sessions.get(name)
        if info is None or info.status == SessionStatus.EXITED:  # `i` did nothing here, without a word
            self.view.notify(f"No agent runs in {name}: enter starts one (its task is the first prompt)",
                             severity="warning")
            return
        self.view.run_flow(flows.inject_task(self.view, name), "send task")

    def copy_path(self, name: str) -> None:
        entry = self.view.entry(name)
        if entry:
            self.view.run_flow(flows.copy_path(self.view, entry.path), "copy path")

    def stop_session(self, name: str) -> None:
        self.view.run_flow(flows.stop_session(self.view, name), "stop session")

    def copy_link(self, name: str) -> None:
        self.view.run_flow(flows.copy_link(self.view, name), "copy link")

    def diff(self, name: str) -> None:
        """Read `name`'s diff into the diff tab (a remote worktree's is its host's: nothing to show here)."""
        if not is_remote(name):
            self.view.run_flow(flows.diff(self.view, name), "diff")

    def review_comment(self, name: str) -> None:
        """r: a comment on the diff's line under its cursor (its file and new-side line)."""
        view = self.view
        place = view.layout_part.diff_place(name)
        if place is None:
            if view.layout_part.diff_shows(name):  # it said "open the diff" over the diff it had open
                view.notify("A comment goes on the new side: move the cursor to an added (+) or unchanged line, "
                            "not a removed one or a header", severity="warning")
            else:
                view.notify(f"Open {name}'s diff (d) and move its cursor to an added or unchanged line first",
                            severity="warning")
            return
        from daintree_tui.tui.screens.review_comment import ReviewCommentScreen  # a dialog: imported when opened

        dialog = flows.ask(view, ReviewCommentScreen(name, place.path, place.line, place.text))
        view.run_flow(flows.review_comment(view, name, place.path, place.line, dialog), "review comment")

    def review_send(self, name: str) -> None:
        self.view.run_flow(flows.review_send(self.view, name), "send review")

    def checkpoints(self, name: str) -> None:
        """The timeline of `name`'s checkpoints, each step's diff, a restore (screens/checkpoints.py)."""
        from daintree_tui.tui.screens.checkpoints import CheckpointsScreen

        self.view.app.push_screen(CheckpointsScreen(name))

    def review_send_ci(self, name: str) -> None:
        """P: the failed checks of the pull request, each with the end of its log, to the agent. With the last
        checks read showing none failed, a notice instead (and a fresh read, should they have failed since)."""
        view = self.view
        report = view.checks.get(name)
        if report is not None and not report.failed:
            view.notify(f"Nothing failed on {name}'s pull request (CI: {report.state}): nothing to send")
            view.checks_now(name)
            return
        view.run_flow(flows.review_send_ci(view, name), "send CI failures")  # unknown yet: the operation says

    def bakeoff_task(self) -> Task | str:
        """The task `b` races agents on, or why there is none: the task under the cursor while the tasks list has
        focus, else the current worktree's own task. It took the tasks list's cursor, unfocused and out of sight,
        over the worktree the user was looking at."""
        view = self.view
        tasks = view.sidebar.task_table
        by_id = {t.id: t for t in view.tasks}
        if tasks.has_focus or not view.selected:
            task = by_id.get(tasks.selected_task_id) if tasks.selected_task_id is not None else None
            return task if task is not None else "Select a task first (in the tasks list)"
        entry = view.entry(view.selected)
        task = by_id.get(entry.task_id) if entry is not None and entry.task_id is not None else None
        if task is None:
            return (f"{view.selected} has no task: select one in the tasks list (shift+tab moves there), "
                    "then press b")
        return task

    def bakeoff(self) -> None:
        view = self.view
        task = self.bakeoff_task()
        if isinstance(task, str):
            view.notify(task, severity="warning")
            return
        if task.status == TaskStatus.COMPLETED:
            # Refused now, not after the agents and score were chosen: the cursor of an unfocused tasks list is
            # easy to miss, and it stays on the first task, often the one just merged.
            view.notify(f"Task {task.id} ({task.subject}) is completed: select another in the tasks list "
                        "(shift+tab moves there), or reopen it", severity="warning")
            return
        from daintree_tui.tui.screens.bakeoff_new import BakeoffNewScreen

        backend = view.backend
        dialog = flows.ask(view, BakeoffNewScreen(task.subject, backend.agent_facts(), backend.default_agent()))
        view.run_flow(flows.bakeoff(view, task.id, dialog), "bake-off")

    def toggle_auto(self) -> None:
        view = self.view
        view.auto_queue = view.feed.auto_queue = not view.auto_queue
        view.sub_title = f"{view.backend.project.root}" + ("  [auto queue on]" if view.auto_queue else "")
        view.notify("Auto queue " + ("on: ready tasks with an agent start by themselves" if view.auto_queue
                                     else "off"))
        view.feed.poll_now()
