"""The dashboard's view of the services: the project's `Services`, held, plus the few reads shaped for the screen.

No widget code here; every method may block (git, filesystem, tmux) and is called from a thread worker. All
wiring lives in `daintree_tui.services.Services` and every change goes through its operations (`services.ops`);
this adapter keeps the names the dashboard calls and what only a UI needs (the live client, a fresh screen).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from daintree_tui.core.errors import OperationError
from daintree_tui.core.models import Task, WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.review import MergeResult
from daintree_tui.core.worktrees import Facts, RemoveResult
from daintree_tui.services import Services
from daintree_tui.sessions.status import SessionStatus

if TYPE_CHECKING:
    from daintree_tui.services.bakeoff import Bakeoff
    from daintree_tui.services.operations import Created, Operations
    from daintree_tui.sessions.host import SessionHost
    from daintree_tui.sessions.live import LiveSessions, StatusChange
    from daintree_tui.sessions.manager import SessionInfo

DIFF_VIEW_BYTES = 256 << 10  # of a worktree's diff in the diff view (`d`, `D`); `worktree diff` prints 8 MiB


@dataclass(frozen=True)
class Snapshot:
    """Tasks and index entries as read from disk at one moment."""

    tasks: tuple[Task, ...]
    entries: tuple[WorktreeEntry, ...]
    taken_at: float = field(default_factory=time.time)


class Backend:
    """The services of one project, shared by the dashboard's workers (sessions fall back to a PTY without tmux:
    the services it is given are built with `pty_fallback`)."""

    def __init__(self, services: Services, clock: Callable[[], float] = time.time) -> None:
        self.services = services
        self.clock = clock
        self.services.host  # noqa: B018 - resolve the host now, on the UI thread, not first in some worker
        self.live: LiveSessions | None = None
        self._live_presence: int | None = None  # the live-observer lock's descriptor while `live` records

    @property
    def ops(self) -> Operations:
        return self.services.ops

    @property
    def project(self) -> Project:
        return self.services.project

    @property
    def host(self) -> SessionHost | None:
        return self.services.host

    @property
    def persistent_sessions(self) -> bool:
        return self.services.persistent_sessions

    def snapshot(self) -> Snapshot:
        entries = tuple(self.services.worktrees.entries()) if self.project.is_git else ()
        return Snapshot(tuple(self.services.tasks.list()), entries)

    def facts(self, entries: tuple[WorktreeEntry, ...]) -> dict[str, Facts]:
        return self.services.worktrees.facts_for(list(entries))

    def start_live(self, on_change: Callable[[StatusChange], None] | None = None) -> bool:
        """Follow the tmux server's sessions by events (one control-mode client) instead of polling them.
        False when the host is not tmux (the in-process PTY host is polled: it costs no fork)."""
        if self.live is not None:
            return True
        if self.host is None or self.host.server_argv() is None:
            return False
        from daintree_tui.services.watcher import hold_live_observer
        from daintree_tui.sessions.live import LiveSessions  # after the first frame: not a start-up import

        observer = self.services.observer
        self.live = LiveSessions(self.services.sessions,
                                 record=lambda c: observer.record(c.worktree, c.new, c.exit_code),
                                 on_change=on_change).start()
        # The repository's watcher stands back while this records (services/watcher.py).
        self._live_presence = hold_live_observer(self.services.project)
        return True

    def stop_live(self) -> None:
        live, self.live = self.live, None
        presence, self._live_presence = self._live_presence, None
        if presence is not None:
            os.close(presence)  # first: the watcher takes its full passes again at once
        if live is not None:
            live.close()

    def poll_sessions(self, preview: list[str]) -> tuple[list[SessionInfo], dict[str, str]]:
        """All sessions with status, plus the screens of those previewed (captured only when they changed).
        With live events this makes no tmux call for the list and forks nothing: status comes from the control
        client's stream (its transitions are recorded by the observer as they happen, see start_live), previews
        come over its connection, only for `preview` (the rows on screen); the sandboxed sessions' inboxes and the
        budgets are still handled on every pass. Otherwise the poll is the acting observer (observe_tick)."""
        live = self.live
        if live is not None:
            deadline = time.monotonic() + 2.0
            while not live.events.known and time.monotonic() < deadline:
                time.sleep(0.02)
        services = self.services
        if live is not None and live.events.known:
            from daintree_tui.services.inbox import process_inboxes

            process_inboxes(services)
            infos = live.infos()
            if services.observer.budget is not None:
                services.observer.budget.tick(infos)  # what observer.poll does after recording
        else:
            infos = list(services.observe_tick().sessions)  # the observer's tick also reads usage, enforces budgets
        usage = services.sessions.usage_summary([i.name for i in infos])
        infos = [replace(i, usage=usage.get(i.name)) for i in infos]  # tokens and cost for the dashboard
        alive = {i.name for i in infos}
        if live is not None and live.events.known:
            return infos, live.screens([n for n in preview if n in alive])
        previews = services.sessions.screens([n for n in preview if n in alive]) if self.host is not None else {}
        return infos, previews

    def first_look(self, preview: list[str]) -> tuple[list[SessionInfo], dict[str, str]]:
        """What `poll_sessions` returns, by one pure look before the live client is up (a listing and one capture
        for all sessions); it records nothing: the live client, started next, records what changes."""
        sessions = self.services.sessions
        infos = sessions.observe(with_screens=True)
        usage = sessions.usage_summary([i.name for i in infos])
        infos = [replace(i, usage=usage.get(i.name)) for i in infos]
        alive = {i.name for i in infos}
        return infos, sessions.screens([n for n in preview if n in alive]) if self.host is not None else {}

    def usage_today(self) -> dict[str, object]:
        """Tokens and estimated cost of every session run since local midnight (as last read)."""
        from daintree_tui.services.usage import local_midnight
        from daintree_tui.sessions.usage import Totals

        total = Totals()
        for run in self.services.sessions.usage.all_runs(since=local_midnight()):
            total = total.merge(run.totals)
        return total.to_dict()

    def run_approved(self, request_id: int) -> str:
        """Approve a request and run its command; its last line of output, for a notification."""
        run = self.services.approve_and_run(request_id)
        if run.exit_code != 0:
            raise OperationError(run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "failed")
        return run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "done"

    # The session layer's modules (presets, usage, the manager) are imported where used: the first poll, in its
    # thread, loads them after the first frame.

    def agents(self) -> list[str]:
        from daintree_tui.sessions.presets import all_presets

        return sorted(all_presets(self.project.config))

    def agent_facts(self) -> dict[str, dict[str, object]]:
        """Every preset with `installed`, `status_source`, `resume`, ... (for pickers and the agents view)."""
        from daintree_tui.sessions.presets import all_presets

        return {name: p.to_dict() for name, p in all_presets(self.project.config).items()}

    def default_agent(self) -> str:
        from daintree_tui.sessions.presets import default_agent_name

        return default_agent_name(self.project.config)

    def create_task(self, subject: str, description: str) -> Task:
        return self.services.tasks.create(subject, description)

    def quick_create(self, subject: str, description: str, agent: str | None, base: str | None,
                     size: tuple[int, int]) -> Created:
        """Task + worktree named from the subject's slug + a session with the agent, in one go."""
        created = self.ops.quick_create(subject, description, agent=agent, base=base, size=size)
        self._poke()
        return created

    def start_for_task(self, task_id: int, size: tuple[int, int]) -> Created:
        """A worktree for the task with a session of the default agent, the task its first prompt."""
        created = self.ops.start_for_task(task_id, size=size)
        self._poke()
        return created

    def check_agent(self, agent: str | None) -> None:
        """Raise when `agent` could not start: unknown, not installed, or untrusted (before a restart lets the
        terminal go)."""
        self.ops.startable(agent)

    def start_session(self, name: str, agent: str | None, size: tuple[int, int], restart: bool = False,
                      resume: bool = False) -> SessionInfo:
        """Start a session; with `restart`, replace the worktree's session (without `agent`: its own agent),
        checking the new agent before the old one is stopped. `resume` continues the agent's last conversation
        (`Preset.resume_argv()`; `Preset.can_resume` says whether the agent has one)."""
        info = self.ops.start_session(name, agent, size=size, restart=restart, resume=resume)
        self._poke()
        return info

    def _poke(self) -> None:
        if self.live is not None:
            self.live.events.poke()  # the first session of a server has no control client to tell yet

    def stop_session(self, name: str, started_at: float | None = None) -> SessionInfo | None:
        """Stop the agent of worktree `name` the user was asked about (the one started at `started_at`): None when
        stopped; else the session as it is now, left alone: it ended on its own while the question was open (its
        exit code and last screen are the user's to read) or it is another one."""
        if started_at is not None:
            sessions = self.services.sessions
            now = next((s for s in sessions.observe(with_screens=False) if s.name == name), None)
            if now is None or now.status == SessionStatus.EXITED or abs(now.started_at - started_at) > 1e-3:
                return now
        self.ops.stop_session(name)
        return None

    def keep(self, name: str) -> WorktreeEntry:
        return self.ops.keep(name)

    def remove(self, name: str, force: bool, complete_task: bool, discard: list[str] | None = None) -> RemoveResult:
        return self.ops.remove(name, force=force, complete_task=complete_task, discard=discard)

    def dirty_files(self, name: str) -> list[str]:
        worktrees = self.services.worktrees
        return worktrees.dirty_files(worktrees.get(name))

    def screen_and_history(self, name: str, history: int = 500) -> str:
        """The session's screen and the scrollback above it, as plain text (what `u` looks for links in)."""
        return self.services.sessions.capture(name, history=history)

    def diff(self, name: str) -> str:
        """The worktree's changes against its base commit, untracked files included, cut at DIFF_VIEW_BYTES (the
        diff view highlights what it gets on the event loop, about 2.5 s a MiB)."""
        return self.services.review.diff(name, limit=DIFF_VIEW_BYTES)

    def commit(self, name: str, message: str, all_changes: bool) -> dict[str, object]:
        return self.ops.landing.commit(name, message, all_changes=all_changes)

    def merge(self, name: str, strategy: str, into: str | None, remove: bool, complete_task: bool) -> MergeResult:
        return self.ops.landing.merge(name, strategy=strategy, into=into, remove=remove, complete_task=complete_task)

    def merge_target(self, name: str) -> str:
        return self.services.review.target_branch(self.services.worktrees.get(name, live=True), None)

    def pr(self, name: str) -> dict[str, object]:
        return self.ops.landing.pr(name)

    def bakeoff(self, task_id: int, agents: list[str], score: str | None) -> Bakeoff:
        return self.ops.bakeoff.create(task_id, agents, score=score)

    def pick(self, bakeoff_id: str, name: str) -> dict[str, Any]:
        return self.ops.bakeoff.pick(bakeoff_id, name)

    def read_events(self, offset: int) -> tuple[list[dict[str, object]], int]:
        """Event records appended since byte `offset` (complete lines only) and the new offset; a long log is
        read from its tail, never whole."""
        return self.project.events.read_since(offset)
