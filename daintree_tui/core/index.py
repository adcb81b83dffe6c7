"""The worktree registry `.worktrees/index.json`, with recovery from `.bak` or from git itself."""

from __future__ import annotations

import time
from pathlib import Path

from daintree_tui.core import admin_dirs, state_files, validate
from daintree_tui.core import git as g
from daintree_tui.core.log import warn
from daintree_tui.core.models import WorktreeEntry, WorktreeStatus
from daintree_tui.core.project import Project
from daintree_tui.core.store import backup_path, read_json, write_json


class Index:
    """Load and save index entries. Callers hold the project lock around load-modify-save."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.recovered: str | None = None  # what the last load had to recover, for reconcile to log

    @property
    def path(self) -> Path:
        return self.project.index_path

    def load(self, *, heal: bool = False) -> list[WorktreeEntry]:
        """Read the entries; a torn or missing file is recovered from `.bak`, else rebuilt from git.

        Args:
            heal: write the recovered index back (state-changing commands do; plain reads only report).
        """
        self.recovered = None
        tracked = self.tracked()
        data, problem = (None, tracked) if tracked else read_json(self.path, "index")
        entries: list[WorktreeEntry] | None = None
        if data is not None:
            entries = self._parse(data)
            if entries is None:
                problem = f"index {self.path} has an unexpected shape"
        if entries is None and (problem or self.path.exists()):
            entries = self.rebuild_from_git()  # a tracked index too: its branches and paths are not ours
            problem = f"{problem}; rebuilt {len(entries)} entries from git worktree list"
        if problem:
            self.recovered = problem
            warn(problem)
            if heal and entries is not None:
                self.save(entries)
        return entries or []

    def tracked(self) -> str | None:
        """Why the index on disk is not daintree's, when git tracks it (or its `.bak`): it came with the
        repository's history (a clone, a pull, the user's own `git merge` of an agent's branch, which writes over
        ignored files), so the branch, base and task it gives each worktree are someone else's word."""
        # The `.bak` only as git tracks it: daintree copies its last index there, so its content is as old as the
        # index it was, whatever its time says (from_history's test).
        found = [self.path] if state_files.from_history(self.project, self.path) else [
            p for p in (backup_path(self.path),) if p in state_files.tracked_state_files(self.project)]
        if not found:
            return None
        return (f"ignored index {found[0]}: git tracks it or checked it out, so it came with the repository's "
                "history, not from daintree (delete it and `git rm --cached` it; daintree rebuilds it from git)")

    def heal_if_torn(self) -> None:
        """Recover a torn or unreadable index from its `.bak` (or from git) and write it back, as every
        state-changing command does first; a sound index costs one read and is left alone."""
        if not self.path.exists() and not backup_path(self.path).exists():
            return
        data, problem = read_json(self.path, "index")
        if problem is None and data is not None and self._parse(data) is not None and not self.tracked():
            return
        try:
            with self.project.lock.hold():
                self.load(heal=True)
        except OSError:
            pass  # state this process may not write (a sandbox's read-only view): reported, left to doctor --fix

    def _parse(self, data: object) -> list[WorktreeEntry] | None:
        if not isinstance(data, dict) or not isinstance(data.get("worktrees"), list):
            return None
        entries = []
        for raw in data["worktrees"]:
            try:
                entries.append(WorktreeEntry.from_dict(raw))
            except (KeyError, TypeError, ValueError) as exc:
                warn(f"index: skipping a malformed entry ({exc})")
        return entries

    def save(self, entries: list[WorktreeEntry]) -> None:
        write_json(self.path, {"worktrees": [e.to_dict() for e in entries]})

    def rebuild_from_git(self) -> list[WorktreeEntry]:
        """Entries for the git worktrees under the worktree dir on our branch prefix (`ours_in_git`; ports get
        reassigned)."""
        if not self.project.is_git:
            return []
        return [self.entry_from_git(w) for w in self.ours_in_git()]

    def ours_in_git(self, *, repair: bool = True) -> list[g.GitWorktree]:
        """The git worktrees a create of ours could have made: in the worktree dir, on `<prefix><name>`. Another
        there (the user's `git worktree add .worktrees/rel release/2.0`) is not adopted: a sandboxed session in it
        could write its branch's ref folder, the user's release branches. Each path once: two admin dirs claiming
        one path (a forged `gitdir`) are one worktree at most, whatever git lists."""
        root = self.project.worktrees_root
        primary = self.project.root.resolve()
        prefix = self.project.config.branch_prefix
        admin_dirs.guard(self.project, fix=repair)
        found: dict[Path, g.GitWorktree] = {}
        for w in g.list_worktrees(self.project.root):
            if (w.path.resolve().parent == root and w.path.resolve() != primary and not w.prunable
                    and validate.name_problem(w.path.name, new=False) is None and w.branch == prefix + w.path.name):
                found.setdefault(w.path.resolve(), w)
        return list(found.values())

    def entry_from_git(self, wt: g.GitWorktree) -> WorktreeEntry:
        branch = wt.branch or ""
        base = g.git(self.project.root, "merge-base", "HEAD", wt.head, check=False).stdout.strip() or wt.head
        return WorktreeEntry(name=wt.path.name, path=str(wt.path), branch=branch, base_ref="HEAD",
                             base_commit=base, status=WorktreeStatus.ACTIVE, created_at=time.time())


def find(entries: list[WorktreeEntry], name: str) -> WorktreeEntry | None:
    for entry in entries:
        if entry.name == name:
            return entry
    return None
