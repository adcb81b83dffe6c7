"""Services: every service of one project, wired once. The CLI, the dashboard and the tests all start here.

Each service is built on first use (and its module imported then), so a command pays only for what it touches:
`daintree task list` never imports the sessions layer's tmux code, `daintree worktree create` never imports
the bake-off or queue modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from daintree_tui.core.log import suppressed
from daintree_tui.core.project import Project

HANGUP_EXIT = 128 + 1  # SIGHUP: what a session's agent gets when its tmux server dies under it

if TYPE_CHECKING:
    from daintree_tui.core.index import Index
    from daintree_tui.core.radar import Radar
    from daintree_tui.core.review import ReviewService
    from daintree_tui.core.tasks import TaskService
    from daintree_tui.core.worktrees import WorktreeService
    from daintree_tui.services.bakeoff import BakeoffService
    from daintree_tui.services.hygiene import DiskUsage
    from daintree_tui.services.observer import Observed, SessionObserver
    from daintree_tui.services.operations import Operations
    from daintree_tui.services.policy import Approvals, ApprovedRun
    from daintree_tui.services.queue import QueueRunner
    from daintree_tui.services.review_loop import ReviewLoop
    from daintree_tui.services.train import Train
    from daintree_tui.services.usage import BudgetGuard
    from daintree_tui.sessions.host import SessionHost
    from daintree_tui.sessions.manager import SessionManager
    from daintree_tui.sessions.status import SessionStatus

InboxHandler = Callable[["Services", str, dict[str, Any]], dict[str, Any]]
"""Applies one inbox request of a kind an interface adds: (services, the inbox's owner, the payload) -> result."""


class _StopThroughManager:
    """The worktree service's way to stop a session, resolved on first use: a command that never removes a
    worktree (`worktree create`, the commonest) never looks for tmux nor imports the sessions layer."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def stop(self, name: str) -> bool:
        if self._services.host is None:
            return False
        return self._services.sessions.stop(name)


class Services:
    """The services of one project over one session host.

    Args:
        project: the project.
        host: the session host to use; by default tmux when installed, else (with `pty_fallback`) an in-process
            PTY host whose sessions end with this process; without either, commands that need sessions fail with
            a clear error and the rest work.
        pty_fallback: make a PTY host when tmux is absent (the dashboard does; the CLI, whose sessions would die
            with it, does not).
        inbox_kinds: the inbox request kinds an interface above this layer applies, by kind (the MCP tools: kind
            `mcp`). Given here by whoever builds the services for a process (`cli.common.build_services`), so every
            process that applies inbox requests (the dashboard's poll, `session watch`, doctor) knows the same ones.
    """

    def __init__(self, project: Project, host: SessionHost | None = None, *, pty_fallback: bool = False,
                 inbox_kinds: Mapping[str, InboxHandler] | None = None) -> None:
        self.project = project
        self._given_host = host
        self._pty_fallback = pty_fallback
        self.inbox_kinds: dict[str, InboxHandler] = dict(inbox_kinds or {})
        self._auto_read: tuple[tuple[int, int] | None, bool] | None = None

    @cached_property
    def host(self) -> SessionHost | None:
        if self._given_host is not None:
            return self._given_host
        from daintree_tui.sessions.host_choice import host_for

        return host_for(self.project, create=self._pty_fallback)

    @property
    def persistent_sessions(self) -> bool:
        """Whether sessions outlive this process (tmux), so quitting leaves them running."""
        return self.host is None or self.host.persistent

    @cached_property
    def tasks(self) -> TaskService:
        from daintree_tui.core.tasks import TaskService

        return TaskService(self.project)

    @cached_property
    def index(self) -> Index:
        from daintree_tui.core.index import Index

        return Index(self.project)

    @cached_property
    def ops(self) -> Operations:
        """Every user operation, each with its checks and events: what the interfaces call to change things."""
        from daintree_tui.services.operations import Operations

        return Operations(self)

    @cached_property
    def sessions(self) -> SessionManager:
        from daintree_tui.sessions.manager import SessionManager

        manager = SessionManager(self.project, self.host, tasks=self.tasks, index=self.index)
        manager.after_start = lambda _name: self.ensure_watcher()
        return manager

    def ensure_watcher(self, since: int | None = None) -> int | None:
        """Start the watcher of this repository unless it runs (or it has nothing to do: no `[notify]` channel and
        `[checkpoints] auto = false`): the process that observes the sessions, records their transitions (and so
        their checkpoints) and sends notices while no dashboard does (services/watcher.py)."""
        if not getattr(self.host, "persistent", False):
            return None  # sessions that end with this process need no watcher to outlive it
        from daintree_tui.services.watcher import ensure_watcher

        return ensure_watcher(self.project, since=since)

    @cached_property
    def observer(self) -> SessionObserver:
        from daintree_tui.services.observer import SessionObserver

        return SessionObserver(self.project, self.sessions, self.budget, after_turn=self._checkpoint_turn)

    def _checkpoint_turn(self, name: str, status: SessionStatus) -> None:
        if self.auto_checkpoints():
            self.ops.checkpoints.turn(name, str(status))

    def auto_checkpoints(self) -> bool:
        """`[checkpoints] auto` of the user's config (default true), read again only when the file changed: the
        observer of a long-running process (the dashboard, the watcher) asks at each end of a turn."""
        from daintree_tui.core.user_config import auto_checkpoints_or_on, user_config_stamp

        stamp = user_config_stamp()
        if self._auto_read is None or self._auto_read[0] != stamp:
            self._auto_read = (stamp, auto_checkpoints_or_on())
        return self._auto_read[1]

    @cached_property
    def budget(self) -> BudgetGuard:
        """Usage of the sessions (from their agents' own records) against the budgets; stops what is over."""
        from daintree_tui.services.usage import BudgetGuard

        return BudgetGuard(self.sessions)

    def observe_tick(self) -> Observed:
        """One pass of the acting observer: apply what sandboxed sessions asked through their inboxes, then record
        the sessions' transitions. The dashboard's poll and `session watch` call this; listings never do."""
        from daintree_tui.services.inbox import process_inboxes

        process_inboxes(self)
        return self.observer.poll()

    @cached_property
    def worktrees(self) -> WorktreeService:
        from daintree_tui.core.worktrees import WorktreeService

        # Removing a worktree stops its session through the manager, which records it as stopped on purpose.
        return WorktreeService(self.project, _StopThroughManager(self), index=self.index, tasks=self.tasks)

    @cached_property
    def review(self) -> ReviewService:
        from daintree_tui.core.review import ReviewService

        return ReviewService(self.worktrees)

    @cached_property
    def reviews(self) -> ReviewLoop:
        """Review comments and verdicts, and telling the agents (services/review_loop.py)."""
        from daintree_tui.services.review_loop import ReviewLoop

        return ReviewLoop(self)

    @cached_property
    def radar(self) -> Radar:
        """The conflict radar; one per Services, so what it learnt of git carries from one pass to the next."""
        from daintree_tui.core.radar import Radar

        return Radar(self.project, self.worktrees.entries)

    @cached_property
    def train(self) -> Train:
        from daintree_tui.services.train import Train

        return Train(self)

    @cached_property
    def bakeoffs(self) -> BakeoffService:
        from daintree_tui.services.bakeoff import BakeoffService

        return BakeoffService(self.worktrees, usage=lambda names: self.sessions.usage_summary(names))

    @cached_property
    def queue(self) -> QueueRunner:
        from daintree_tui.services.queue import QueueRunner

        return QueueRunner(self.ops, self.observer)

    @cached_property
    def disk(self) -> DiskUsage:
        from daintree_tui.services.hygiene import DiskUsage

        return DiskUsage(self.worktrees)

    @cached_property
    def approvals(self) -> Approvals:
        from daintree_tui.services.policy import Approvals

        return Approvals(self.project)

    # -- operations that span services -----------------------------------------------------------------------

    def close(self) -> None:
        """Wait for the hooks the observer started (a process that recorded transitions calls this last)."""
        if "observer" in self.__dict__:
            self.observer.close()

    def reconcile(self, fix: bool) -> list[str]:
        """Report (and with `fix`, repair) every disagreement between tasks, index and git."""
        from daintree_tui.core.reconcile import reconcile

        return reconcile(self.project, fix=fix)

    def startup(self) -> list[str]:
        """Reconcile after whatever happened while nothing of ours ran (the dashboard calls this first)."""
        if not self.project.is_git:
            return []
        fixes = self.reconcile(fix=True)
        host = self.host
        if getattr(host, "persistent", False) and getattr(host, "serves_sessions", lambda: False)():
            with suppressed(OSError):  # its log cannot be opened (a full disk): no notices, all else works
                self.ensure_watcher()  # sessions started before a channel was set, or a watcher ended
        return fixes

    def approve_and_run(self, request_id: int, extra_args: tuple[str, ...] = ()) -> ApprovedRun:
        """Approve a request and run its command (the same way from the CLI and the dashboard)."""
        return self.approvals.approve_and_run(request_id, extra_args)

    def lost_sessions(self, runs: Mapping[str, float | None]) -> dict[str, str]:
        """Of sessions seen before (name -> when the run seen had started, None when not known), those that
        vanished with the tmux server (not stopped on purpose): name -> the agent they ran. A record of a later
        run than the one seen means that session is being started again (a restart of the only session stops the
        server for a moment), not lost."""
        if self.host is None or not self.host.server_gone():
            return {}
        lost = {}
        live = {e.name for e in self.worktrees.entries()}
        for name, seen_start in runs.items():
            if name not in live:
                continue  # its worktree was removed: the session was stopped on purpose
            record = self.sessions.record(name)
            if record is None or not record.agent:
                continue
            if seen_start is not None and record.started_at not in (None, seen_start):
                continue  # a later run's record: started again since (a restart), not lost
            # A hangup as its exit: the server's death ended it, and the observer may have recorded that
            # before the session vanished (an exit of its own, or a stop, records another code).
            if not record.ended or record.exit_code == HANGUP_EXIT:
                lost[name] = record.agent
        return lost

    def untrusted_hooks(self) -> list[str]:
        """Commands from the repo's config (hooks, agents, bakeoff.score) that will not run until the user
        trusts it."""
        from daintree_tui.core.trust import untrusted_commands

        return [f"{key}: {command}" for key, command in untrusted_commands(self.project.config).items()]

    def trust_change(self) -> list[str] | None:
        """How the repo's config changed since the user trusted it (unified-diff lines, [] when no copy of the
        trusted version was kept), or None when it was never trusted or is trusted as it is."""
        from daintree_tui.core.trust import changed_since_trust, trust_diff

        path = self.project.config.repo_config_path
        if path is None or not changed_since_trust(path):
            return None
        return trust_diff(path) or []

    def trust(self) -> None:
        from daintree_tui.core.hooks import trust

        trust(self.project)

    def inject_task(self, name: str) -> None:
        """Paste the bound task's subject and description into the session of worktree `name`."""
        self.send_context(name, task=True)

    def send_context(self, name: str, *, files: Sequence[str] = (), task: bool = False,
                     clipboard: bool = False) -> str:
        """Paste the task, files or the clipboard into the agent of worktree `name` as one bracketed paste (never
        into a shell); returns the text."""
        from daintree_tui.sessions.context import build_context

        text = build_context(self.project, name, files=list(files), task=task, clipboard=clipboard)
        self.sessions.paste_context(name, text)
        return text
