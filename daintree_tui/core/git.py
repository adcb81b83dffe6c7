"""Thin, fast wrappers over the git CLI.

Every call shells out to git directly: one fork each, no object parsing in Python, nothing imported that the
CLI's start-up would pay for. (GitPython stays a dependency of the project, but no path has needed its object
model yet; its import alone costs more than most of these calls.)
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from daintree_tui.core.errors import OperationError
from daintree_tui.core.log import suppressed, warn
from daintree_tui.core.spawn import NO_GIT, command, start
from daintree_tui.core.store import remove_tree

A = TypeVar("A")
B = TypeVar("B")


def git(cwd: Path, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `git -C cwd args...` and capture its output as text.

    Raises:
        OperationError: when `check` is set and git exits non-zero; the message is git's last stderr line.
    """
    argv, env = command(cwd, *args)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise OperationError(NO_GIT) from None
    if check:
        _check(args, proc.returncode, proc.stderr)
    return proc


def _check(args: Sequence[str], returncode: int, stderr: str) -> None:
    if returncode != 0:
        raise OperationError(f"git {args[0]} failed: {last_line(stderr) or f'exit {returncode}'}")


def git_while(cwd: Path, *args: str, meanwhile: Callable[[], A]) -> A:
    """Run `git -C cwd args...` (raising as `git()` does) with `meanwhile` run here while git runs; its result,
    or its failure once git has ended.

    For Python work of the caller's own beside a long git command: done in a thread instead, it held the GIL
    while this thread waited to start git (imports are CPU work), and `worktree add` started 6-36 ms late."""
    proc = start(cwd, *args)
    try:
        result = meanwhile()
    finally:
        _, stderr = proc.communicate()
    _check(args, proc.returncode, stderr)
    return result


def both(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """Two independent read-only queries at the same time (each is a fork and a wait for git): the second in a
    thread, the first here. An exception of either is raised after both have ended, the first's first."""
    outcome: list[B] = []
    failure: list[BaseException] = []

    def run_second() -> None:
        try:
            outcome.append(second())
        except BaseException as exc:  # raised in the caller's thread below
            failure.append(exc)

    thread = threading.Thread(target=run_second, name="git-query")
    thread.start()
    try:
        result = first()
    finally:
        thread.join()
    if failure:
        raise failure[0]
    return result, outcome[0]


class ParallelCheckout:
    """Whether `git worktree add` checks out with several processes (`checkout.workers`): yes, one per core,
    unless the user's git config chose. Asked of git at once, read when the add is about to start.

    On the 2-core target a 10,000-file add took 0.3-0.6x as long as a sequential one while the disk was throttled
    (it waits on writes, which several workers overlap), about 0.95x when the disk was quick, and the same on
    tmpfs. Git checks out fewer than `checkout.thresholdForParallelism` files (100) in one process anyway."""

    def __init__(self, root: Path) -> None:
        self._asked: subprocess.Popen[str] | None = None
        with suppressed(OperationError):  # no git: the add says so
            self._asked = start(root, "config", "--get", "checkout.workers")

    def options(self) -> list[str]:
        """Options for the add: none when the user set `checkout.workers` (or git could not say)."""
        if self._asked is None:
            return []
        self._asked.communicate()
        return ["-c", "checkout.workers=0"] if self._asked.returncode == 1 else []


def pinned_hooks(root: Path) -> list[str]:
    """Options that make git run the hooks the primary worktree at `root` would run, wherever it runs.

    A relative `core.hooksPath` (husky and the like: `.husky`, `.githooks`) is resolved where a hook runs: in an
    agent's worktree, or in a merge worktree checked out from its branch, that is a folder the agent wrote, and
    a commit or merge made there by the user (unconfined) would run the agent's scripts outside its sandbox.
    """
    proc = git(root, "rev-parse", "--path-format=absolute", "--git-path", "hooks", check=False)
    hooks = proc.stdout.strip()
    return ["-c", f"core.hooksPath={hooks}"] if proc.returncode == 0 and hooks else []


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def rev_parse_commit(root: Path, ref: str) -> str | None:
    """The commit a ref names, or None when it names none."""
    if not ref or ref.startswith("-") or "\0" in ref:
        return None
    proc = git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def moved_outside_git(root: Path, branch: str) -> tuple[str, str] | None:
    """(where the branch is, where git's log of it says it is) when the two differ, else None.

    Every git that moves a branch logs it in `logs/refs/heads/<branch>`; a sandboxed agent can write the ref file
    of a branch made after its sandbox started (they share the ref folder), but not that branch's log. A branch
    without a log says nothing.
    """
    ref = f"refs/heads/{branch}"
    logged = git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}@{{0}}", check=False)
    if logged.returncode != 0 or branch.startswith("-"):
        return None
    current = git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", ref, check=False)
    expected = logged.stdout.strip()
    now = current.stdout.strip() if current.returncode == 0 else ""
    return (now, expected) if now != expected else None


def ref_candidates(root: Path, ref: str) -> list[str]:
    """The full ref names a short name could mean (git's own order: refs/X, tag, branch, remote-tracking). Two or
    more is an ambiguity git would settle silently (a tag wins over a branch): callers reject it instead.
    An expression (`main~2`, a commit id, `HEAD`) gives no candidates."""
    if not ref or ref.startswith("-") or ref.startswith("refs/") or any(c in ref for c in "~^:@{}*?[ \\") \
            or ref.isupper():
        return []
    wanted = [f"refs/{ref}", f"refs/tags/{ref}", f"refs/heads/{ref}", f"refs/remotes/{ref}",
              f"refs/remotes/{ref}/HEAD"]
    proc = git(root, "for-each-ref", "--format=%(refname)", *wanted, check=False)
    found = set(proc.stdout.split())
    return [r for r in wanted if r in found]


def branch_exists(root: Path, branch: str) -> bool:
    return git(root, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False).returncode == 0


def branch_name_ok(root: Path, branch: str) -> bool:
    return git(root, "check-ref-format", "--branch", branch, check=False).returncode == 0


def is_ancestor(root: Path, commit: str, of: str) -> bool:
    return git(root, "merge-base", "--is-ancestor", commit, of, check=False).returncode == 0


# How a caller runs git: `git` itself, or a worktree's sandboxed runner (core/worktree_git.py) of the same shape.
Runner = Callable[..., subprocess.CompletedProcess[str]]


def dirty_files(worktree: Path, run: Runner = git) -> list[str]:
    """Files with uncommitted or untracked changes in a worktree (ignored files excluded). A submodule counts
    when its HEAD moved; what is uncommitted inside one is not looked at (see `populated_submodules`)."""
    proc = run(worktree, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=dirty")
    return parse_porcelain_z(proc.stdout)


def populated_submodules(worktree: Path, run: Runner = git) -> list[str]:
    """Gitlinks of the worktree's index whose folder holds a repository: work there cannot be inspected from
    outside the sandbox (git would run that repository's own config), so deleting it may lose work."""
    proc = run(worktree, "ls-files", "--stage", "-z")
    found = []
    for record in proc.stdout.split("\0"):
        meta, _, path = record.partition("\t")
        if meta.startswith("160000 ") and os.path.lexists(worktree / path / ".git"):
            found.append(path)
    return found


def parse_porcelain_z(out: str) -> list[str]:
    files: list[str] = []
    parts = out.split("\0")
    i = 0
    while i < len(parts):
        item = parts[i]
        if len(item) < 4:
            i += 1
            continue
        status, path = item[:2], item[3:]
        files.append(path)
        # A rename or copy carries its source path in the next field.
        i += 2 if status[0] in "RC" else 1
    return files


def ahead_behind(root: Path, base: str, branch: str) -> tuple[int, int]:
    """(ahead, behind): commits on `branch` not in `base`, and the reverse."""
    proc = git(root, "rev-list", "--left-right", "--count", f"{base}...{branch}", check=False)
    try:
        behind, ahead = (int(x) for x in proc.stdout.split())
    except ValueError:
        return 0, 0
    return ahead, behind


@dataclass(frozen=True)
class GitWorktree:
    """One record of `git worktree list --porcelain`."""

    path: Path
    head: str
    branch: str | None
    prunable: bool = False


# The files of a linked worktree's admin dir that `git worktree list` reads. That dir is writable inside the
# worktree's sandbox (git writes HEAD there by renaming over it), so an agent can put a link to /dev/zero (or a
# huge file) in their place, and git then reads it until memory runs out: `git worktree list` (ours, the
# dashboard's, the user's own) hung. Such a file is removed before we ask git, with a warning. `locked` too: the
# listing reads it whole for the lock's reason (a FIFO there hung it).
ADMIN_FILES = ("HEAD", "gitdir", "commondir", "locked")
MAX_ADMIN_FILE = 64 * 1024
# Read by the user's own `git gc` (its objects are kept): a FIFO there hung it, for good, waiting for a writer.
ADMIN_INDEX = "index"


def drop_unreadable_admin_files(common_dir: Path, names: Sequence[str] = (*ADMIN_FILES, ADMIN_INDEX)) -> list[Path]:
    """Remove every admin-dir file git would read forever (not a regular file, or too large); returns them."""
    dropped: list[Path] = []
    try:
        admins = [Path(e.path) for e in os.scandir(common_dir / "worktrees") if e.is_dir(follow_symlinks=False)]
    except OSError:
        return dropped
    for admin in admins:
        for name in names:
            path = admin / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or (name != ADMIN_INDEX and st.st_size > MAX_ADMIN_FILE):
                with suppressed(OSError):
                    remove_tree(path) if stat.S_ISDIR(st.st_mode) else path.unlink()  # a folder: git dies on it
                    dropped.append(path)
                    warn(f"removed {path}: not a small regular file (git would read it forever); set the worktree's "
                         f"branch again if it was its HEAD (git -C <worktree> checkout <branch>)")
    return dropped


def list_worktrees(root: Path) -> list[GitWorktree]:
    if (root / ".git").is_dir():
        drop_unreadable_admin_files(root / ".git")
    out = git(root, "worktree", "list", "--porcelain").stdout
    result: list[GitWorktree] = []
    for block in out.strip().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            fields[key] = value
        if "worktree" not in fields:
            continue
        branch = fields.get("branch")
        if branch and branch.startswith("refs/heads/"):
            branch = branch[len("refs/heads/"):]
        result.append(GitWorktree(Path(fields["worktree"]), fields.get("HEAD", ""), branch, "prunable" in fields))
    return result


def add_exclude(common_dir: Path, patterns: Sequence[str]) -> None:
    """Add patterns to `.git/info/exclude` (never to the user's .gitignore), each once."""
    exclude = common_dir / "info" / "exclude"
    try:
        existing = exclude.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        existing = []
    missing = [p for p in patterns if p not in existing]
    if not missing:
        return
    exclude.parent.mkdir(parents=True, exist_ok=True)
    prefix = "" if not existing or exclude.read_text(encoding="utf-8").endswith("\n") else "\n"
    with exclude.open("a", encoding="utf-8") as fh:
        fh.write(prefix + "".join(f"{p}\n" for p in missing))
