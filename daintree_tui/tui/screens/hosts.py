"""Remote rows on the main screen: what a host's state change does to the lists, and what a key does on a remote
row.

A part the main screen holds (`MainScreen.remote`). `HostsWatch` polls the hosts and posts `HostsChanged`; the
screen hands it here, and this merges each host's rows, sessions, facts and disk use into the screen's state,
after the local ones. Remove and keep run on the host through its own CLI; the actions that only make sense here
(commit, merge, diff, ...) are refused with a notice naming the `--host` command. None of them ever reaches a
local worktree: a remote row's key (`NAME@HOST`) is no local worktree's name.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.worktrees import Facts
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.tui.hosts import (
    HostsWatch,
    host_label,
    is_host_row,
    is_remote,
    remote_entries,
    remote_facts_and_disk,
    remote_key,
    remote_sessions,
    split_key,
)
from daintree_tui.tui.screens import flows
from daintree_tui.tui.screens.confirm import ConfirmScreen
from daintree_tui.tui.screens.dashboard import Dashboard

if TYPE_CHECKING:
    # Imported where used: the dialog (a text area, a select) and the host services are not on the first screen.
    from daintree_tui.services.hosts_feed import HostState
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.tui.screens.new_task import HostAgents, NewTask


LOCAL_ONLY = {"commit": "worktree commit {name} -m MSG", "merge": "worktree merge {name}",
              "pr": "worktree pr {name}", "diff": "worktree diff {name}", "copy_path": "worktree status {name}",
              "inject_task": "session send {name} --task", "start_session": "session start {name}",
              "stop_session": "session stop {name}", "review_comment": "review {name} --comment PATH:LINE TEXT",
              "review_send": "review {name} --send", "checkpoints": "checkpoint list {name}",
              "review_send_ci": "review {name} --send-ci"}
"""The command line that does each local-only action on a remote row (`--host HOST` added), whole: `r` said
`daintree review NAME --host far` and what that prints is the review, not how to comment."""


class HostsView(Dashboard, Protocol):
    """What the remote part sets on its screen (the lists' rows, the hosts' states) and the poller it reads."""

    entries: tuple[WorktreeEntry, ...]
    sessions: dict[str, SessionInfo]
    facts: dict[str, Facts]
    disk: dict[str, int]
    hosts: dict[str, HostState]

    @property
    def hosts_watch(self) -> HostsWatch: ...


class HostRows:
    """The remote half of the main screen."""

    def __init__(self, view: HostsView) -> None:
        self.view = view

    @property
    def watch(self) -> HostsWatch:
        return self.view.hosts_watch

    def take(self, states: dict[str, HostState]) -> None:
        """Every host's state now: its rows replace the ones it had, after the local rows."""
        view = self.view
        local_entries = tuple(e for e in view.entries if not is_remote(e.name))
        local_sessions = {k: v for k, v in view.sessions.items() if not is_remote(k)}
        entries: list[WorktreeEntry] = []
        sessions: dict[str, SessionInfo] = {}
        for name in sorted(states):  # grouped by host, in name order, after the local rows
            entries += remote_entries(states[name])
            sessions.update(remote_sessions(states[name]))
        view.entries = (*local_entries, *entries)
        view.sessions = {**local_sessions, **sessions}
        facts, disk = remote_facts_and_disk(entries)  # what each host's poll reported: no round trip per row
        view.facts = {**{k: v for k, v in view.facts.items() if not is_remote(k)}, **facts}
        view.disk = {**{k: v for k, v in view.disk.items() if not is_remote(k)}, **disk}
        view.hosts = dict(states)  # last: the terminal's words and attach follow the rows

    def merged_entries(self, local: tuple[WorktreeEntry, ...]) -> tuple[WorktreeEntry, ...]:
        """A new local snapshot, with the remote rows kept after it."""
        return (*local, *(e for e in self.view.entries if is_remote(e.name)))

    def merged_sessions(self, local: dict[str, SessionInfo]) -> dict[str, SessionInfo]:
        return {**local, **{k: v for k, v in self.view.sessions.items() if is_remote(k)}}

    def state_of(self, key: str | None) -> HostState | None:
        host, _ = split_key(key)
        return self.watch.states.get(host) if host else None

    # -- placing work on a host ----------------------------------------------------------------------------------

    @property
    def configured(self) -> bool:
        """Whether the user has remote hosts (the new-task dialog then also asks where)."""
        return bool(self.watch.hosts)

    def new_task(self) -> None:
        """`n` with remote hosts configured: the dialog also asks where (here, or a host: the last one chosen)."""
        from daintree_tui.tui.screens.new_task import NewTaskScreen

        view, watch = self.view, self.watch
        choices = [(host_label(name, watch.states.get(name)), name) for name in sorted(watch.hosts)]
        backend = view.backend
        dialog = flows.ask(view, NewTaskScreen(backend.agent_facts(), backend.default_agent(), choices,
                                               host=watch.last_host, host_agents=self.agents_of))
        view.run_flow(self.new_task_anywhere(dialog), "create task")

    def agents_of(self, name: str) -> HostAgents | str:
        """(In a worker thread.) The presets of host `name`'s own config, over its master connection; or why
        they are not known, for the dialog's note."""
        from daintree_tui.core.errors import DaintreeError
        from daintree_tui.services.hosts_feed import read_agents

        host, state = self.watch.hosts.get(name), self.watch.states.get(name)
        if host is None:
            return "is not configured"
        if state is not None and state.status == "unreachable":
            return "is not reached"  # at once: not another poll's wait for a host known not to answer
        try:
            return read_agents(host)
        except DaintreeError as exc:
            return f"did not list its agents ({exc})"

    async def new_task_anywhere(self, dialog: asyncio.Future[NewTask | None]) -> None:
        new = await dialog
        if new is None:
            return
        self.watch.last_host = new.host
        if new.host is None:
            answered: asyncio.Future[NewTask | None] = asyncio.get_running_loop().create_future()
            answered.set_result(new)
            await flows.new_task(self.view, answered)
            return
        await self.create_on_host(new)

    async def create_on_host(self, new: NewTask) -> None:
        """The host's own CLI makes the task, worktree and session (as the host queue does); the new row
        becomes the current one and its terminal attaches over ssh."""
        from daintree_tui.services.host_queue import create_on_host, create_task_on_host

        view, watch = self.view, self.watch
        host_name = str(new.host)
        host = watch.hosts.get(host_name)
        if host is None:
            return
        if not new.start:
            task = await asyncio.to_thread(create_task_on_host, host, new.subject, new.description, new.agent)
            view.notify(f"Created task {task['id']} on host {host_name}")
            return
        state = watch.states.get(host_name)
        taken = {str(w.get("name")) for w in state.worktrees} if state is not None else set()
        view.notify(f"Creating on host {host_name}…")
        created = await asyncio.to_thread(create_on_host, host, new.subject, new.description, new.agent,
                                          base=new.base or None, taken=taken)
        await asyncio.to_thread(watch.poll_host, host_name)  # its session is known before the terminal attaches
        key = remote_key(host_name, created.name)
        view.operation_done(f"Task {created.task_id} → worktree {created.name} with {new.agent} on host "
                            f"{host_name}", focus=key)

    def follow_auto_queue(self, on: bool) -> None:
        """With hosts, the auto queue also fills their free slots (the pass of `queue run --hosts`)."""
        self.watch.queue_project = self.view.backend.project if on else None
        self.watch.poll_now()

    # -- actions on a remote row ---------------------------------------------------------------------------------

    def unreached(self, key: str | None) -> bool:
        """True (after saying so) when `key` is the row of a host that never answered: nothing there to act on."""
        if not is_host_row(key):
            return False
        self.view.notify(f"host {split_key(key)[0]} does not answer: nothing of it is known yet (`daintree host "
                         f"check {split_key(key)[0]}` says why)", severity="warning")
        return True

    def refuse(self, action: str, key: str | None) -> bool:
        """True (after saying why) when `key` is a remote row and `action` only works on local worktrees."""
        if not is_remote(key):
            return False
        host, name = split_key(key)
        command = LOCAL_ONLY[action].format(name=name)
        self.view.notify(f"{name} is on host {host}: in a shell, `daintree {command} --host {host}`",
                         title="not from the dashboard", severity="warning")
        return True

    def open_session(self, key: str) -> None:
        view = self.view
        info = view.sessions.get(key)
        state = self.state_of(key)
        if state is None or state.status != "ok":
            host = split_key(key)[0]
            view.notify(f"host {host} does not answer: its last state is shown greyed", severity="warning")
        elif info is not None and info.status != SessionStatus.EXITED:
            view.attach_and_focus(key)
        else:
            self.refuse("start_session", key)

    def keep(self, key: str) -> None:
        self.view.run_flow(self.remote_operation(key, "keep"), "keep on host")

    def remove(self, key: str) -> None:
        self.view.run_flow(self.remote_operation(key, "remove"), "remove on host")

    async def remote_operation(self, key: str, operation: str) -> None:
        """`worktree keep|remove NAME` run by the host's own daintree. Remove is asked first and never forced:
        the host refuses a worktree with uncommitted work, and its words are shown here."""
        view = self.view
        host_name, name = split_key(key)
        host = self.watch.hosts.get(host_name or "")
        if host is None or name is None:
            return
        if operation == "remove":
            confirmed = await view.app.push_screen_wait(ConfirmScreen(
                f"Remove {name} on host {host_name}?",
                f"Its host stops its session and removes the worktree, and its branch if that is merged there (an "
                f"unmerged branch stays); a worktree with uncommitted work is refused there (then: `daintree "
                f"worktree remove {name} --force --delete-branch --host {host_name}`).",
                yes="Remove"))
            if not confirmed:
                return
            view.release(key)
            done = await asyncio.to_thread(host.run_json, ["worktree", "remove", name, "--delete-branch"])
            branch = "its branch deleted" if isinstance(done, dict) and done.get("branch_deleted") is True \
                else "its branch kept (not merged there)"
            view.notify(f"Removed {name} on host {host_name}, {branch}")
        else:
            if not await view.app.push_screen_wait(flows.keep_question(name, host_name)):
                return
            await asyncio.to_thread(host.run_json, ["worktree", operation, name])
            view.notify(f"Kept {name} on host {host_name}")
        self.watch.poll_now()
