"""Removing a worktree (docs/design.md section 3): never the primary, never what is not ours, never work without
`--force`. Its `pre_remove` hooks, its session's stop, the move of its folder to the trash, its ports, its task and
(when asked, and merged) its branch; the locked part is journaled, so `doctor --fix` finishes one interrupted."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from daintree_tui.core import admin_dirs, ownership
from daintree_tui.core import git as g
from daintree_tui.core.checkpoints import drop as drop_checkpoints
from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.log import suppressed, warn
from daintree_tui.core.models import WorktreeEntry, WorktreeStatus
from daintree_tui.core.project import Project
from daintree_tui.core.review_record import ReviewStore
from daintree_tui.core.sandbox import agent_git_of, bring_in
from daintree_tui.core.store import remove_tree
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.validate import check_name
from daintree_tui.core.worktree_git import WorktreeGit
from daintree_tui.core.worktree_journal import Journal


class SessionControl(Protocol):
    """What the worktree service needs of a session host: stopping a worktree's session before removal."""

    def stop(self, name: str) -> bool: ...

@dataclass
class RemoveResult:
    name: str
    message: str
    removed: bool
    branch_deleted: bool = False
    warnings: list[str] = field(default_factory=list)
    entry: WorktreeEntry | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "removed": self.removed, "message": self.message,
                               "branch_deleted": self.branch_deleted, "warnings": self.warnings}
        if self.entry is not None:
            out["worktree"] = self.entry.to_dict()
        return out


class WorktreeRemoval:
    """`worktree remove` over one project (WorktreeService.remove)."""

    def __init__(self, project: Project, index: Index, tasks: TaskService, journal: Journal,
                 sessions: SessionControl | None = None) -> None:
        self.project = project
        self.index = index
        self.tasks = tasks
        self.journal = journal
        self.sessions = sessions

    def remove(self, name: str, *, force: bool = False, complete_task: bool = False,
               delete_branch: bool = False, discard: Collection[str] | None = None) -> RemoveResult:
        """Remove a worktree: refuse uncommitted work unless forced, stop its session, free its ports,
        unbind (or complete) its task, and delete its branch only when asked and merged (or forced).

        `discard`, with `force`: the uncommitted files the user was shown and agreed to lose; any other work
        found (a file the agent wrote since, detached commits, a checked-out submodule) refuses the remove,
        checked again once the session is stopped."""
        # Here, not at the top: every command imports this module, and a create loads hooks only while git checks
        # out (worktree_create), off its critical path.
        from daintree_tui.core.hooks import run_hooks

        project = self.project
        project.require_git()
        check_name(name, new=False)
        entry = find(self.index.load(), name)
        if entry is None:
            raise InputError(f"no worktree named {name!r}")
        if not entry.live:
            return RemoveResult(name, f"worktree {name} is already removed", removed=False, entry=entry)
        path = Path(entry.path)
        self._check_removable(entry, force, discard)
        # remove.before opens the log of the remove, as create.before does for a create: the pre_remove hooks and
        # the session's stop are steps of the remove (docs/design.md 3), and a failure of any step is remove.failed.
        task = self.tasks.brief_of(entry.task_id)
        project.events.append("worktree.remove.before", worktree=entry.brief(), task=task)
        try:
            if path.is_dir():
                run_hooks(project, "pre_remove", entry)
            closed = False  # its session, live or exited: said in the result, since the agent ends with it
            if self.sessions is not None:
                with suppressed(Exception):
                    closed = self.sessions.stop(name)
            with project.lock.hold():
                entries = self.index.load(heal=True)
                entry = find(entries, name) or entry
                if not entry.live:
                    return RemoveResult(name, f"worktree {name} is already removed", removed=False, entry=entry)
                self._check_removable(entry, force, discard)  # again under the lock: the agent may have written since
                self.journal.write(name, op="remove", path=str(path), force=force, complete_task=complete_task)
                self.finish_remove(entries, entry, complete_task)
        except BaseException as exc:
            reason = str(exc) if isinstance(exc, DaintreeError) else f"{type(exc).__name__}: {exc}"
            project.events.append("worktree.remove.failed", worktree=entry.brief(), error=reason,
                                  task=self.tasks.brief_of(entry.task_id))
            if isinstance(exc, OSError):
                raise OperationError(f"remove {name} failed: {exc}") from None
            raise
        result = RemoveResult(name, f"removed worktree {name}" + (" and closed its session" if closed else ""),
                              removed=True, entry=entry)
        if delete_branch:
            self._delete_branch(entry, force, result)
        run_hooks(project, "post_remove", entry, cwd=project.root)
        return result

    def _check_removable(self, entry: WorktreeEntry, force: bool, discard: Collection[str] | None = None) -> None:
        """Refuse to remove what is not ours (always), or what would lose work (unless forced, or beyond the
        files `discard` names), saying why."""
        path = Path(entry.path)
        if not (path.exists() or path.is_symlink()):
            return
        ownership.require_ours(self.project, path, f"remove worktree {entry.name}")
        if not force:
            reasons = self.work_at_risk(entry)
            if reasons:
                raise OperationError(f"worktree {entry.name} has {'; '.join(reasons)} (use --force to discard)")
        elif discard is not None:
            reasons = self.work_at_risk(entry, agreed=frozenset(discard))
            if reasons:
                raise OperationError(f"worktree {entry.name} not removed: it has {'; '.join(reasons)}, which the "
                                     "removal you confirmed did not list")

    def work_at_risk(self, entry: WorktreeEntry, agreed: frozenset[str] = frozenset()) -> list[str]:
        """What removing the worktree would lose (`ownership.work_at_risk`), asked of git inside its sandbox, after
        what its agent's git wrote is brought in (its commits are then on its branch, which stays)."""
        try:
            git = WorktreeGit(self.project, entry)
            git.bring_in()
        except OperationError as exc:
            return [f"{entry.path} cannot be inspected: {exc}"]
        return ownership.work_at_risk(self.project, Path(entry.path), agreed, run=git.run)

    def finish_remove(self, entries: list[WorktreeEntry], entry: WorktreeEntry, complete_task: bool) -> None:
        """The locked part of remove, also used by reconcile to finish an interrupted remove."""
        project = self.project
        path = Path(entry.path)
        with suppressed(OperationError):
            bring_in(project, entry)  # its agent's last commits join the branch, which outlives the worktree
        # Its record goes with it: a `locked` its agent left there would keep it, and the next create of this
        # name would be refused ("a missing but locked worktree").
        admin = admin_dirs.admin_dir_of(project.common_dir, path) if project.common_dir else None
        if path.exists() or path.is_symlink():
            ownership.require_ours(project, path, f"delete {path}")
            self._move_to_trash(path)
        if admin is not None and not os.path.lexists(path):
            admin_dirs.release(admin)
        lost: OperationError | None = None
        try:
            admin_dirs.prune(project, entries)
        except OperationError as exc:  # another worktree's record: said once this remove is recorded
            lost = exc
        tmpdir = project.tmpdir_for(entry.name)
        if tmpdir.exists():
            self._move_to_trash(tmpdir)
        remove_tree(project.sandbox_home_for(entry.name))  # caches: nothing to keep
        ReviewStore(project).discard(entry.name)  # its comments and verdicts were of this worktree's heads
        remove_tree(agent_git_of(project, entry.name).root)  # brought in above
        with suppressed(OperationError):  # its checkpoints go with it (under the lock a checkpoint is made in)
            drop_checkpoints(project, entry.name)
        released = entry.ports
        entry.status = WorktreeStatus.REMOVED
        entry.removed_at = time.time()
        entry.ports = []
        self.index.save(entries)
        if released:
            project.events.append("port.released", worktree=entry.brief(), ports=released,
                                  task=self.tasks.brief_of(entry.task_id))
        task = None
        if entry.task_id is not None:
            task = self.tasks.unbind(entry.task_id, complete=complete_task)
        self.journal.clear(entry.name)
        project.events.append("worktree.remove.after", worktree=entry.brief(), task=task.brief() if task else None)
        self.empty_trash(background=True)
        if lost is not None:
            raise lost

    def _move_to_trash(self, path: Path) -> None:
        """Rename a tree into `.worktrees/.trash/` (instant); the slow delete happens in the background."""
        trash = self.project.trash_dir
        trash.mkdir(parents=True, exist_ok=True)
        target = trash / f"{path.name}-{os.urandom(4).hex()}"
        try:
            os.rename(path, target)
        except OSError:
            # Another filesystem (worktree_dir elsewhere): delete in place.
            remove_tree(path)

    def empty_trash(self, background: bool = False) -> None:
        """Delete what remove left in the trash; an interrupted delete is finished by the next call."""
        trash = self.project.trash_dir
        if not trash.is_dir() or not any(trash.iterdir()):
            return
        if background:
            try:
                subprocess.Popen(["rm", "-rf", "--", *[str(p) for p in trash.iterdir()]], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                return
            except OSError:
                pass  # no `rm` on PATH: delete here rather than call a finished remove failed
        for child in trash.iterdir():
            remove_tree(child)

    def _delete_branch(self, entry: WorktreeEntry, force: bool, result: RemoveResult) -> None:
        root = self.project.root
        if entry.branch != self.project.branch_for(entry.name):
            # The index is data: delete only the branch this tool made for this name, never one it merely names.
            msg = (f"branch {entry.branch} kept: it is not {self.project.branch_for(entry.name)}, the branch of "
                   f"{entry.name}")
            result.warnings.append(msg)
            warn(msg)
            return
        if not g.branch_exists(root, entry.branch):
            return
        targets = [t for t in (g.rev_parse_commit(root, entry.base_ref), g.rev_parse_commit(root, "HEAD")) if t]
        merged = any(g.is_ancestor(root, entry.branch, t) for t in targets)
        if merged or force:
            g.git(root, "branch", "-D", entry.branch)
            result.branch_deleted = True
        else:
            msg = f"branch {entry.branch} kept: it is not merged into {entry.base_ref} (use --force to delete it)"
            result.warnings.append(msg)
            warn(msg)
