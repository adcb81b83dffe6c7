"""The dashboard's view of the services: plain calls that workers run off the event loop.

No widget code here; every method may block (git, filesystem, tmux) and is called from a thread worker.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from daintree_tui.core.bakeoff import BakeoffService
from daintree_tui.core.errors import OperationError
from daintree_tui.core.hygiene import DiskUsage
from daintree_tui.core.models import Task, WorktreeEntry
from daintree_tui.core.policy import Approvals
from daintree_tui.core.project import Project
from daintree_tui.core.queue import QueueRunner
from daintree_tui.core.reconcile import reconcile
from daintree_tui.core.review import MergeResult, ReviewService
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.worktrees import Facts, RemoveResult, WorktreeService, slugify
from daintree_tui.sessions.host import SessionHost, host_for
from daintree_tui.sessions.manager import SessionInfo, SessionManager
from daintree_tui.sessions.presets import all_presets


@dataclass(frozen=True)
class Snapshot:
    """Tasks and index entries as read from disk at one moment."""

    tasks: tuple[Task, ...]
    entries: tuple[WorktreeEntry, ...]
    taken_at: float = field(default_factory=time.time)


class Backend:
    """Services of one project, shared by the dashboard's workers."""

    def __init__(self, project: Project, host: SessionHost | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.project = project
        self.host = host if host is not None else host_for(project, create=True)
        self.tasks = TaskService(project)
        self.sessions = SessionManager(project, self.host)
        # Removing a worktree stops its session through the manager, which records it as stopped on purpose.
        self.worktrees = WorktreeService(project, self.sessions if self.host is not None else None)
        self.review = ReviewService(self.worktrees)
        self.bakeoffs = BakeoffService(self.worktrees)
        self.queue = QueueRunner(self.worktrees, self.sessions)
        self.disk = DiskUsage(self.worktrees)
        self.approvals = Approvals(project)
        self.clock = clock

    @property
    def persistent_sessions(self) -> bool:
        return self.host is None or self.host.persistent

    def startup(self) -> list[str]:
        """Reconcile after whatever happened while no dashboard ran."""
        if not self.project.is_git:
            return []
        return reconcile(self.project, fix=True, sessions=self.host)

    def snapshot(self) -> Snapshot:
        entries = tuple(self.worktrees.entries()) if self.project.is_git else ()
        return Snapshot(tuple(self.tasks.list()), entries)

    def facts(self, entries: tuple[WorktreeEntry, ...]) -> dict[str, Facts]:
        return self.worktrees.facts_for(list(entries))

    def poll_sessions(self, preview: list[str]) -> tuple[list[SessionInfo], dict[str, str]]:
        """All sessions with status, plus the screens of those previewed (captured only when they changed)."""
        infos = self.sessions.list()
        alive = {i.name for i in infos}
        previews = self.sessions.screens([n for n in preview if n in alive]) if self.host is not None else {}
        return infos, previews

    def lost_sessions(self, names: list[str]) -> dict[str, str]:
        """Of sessions seen before, those that vanished with the tmux server (not stopped on purpose):
        name -> the agent they ran."""
        from daintree_tui.sessions.tmux import TmuxHost

        if not isinstance(self.host, TmuxHost) or self.host.server_running():
            return {}
        lost = {}
        live = {e.name for e in self.worktrees.entries()}
        for name in names:
            if name not in live:
                continue  # its worktree was removed: the session was stopped on purpose
            meta = self.sessions.meta(name)
            if meta.get("status") != "exited" and meta.get("agent"):
                lost[name] = str(meta["agent"])
        return lost

    def run_approved(self, request_id: int) -> str:
        """Approve a request and run its command in a subprocess (its output must not touch the screen)."""
        import subprocess
        import sys

        record = self.approvals.resolve(request_id, approve=True)
        env = {k: v for k, v in os.environ.items() if k != "DAINTREE_WORKTREE"}
        proc = subprocess.run([sys.executable, "-m", "daintree_tui", *record["argv"], "--repo", str(self.project.root)],
                              capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise OperationError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
        return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "done"

    def agents(self) -> list[str]:
        return sorted(all_presets(self.project.config))

    def default_agent(self) -> str:
        return self.project.config.default_agent

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

    def start_session(self, name: str, agent: str | None, size: tuple[int, int], restart: bool = False) -> SessionInfo:
        if restart:
            self.sessions.stop(name)
        return self.sessions.start(name, agent, size=size)

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

    def inject_task(self, name: str) -> None:
        from daintree_tui.sessions.context import build_context

        text = build_context(self.project, name, files=[], task=True, clipboard=False)
        self.sessions.send(name, text, enter=False, paste=True)

    def untrusted_hooks(self) -> list[str]:
        """Hook commands from the repo's config that will not run until the user trusts it."""
        from daintree_tui.core.hooks import is_trusted

        cfg = self.project.config
        commands = [f"{hook}: {spec.command}" for hook, specs in cfg.hooks.items() for spec in specs
                    if spec.source == "repo"]
        if not commands or cfg.repo_config_path is None or is_trusted(cfg.repo_config_path):
            return []
        return commands

    def trust(self) -> None:
        from daintree_tui.core.hooks import trust

        trust(self.project)

    def read_events(self, offset: int) -> tuple[list[dict[str, object]], int]:
        """Event records appended since byte `offset` (complete lines only) and the new offset."""
        from daintree_tui.core.store import parse_event_lines

        path = self.project.events.path
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return [], 0
        if size < offset:
            offset = 0
        if size == offset:
            return [], offset
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read(size - offset)
        cut = data.rfind(b"\n")
        if cut < 0:
            return [], offset
        records, _ = parse_event_lines(data[:cut].split(b"\n"))
        return records, offset + cut + 1
