"""Review and integrate: diff, commit, merge back, open a PR.

Merges never touch the primary's uncommitted changes: the merge runs in a temporary detached worktree, and the
target branch is then moved with a fast-forward (refused when that branch is checked out dirty). A conflict
leaves every branch and worktree exactly as it was and names the files.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat as file_mode
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daintree_tui.core import admin_dirs
from daintree_tui.core import git as g
from daintree_tui.core.admin_dirs import admin_dir_named_by
from daintree_tui.core.agent_git import whole
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.fs_safe import read_state_file, small_text
from daintree_tui.core.hooks import run_hooks
from daintree_tui.core.models import WorktreeEntry
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


UNTRACKED_DIFF_BYTES = 8 * 1024 * 1024  # an untracked file larger than this is named in a diff, not shown


def _line_count(path: Path) -> int:
    """Lines of a regular file (at most UNTRACKED_DIFF_BYTES of it), never through a link: a link the agent left
    in its worktree pointed `--stat` at a file of the user's, or at one that never ends (/proc/kmsg)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return 0
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(UNTRACKED_DIFF_BYTES)
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _untracked(path: Path) -> list[str]:
    out = g.git(path, "ls-files", "--others", "--exclude-standard", "-z").stdout
    return [p for p in out.split("\0") if p]


IGNORED_MARK = "replaces an ignored file: "  # how `worktree diff` (and the dashboard's diff) marks such a path
_SPECS_PER_CALL = 500  # pathspecs per `ls-files`: a merge of many thousand files stays under the argv limit


def _written_paths(cwd: Path, *revs: str, run: Callable[..., subprocess.CompletedProcess[str]] = g.git) -> list[str]:
    """The paths a change between `revs` adds, modifies, renames to or changes the type of (deletions aside)."""
    out = run(cwd, "diff", "--name-only", "-z", "--no-renames", "--diff-filter=d", *revs, "--").stdout
    return [p for p in out.split("\0") if p]


def ignored_in_the_way(checkout: Path, paths: list[str]) -> list[str]:
    """What `checkout` holds untracked and ignored that writing `paths` there would replace or write into.

    Git treats an ignored file as expendable: a checkout or fast-forward that brings a tracked `.env` replaces
    the user's own with no word (an agent commits one with `git add -f`). In the way are: an ignored file, link or
    folder at one of `paths`; an ignored file or link where one of them needs a folder (`logs` for `logs/a`); an
    ignored folder one of them would go into (`node_modules/` for `node_modules/.bin/x`); and what is ignored
    inside a folder that one of them replaces with a file. Git decides what is ignored (every exclude source it
    reads itself); folders are named with a trailing `/`.
    """
    wanted = set(paths)
    above: set[str] = set()  # the folders `paths` need
    for path in wanted:
        parts = path.split("/")
        above.update("/".join(parts[:i]) for i in range(1, len(parts)))
    specs = sorted(wanted | above)
    entries: dict[str, None] = {}
    for start in range(0, len(specs), _SPECS_PER_CALL):
        chunk = [f":(literal){spec}" for spec in specs[start:start + _SPECS_PER_CALL]]
        out = g.git(checkout, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory", "--",
                    *chunk).stdout
        entries.update(dict.fromkeys(e for e in out.split("\0") if e))
    found = []
    for entry in entries:
        bare = entry.rstrip("/")
        parts = bare.split("/")
        inside_replaced = any("/".join(parts[:i]) in wanted for i in range(1, len(parts)))
        # An entry only under a folder that stays a folder (ignored `src/x.pyc` beside a new `src/y.py`) is safe.
        if bare in wanted or bare in above or inside_replaced:
            found.append(entry)
    return sorted(found)


def _shown(path: str) -> str:
    """A path as one line of text: quoted (JSON's escapes) when it holds a control, a quote or a backslash."""
    return json.dumps(path, ensure_ascii=False) if any(c < " " or c in '"\\\x7f' for c in path) else path


def marked(diff: str, ignored: list[str]) -> str:
    """`diff` after a line `replaces an ignored file: PATH` for each of `ignored`."""
    return "".join(f"{IGNORED_MARK}{_shown(path)}\n" for path in ignored) + diff


def _named(paths: list[str], most: int = 5) -> str:
    return ", ".join(map(_shown, paths[:most])) + (f" and {len(paths) - most} more" if len(paths) > most else "")


class ReviewService:
    """Diff, commit, merge and PR for the worktrees of one project."""

    def __init__(self, worktrees: WorktreeService) -> None:
        self.worktrees = worktrees
        self.project = worktrees.project

    def _entry(self, name: str, check_log: bool = True) -> WorktreeEntry:
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

    # -- diff ------------------------------------------------------------------------------------------------

    def diff(self, name: str, stat: bool = False) -> str:
        """Changes against the base commit: committed, uncommitted and untracked files alike; first a line
        `replaces an ignored file: PATH` for each path that a merge would refuse (`ignored_replaced`)."""
        return marked(*self.diff_report(name, stat))

    def diff_report(self, name: str, stat: bool = False) -> tuple[str, list[str]]:
        """The diff as git gives it (no mark), and what it would replace that is ignored (`ignored_replaced`)."""
        entry = self._entry(name, check_log=False)  # what is in the worktree, whatever its branch says
        path = Path(entry.path)
        git = WorktreeGit(self.project, entry)
        untracked = git.untracked()
        ignored = self.ignored_replaced(entry, git, untracked)
        args = ["diff", "--no-color", "--no-ext-diff"] + (["--stat"] if stat else []) + [entry.base_commit]
        parts = [git(*args).stdout]
        shown: list[str] = []
        for rel in untracked:
            try:
                info = os.lstat(path / rel)
            except OSError:
                continue
            if file_mode.S_ISREG(info.st_mode) and info.st_size > UNTRACKED_DIFF_BYTES:
                # The agent's file: a sparse one of 100 GB took `--stat` to MemoryError (one line without end)
                # and the dashboard's diff to minutes of git reading zeros.
                parts.append(f" {rel} (untracked) | {info.st_size} bytes, not shown\n" if stat else
                             f"untracked file {rel}: {info.st_size} bytes, too large to show\n")
            elif stat:
                lines = _line_count(path / rel) if file_mode.S_ISREG(info.st_mode) else 0
                parts.append(f" {rel} (untracked) | {lines} +\n")
            else:
                shown.append(rel)
        if shown:
            # One sandboxed git for them all: `diff --no-index` compares two paths, so a shell loop runs it.
            loop = 'for f; do git diff --no-color --no-index -- /dev/null "$f"; done; exit 0'
            parts.append(git.run_shell(loop, shown).stdout)
        return "".join(parts), ignored

    def ignored_replaced(self, entry: WorktreeEntry, git: WorktreeGit, untracked: list[str]) -> list[str]:
        """What the checkout of the worktree's merge target holds ignored that its changes would replace (so a
        merge of them now refuses): its committed and uncommitted changes against its base (read by `git`, in its
        sandbox), and `untracked`."""
        try:
            holder = self._checked_out_at(self.target_branch(entry, None))
        except InputError:  # the primary on a detached HEAD: no target to say anything of
            return []
        if holder is None:
            return []
        return ignored_in_the_way(holder, _written_paths(git.path, entry.base_commit, run=git.run) + untracked)

    # -- commit ----------------------------------------------------------------------------------------------

    def commit(self, name: str, message: str, all_changes: bool = False) -> dict[str, Any]:
        """Commit in the worktree: what is staged, or everything (untracked included) with `all_changes`."""
        if not message.strip():
            raise InputError("a commit needs a message (-m)")
        entry = self._entry(name)
        path = Path(entry.path)
        git = WorktreeGit(self.project, entry)
        # The worktree's HEAD lives in its admin dir, which its (sandboxed) agent may write: pointed at main or at
        # another agent's branch, a commit would land there.
        head = git("symbolic-ref", "--quiet", "HEAD", check=False).stdout.strip()
        if head != f"refs/heads/{entry.branch}":
            raise OperationError(f"{name}: HEAD is {head or 'detached'}, not its branch {entry.branch}: refusing to "
                                 f"commit (check out {entry.branch} in the worktree first)")
        if all_changes:
            # `add -A` runs `git status` inside each checked-out submodule, whatever the config says: a repository
            # the agent made there would run its own config's commands. Submodules are left as they are staged.
            nested = [f":(exclude,literal){sub}" for sub in g.populated_submodules(path, run=git.run)]
            git("add", "-A", "--", ".", *nested)
        staged = git("diff", "--cached", "--name-only", "-z").stdout
        files = [f for f in staged.split("\0") if f]
        if not files:
            raise OperationError(f"nothing to commit in {name}" + ("" if all_changes else " (use --all)"))
        sha = self._commit_confined(entry, git, message)
        self.project.events.append("worktree.commit", worktree=entry.brief(), commit=sha, files=files,
                                   task=self.worktrees.tasks.brief_of(entry.task_id))
        return {"name": name, "commit": sha, "files": files, "message": message}

    def _commit_confined(self, entry: WorktreeEntry, git: WorktreeGit, message: str) -> str:
        """Commit what is staged: the user's hooks and the tree run inside the worktree's sandbox, the commit
        object and the branch's move are made here, from objects alone; the new commit.

        Hooks like pre-commit, husky's lint-staged or a `make lint` run what the worktree holds (an agent's
        `.pre-commit-config.yaml`, package.json, Makefile): run outside, an agent's own `worktree commit` request
        (applied from its inbox) ran its code with the user's full access. So pre-commit, prepare-commit-msg and
        commit-msg run first, confined, and post-commit after. `git commit` itself writes through the admin dir
        (`COMMIT_EDITMSG`, `logs/HEAD`, the index), so the tree is written inside (`write-tree`, into the
        quarantine), brought in checked, and the commit made here with `commit-tree`, which reads no file of the
        worktree: signing (gpg or ssh keys, hidden in the sandbox) still works.
        """
        from daintree_tui.core.environment import worktree_env
        from daintree_tui.core.runner import run_command
        from daintree_tui.core.sandbox import wrap_command

        path = Path(entry.path)
        pinned = g.pinned_hooks(self.project.root)
        hooks_dir = Path(pinned[1].split("=", 1)[1]) if pinned else None

        def hook(name: str, *args: str) -> None:
            # Run as git runs a hook (an executable of that name, in the worktree), by hand: `git hook run` is
            # git 2.36 and later.
            script = hooks_dir / name if hooks_dir is not None else None
            if script is None or not script.is_file() or not os.access(script, os.X_OK):
                return
            _, env = g.command(path)
            env = worktree_env(self.project, entry, {**env, "GIT_EDITOR": ":"})
            result = run_command(wrap_command(self.project, entry, [str(script), *args], env), path, env, None)
            if result.exit_code != 0:
                said = g.last_line(result.stderr) or g.last_line(result.stdout) or f"exit {result.exit_code}"
                raise OperationError(f"{entry.name}: the {name} hook refused the commit: {said}")

        tmpdir = self.project.tmpdir_for(entry.name)
        tmpdir.mkdir(parents=True, exist_ok=True)
        # In the TMPDIR: the confined hooks may edit the message; a name of our own making (O_EXCL), read back
        # only as a regular file.
        fd, msg_name = tempfile.mkstemp(prefix="commit-msg-", suffix=".txt", dir=tmpdir)
        msg_file = Path(msg_name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(message if message.endswith("\n") else message + "\n")
            hook("pre-commit")
            hook("prepare-commit-msg", str(msg_file), "message")
            hook("commit-msg", str(msg_file))
            final = read_state_file(msg_file).decode("utf-8", "replace")
        finally:
            msg_file.unlink(missing_ok=True)
        cleaned = g.git(self.project.root, "stripspace", input=final).stdout
        if not cleaned.strip():
            raise OperationError(f"{entry.name}: the commit message is empty (after the commit-msg hook)")
        tree = git("write-tree").stdout.strip()
        parent = bring_in(self.project, entry)
        root = self.project.root
        # The tree alone is not enough: the agent's index can name a tree of its own whose blobs exist nowhere
        # (`mktree --missing`, then `read-tree`: `write-tree` answers from the index's cache of trees), and a
        # commit of it made a branch that `git fsck` and `git gc` of the whole repository fail on.
        if not whole(root, tree, "tree", parent):
            raise OperationError(f"{entry.name}: the staged tree {tree[:12]} did not come through the sandbox's "
                                 "check whole (objects missing or refused): nothing was committed")
        sign = g.git(root, "config", "--type=bool", "commit.gpgSign", check=False).stdout.strip() == "true"
        sha = g.git(root, "commit-tree", *(["-S"] if sign else []), tree, *(["-p", parent] if parent else []),
                    "-F", "-", input=cleaned).stdout.strip()
        subject = cleaned.splitlines()[0] if cleaned.strip() else ""
        g.git(root, "update-ref", "-m", f"commit: {subject}", f"refs/heads/{entry.branch}", sha, parent or "")
        bring_in(self.project, entry)  # the agent's ref folder follows the branch
        with contextlib.suppress(OperationError):
            hook("post-commit")  # as git does: its failure changes nothing
        return sha

    # -- merge -----------------------------------------------------------------------------------------------

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

    def _checked_out_at(self, branch: str) -> Path | None:
        """Where `branch` is checked out, as only the user's own git state says: the primary's HEAD, or the HEAD of
        a linked worktree that is none of daintree's (its `.git` file and its admin dir name each other).

        What `git worktree list` says of an agent's worktree comes from its admin dir, the agent's to write
        (DESIGN.md 2a rule 9): b's HEAD made `ref: refs/heads/develop` had a merge into develop run `git merge` in
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
              complete_task: bool = False, verify: bool = True) -> MergeResult:
        """Merge a worktree's branch back. `verify=False` (`--no-verify`) skips the pre_merge checks: a person's
        explicit choice, refused from inside a session (an agent may not waive its own checks)."""
        if strategy not in STRATEGIES:
            raise InputError(f"invalid strategy {strategy!r} (expected one of: {', '.join(STRATEGIES)})")
        if not verify:
            require_outside_session(self.project, "--no-verify")
        entry = self._entry(name)
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
        holder = self._checked_out_at(target)
        if holder is not None:
            untracked = set(_untracked(holder))
            held_dirty = [f for f in g.dirty_files(holder) if f not in untracked]
            if held_dirty:
                raise OperationError(f"{target} is checked out at {holder} with uncommitted changes "
                                     f"({', '.join(held_dirty[:5])}); commit or stash them first")
        branch_tip = g.rev_parse_commit(root, entry.branch)
        target_tip = g.rev_parse_commit(root, target)
        assert branch_tip is not None and target_tip is not None
        if g.is_ancestor(root, branch_tip, target_tip):
            return MergeResult(name, target, strategy, target_tip, f"{entry.branch} is already merged into {target}")
        if strategy == "ff" and not g.is_ancestor(root, target_tip, branch_tip):
            raise OperationError(f"{target} has diverged from {entry.branch}: a fast-forward is impossible "
                                 "(use --strategy rebase or squash)")
        self._refuse_state_changes(entry, target_tip, branch_tip)
        self._refuse_ignored_overwrites(entry, target, holder, f"{target_tip}...{branch_tip}")
        if verify:
            run_hooks(self.project, "pre_merge", entry)  # fails closed: an untrusted check refuses the merge
        brief = {**entry.brief(), "target": target, "strategy": strategy, "verified": verify}
        task_brief = self.worktrees.tasks.brief_of(entry.task_id)
        self.project.events.append("worktree.merge.before", worktree=brief, task=task_brief)
        # Every git command below runs the user's hooks as they are now, never ones the merged branch brings.
        with self._hooks_as_they_are(holder or root) as hooks:
            try:
                new_tip = self._merge_in_temp(entry, target, target_tip, strategy, hooks)
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
        result = MergeResult(name, target, strategy, new_tip, f"merged {entry.branch} into {target} ({strategy})")
        self.project.events.append("worktree.merge.after", worktree=brief, commit=new_tip, task=task_brief)
        if remove:
            removed = self.worktrees.remove(name, complete_task=complete_task, delete_branch=strategy != "squash")
            result.removed = removed.removed
            result.warnings += removed.warnings
        elif complete_task and entry.task_id is not None:
            from daintree_tui.core.models import TaskStatus

            self.worktrees.tasks.update(entry.task_id, status=TaskStatus.COMPLETED)
        return result

    def _refuse_state_changes(self, entry: WorktreeEntry, target_tip: str, branch_tip: str) -> None:
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
        lost = ignored_in_the_way(holder, _written_paths(self.project.root, *revs))
        if lost:
            raise OperationError(f"{entry.branch} would replace files that git ignores in {holder}, where "
                                 f"{target} is checked out ({_named(lost)}): refusing it (git writes over ignored "
                                 "files without a word); nothing was changed: move them aside or drop them from "
                                 "the branch, then merge again")

    def _merge_in_temp(self, entry: WorktreeEntry, target: str, target_tip: str, strategy: str,
                       hooks: list[str]) -> str:
        """Produce the new target commit in a throwaway detached worktree; nothing else changes.

        No hook runs there (`hooks` applies to the target's own worktree, in `_advance`): that worktree holds the
        agent's files, and the user's hooks run what the tree holds (pre-commit's config, lint-staged, a
        post-merge `npm install`), so a squash's pre-commit or a fast-forward's post-merge ran the agent's code
        outside its sandbox. The pre_merge checks, sandboxed, are where a merge is checked.
        """
        root = self.project.root
        hooks = list(NO_HOOKS)
        self.project.tmp_root.mkdir(parents=True, exist_ok=True)
        tmp = self.project.tmp_root / f".merge-{entry.name}-{uuid.uuid4().hex[:8]}"
        start = target_tip if strategy != "rebase" else entry.branch
        g.git(root, *hooks, "worktree", "add", "--quiet", "--detach", str(tmp), start)
        try:
            if strategy == "ff":
                g.git(tmp, *hooks, "merge", "--quiet", "--ff-only", entry.branch)
            elif strategy == "squash":
                proc = g.git(tmp, *hooks, "merge", "--squash", entry.branch, check=False)
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

    # -- pull request ----------------------------------------------------------------------------------------

    def pr(self, name: str, draft: bool = False, remote: str = "origin") -> dict[str, Any]:
        """Push the branch and open a PR with `gh`; without a usable `gh`, say how to do it by hand."""
        entry = self._entry(name)
        root = self.project.root
        target = self.target_branch(entry, None)
        push = f"git push -u {remote} {entry.branch}"
        gh = shutil.which("gh")
        if gh is None:
            raise OperationError(f"gh (GitHub CLI) is not installed: push with `{push}` and open the pull "
                                 "request on your forge")
        if g.git(root, "remote", "get-url", remote, check=False).returncode != 0:
            raise OperationError(f"no remote named {remote!r}: add one, then `{push}`")
        auth = subprocess.run([gh, "auth", "status"], capture_output=True, text=True, cwd=root)
        if auth.returncode != 0:
            raise OperationError(f"gh is not logged in (`gh auth login`); or push with `{push}` and open the PR "
                                 "by hand")
        target_tip, branch_tip = g.rev_parse_commit(root, target), g.rev_parse_commit(root, entry.branch)
        if target_tip is not None and branch_tip is not None:
            self._refuse_state_changes(entry, target_tip, branch_tip)
        g.git(root, "push", "--quiet", "-u", remote, f"{entry.branch}:{entry.branch}")
        task = self.worktrees.tasks.find(entry.task_id) if entry.task_id is not None else None
        title = task.subject if task else entry.branch
        body = (task.description if task and task.description else f"Work from worktree {name}.") + \
            f"\n\n_Opened by daintree from `{entry.branch}`._"
        args = [gh, "pr", "create", "--head", entry.branch, "--base", target, "--title", title, "--body", body]
        if draft:
            args.append("--draft")
        # From the primary: gh runs git where it starts, and the worktree and its admin dir are the agent's.
        proc = subprocess.run(args, capture_output=True, text=True, cwd=root)
        if proc.returncode != 0:
            raise OperationError(f"gh pr create failed: {g.last_line(proc.stderr) or proc.returncode}")
        url = g.last_line(proc.stdout)
        self.project.events.append("worktree.pr", worktree=entry.brief(), url=url, draft=draft,
                                   task=task.brief() if task else None)
        return {"name": name, "branch": entry.branch, "base": target, "url": url, "draft": draft}


