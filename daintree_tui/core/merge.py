"""Merging a worktree's branch back (`worktree merge`), and the checks every integration of its branch starts from.

Merges never touch the primary's uncommitted changes: the merge runs in a temporary detached worktree, and the
target branch is then moved with a fast-forward (refused when that branch is checked out dirty). A conflict
leaves every branch and worktree exactly as it was and names the files. No hook the merged branch brings runs,
and none runs in a checkout of the agent's files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daintree_tui.core import admin_dirs
from daintree_tui.core import git as g
from daintree_tui.core.admin_dirs import admin_dir_named_by
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.fs_safe import small_text
from daintree_tui.core.hooks import run_hooks
from daintree_tui.core.ignored_paths import ignored_in_the_way, named, written_paths
from daintree_tui.core.models import TaskStatus, WorktreeEntry
from daintree_tui.core.ownership import require_outside_session
from daintree_tui.core.roles import worktree_role
from daintree_tui.core.sandbox import bring_in, choose
from daintree_tui.core.store import remove_tree
from daintree_tui.core.worktree_git import WorktreeGit
from daintree_tui.core.worktrees import WorktreeService

STRATEGIES = ("ff", "squash", "rebase")
NO_HOOKS = ("-c", f"core.hooksPath={os.devnull}")  # git finds no hook under a path that is not a folder


@dataclass
class MergeResult:
    name: str
    target: str
    strategy: str
    commit: str
    message: str
    removed: bool = False
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, "strategy": self.strategy, "commit": self.commit,
                "message": self.message, "removed": self.removed, "warnings": self.warnings}


def _untracked(path: Path) -> list[str]:
    out = g.git(path, "ls-files", "--others", "--exclude-standard", "-z").stdout
    return [p for p in out.split("\0") if p]


class Merger:
    """Merge for the worktrees of one project; also the entry check and the target branch that diff, commit and PR
    use (ReviewService)."""

    def __init__(self, worktrees: WorktreeService) -> None:
        self.worktrees = worktrees
        self.project = worktrees.project

    def entry(self, name: str, check_log: bool = True) -> WorktreeEntry:
        """Live worktree `name` to integrate: its directory there, what its agent committed brought in, its branch
        a branch of its own that only git moved (`check_log`)."""
        self.project.require_git()
        entry = self.worktrees.get(name, live=True)
        if not Path(entry.path).is_dir():
            raise OperationError(f"worktree {name} has no directory at {entry.path} (run `daintree doctor --fix`)")
        bring_in(self.project, entry)  # what its agent committed, checked, on its branch before we read it
        # The branch's ref file is the agent's to write (its commits move it): written as `ref: refs/heads/release`,
        # it made every outside merge, commit or PR of this worktree act on `release` (a rebase merge merged
        # release's commits and then moved release itself).
        target = g.git(self.project.root, "symbolic-ref", "--quiet", f"refs/heads/{entry.branch}", check=False)
        if target.returncode == 0:
            raise OperationError(f"{name}: its branch {entry.branch} is a symbolic ref to {target.stdout.strip()}, "
                                 f"not a branch of its own: refusing (`git branch -D {entry.branch}` removes the "
                                 "link, nothing else)")
        moved = g.moved_outside_git(self.project.root, entry.branch) if check_log else None
        if moved is not None:
            raise OperationError(
                f"{name}: its branch {entry.branch} is at {moved[0][:12] or '(deleted)'}, but git's log of it says "
                f"{moved[1][:12]}: it was moved without git (another worktree's sandboxed agent can write a branch "
                f"made after its sandbox started): refusing. `git update-ref refs/heads/{entry.branch} {moved[1]}` "
                "puts it back")
        return entry

    def target_branch(self, entry: WorktreeEntry, into: str | None) -> str:
        root = self.project.root
        if into:
            name = into[len("refs/heads/"):] if into.startswith("refs/heads/") else into
            if not g.branch_exists(root, name):
                raise InputError(f"no branch named {into!r} to merge into")
            return name
        if entry.base_ref != "HEAD" and g.branch_exists(root, entry.base_ref):
            return entry.base_ref
        head = g.git(root, "symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip()
        if not head:
            raise InputError("the primary worktree is on a detached HEAD: say which branch with --into")
        return head

    def _confined(self, entry: WorktreeEntry) -> bool:
        """Whether the worktree's commands run in a sandbox: then its admin dir and checkout are its agent's."""
        return choose(self.project.config, role=worktree_role(self.project, entry.name)).active

    def checked_out_at(self, branch: str) -> Path | None:
        """Where `branch` is checked out, as only the user's own git state says: the primary's HEAD, or the HEAD of
        a linked worktree that is none of daintree's (its `.git` file and its admin dir name each other).

        What `git worktree list` says of an agent's worktree comes from its admin dir, the agent's to write
        (docs/design.md 2a, rule 9): b's HEAD made `ref: refs/heads/develop` had a merge into develop run `git merge` in
        b's worktree, outside its sandbox (b's `.husky/post-merge` ran as the user; git appended through b's
        `logs/HEAD` link), and b's `gitdir` made the primary's `.git` had that merge fast-forward the primary's
        main instead."""
        # The listing names the path each admin dir's `gitdir` claims: checked against the index first.
        admin_dirs.guard(self.project)
        root = self.project.root
        ref = f"refs/heads/{branch}"
        if g.git(root, "symbolic-ref", "--quiet", "HEAD", check=False).stdout.strip() == ref:
            return root
        common = self.project.common_dir
        if common is None:
            return None
        agents = {admin for e in self.worktrees.entries() if e.live and self._confined(e)
                  for admin in (admin_dir_named_by(common, Path(e.path)), (common / "worktrees" / e.name).resolve())
                  if admin is not None}
        for wt in g.list_worktrees(root):
            if wt.branch != branch:
                continue
            admin = admin_dir_named_by(common, wt.path)
            if admin is None or admin in agents or small_text(admin / "HEAD") != f"ref: {ref}":
                continue
            if small_text(admin / "gitdir") == str(wt.path / ".git"):
                return wt.path
        return None

    def merge(self, name: str, strategy: str = "ff", into: str | None = None, remove: bool = False,
              complete_task: bool = False, verify: bool = True,
              gate: Callable[[str], None] | None = None) -> MergeResult:
        """Merge a worktree's branch back. `verify=False` (`--no-verify`) skips the pre_merge checks: a person's
        explicit choice, refused from inside a session (an agent may not waive its own checks). `gate` (the
        approval gate) is asked of the branch's commit as it is once brought in, and that commit, never the
        branch's name read again, is what is merged: the agent's commits arrive whenever the outside brings them
        in (a commit made after a person's approval was brought in by the merge itself and merged)."""
        if strategy not in STRATEGIES:
            raise InputError(f"invalid strategy {strategy!r} (expected one of: {', '.join(STRATEGIES)})")
        if not verify:
            require_outside_session(self.project, "--no-verify")
        entry = self.entry(name)
        root = self.project.root
        target = self.target_branch(entry, into)
        if target == entry.branch:
            raise InputError(f"cannot merge {entry.branch} into itself")
        owner = next((e for e in self.worktrees.entries() if e.live and e.branch == target), None)
        if owner is not None and self._confined(owner):
            # Its checkout is its sandboxed agent's: git run there from here follows what the agent wrote.
            raise OperationError(f"{target} is worktree {owner.name}'s own branch, checked out in its sandbox: "
                                 f"refusing to move it from here (its agent can merge it there: `git merge "
                                 f"{g.rev_parse_commit(root, entry.branch) or entry.branch}`)")
        worktree_git = WorktreeGit(self.project, entry)
        dirty = worktree_git.dirty_files()
        if dirty:
            raise OperationError(f"worktree {name} has uncommitted changes: {', '.join(dirty[:10])} "
                                 "(commit them first: daintree worktree commit)")
        holder = self.checked_out_at(target)
        if holder is not None:
            untracked = set(_untracked(holder))
            held_dirty = [f for f in g.dirty_files(holder) if f not in untracked]
            if held_dirty:
                raise OperationError(f"{target} is checked out at {holder} with uncommitted changes "
                                     f"({', '.join(held_dirty[:5])}); commit or stash them first")
        branch_tip = g.rev_parse_commit(root, entry.branch)
        target_tip = g.rev_parse_commit(root, target)
        assert branch_tip is not None and target_tip is not None
        if gate is not None:
            gate(branch_tip)
        if g.is_ancestor(root, branch_tip, target_tip):
            return MergeResult(name, target, strategy, target_tip, f"{entry.branch} is already merged into {target}")
        if strategy == "ff" and not g.is_ancestor(root, target_tip, branch_tip):
            raise OperationError(f"{target} has diverged from {entry.branch}: a fast-forward is impossible "
                                 "(use --strategy rebase or squash)")
        self.refuse_state_changes(entry, target_tip, branch_tip)
        self._refuse_ignored_overwrites(entry, target, holder, f"{target_tip}...{branch_tip}")
        if verify:
            run_hooks(self.project, "pre_merge", entry)  # fails closed: an untrusted check refuses the merge
        brief = {**entry.brief(), "target": target, "strategy": strategy, "verified": verify}
        task_brief = self.worktrees.tasks.brief_of(entry.task_id)
        self.project.events.append("worktree.merge.before", worktree=brief, task=task_brief)
        # Every git command below runs the user's hooks as they are now, never ones the merged branch brings.
        with self._hooks_as_they_are(holder or root) as hooks:
            try:
                new_tip = self._merge_in_temp(entry, branch_tip, target, target_tip, strategy, hooks)
                self._refuse_ignored_overwrites(entry, target, holder, target_tip, new_tip)
                self._advance(target, target_tip, new_tip, holder, hooks)
            except OperationError as exc:
                self.project.events.append("worktree.merge.failed", worktree=brief, error=str(exc), task=task_brief)
                raise
            if strategy == "rebase":
                # The agent's branch follows its rebased commits (its worktree is clean, checked above).
                # Inside its sandbox: `reset` writes the admin dir (`logs/HEAD`, the index), the agent's to link.
                worktree_git("reset", "-q", "--keep", new_tip, check=False)
                bring_in(self.project, entry)
        self.worktrees.mark_landed(name, branch_tip, target, new_tip)  # the radar leaves it out while it stays
        result = MergeResult(name, target, strategy, new_tip, f"merged {entry.branch} into {target} ({strategy})")
        self.project.events.append("worktree.merge.after", worktree=brief, commit=new_tip, task=task_brief)
        if remove:
            removed = self.worktrees.remove(name, complete_task=complete_task, delete_branch=strategy != "squash")
            result.removed = removed.removed
            result.warnings += removed.warnings
        elif complete_task and entry.task_id is not None:
            self.worktrees.tasks.update(entry.task_id, status=TaskStatus.COMPLETED)
        return result

    def refuse_state_changes(self, entry: WorktreeEntry, target_tip: str, branch_tip: str) -> None:
        """Refuse a branch that adds or changes files in daintree's own state dirs (`.worktrees/`, `.tasks/`).

        Those dirs are ignored, and git writes over ignored files: merged into the branch the primary has checked
        out, `.worktrees/.sessions/<name>.json` would give a session another role, `.tasks/task_N.json` a task
        another role, `.worktrees/.inbox/<lead>/req-*.json` a request in a lead's name. An agent commits them
        with `git add -f`; nothing of a task's work belongs there.
        """
        root = self.project.root
        specs = [f":(literal){d.relative_to(root).as_posix()}/" for d in (self.project.state_dir,
                                                                         self.project.tasks_dir)
                 if d.is_relative_to(root)]
        if not specs:
            return
        proc = g.git(root, "diff", "--name-only", "-z", "--no-renames", f"{target_tip}...{branch_tip}", "--",
                     *specs)
        changed = [p for p in proc.stdout.split("\0") if p]
        if changed:
            raise OperationError(f"{entry.branch} changes daintree's own state ({', '.join(changed[:5])}): refusing "
                                 "it (merged, those files would overwrite the state of this repository's sessions "
                                 "and tasks); drop them from the branch first")

    def _refuse_ignored_overwrites(self, entry: WorktreeEntry, target: str, holder: Path | None,
                                   *revs: str) -> None:
        """Refuse a merge that would replace what the checkout of `target` holds ignored (`ignored_in_the_way`):
        the user's `.env`, a build folder, a link. Asked twice: before the checks run, of what the branch brings
        (`target...branch`), and before `target` moves, of the commit that it moves to. A target that no worktree
        has checked out has no files to lose."""
        if holder is None:
            return
        lost = ignored_in_the_way(holder, written_paths(self.project.root, *revs))
        if lost:
            raise OperationError(f"{entry.branch} would replace files that git ignores in {holder}, where "
                                 f"{target} is checked out ({named(lost)}): refusing it (git writes over ignored "
                                 "files without a word); nothing was changed: move them aside or drop them from "
                                 "the branch, then merge again")

    def _merge_in_temp(self, entry: WorktreeEntry, branch_tip: str, target: str, target_tip: str, strategy: str,
                       hooks: list[str]) -> str:
        """Produce the new target commit from `branch_tip` in a throwaway detached worktree; nothing else changes.

        No hook runs there (`hooks` applies to the target's own worktree, in `_advance`): that worktree holds the
        agent's files, and the user's hooks run what the tree holds (pre-commit's config, lint-staged, a
        post-merge `npm install`), so a squash's pre-commit or a fast-forward's post-merge ran the agent's code
        outside its sandbox. The pre_merge checks, sandboxed, are where a merge is checked.
        """
        root = self.project.root
        hooks = list(NO_HOOKS)
        self.project.tmp_root.mkdir(parents=True, exist_ok=True)
        tmp = self.project.tmp_root / f".merge-{entry.name}-{os.urandom(4).hex()}"
        start = target_tip if strategy != "rebase" else branch_tip
        g.git(root, *hooks, "worktree", "add", "--quiet", "--detach", str(tmp), start)
        try:
            if strategy == "ff":
                g.git(tmp, *hooks, "merge", "--quiet", "--ff-only", branch_tip)
            elif strategy == "squash":
                proc = g.git(tmp, *hooks, "merge", "--squash", branch_tip, check=False)
                if proc.returncode != 0:
                    raise OperationError(self._conflict(tmp, entry, target, "merge"))
                subject = self._commit_subject(entry)
                g.git(tmp, *hooks, "commit", "-q", "-m", subject)
            else:
                proc = g.git(tmp, *hooks, "rebase", "--quiet", target_tip, check=False)
                if proc.returncode != 0:
                    message = self._conflict(tmp, entry, target, "rebase")
                    g.git(tmp, "rebase", "--abort", check=False)
                    raise OperationError(message)
            return g.git(tmp, "rev-parse", "HEAD").stdout.strip()
        finally:
            g.git(root, "worktree", "remove", "--force", "--force", str(tmp), check=False)
            remove_tree(tmp)
            admin_dirs.prune(self.project)

    def _conflict(self, tmp: Path, entry: WorktreeEntry, target: str, what: str) -> str:
        files = g.git(tmp, "diff", "--name-only", "--diff-filter=U", check=False).stdout.split()
        if what == "merge":
            g.git(tmp, "merge", "--abort", check=False)
            g.git(tmp, "reset", "-q", "--hard", check=False)
        shown = ", ".join(files) if files else "see git for details"
        # What next: "nothing was changed" alone left a newcomer with a branch that would never merge.
        return (f"{what} of {entry.branch} into {target} conflicts in: {shown}; nothing was changed (resolve it on "
                f"the branch: `git rebase {target}` in {entry.path}, or ask its agent to; then merge again)")

    def _commit_subject(self, entry: WorktreeEntry) -> str:
        task = self.worktrees.tasks.find(entry.task_id) if entry.task_id is not None else None
        return f"{task.subject} (#{task.id})" if task else f"Merge {entry.branch}"

    @contextlib.contextmanager
    def _hooks_as_they_are(self, holder: Path) -> Iterator[list[str]]:
        """Options pinning git to the hooks `holder` runs now. Hooks tracked in the tree (a relative
        core.hooksPath: husky) are resolved where git runs (the agent's worktree, a merge worktree of its branch)
        and replaced by the merge itself, and git would run the new ones (post-merge, reference-transaction) in
        the same command: the agent's scripts, unconfined, before the user has seen them. So the merge runs the
        hooks as they were before it, from a copy."""
        pinned = g.pinned_hooks(holder)
        hooks = Path(pinned[1].split("=", 1)[1]) if pinned else None
        if hooks is None or not hooks.is_dir() or not hooks.resolve().is_relative_to(holder.resolve()):
            yield pinned
            return
        self.project.tmp_root.mkdir(parents=True, exist_ok=True)
        copy = Path(tempfile.mkdtemp(prefix=".hooks-", dir=self.project.tmp_root))
        try:
            shutil.copytree(hooks, copy / "hooks", symlinks=True)
            yield ["-c", f"core.hooksPath={copy / 'hooks'}"]
        finally:
            remove_tree(copy)

    def _advance(self, target: str, old: str, new: str, holder: Path | None, hooks: list[str]) -> None:
        """Move `target` from `old` to `new`: through its worktree when checked out, else the ref itself."""
        root = self.project.root
        if holder is not None:
            proc = g.git(holder, *hooks, "merge", "--quiet", "--ff-only", new, check=False)
            if proc.returncode != 0:
                raise OperationError(f"could not advance {target} at {holder}: {g.last_line(proc.stderr)}")
        else:
            g.git(root, *hooks, "update-ref", f"refs/heads/{target}", new, old)

    # -- the steps of a merge, for the merge train (services/train.py), which composes them around a gate run in
    # a candidate worktree of its own; each is the one `merge` runs.

    def confined(self, entry: WorktreeEntry) -> bool:
        return self._confined(entry)

    def refuse_unsafe(self, entry: WorktreeEntry, target: str, holder: Path | None, *revs: str) -> None:
        """Refuse (OperationError) what a merge refuses of `revs` (`target...branch`, or old and new target): a
        change to daintree's own state dirs, and a file that would replace an ignored one of the target's
        checkout."""
        if len(revs) == 1:
            target_tip, branch_tip = revs[0].split("...")
            self.refuse_state_changes(entry, target_tip, branch_tip)
        self._refuse_ignored_overwrites(entry, target, holder, *revs)

    def hooks_as_they_are(self, holder: Path) -> contextlib.AbstractContextManager[list[str]]:
        return self._hooks_as_they_are(holder)

    def advance(self, target: str, old: str, new: str, holder: Path | None, hooks: list[str]) -> None:
        self._advance(target, old, new, holder, hooks)

    def commit_subject(self, entry: WorktreeEntry) -> str:
        return self._commit_subject(entry)
