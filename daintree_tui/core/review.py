"""Review and integrate: diff, commit, merge back (core/merge.py), open a PR."""

from __future__ import annotations

import os
import shutil
import stat as file_mode
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daintree_tui.core import git as g
from daintree_tui.core.capped import BYTES, cut_at
from daintree_tui.core.confined_commit import commit_confined
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.ignored_paths import IGNORED_MARK, ignored_in_the_way, marked, written_paths
from daintree_tui.core.merge import STRATEGIES, Merger, MergeResult
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.worktree_git import WorktreeGit
from daintree_tui.core.worktrees import WorktreeService

__all__ = ["IGNORED_MARK", "STRATEGIES", "MergeResult", "ReviewService", "ignored_in_the_way", "marked"]

UNTRACKED_DIFF_BYTES = 8 * 1024 * 1024  # an untracked file larger than this is named in a diff, not shown
DIFF_LIMIT = 8 << 20  # bytes of `worktree diff` (the whole of it); the dashboard's diff view reads less


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


class ReviewService:
    """Diff, commit, merge and PR for the worktrees of one project."""

    def __init__(self, worktrees: WorktreeService) -> None:
        self.worktrees = worktrees
        self.project = worktrees.project
        self.merger = Merger(worktrees)

    def _entry(self, name: str, check_log: bool = True) -> WorktreeEntry:
        return self.merger.entry(name, check_log)

    # -- diff ------------------------------------------------------------------------------------------------

    def diff(self, name: str, stat: bool = False, limit: int = DIFF_LIMIT) -> str:
        """Changes against the base commit: committed, uncommitted and untracked files alike; first a line
        `replaces an ignored file: PATH` for each path that a merge would refuse (`ignored_replaced`)."""
        return marked(*self.diff_report(name, stat, limit))

    def diff_report(self, name: str, stat: bool = False, limit: int = DIFF_LIMIT) -> tuple[str, list[str]]:
        """The diff as git gives it (no mark), and what it would replace that is ignored (`ignored_replaced`).
        At most `limit` bytes of it, then a line that says it was cut: the files are as large as the agent made
        them (every untracked one up to UNTRACKED_DIFF_BYTES, as many as it likes), and the dashboard highlights
        the whole of what it reads on its event loop."""
        entry = self._entry(name, check_log=False)  # what is in the worktree, whatever its branch says
        path = Path(entry.path)
        git = WorktreeGit(self.project, entry)
        untracked = git.untracked()
        ignored = self.ignored_replaced(entry, git, untracked)
        args = ["diff", "--no-color", "--no-ext-diff"] + (["--stat"] if stat else []) + [entry.base_commit]
        read = git.capped(args, limit)
        parts = [read.text]
        room = limit - len(read.text.encode("utf-8", BYTES))
        cut = read.cut
        shown: list[str] = []
        for rel in untracked:
            if cut:
                break
            try:
                info = os.lstat(path / rel)
            except OSError:
                continue
            line = None
            if file_mode.S_ISREG(info.st_mode) and info.st_size > UNTRACKED_DIFF_BYTES:
                # The agent's file: a sparse one of 100 GB took `--stat` to MemoryError (one line without end)
                # and the dashboard's diff to minutes of git reading zeros.
                line = (f" {rel} (untracked) | {info.st_size} bytes, not shown\n" if stat else
                        f"untracked file {rel}: {info.st_size} bytes, too large to show\n")
            elif stat:
                lines = _line_count(path / rel) if file_mode.S_ISREG(info.st_mode) else 0
                line = f" {rel} (untracked) | {lines} +\n"
            else:
                shown.append(rel)
            if line is not None:
                size = len(line.encode("utf-8", BYTES))
                cut = size > room
                parts.append(line[:max(room, 0)])
                room -= size
        if shown and not cut:
            # One sandboxed git for them all: `diff --no-index` compares two paths, so a shell loop runs it.
            loop = 'for f; do git diff --no-color --no-index -- /dev/null "$f"; done; exit 0'
            more = git.capped(shown, room, shell=loop)
            parts.append(more.text)
            cut = more.cut
        text = "".join(parts)
        if cut:
            text = cut_at(text, limit, "file list" if stat else "diff", "" if stat else
                          "`--stat` lists every file that differs")
        return text, ignored

    def ignored_replaced(self, entry: WorktreeEntry, git: WorktreeGit, untracked: list[str]) -> list[str]:
        """What the checkout of the worktree's merge target holds ignored that its changes would replace (so a
        merge of them now refuses): its committed and uncommitted changes against its base (read by `git`, in its
        sandbox), and `untracked`."""
        try:
            holder = self.merger.checked_out_at(self.target_branch(entry, None))
        except InputError:  # the primary on a detached HEAD: no target to say anything of
            return []
        if holder is None:
            return []
        return ignored_in_the_way(holder, written_paths(git.path, entry.base_commit, run=git.run) + untracked)

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
        sha = commit_confined(self.project, entry, git, message)
        self.project.events.append("worktree.commit", worktree=entry.brief(), commit=sha, files=files,
                                   task=self.worktrees.tasks.brief_of(entry.task_id))
        return {"name": name, "commit": sha, "files": files, "message": message}

    # -- merge -----------------------------------------------------------------------------------------------

    def target_branch(self, entry: WorktreeEntry, into: str | None) -> str:
        return self.merger.target_branch(entry, into)

    def merge(self, name: str, strategy: str = "ff", into: str | None = None, remove: bool = False,
              complete_task: bool = False, verify: bool = True,
              gate: Callable[[str], None] | None = None) -> MergeResult:
        """Merge a worktree's branch back (`Merger.merge`). `verify=False` (`--no-verify`) skips the pre_merge
        checks: a person's explicit choice, refused from inside a session. `gate` is asked of the commit merged."""
        return self.merger.merge(name, strategy, into, remove, complete_task, verify, gate)

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
            self.merger.refuse_state_changes(entry, target_tip, branch_tip)
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
