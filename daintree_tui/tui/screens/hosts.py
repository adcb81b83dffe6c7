"""Remote rows on the main screen: what a host's state change does to the lists and the terminal, and what each
action does on a remote row.

A base of `MainScreen` (after `DashboardActions`): its action overrides see a remote row first. Remove and keep
run on the host through its own CLI; the actions that only make sense here (commit, merge, diff, ...) are refused
with a notice naming the `--host` command. None of them ever reaches a local worktree: a remote row's key
(`NAME@HOST`) is no local worktree's name.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.worktrees import Facts
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.tui.bindings import needs_worktree
from daintree_tui.tui.hosts import (
    HostsChanged,
    HostsWatch,
    host_label,
    is_remote,
    last_update,
    remote_entries,
    remote_facts_and_disk,
    remote_key,
    remote_sessions,
    split_key,
)
from daintree_tui.tui.screens import flows
from daintree_tui.tui.screens.actions import DashboardActions
from daintree_tui.tui.screens.confirm import ConfirmScreen
from daintree_tui.tui.widgets.terminal import LOOKING, NO_SESSION

if TYPE_CHECKING:
    # Imported where used: the dialog (a text area, a select) and the host services are not on the first screen.
    from daintree_tui.services.hosts_feed import HostState
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.tui.screens.new_task import NewTask

LOCAL_ONLY = {"commit": "worktree commit", "merge": "worktree merge", "pr": "worktree pr",
              "diff": "worktree diff", "copy_path": "worktree status", "inject_task": "session send",
              "start_session": "session start", "stop_session": "session stop"}


class HostsScreen(DashboardActions):
    """The remote half of the main screen."""

    facts: dict[str, Facts]
    disk: dict[str, int]

    def __init__(self) -> None:
        super().__init__()
        self._host_status: dict[str, HostState] = {}

    def schedule_attach(self) -> None:
        raise NotImplementedError

    @property
    def hosts_watch(self) -> HostsWatch:
        return self.query_one(HostsWatch)

    def host_state(self, key: str | None) -> HostState | None:
        host, _ = split_key(key)
        return self.hosts_watch.states.get(host) if host else None

    def on_hosts_changed(self, message: HostsChanged) -> None:
        before = {name: state.status for name, state in self._host_status.items()}
        self._host_status = dict(message.states)
        local_entries = tuple(e for e in self.entries if not is_remote(e.name))
        local_sessions = {k: v for k, v in self.sessions.items() if not is_remote(k)}
        entries: list[WorktreeEntry] = []
        sessions: dict[str, SessionInfo] = {}
        for name in sorted(message.states):  # grouped by host, in name order, after the local rows
            entries += remote_entries(message.states[name])
            sessions.update(remote_sessions(message.states[name]))
        self.entries = (*local_entries, *entries)
        self.sessions = {**local_sessions, **sessions}
        facts, disk = remote_facts_and_disk(entries)  # what each host's poll reported: no round trip per row
        self.facts = {**{k: v for k, v in self.facts.items() if not is_remote(k)}, **facts}
        self.disk = {**{k: v for k, v in self.disk.items() if not is_remote(k)}, **disk}
        host, _ = split_key(self.selected)
        state = message.states.get(host) if host else None
        if state is None:
            return
        self.explain_unattached(self.selected)
        if state.status == "ok" and before.get(state.name) != "ok" and self.terminal.worktree != self.selected:
            self.schedule_attach()  # the host came back: show its session again

    def explain_unattached(self, key: str | None) -> None:
        """What the terminal says when it shows nothing: for a remote row whose host does not answer, that."""
        terminal = self.terminal
        state = self.host_state(key)
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

    def merged_entries(self, local: tuple[WorktreeEntry, ...]) -> tuple[WorktreeEntry, ...]:
        """A new local snapshot, with the remote rows kept after it."""
        return (*local, *(e for e in self.entries if is_remote(e.name)))

    def merged_sessions(self, local: dict[str, SessionInfo]) -> dict[str, SessionInfo]:
        return {**local, **{k: v for k, v in self.sessions.items() if is_remote(k)}}

    # -- placing work on a host ----------------------------------------------------------------------------------

    def action_new_task(self) -> None:
        """`n`: with remote hosts configured, the dialog also asks where (here, or a host: the last one chosen)."""
        watch = self.hosts_watch
        if not watch.hosts:
            super().action_new_task()
            return
        from daintree_tui.tui.screens.new_task import NewTaskScreen

        choices = [(host_label(name, watch.states.get(name)), name) for name in sorted(watch.hosts)]
        backend = self.backend
        dialog = flows.ask(self, NewTaskScreen(backend.agent_facts(), backend.default_agent(), choices,
                                               host=watch.last_host))
        self.run_flow(self.new_task_anywhere(dialog), "create task")

    async def new_task_anywhere(self, dialog: asyncio.Future[NewTask | None]) -> None:
        new = await dialog
        if new is None:
            return
        self.hosts_watch.last_host = new.host
        if new.host is None:
            answered: asyncio.Future[NewTask | None] = asyncio.get_running_loop().create_future()
            answered.set_result(new)
            await flows.new_task(self, answered)
            return
        await self.create_on_host(new)

    async def create_on_host(self, new: NewTask) -> None:
        """The host's own CLI makes the task, worktree and session (as the host queue does); the new row
        becomes the current one and its terminal attaches over ssh."""
        from daintree_tui.services.host_queue import create_on_host, create_task_on_host

        watch = self.hosts_watch
        host_name = str(new.host)
        host = watch.hosts.get(host_name)
        if host is None:
            return
        if not new.start:
            task = await asyncio.to_thread(create_task_on_host, host, new.subject, new.description, new.agent)
            self.notify(f"Created task {task['id']} on host {host_name}")
            return
        state = watch.states.get(host_name)
        taken = {str(w.get("name")) for w in state.worktrees} if state is not None else set()
        self.notify(f"Creating on host {host_name}…")
        created = await asyncio.to_thread(create_on_host, host, new.subject, new.description, new.agent,
                                          base=new.base or None, taken=taken)
        await asyncio.to_thread(watch.poll_host, host_name)  # its session is known before the terminal attaches
        key = remote_key(host_name, created.name)
        self.operation_done(f"Task {created.task_id} → worktree {created.name} with {new.agent} on host "
                            f"{host_name}", focus=key)

    def action_toggle_auto(self) -> None:
        super().action_toggle_auto()
        # With hosts, the auto queue also fills their free slots (the pass of `queue run --hosts`).
        self.hosts_watch.queue_project = self.backend.project if self.auto_queue else None
        self.hosts_watch.poll_now()

    # -- actions on a remote row ---------------------------------------------------------------------------------

    def refuse(self, action: str) -> bool:
        """True (after saying why) when the current row is remote and `action` only works on local worktrees."""
        if not is_remote(self.selected):
            return False
        host, name = split_key(self.selected)
        self.notify(f"{name} is on host {host}: run `daintree {LOCAL_ONLY[action]} {name} --host {host}` there",
                    title="not from the dashboard", severity="warning")
        return True

    def action_open_session(self) -> None:
        key = self.selected
        if not is_remote(key) or self.query_one("#tasks").has_focus:
            super().action_open_session()
            return
        info = self.sessions.get(str(key))
        state = self.host_state(key)
        if state is None or state.status != "ok":
            host = split_key(key)[0]
            self.notify(f"host {host} does not answer: its last state is shown greyed", severity="warning")
        elif info is not None and info.status != SessionStatus.EXITED:
            self.attach_and_focus(str(key))
        else:
            self.refuse("start_session")

    @needs_worktree
    def action_keep(self) -> None:
        if is_remote(self.selected):
            self.run_flow(self.remote_operation(str(self.selected), "keep"), "keep on host")
        else:
            super().action_keep()

    @needs_worktree
    def action_remove(self) -> None:
        if is_remote(self.selected):
            self.run_flow(self.remote_operation(str(self.selected), "remove"), "remove on host")
        else:
            super().action_remove()

    async def remote_operation(self, key: str, operation: str) -> None:
        """`worktree keep|remove NAME` run by the host's own daintree. Remove is asked first and never forced:
        the host refuses a worktree with uncommitted work, and its words are shown here."""
        host_name, name = split_key(key)
        host = self.hosts_watch.hosts.get(host_name or "")
        if host is None or name is None:
            return
        if operation == "remove":
            confirmed = await self.app.push_screen_wait(ConfirmScreen(
                f"Remove {name} on host {host_name}?",
                f"Its host removes the worktree and its branch and stops its session; a worktree with uncommitted "
                f"work is refused there (then: `daintree worktree remove {name} --force --host {host_name}`).",
                yes="Remove"))
            if not confirmed:
                return
            self.release(key)
        await asyncio.to_thread(host.run_json, ["worktree", operation, name])
        self.notify(f"{'Kept' if operation == 'keep' else 'Removed'} {name} on host {host_name}")
        self.hosts_watch.poll_now()

    @needs_worktree
    def action_commit(self) -> None:
        if not self.refuse("commit"):
            super().action_commit()

    @needs_worktree
    def action_merge(self) -> None:
        if not self.refuse("merge"):
            super().action_merge()

    @needs_worktree
    def action_pr(self) -> None:
        if not self.refuse("pr"):
            super().action_pr()

    @needs_worktree
    def action_start_session(self) -> None:
        if not self.refuse("start_session"):
            super().action_start_session()

    @needs_worktree
    def action_stop_session(self) -> None:
        if not self.refuse("stop_session"):
            super().action_stop_session()

    @needs_worktree
    def action_inject_task(self) -> None:
        if not self.refuse("inject_task"):
            super().action_inject_task()

    @needs_worktree
    def action_copy_path(self) -> None:
        if not self.refuse("copy_path"):
            super().action_copy_path()

    @needs_worktree
    def action_diff(self) -> None:
        if not self.refuse("diff"):
            super().action_diff()

    @needs_worktree
    def action_full_diff(self) -> None:
        if not self.refuse("diff"):
            super().action_full_diff()

    def show_diff(self, name: str) -> None:
        """The diff tab follows the current worktree (a remote one's diff is its host's: nothing to show)."""
        if not is_remote(name):
            self.run_flow(flows.diff(self, name), "diff")
