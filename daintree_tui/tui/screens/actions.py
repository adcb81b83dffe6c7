"""The dashboard's actions: what each key of `bindings.DASHBOARD_BINDINGS` does.

A base of `MainScreen` so the screen module keeps to arranging widgets and following state. Actions that act on
the current worktree are marked `@needs_worktree` (the footer, help and palette read that mark); every one that
asks or blocks starts a flow from `flows.py` as an async worker.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from textual import work
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input

from daintree_tui.core.log import warn
from daintree_tui.core.models import Task, TaskStatus, WorktreeEntry
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.tui.bindings import KeyRow, key_rows, needs_worktree
from daintree_tui.tui.feed import DashboardFeed
from daintree_tui.tui.keymap import dialog_bindings, unknown_ids
from daintree_tui.tui.screens import flows
from daintree_tui.tui.widgets.task_table import TaskTable
from daintree_tui.tui.widgets.terminal import TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable

if TYPE_CHECKING:
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.tui.app import DaintreeApp
    from daintree_tui.tui.backend import Backend


def every_binding(screen: list[BindingType], app: list[BindingType], palette_key: str) -> list[BindingType]:
    """The dashboard's keys in help order: leaving the terminal, the screen's, the palette, the app's."""
    palette = Binding(palette_key, "command_palette", "Palette", id="command_palette",
                      tooltip="Command palette: every action by name")
    return [*TerminalView.BINDINGS, *screen, palette, *app]


class DashboardActions(Screen[None]):
    """Actions and the small helpers they share; the state they read is `MainScreen`'s reactives."""

    # Declared here for the type checker; MainScreen defines them as reactives.
    tasks: tuple[Task, ...]
    entries: tuple[WorktreeEntry, ...]
    sessions: dict[str, SessionInfo]
    sessions_known: bool
    selected: str | None
    auto_queue: bool
    terminal_focused: bool
    restarted_failed: set[str]
    """Worktrees whose failed agent enter started again: failing once more, enter shows why and asks (a loop)."""

    later_mounted = False
    """Whether the events and diff tabs and the footer are mounted (`MainScreen.mount_later`)."""

    async def mount_later(self) -> None:
        raise NotImplementedError

    def with_later(self, then: Callable[[], object]) -> None:
        """Run `then` with the tabs and the footer mounted: now, or once `mount_later` has run on the screen's own
        message loop (a key's action runs on the app's)."""
        if self.later_mounted:
            then()
            return
        self.call_later(self.mount_later)
        self.call_later(then)

    def attach_and_focus(self, name: str) -> None:
        raise NotImplementedError

    def release(self, name: str) -> None:
        raise NotImplementedError

    def reattach(self, name: str) -> None:
        """Show `name` again after a refused restart, remove or merge released it (when it is still the current
        worktree)."""
        if self.selected == name and self.terminal.worktree is None and name in self.sessions:
            self.dashboard.attach(self.terminal, name)
            self.feed.shown = self.terminal.worktree
        self.feed.poll_now()

    def operation_done(self, message: str, focus: str | None = None, removed: str | None = None) -> None:
        raise NotImplementedError

    @property
    def dashboard(self) -> DaintreeApp:
        return self.app  # type: ignore[return-value]

    @property
    def backend(self) -> Backend:
        return self.dashboard.backend

    @property
    def feed(self) -> DashboardFeed:
        return self.query_one(DashboardFeed)

    @property
    def terminal(self) -> TerminalView:
        return self.query_one(TerminalView)

    def entry(self, name: str | None) -> WorktreeEntry | None:
        return next((e for e in self.entries if e.name == name), None)

    def session_order(self) -> list[str]:
        """Worktrees that have a session, in table order: what the digits, alt+N and [ ] move through."""
        return [e.name for e in self.entries if e.name in self.sessions]

    def terminal_size(self) -> tuple[int, int]:
        width, height = self.terminal.size
        return max(width, 40), max(height, 10)

    # -- actions ---------------------------------------------------------------------------------------------

    def run_flow(self, flow: Coroutine[Any, Any, None], description: str) -> None:
        self.run_worker(flow, group="ops", exit_on_error=False, description=description)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.terminal_focused and self.terminal.attached:
            return False  # every key goes to the agent: the footer shows only the leave key
        method = getattr(self, f"action_{action}", None)
        if getattr(method, "needs_worktree", False) and not self.selected:
            return None
        return True

    # The dialogs are imported when first opened: none is on the first screen, and their widgets (a text area, a
    # select) cost the dashboard's start-up tens of milliseconds of imports.

    def action_new_task(self) -> None:
        from daintree_tui.tui.screens.new_task import NewTaskScreen

        backend = self.backend
        dialog = flows.ask(self, NewTaskScreen(backend.agent_facts(), backend.default_agent()))
        self.run_flow(flows.new_task(self, dialog), "create task")

    def action_open_session(self) -> None:
        tasks = self.query_one(TaskTable)
        if tasks.has_focus:
            task = next((t for t in self.tasks if t.id == tasks.selected_task_id), None)
            if task is not None and not task.worktree:
                self.run_flow(flows.start_for_task(self, task.id), "start task")
                return
        name = self.selected
        if not name:
            return
        info = self.sessions.get(name)
        if info is not None and info.status != SessionStatus.EXITED:
            self.attach_and_focus(name)
        elif info is not None and info.exit_code != 0 and name in self.restarted_failed:
            # It failed again after enter restarted it (no login, no network, a bad flag fail at once): say why and
            # ask, rather than restart it on every enter.
            self.run_flow(flows.restart_failed(self, name, info), "start session")
        else:
            if info is not None and info.exit_code not in (None, 0):
                self.restarted_failed.add(name)
            else:
                self.restarted_failed.discard(name)
            agent = info.agent if info is not None else None  # an exited session restarts with its own agent
            self.run_flow(flows.start_session(self, name, agent, restart=info is not None), "start session")

    @needs_worktree
    def action_start_session(self) -> None:
        from daintree_tui.tui.screens.agent_picker import AgentPickerScreen

        name, backend = str(self.selected), self.backend
        self.restarted_failed.discard(name)  # an agent chosen anew
        info = self.sessions.get(name)
        failed = info is not None and info.status == SessionStatus.EXITED and info.exit_code not in (None, 0)
        picker = AgentPickerScreen(name, backend.agent_facts(), backend.default_agent(), restart=info is not None,
                                   current=info.agent if info else None, failed=failed)
        restart = info is not None
        dialog = flows.ask(self, picker)
        self.run_flow(flows.pick_agent(self, name, restart, dialog), "start session")

    @needs_worktree
    def action_keep(self) -> None:
        self.run_flow(flows.keep(self, str(self.selected)), "keep")

    @needs_worktree
    def action_remove(self) -> None:
        self.run_flow(flows.remove(self, str(self.selected)), "remove")

    @needs_worktree
    def action_commit(self) -> None:
        self.run_flow(flows.commit(self, str(self.selected)), "commit")

    @needs_worktree
    def action_merge(self) -> None:
        self.run_flow(flows.merge(self, str(self.selected)), "merge")

    @needs_worktree
    def action_pr(self) -> None:
        self.run_flow(flows.pull_request(self, str(self.selected)), "pull request")

    @needs_worktree
    def action_inject_task(self) -> None:
        info = self.sessions.get(str(self.selected))
        if info is None or info.status == SessionStatus.EXITED:  # `i` did nothing here, without a word
            self.notify(f"No agent runs in {self.selected}: enter starts one (its task is the first prompt)",
                        severity="warning")
            return
        self.run_flow(flows.inject_task(self, str(self.selected)), "send task")

    @needs_worktree
    def action_copy_path(self) -> None:
        entry = self.entry(self.selected)
        if entry:
            self.run_flow(flows.copy_path(self, entry.path), "copy path")

    @needs_worktree
    def action_stop_session(self) -> None:
        self.run_flow(flows.stop_session(self, str(self.selected)), "stop session")

    @needs_worktree
    def action_copy_link(self) -> None:
        self.run_flow(flows.copy_link(self, str(self.selected)), "copy link")

    @needs_worktree
    def action_diff(self) -> None:
        self.with_later(self.show_diff_tab)

    def show_diff_tab(self) -> None:
        from daintree_tui.tui.screens import later  # loaded with the tabs

        if self.selected:
            later.show_tab(self, "diff-tab")
            self.run_flow(flows.diff(self, self.selected), "diff")

    @needs_worktree
    def action_full_diff(self) -> None:
        if self.has_class("full-diff"):
            self.unzoom()
            return
        self.with_later(self.show_full_diff)

    def show_full_diff(self) -> None:
        from daintree_tui.tui.screens import later  # loaded with the tabs

        self.show_diff_tab()
        self.remove_class("zoomed")
        self.add_class("full-diff")
        # Focus goes where it is useful, not wherever Textual moves it from the hidden lists.
        later.diff_view(self).focus()

    def action_zoom(self) -> None:
        if self.has_class("zoomed"):
            self.unzoom()
            return
        self.remove_class("full-diff")
        self.add_class("zoomed")
        if self.terminal.attached:
            self.terminal.focus()
        else:
            self.set_focus(None)

    def unzoom(self) -> None:
        """Back from the zoomed terminal or the full-screen diff, to the lists."""
        self.remove_class("zoomed", "full-diff")
        self.query_one(WorktreeTable).focus()

    def action_events(self) -> None:
        self.with_later(self.show_events_tab)

    def show_events_tab(self) -> None:
        from daintree_tui.tui.screens import later  # loaded with the tabs

        later.show_tab(self, "events-tab")

    def bakeoff_task(self) -> Task | str:
        """The task `b` races agents on, or why there is none: the task under the cursor while the tasks list has
        focus, else the current worktree's own task. It took the tasks list's cursor, unfocused and out of sight,
        over the worktree the user was looking at."""
        tasks = self.query_one(TaskTable)
        by_id = {t.id: t for t in self.tasks}
        if tasks.has_focus or not self.selected:
            task = by_id.get(tasks.selected_task_id) if tasks.selected_task_id is not None else None
            return task if task is not None else "Select a task first (in the tasks list)"
        entry = self.entry(self.selected)
        task = by_id.get(entry.task_id) if entry is not None and entry.task_id is not None else None
        if task is None:
            return (f"{self.selected} has no task: select one in the tasks list (shift+tab moves there), "
                    "then press b")
        return task

    def action_bakeoff(self) -> None:
        task = self.bakeoff_task()
        if isinstance(task, str):
            self.notify(task, severity="warning")
            return
        if task.status == TaskStatus.COMPLETED:
            # Refused now, not after the agents and score were chosen: the cursor of an unfocused tasks list is
            # easy to miss, and it stays on the first task, often the one just merged.
            self.notify(f"Task {task.id} ({task.subject}) is completed: select another in the tasks list "
                        "(shift+tab moves there), or reopen it", severity="warning")
            return
        from daintree_tui.tui.screens.bakeoff_new import BakeoffNewScreen

        backend = self.backend
        dialog = flows.ask(self, BakeoffNewScreen(task.subject, backend.agent_facts(), backend.default_agent()))
        self.run_flow(flows.bakeoff(self, task.id, dialog), "bake-off")

    def action_train(self) -> None:
        from daintree_tui.tui.screens.train import run_train  # a dialog: imported when first opened

        self.run_flow(run_train(self), "merge train")

    def action_toggle_auto(self) -> None:
        self.auto_queue = self.feed.auto_queue = not self.auto_queue
        self.sub_title = f"{self.backend.project.root}" + ("  [auto queue on]" if self.auto_queue else "")
        self.notify("Auto queue " + ("on: ready tasks with an agent start by themselves" if self.auto_queue
                                     else "off"))
        self.feed.poll_now()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        self.set_focus(box)  # now, not on the next loop turn: `/cart` typed fast all goes to the box

    def key_escape(self) -> None:
        if self.has_class("zoomed") or self.has_class("full-diff"):
            self.unzoom()
            return
        box = self.query_one("#filter", Input)
        if box.display:
            box.value = ""
            box.display = False
            self.query_one(WorktreeTable).focus()

    def action_cycle_session(self, step: int) -> None:
        order = self.session_order()
        if not order:
            return
        index = order.index(self.selected) if self.selected in order else -1
        self.selected = order[(index + step) % len(order)]

    def action_jump_session(self, number: int) -> None:
        order = self.session_order()
        if 1 <= number <= len(order):
            self.selected = order[number - 1]

    def action_help(self) -> None:
        from daintree_tui.tui.screens.help import HelpScreen

        self.app.push_screen(HelpScreen(self.help_rows()))

    def help_rows(self) -> list[KeyRow]:
        app = self.dashboard
        bindings = every_binding(self.BINDINGS, app.BINDINGS, app.COMMAND_PALETTE_BINDING)
        return key_rows(bindings, app.keymap, self, app.get_key_display)

    @work(thread=True, group="keymap", description="keys in the config")
    def check_keymap(self) -> None:
        """Warn (a toast) of `keys.<id>` entries that remap nothing."""
        app = self.dashboard
        bindings = [*every_binding(self.BINDINGS, app.BINDINGS, app.COMMAND_PALETTE_BINDING), *dialog_bindings()]
        unknown = unknown_ids(app.keymap, bindings)
        if unknown:
            warn(f"config: {', '.join(f'keys.{i}' for i in unknown)} remaps nothing: no key has that id "
                 "(the README's key table lists them)")

    def action_quit_dashboard(self) -> None:
        self.dashboard.quit_dashboard()
