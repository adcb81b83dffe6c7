"""Worktrees, the execution plane: create, list, status, run, keep, remove (docs/design.md section 3).

Every operation validates its input before any side effect, and every create either completes or rolls back
everything it did. A journal file per in-flight operation lets `doctor --fix` finish or undo what a `kill -9`
interrupted.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daintree_tui.core import deps, ownership, validate
from daintree_tui.core import git as g
from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.log import suppressed
from daintree_tui.core.models import WorktreeEntry, WorktreeStatus
from daintree_tui.core.project import Project
from daintree_tui.core.runner import RunResult, run_command
from daintree_tui.core.sandbox import bring_in, wrap_command
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.worktree_create import WorktreeCreation, base_ref_error
from daintree_tui.core.worktree_git import WorktreeGit
from daintree_tui.core.worktree_journal import Journal
from daintree_tui.core.worktree_remove import RemoveResult, SessionControl, WorktreeRemoval

__all__ = ["DEFAULT_RUN_TIMEOUT", "Facts", "RemoveResult", "SessionControl", "WorktreeService", "base_ref_error",
           "require_worktree_ours", "slugify", "validate_name"]

DEFAULT_RUN_TIMEOUT = 300.0


def require_worktree_ours(project: Project, entry: WorktreeEntry) -> None:
    """Refuse (exit 1) to work in an index entry's path that is not one of our worktrees."""
    project.worktrees_root  # noqa: B018 - a config that does not read is its own error, not the index entry's
    problem = ownership.ownership_problem(project, Path(entry.path))
    if problem:
        raise OperationError(f"worktree {entry.name}: {problem} (the index is not trusted on its own; "
                             "`daintree doctor --fix` drops such entries)")


def validate_name(name: str, *, new: bool = True) -> None:
    """Reject a worktree name that is not `[A-Za-z0-9][A-Za-z0-9._-]{0,62}` (no `..`, no trailing `.`/`.lock`),
    and, for a new worktree, one that a state file of `.worktrees/` uses (`index.json`, `tmux.conf`...)."""
    validate.check_name(name, new=new)


def slugify(text: str, limit: int = 40) -> str:
    """A worktree name from free text (a task subject): lowercase words joined by '-'."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return slug or "task"


@dataclass(frozen=True)
class Facts:
    """Live git facts about one worktree, computed on demand."""

    exists: bool
    dirty: int = 0
    ahead: int = 0
    behind: int = 0
    read_at: float = field(default=0.0, compare=False)
    """When the read of its files began (`time.monotonic()`): a file watch set up later may have missed an edit
    made after it (`tui.pending_names.ReadsBeforeWatch`)."""

    def to_dict(self) -> dict[str, Any]:
        return {"exists": self.exists, "dirty": self.dirty, "ahead": self.ahead, "behind": self.behind}


class WorktreeService:
    """The worktree lifecycle over one project."""

    def __init__(self, project: Project, sessions: SessionControl | None = None, *, index: Index | None = None,
                 tasks: TaskService | None = None) -> None:
        self.project = project
        # The services hand in the ones they share with the sessions layer; alone (reconcile, a test), its own.
        self.index = index if index is not None else Index(project)
        self.tasks = tasks if tasks is not None else TaskService(project)
        self.sessions = sessions
        self.journal = Journal(project)
        self.creation = WorktreeCreation(project, self.index, self.tasks, self.journal)
        self.removal = WorktreeRemoval(project, self.index, self.tasks, self.journal, sessions)

    @property
    def cfg(self) -> Any:
        return self.project.config

    def branch_for(self, name: str) -> str:
        return self.project.branch_for(name)

    # -- journal ---------------------------------------------------------------------------------------------

    def journal_clear(self, name: str) -> None:
        self.journal.clear(name)

    def journals(self) -> list[dict[str, Any]]:
        return self.journal.records()

    # -- reading ---------------------------------------------------------------------------------------------

    def entries(self, include_removed: bool = False) -> list[WorktreeEntry]:
        entries = self.index.load() if self.project.is_git else []
        return [e for e in entries if include_removed or e.live]

    def get(self, name: str, *, live: bool = False) -> WorktreeEntry:
        """The entry called `name`. With `live`, one to work in: its path must be one of our worktrees (git lists
        it, inside the worktree dir), since commands and git itself will run there."""
        entry = find(self.entries(include_removed=True), name)
        if entry is None or (live and not entry.live):
            raise InputError(f"no worktree named {name!r}" + (" (it was removed)" if entry else ""))
        if live and Path(entry.path).exists():
            require_worktree_ours(self.project, entry)
        return entry

    def facts(self, entry: WorktreeEntry, listed: list[Path] | None = None,
              bases: Mapping[str, str | None] | None = None) -> Facts:
        """What `worktree list` shows of one worktree; `bases`: the commits of base refs already resolved."""
        began = time.monotonic()
        path = Path(entry.path)
        if not entry.live or not (path / ".git").exists():
            return Facts(exists=path.is_dir(), read_at=began)
        if ownership.ownership_problem(self.project, path, listed):
            return Facts(exists=True, read_at=began)  # never run git in a directory the index merely names
        try:
            git = WorktreeGit(self.project, entry)
            dirty = len(git.dirty_files())  # its sandbox's start brings in what its agent's git wrote
            if not git.confined:
                bring_in(self.project, entry, quick=True)  # left by an earlier sandboxed run
        except OperationError:
            dirty = 0
        base = (bases[entry.base_ref] if bases is not None and entry.base_ref in bases
                else g.rev_parse_commit(self.project.root, entry.base_ref)) or entry.base_commit
        ahead, behind = g.ahead_behind(self.project.root, base, entry.branch)
        return Facts(True, dirty, ahead, behind, read_at=began)

    def facts_for(self, entries: Sequence[WorktreeEntry]) -> dict[str, Facts]:
        """Facts for many worktrees at once: git runs in parallel, a few forks at a time."""
        from concurrent.futures import ThreadPoolExecutor  # not for create: the CLI imports per command

        listed = ownership.linked_worktrees(self.project) if entries else []
        # Most worktrees share a base (main): its commit is read once, not once a worktree (100 forks of git at
        # 100 worktrees, a seventh of the dashboard's start-up reading).
        bases = {ref: g.rev_parse_commit(self.project.root, ref) for ref in {e.base_ref for e in entries if e.live}}
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(entries)))) as pool:
            facts = pool.map(lambda e: self.facts(e, listed, bases), entries)
            return dict(zip([e.name for e in entries], facts, strict=True))

    def dirty_files(self, entry: WorktreeEntry) -> list[str]:
        path = Path(entry.path)
        if not (path / ".git").exists():
            return []
        return WorktreeGit(self.project, entry).dirty_files()

    def free_name(self, base: str, also_taken: set[str] | frozenset[str] = frozenset()) -> str:
        """`base`, or `base-2`, `base-3`...: the first name no live worktree and no branch uses."""
        taken = {e.name for e in self.entries()} | set(also_taken)
        name, n = base, 2
        while name in taken or g.branch_exists(self.project.root, self.branch_for(name)):
            name, n = f"{base}-{n}", n + 1
        return name

    # -- create ----------------------------------------------------------------------------------------------

    def create(self, name: str, task_id: int | None = None, base: str | None = None) -> WorktreeEntry:
        """Create worktree `name` on branch `wt/<name>` from `base`, bound to task `task_id`.

        Raises:
            InputError: rejected before any side effect.
            OperationError: a step failed; everything done so far was rolled back.
        """
        return self.create_reporting(name, task_id, base)[0]

    def create_reporting(self, name: str, task_id: int | None = None,
                         base: str | None = None) -> tuple[WorktreeEntry, deps.DepsReport]:
        """`create`, and what the new worktree got from the primary (files copied, dirs linked)."""
        return self.creation.create(name, task_id, base)

    def discard_worktree(self, path: Path) -> None:
        """Remove a worktree directory this process just made (never the user's: create checked it was new)."""
        self.creation.discard_worktree(path)

    # -- keep ------------------------------------------------------------------------------------------------

    def keep(self, name: str) -> WorktreeEntry:
        """Mark an active worktree kept: its dir, branch, ports and session stay."""
        self.project.require_git()
        with self.project.lock.hold():
            entries = self.index.load(heal=True)
            entry = find(entries, name)
            if entry is None:
                raise InputError(f"no worktree named {name!r}")
            if entry.status != WorktreeStatus.ACTIVE:
                raise InputError(f"worktree {name!r} is {entry.status}; only an active worktree can be kept")
            entry.status = WorktreeStatus.KEPT
            entry.kept_at = time.time()
            self.index.save(entries)
            task = self.tasks.find(entry.task_id) if entry.task_id is not None else None
            self.project.events.append("worktree.keep", worktree=entry.brief(), task=task.brief() if task else None)
        return entry

    def mark_landed(self, name: str, tip: str, into: str, commit: str) -> None:
        """Record in its index entry that branch tip `tip` landed on `into` as `commit` (`landed`): the radar
        leaves such a worktree out while its branch stays at that tip (core/radar_merge.py), a squash being never
        the target's ancestor. Best effort: the merge is done whatever becomes of the note."""
        with suppressed(OSError, DaintreeError), self.project.lock.hold():
            entries = self.index.load(heal=True)
            entry = find(entries, name)
            if entry is not None:
                entry.extra["landed"] = {"tip": tip, "into": into, "commit": commit, "at": time.time()}
                self.index.save(entries)

    # -- remove ----------------------------------------------------------------------------------------------

    def remove(self, name: str, *, force: bool = False, complete_task: bool = False,
               delete_branch: bool = False, discard: Collection[str] | None = None) -> RemoveResult:
        """Remove a worktree (`WorktreeRemoval.remove`): refuse uncommitted work unless forced (beyond the files
        `discard` names), stop its session, free its ports, unbind (or complete) its task, delete its branch only
        when asked and merged (or forced)."""
        return self.removal.remove(name, force=force, complete_task=complete_task, delete_branch=delete_branch,
                                   discard=discard)

    def work_at_risk(self, entry: WorktreeEntry, agreed: frozenset[str] = frozenset()) -> list[str]:
        """What removing the worktree would lose (`ownership.work_at_risk`, asked in its sandbox)."""
        return self.removal.work_at_risk(entry, agreed)

    def finish_remove(self, entries: list[WorktreeEntry], entry: WorktreeEntry, complete_task: bool) -> None:
        """The locked part of remove, also used by reconcile to finish an interrupted remove."""
        self.removal.finish_remove(entries, entry, complete_task)

    def empty_trash(self, background: bool = False) -> None:
        """Delete what remove left in the trash; an interrupted delete is finished by the next call."""
        self.removal.empty_trash(background)

    # -- run -------------------------------------------------------------------------------------------------

    def run(self, name: str, argv: Sequence[str], timeout: float | None = DEFAULT_RUN_TIMEOUT) -> RunResult:
        """Run a command in the worktree with its environment; returns its exit code and capped output."""
        self.project.require_git()
        if not argv:
            raise InputError("run needs a command after --")
        if timeout is not None:
            timeout = validate.finite_seconds(timeout)
        entry = self.get(name, live=True)
        path = Path(entry.path)
        if not path.is_dir():
            raise OperationError(f"worktree {name} has no directory at {path} (run `daintree doctor --fix`)")
        self.project.tmpdir_for(name).mkdir(parents=True, exist_ok=True)
        env = worktree_env(self.project, entry)
        program = argv[0]
        # Said here, as a shell would (127 not found, 126 not executable): inside the sandbox either would be
        # bwrap's own exit 1, which a caller cannot tell from the command's.
        target = path / program
        found = shutil.which(program, path=env.get("PATH")) if "/" not in program else target.exists()
        if not found:
            return RunResult(127, "", f"command not found: {program}\n", 0.0)
        if "/" in program and (target.is_dir() or not os.access(target, os.X_OK)):
            return RunResult(126, "", f"permission denied: {program}\n", 0.0)
        result = run_command(wrap_command(self.project, entry, argv, env), path, env, timeout)
        with suppressed(OperationError, OSError):
            bring_in(self.project, entry, quick=True)  # what it committed is on its branch when `run` returns
        return result
