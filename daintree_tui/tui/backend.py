"""The dashboard's view of the services: the project's `Services` plus the few reads shaped for the screen.

No widget code here; every method may block (git, filesystem, tmux) and is called from a thread worker. All
wiring lives in `daintree_tui.services.Services`; this adapter only keeps the names the dashboard calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from daintree_tui.core.errors import OperationError
from daintree_tui.core.models import Task, WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.review import MergeResult
from daintree_tui.core.worktrees import Facts, RemoveResult, slugify
from daintree_tui.services import Services
from daintree_tui.sessions.host import SessionHost
from daintree_tui.sessions.manager import SessionInfo
from daintree_tui.sessions.presets import all_presets, default_agent_name


@dataclass(frozen=True)
class Snapshot:
    """Tasks and index entries as read from disk at one moment."""

    tasks: tuple[Task, ...]
    entries: tuple[WorktreeEntry, ...]
    taken_at: float = field(default_factory=time.time)


class Backend(Services):
    """Services of one project, shared by the dashboard's workers (sessions fall back to a PTY without tmux)."""

    def __init__(self, project: Project, host: SessionHost | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(project, host, pty_fallback=True)
        self.clock = clock
        self.host  # noqa: B018 - resolve the host now, on the UI thread, not first in some worker

    def snapshot(self) -> Snapshot:
        entries = tuple(self.worktrees.entries()) if self.project.is_git else ()
        return Snapshot(tuple(self.tasks.list()), entries)

    def facts(self, entries: tuple[WorktreeEntry, ...]) -> dict[str, Facts]:
        return self.worktrees.facts_for(list(entries))

    def poll_sessions(self, preview: list[str]) -> tuple[list[SessionInfo], dict[str, str]]:
        """All sessions with status, plus the screens of those previewed (captured only when they changed).
        The dashboard's poll is an observer: it records the transitions it finds (events, hooks)."""
        infos = list(self.observe_tick().sessions)  # the observer's tick also reads usage and enforces budgets
        usage = self.sessions.usage_summary([i.name for i in infos])
        infos = [replace(i, usage=usage.get(i.name)) for i in infos]  # tokens and cost for the dashboard
        alive = {i.name for i in infos}
        previews = self.sessions.screens([n for n in preview if n in alive]) if self.host is not None else {}
        return infos, previews

    def run_approved(self, request_id: int) -> str:
        """Approve a request and run its command; its last line of output, for a notification."""
        run = self.approve_and_run(request_id)
        if run.exit_code != 0:
            raise OperationError(run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "failed")
        return run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "done"

    def agents(self) -> list[str]:
        return sorted(all_presets(self.project.config))

    def agent_facts(self) -> dict[str, dict[str, object]]:
        """Every preset with `installed`, `status_source`, `resume`, ... (for pickers and the agents view)."""
        return {name: p.to_dict() for name, p in all_presets(self.project.config).items()}

    def default_agent(self) -> str:
        return default_agent_name(self.project.config)

    def unique_name(self, subject: str) -> str:
        return self.worktrees.free_name(slugify(subject))

    def quick_create(self, subject: str, description: str, agent: str | None, base: str | None,
                     size: tuple[int, int]) -> tuple[Task, WorktreeEntry, SessionInfo | None]:
        """Task + worktree named from the subject's slug + a session with the agent, in one go."""
        preset = self.sessions.preset(agent)
        preset.check_program()
        task = self.tasks.create(subject, description)
        entry = self.worktrees.create(self.unique_name(subject), task_id=task.id, base=base or None)
        info = self.sessions.start(entry.name, preset.name, size=size) if self.host is not None else None
        return task, entry, info

    def start_session(self, name: str, agent: str | None, size: tuple[int, int], restart: bool = False,
                      resume: bool = False) -> SessionInfo:
        """Start a session; with `restart`, replace the worktree's session (without `agent`: its own agent),
        checking the new agent before the old one is stopped. `resume` continues the agent's last conversation
        (`Preset.resume_argv()`; `Preset.can_resume` says whether the agent has one)."""
        if restart:
            return self.sessions.restart(name, agent, size=size, resume=resume)
        return self.sessions.start(name, agent, size=size, resume=resume)

    def keep(self, name: str) -> WorktreeEntry:
        return self.worktrees.keep(name)

    def remove(self, name: str, force: bool, complete_task: bool) -> RemoveResult:
        return self.worktrees.remove(name, force=force, complete_task=complete_task)

    def dirty_files(self, name: str) -> list[str]:
        return self.worktrees.dirty_files(self.worktrees.get(name))

    def diff(self, name: str) -> str:
        """The worktree's changes against its base commit, untracked files included."""
        return self.review.diff(name)

    def commit(self, name: str, message: str, all_changes: bool) -> dict[str, object]:
        return self.review.commit(name, message, all_changes)

    def merge(self, name: str, strategy: str, into: str | None, remove: bool, complete_task: bool) -> MergeResult:
        return self.review.merge(name, strategy=strategy, into=into, remove=remove, complete_task=complete_task)

    def merge_target(self, name: str) -> str:
        return self.review.target_branch(self.worktrees.get(name, live=True), None)

    def pr(self, name: str) -> dict[str, object]:
        return self.review.pr(name)

    def read_events(self, offset: int) -> tuple[list[dict[str, object]], int]:
        """Event records appended since byte `offset` (complete lines only) and the new offset; a long log is
        read from its tail, never whole."""
        return self.project.events.read_since(offset)
