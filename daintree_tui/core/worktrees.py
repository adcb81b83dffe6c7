"""Worktrees, the execution plane: create, list, status, run, keep, remove (DESIGN.md section 3).

Every operation validates its input before any side effect, and every create either completes or rolls back
everything it did. A journal file per in-flight operation lets `doctor --fix` finish or undo what a `kill -9`
interrupted.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from daintree_tui.core import admin_dirs, deps, trust, validate
from daintree_tui.core import git as g
from daintree_tui.core.config import DEFAULT_BRANCH_PREFIX
from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.log import warn
from daintree_tui.core.models import Task, WorktreeEntry, WorktreeStatus
from daintree_tui.core.project import Project
from daintree_tui.core.sandbox import agent_git_of, bring_in
from daintree_tui.core.store import read_json, remove_tree, write_json
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.worktree_git import WorktreeGit

if TYPE_CHECKING:
    from daintree_tui.core.runner import RunResult

DEFAULT_RUN_TIMEOUT = 300.0


def require_worktree_ours(project: Project, entry: WorktreeEntry) -> None:
    """Refuse (exit 1) to work in an index entry's path that is not one of our worktrees."""
    problem = trust.ownership_problem(project, Path(entry.path))
    if problem:
        raise OperationError(f"worktree {entry.name}: {problem} (the index is not trusted on its own; "
                             "`daintree doctor --fix` drops such entries)")


def base_ref_error(root: Path, base_ref: str) -> InputError:
    """Why `base_ref` gives no commit. In a repository made with `git init` a moment ago even HEAD names none, and
    "invalid base ref 'HEAD'" told a newcomer nothing of what to do."""
    if g.rev_parse_commit(root, "HEAD") is None:
        return InputError("the repository has no commit yet, and a worktree starts from one: commit first "
                          "(git commit --allow-empty -m 'first commit' will do)")
    return InputError(f"invalid base ref {base_ref!r}: it names no commit")


def _import_the_steps_after_the_add() -> None:
    """Import what a create needs after `git worktree add` while git checks the files out: the add is the create's
    critical path, and these imports (hooks and what they run, ports and `socket`) would otherwise follow it.
    Git is started first: a thread importing beside it delayed its start (see `git.git_while`)."""
    from daintree_tui.core import hooks, ports  # noqa: F401


class SessionControl(Protocol):
    """What the worktree service needs of a session host: stopping a worktree's session before removal."""

    def stop(self, name: str) -> bool: ...


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

    def to_dict(self) -> dict[str, Any]:
        return {"exists": self.exists, "dirty": self.dirty, "ahead": self.ahead, "behind": self.behind}


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


class _Undo:
    """A stack of compensating actions, run newest first; each failure is reported, none stops the rest."""

    def __init__(self) -> None:
        self._steps: list[tuple[str, Callable[[], object]]] = []

    def push(self, what: str, step: Callable[[], object]) -> None:
        self._steps.append((what, step))

    def run(self) -> None:
        for what, step in reversed(self._steps):
            try:
                step()
            except Exception as exc:  # keep undoing: one failed step must not strand the others
                warn(f"rollback: could not {what}: {exc}")
        self._steps.clear()


class WorktreeService:
    """The worktree lifecycle over one project."""

    def __init__(self, project: Project, sessions: SessionControl | None = None, *, index: Index | None = None,
                 tasks: TaskService | None = None) -> None:
        self.project = project
        # The services hand in the ones they share with the sessions layer; alone (reconcile, a test), its own.
        self.index = index if index is not None else Index(project)
        self.tasks = tasks if tasks is not None else TaskService(project)
        self.sessions = sessions

    @property
    def cfg(self) -> Any:
        return self.project.config

    def branch_for(self, name: str) -> str:
        return f"{self.cfg.branch_prefix}{name}"

    def _branch_name_ok(self, branch: str) -> bool:
        """Whether git takes `branch` (of a name `validate_name` passed) as a branch name. Under the default
        prefix it always does: a valid name breaks none of check-ref-format's rules for a component (no leading
        '.', no '..', no '.lock' or '.' at the end, none of `~^:?*[\\ @{` or controls)."""
        if self.cfg.branch_prefix == DEFAULT_BRANCH_PREFIX:
            return True
        return g.branch_name_ok(self.project.root, branch)

    # -- journal ---------------------------------------------------------------------------------------------

    def _journal(self, name: str) -> Path:
        return self.project.journal_dir / f"{name}.json"

    def _journal_write(self, name: str, **data: Any) -> None:
        write_json(self._journal(name), {"name": name, "started": time.time(), **data})

    def journal_clear(self, name: str) -> None:
        for path in (self._journal(name), self._journal(name).with_name(f"{name}.json.bak")):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def journals(self) -> list[dict[str, Any]]:
        out = []
        if self.project.journal_dir.is_dir():
            for path in sorted(self.project.journal_dir.glob("*.json")):
                if trust.from_history(self.project, path):
                    # It came through git (a pull, a merged branch): "finish the remove of b1" is not ours to obey.
                    warn(f"skipping journal {path}: git tracks it or checked it out, so it came with the "
                         "repository's history, not from daintree (delete it and `git rm --cached` it)")
                    continue
                data, _ = read_json(path, "journal")
                # A journal is data (it may have come with a clone): only its name and op are used, both checked.
                if (isinstance(data, dict) and validate.name_problem(data.get("name"), new=False) is None
                        and data.get("op") in ("create", "remove") and path.name == f"{data['name']}.json"):
                    out.append(data)
                else:
                    warn(f"skipping journal {path}: not a journal record")
        return out

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

    def facts(self, entry: WorktreeEntry, listed: list[Path] | None = None) -> Facts:
        path = Path(entry.path)
        if not entry.live or not (path / ".git").exists():
            return Facts(exists=path.is_dir())
        if trust.ownership_problem(self.project, path, listed):
            return Facts(exists=True)  # never run git in a directory the index merely names
        try:
            git = WorktreeGit(self.project, entry)
            dirty = len(git.dirty_files())  # its sandbox's start brings in what its agent's git wrote
            if not git.confined:
                bring_in(self.project, entry, quick=True)  # left by an earlier sandboxed run
        except OperationError:
            dirty = 0
        base = g.rev_parse_commit(self.project.root, entry.base_ref) or entry.base_commit
        ahead, behind = g.ahead_behind(self.project.root, base, entry.branch)
        return Facts(True, dirty, ahead, behind)

    def facts_for(self, entries: Sequence[WorktreeEntry]) -> dict[str, Facts]:
        """Facts for many worktrees at once: git runs in parallel, a few forks at a time."""
        from concurrent.futures import ThreadPoolExecutor  # not for create: the CLI imports per command

        listed = trust.linked_worktrees(self.project) if entries else []
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(entries)))) as pool:
            facts = pool.map(lambda e: self.facts(e, listed), entries)
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

    def _validate_create(self, entries: list[WorktreeEntry], name: str, task_id: int | None,
                         base_ref: str) -> tuple[Task | None, str, bool]:
        existing = find(entries, name)
        if existing is not None and existing.live:
            raise InputError(f"worktree {name!r} already exists ({existing.status})")
        task = None
        if task_id is not None:
            task = self.tasks.get(task_id)
            bound = find(entries, task.worktree) if task.worktree else None
            if bound is not None and bound.live:
                raise InputError(f"task {task_id} is already bound to worktree {bound.name!r}")
        candidates = g.ref_candidates(self.project.root, base_ref)
        if len(candidates) > 1:
            raise InputError(f"ambiguous base ref {base_ref!r}: it names {' and '.join(candidates)}; "
                             "give the full name")
        branch = self.branch_for(name)
        root = self.project.root
        target = candidates[0] if candidates else base_ref
        base_commit: str | None = self.project.fresh_head() if target == "HEAD" else None
        if base_commit:  # discovery asked git a moment ago
            branch_taken = g.branch_exists(root, branch)
        else:
            base_commit, branch_taken = g.both(lambda: g.rev_parse_commit(root, target),
                                               lambda: g.branch_exists(root, branch))
        if base_commit is None:
            raise base_ref_error(root, base_ref)
        reset_branch = False
        if branch_taken:
            # The branch of a removed worktree of the same name may be reused when resetting it loses nothing.
            reusable = (existing is not None and existing.branch == branch
                        and g.is_ancestor(self.project.root, branch, base_commit))
            if not reusable:
                raise InputError(f"branch {branch} already exists (delete it or choose another name)")
            reset_branch = True
        path = self.project.worktree_path(name)
        if path.is_symlink() or (path.exists() and (not path.is_dir() or any(path.iterdir()))):
            raise InputError(f"target directory {path} exists and is not empty")
        return task, base_commit, reset_branch

    def create(self, name: str, task_id: int | None = None, base: str | None = None) -> WorktreeEntry:
        """Create worktree `name` on branch `wt/<name>` from `base`, bound to task `task_id`.

        Raises:
            InputError: rejected before any side effect.
            OperationError: a step failed; everything done so far was rolled back.
        """
        return self.create_reporting(name, task_id, base)[0]

    def create_reporting(self, name: str, task_id: int | None = None,
                         base: str | None = None) -> tuple[WorktreeEntry, deps.DepsReport]:
        """`create`, and what the new worktree got from the primary (files copied, dirs linked).

        Raises:
            InputError: rejected before any side effect.
            OperationError: a step failed; everything done so far was rolled back.
        """
        project = self.project
        project.require_git()
        validate_name(name)
        problem = trust.state_dir_problem(project)
        if problem:
            raise OperationError(problem)
        branch = self.branch_for(name)
        # The hooks path the add will pin is asked for beside the name check (two forks at once, not in turn), when
        # either needs git at all: discovery asked for the path, and `wt/` + a valid name is a valid branch.
        name_ok, hooks = g.both(lambda: self._branch_name_ok(branch), project.pinned_hooks)
        if not name_ok:
            raise InputError(f"invalid worktree name {name!r}: {branch} is not a valid branch name")
        base_ref = base or self.cfg.base
        checkout = g.ParallelCheckout(project.root)  # git answers while the checks below run
        with project.lock.hold():
            entries = self.index.load(heal=True)
            task, base_commit, reset_branch = self._validate_create(entries, name, task_id, base_ref)
            entry, provided = self._create_locked(entries, name, task, base_ref, base_commit, reset_branch,
                                                  [*hooks, *checkout.options()])
            if task is not None:  # the events after this point show the task as the create left it: bound
                task = self.tasks.find(task.id) or task
        from daintree_tui.core.hooks import run_hooks

        try:
            run_hooks(project, "post_create", entry)
        except DaintreeError as exc:
            with project.lock.hold():
                self._rollback_created(entry, reset_branch)
            task = self.tasks.find(task.id) if task is not None else None  # unbound again by the rollback
            project.events.append("worktree.create.failed", worktree=entry.brief(), error=str(exc),
                                  task=task.brief() if task else None)
            raise OperationError(f"create {name} rolled back: {exc}") from None
        project.events.append("worktree.create.after", worktree=entry.brief(), task=task.brief() if task else None)
        return entry, provided

    def _create_locked(self, entries: list[WorktreeEntry], name: str, task: Task | None, base_ref: str,
                       base_commit: str, reset_branch: bool,
                       options: list[str]) -> tuple[WorktreeEntry, deps.DepsReport]:
        project, root = self.project, self.project.root
        branch = self.branch_for(name)
        path = project.worktree_path(name)
        old_tip = g.rev_parse_commit(root, branch) if reset_branch else None
        project.ensure_excluded()
        self._journal_write(name, op="create", path=str(path), branch=branch, base_commit=base_commit,
                            reset_branch=reset_branch)
        brief = {"name": name, "path": str(path), "branch": branch}
        project.events.append("worktree.create.before", worktree=brief, task=task.brief() if task else None)
        undo = _Undo()
        try:
            # Pushed before the add (and so run after the directory's removal: git keeps a checked-out branch):
            # `git worktree add -b` creates the branch first and leaves it behind when the checkout fails.
            if old_tip:
                undo.push("restore the branch", lambda: g.git(root, "branch", "-f", branch, old_tip))
            else:
                undo.push("delete the branch", lambda: self._delete_new_branch(branch))
            path.parent.mkdir(parents=True, exist_ok=True)
            admin_dirs.guard(project, entries)  # the add reads every record: none may claim this path, or hang it
            skip = [project.worktrees_root, project.state_dir, project.tasks_dir]

            def while_git_checks_out() -> deps.IgnoredScan:
                scan = deps.IgnoredScan(root, skip)  # reads the primary; the add writes only in `path`
                _import_the_steps_after_the_add()
                return scan

            # Pushed before the add too: when the scan beside it fails (no thread could start: a fork storm's
            # process limit), git has added the worktree all the same, and it stayed behind the rollback. The
            # target was checked new (or empty), so whatever is there after a failed add is the add's.
            undo.push("remove the worktree directory", lambda: self.discard_worktree(path))
            scan = g.git_while(root, *options, "worktree", "add", "--quiet", "-B" if reset_branch else "-b", branch,
                               str(path), base_commit, meanwhile=while_git_checks_out)
            assert project.common_dir is not None
            provided = deps.provide(root, path, self.cfg, project.common_dir, skip, scan)
            copied, linked = provided.copied, provided.linked
            # Each step's event as it happens, in the order DESIGN 3 gives the steps (a rollback logs its own
            # create.failed after them).
            if copied or linked:
                project.events.append("deps.linked", worktree=brief, copied=copied, linked=linked,
                                      task=task.brief() if task else None)
            tmpdir = project.tmpdir_for(name)
            if tmpdir.is_symlink():
                tmpdir.unlink()  # TMPDIR must be a folder of ours, not wherever a committed link points
            tmpdir.mkdir(parents=True, exist_ok=True)
            undo.push("remove the temp dir", lambda: remove_tree(tmpdir))
            leased = [p for e in entries if e.live for p in e.ports]
            from daintree_tui.core.ports import lease_block

            ports = lease_block(leased, self.cfg.ports_range, self.cfg.ports_per_worktree)
            entry = WorktreeEntry(name=name, path=str(path), branch=branch, base_ref=base_ref,
                                  base_commit=base_commit, task_id=task.id if task else None, ports=ports,
                                  created_at=time.time())
            project.events.append("port.assigned", worktree=entry.brief(), ports=ports,
                                  task=task.brief() if task else None)
            previous = list(entries)
            self.index.save([e for e in entries if e.name != name] + [entry])
            undo.push("restore the index", lambda: self.index.save(previous))
            if task is not None:
                before = task.to_dict()
                self.tasks.bind(task.id, name)
                undo.push("restore the task", lambda: write_json(self.tasks.path(task.id), before))
        except BaseException as exc:
            undo.run()
            self.journal_clear(name)
            reason = str(exc) if isinstance(exc, DaintreeError) else f"{type(exc).__name__}: {exc}"
            project.events.append("worktree.create.failed", worktree=brief, task=task.brief() if task else None,
                                  error=reason)
            if isinstance(exc, DaintreeError):
                raise
            if isinstance(exc, OSError):
                raise OperationError(f"create {name} failed and was rolled back: {exc}") from None
            raise
        self.journal_clear(name)
        return entry, provided

    def _delete_new_branch(self, branch: str) -> None:
        """Delete the branch this create just made. git deletes even a loose ref by rewriting packed-refs, which
        a full disk refuses: the branch stayed, and the next create of the name said it exists. Then its loose
        file goes, as git's own delete would have left it (only a regular file that packed-refs does not name)."""
        root = self.project.root
        if not g.branch_exists(root, branch):
            return
        try:
            g.git(root, "branch", "-D", branch)
        except OperationError:
            common = self.project.common_dir
            ref = f"refs/heads/{branch}"
            if common is None or (common / ref).is_symlink() or not (common / ref).is_file() \
                    or _packed_ref(common, ref):
                raise
            loose = common / ref
            loose.unlink()
            with contextlib.suppress(OSError):
                (common / "logs" / ref).unlink()

    def discard_worktree(self, path: Path) -> None:
        """Remove a worktree directory this process just made (never the user's: create checked it was new)."""
        g.git(self.project.root, "worktree", "remove", "--force", "--force", str(path), check=False)
        remove_tree(path)
        admin_dirs.prune(self.project)

    def _rollback_created(self, entry: WorktreeEntry, reset_branch: bool) -> None:
        """Undo a create whose post_create hook failed (the index entry and task binding exist already)."""
        self.discard_worktree(Path(entry.path))
        if not reset_branch:
            with contextlib.suppress(OperationError):
                self._delete_new_branch(entry.branch)
        remove_tree(self.project.tmpdir_for(entry.name))
        remove_tree(self.project.sandbox_home_for(entry.name))
        entries = [e for e in self.index.load(heal=True) if e.name != entry.name]
        self.index.save(entries)
        if entry.task_id is not None:
            self.tasks.unbind(entry.task_id)

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

    # -- remove ----------------------------------------------------------------------------------------------

    def remove(self, name: str, *, force: bool = False, complete_task: bool = False,
               delete_branch: bool = False, discard: Collection[str] | None = None) -> RemoveResult:
        """Remove a worktree: refuse uncommitted work unless forced, stop its session, free its ports,
        unbind (or complete) its task, and delete its branch only when asked and merged (or forced).

        `discard`, with `force`: the uncommitted files the user was shown and agreed to lose; any other work
        found (a file the agent wrote since, detached commits, a checked-out submodule) refuses the remove,
        checked again once the session is stopped."""
        from daintree_tui.core.hooks import run_hooks

        project = self.project
        project.require_git()
        validate_name(name, new=False)
        entry = self.get(name)
        if not entry.live:
            return RemoveResult(name, f"worktree {name} is already removed", removed=False, entry=entry)
        path = Path(entry.path)
        self._check_removable(entry, force, discard)
        # remove.before opens the log of the remove, as create.before does for a create: the pre_remove hooks and
        # the session's stop are steps of the remove (DESIGN 3), and a failure of any step is remove.failed.
        task = self.tasks.brief_of(entry.task_id)
        project.events.append("worktree.remove.before", worktree=entry.brief(), task=task)
        try:
            if path.is_dir():
                run_hooks(project, "pre_remove", entry)
            closed = False  # its session, live or exited: said in the result, since the agent ends with it
            if self.sessions is not None:
                with contextlib.suppress(Exception):
                    closed = self.sessions.stop(name)
            with project.lock.hold():
                entries = self.index.load(heal=True)
                entry = find(entries, name) or entry
                if not entry.live:
                    return RemoveResult(name, f"worktree {name} is already removed", removed=False, entry=entry)
                self._check_removable(entry, force, discard)  # again under the lock: the agent may have written since
                self._journal_write(name, op="remove", path=str(path), force=force, complete_task=complete_task)
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
        trust.require_ours(self.project, path, f"remove worktree {entry.name}")
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
        """What removing the worktree would lose (`trust.work_at_risk`), asked of git inside its sandbox, after
        what its agent's git wrote is brought in (its commits are then on its branch, which stays)."""
        try:
            git = WorktreeGit(self.project, entry)
            git.bring_in()
        except OperationError as exc:
            return [f"{entry.path} cannot be inspected: {exc}"]
        return trust.work_at_risk(self.project, Path(entry.path), agreed, run=git.run)

    def finish_remove(self, entries: list[WorktreeEntry], entry: WorktreeEntry, complete_task: bool) -> None:
        """The locked part of remove, also used by reconcile to finish an interrupted remove."""
        project = self.project
        path = Path(entry.path)
        with contextlib.suppress(OperationError):
            bring_in(project, entry)  # its agent's last commits join the branch, which outlives the worktree
        # Its record goes with it: a `locked` its agent left there would keep it, and the next create of this
        # name would be refused ("a missing but locked worktree").
        admin = admin_dirs.admin_dir_of(project.common_dir, path) if project.common_dir else None
        if path.exists() or path.is_symlink():
            trust.require_ours(project, path, f"delete {path}")
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
        remove_tree(agent_git_of(project, entry.name).root)  # brought in above
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
        self.journal_clear(entry.name)
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
        if entry.branch != self.branch_for(entry.name):
            # The index is data: delete only the branch this tool made for this name, never one it merely names.
            msg = f"branch {entry.branch} kept: it is not {self.branch_for(entry.name)}, the branch of {entry.name}"
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

    # -- run -------------------------------------------------------------------------------------------------

    def run(self, name: str, argv: Sequence[str], timeout: float | None = DEFAULT_RUN_TIMEOUT) -> RunResult:
        """Run a command in the worktree with its environment; returns its exit code and capped output."""
        from daintree_tui.core.runner import RunResult, run_command

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
        from daintree_tui.core.sandbox import wrap_command  # only commands run in a worktree need it

        result = run_command(wrap_command(self.project, entry, argv, env), path, env, timeout)
        with contextlib.suppress(OperationError, OSError):
            bring_in(self.project, entry, quick=True)  # what it committed is on its branch when `run` returns
        return result


def _packed_ref(common_dir: Path, ref: str) -> bool:
    """Whether `packed-refs` names `ref` (then only git may delete it); True when the file cannot be read."""
    try:
        lines = (common_dir / "packed-refs").read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return any(line.split(" ", 1)[-1].strip() == ref for line in lines if not line.startswith(("#", "^")))
