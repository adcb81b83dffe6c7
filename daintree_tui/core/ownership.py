"""What is ours to delete, move, adopt or gc (docs/design.md 2a rules 1 and 5), and whether the caller stands inside
one of our worktrees.

A path is one of our worktrees only when git lists it as a linked worktree of this repository, it lies inside the
worktree dir, and it is neither the primary nor one of its ancestors: index and journal entries are checked with
this, never obeyed on their own. Nothing is deleted that would lose work (uncommitted or untracked files, commits
no branch contains, a tree that cannot be inspected) unless the user said `--force`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from daintree_tui.core import admin_dirs
from daintree_tui.core import git as g
from daintree_tui.core.errors import ConfigError, OperationError
from daintree_tui.core.log import suppressed

if TYPE_CHECKING:
    from daintree_tui.core.project import Project


def linked_worktrees(project: Project, *, repair: bool = True) -> list[Path]:
    """The linked worktrees git lists for this repository (the primary, listed first, excluded), resolved.

    Git lists the path each admin dir's `gitdir` claims, and an agent could write its own: the admin dirs are
    checked against the index first (and, with `repair`, repaired from it)."""
    admin_dirs.guard(project, fix=repair)
    listed = g.list_worktrees(project.root)
    primary = project.root.resolve()
    return [w.path.resolve() for w in listed if w.path.resolve() != primary]


def ownership_problem(project: Project, path: Path, listed: list[Path] | None = None) -> str | None:
    """Why `path` is not one of our worktrees (None when it is): git must list it as a linked worktree of this
    repository, it must lie inside the worktree dir, on the same filesystem, and be neither the primary nor one
    of its ancestors. Index and journal entries are checked with this; they are never obeyed on their own."""
    root = project.root.resolve()
    try:
        wt_root = project.worktrees_root
    except ConfigError as exc:
        return str(exc)
    if path.is_symlink():
        return f"{path} is a symbolic link"
    real = path.resolve()
    if real == root or root.is_relative_to(real):
        return f"{path} is the repository or one of its parents"
    if not real.is_relative_to(wt_root) or real == wt_root:
        return f"{path} is not inside the worktree directory {wt_root}"
    if project.common_dir is not None and real.is_relative_to(project.common_dir.resolve()):
        return f"{path} is inside .git"
    with suppressed(OSError):
        if real.exists() and wt_root.exists() and real.stat().st_dev != wt_root.stat().st_dev:
            return f"{path} is on another filesystem than the worktree directory"
    if listed is None:
        try:
            listed = linked_worktrees(project)
        except OperationError as exc:
            return f"git cannot list worktrees: {exc}"
    if real not in listed:
        return f"git does not list {path} as a worktree of this repository"
    return None


def require_ours(project: Project, path: Path, what: str) -> None:
    problem = ownership_problem(project, path)
    if problem:
        raise OperationError(f"refusing to {what}: {problem}")


def work_at_risk(project: Project, path: Path, agreed: frozenset[str] = frozenset(),
                 run: g.Runner = g.git) -> list[str]:
    """What deleting the worktree at `path` would lose, each as a reason: a tree git cannot inspect (its `.git`
    file is gone), uncommitted or untracked files (but those in `agreed`, which the user agreed to lose),
    checked-out submodules, commits on a detached HEAD that no branch contains. `run` runs git there (the
    worktree's sandboxed git, core/worktree_git.py)."""
    if not path.is_dir():
        return []
    if not (path / ".git").is_file() and not (path / ".git").is_dir():
        return [f"{path} cannot be inspected: its .git file is missing (a repair may bring it back: "
                "`git worktree repair`)"]
    reasons = []
    try:
        dirty = [name for name in g.dirty_files(path, run=run) if name not in agreed]
    except OperationError as exc:
        return [f"{path} cannot be inspected: {exc}"]
    if dirty:
        shown = ", ".join(dirty[:10]) + (f" and {len(dirty) - 10} more" if len(dirty) > 10 else "")
        reasons.append(f"uncommitted changes: {shown}")
    try:
        nested = g.populated_submodules(path, run=run)
        unreachable = commits_on_no_branch(path, run=run)
    except OperationError as exc:
        return [f"{path} cannot be inspected: {exc}"]
    if nested:
        reasons.append(f"submodules whose own uncommitted work is not inspected: {', '.join(nested[:10])}")
    if unreachable:
        reasons.append(f"HEAD has {unreachable} commit(s) that no branch contains (detached HEAD work)")
    return reasons


def commits_on_no_branch(path: Path, run: g.Runner = g.git) -> int:
    """How many commits reachable from the worktree's HEAD are on no branch (0 when HEAD is on a branch)."""
    head = run(path, "symbolic-ref", "-q", "HEAD", check=False)
    if head.returncode == 0:
        return 0
    proc = run(path, "rev-list", "--count", "HEAD", "--not", "--branches", check=False)
    try:
        return int(proc.stdout.strip() or 0)
    except ValueError:
        return 0


def branch_safe_to_delete(root: Path, branch: str) -> bool:
    """A branch may go without a prompt only when every commit on it is also on another branch."""
    proc = g.git(root, "rev-list", "--count", f"refs/heads/{branch}", "--not",
                 *[f"--exclude=refs/heads/{branch}", "--branches"], check=False)
    return proc.returncode == 0 and proc.stdout.strip() == "0"


# -- the caller -------------------------------------------------------------------------------------------------


def inside_session(project: Project, cwd: Path | None = None) -> bool:
    """Whether this process runs inside an agent's session: its environment names a worktree, or its working
    directory is inside one. An agent must not waive a gate (`--no-verify`) for itself."""
    if os.environ.get("DAINTREE_WORKTREE"):
        return True
    here = (cwd or Path.cwd()).resolve()
    if project.is_git:
        with suppressed(OperationError, ConfigError):
            if here.is_relative_to(project.worktrees_root) and here != project.worktrees_root:
                return True
            for wt in linked_worktrees(project):
                if here.is_relative_to(wt):
                    return True
    return False


def require_outside_session(project: Project, what: str) -> None:
    if inside_session(project):
        raise OperationError(f"{what} is refused from inside a session: only a person outside it may skip checks")
