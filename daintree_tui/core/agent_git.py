"""What an agent's git writes, brought in the way git's receive-pack brings in a push (docs/design.md 2a, rule 9).

Inside its sandbox an agent's git sees, at the usual paths of the shared repository:
- `objects/`: its own quarantine, `.worktrees/.agent-git/<name>/objects/` (writable), whose `info/alternates`
  names the shared store, bound read-only at SHARED_OBJECTS_MOUNT: it reads every object and writes only there;
- `refs/heads/<prefix>/` and `logs/refs/heads/<prefix>/`: folders of its own (`refs/`, `logs/` beside the
  quarantine), holding its branch alone. Nothing it plants there (a `<ref>.lock`, a folder, a link) is seen by
  any other worktree, by the user's git or by daintree's.

The outside brings that in (`bring_in`) before it reads the branch (commit, diff, merge, list, remove, doctor,
each sandbox start, the dashboard's poll):
1. Each quarantined object is checked, then joins the shared store (core/quarantine.py).
2. The branch moves to the agent's commit with `git update-ref NEW OLD`, only when that commit and everything it
   reaches is in the shared store (git's own connectivity check, `rev-list --objects`), and only from the value
   the outside last gave it (`synced`): a branch the user moved meanwhile is never overwritten.
A branch the outside moves (a rebase merge, a commit made here, the user's `git branch -f`) is pushed down into
the agent's folder the same way, under git's own `<ref>.lock`.

Every path under the quarantine and the agent's ref folders is the agent's to write: all of it is opened
relative to a folder descriptor, never through a link (O_NOFOLLOW), never waiting on a FIFO (O_NONBLOCK).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from daintree_tui.core import git as g
from daintree_tui.core.fs_safe import real_folder, writer_tag
from daintree_tui.core.log import suppressed, warn
from daintree_tui.core.mounts import SHARED_OBJECTS_MOUNT
from daintree_tui.core.quarantine import HEX, ingest
from daintree_tui.core.store import atomic_write_text

REF_LIMIT = 4096
# Entries of the quarantine (loose objects, what is refused, packs) one poll of the dashboard looks at: the agent
# makes 200,000 empty files in a second or two, and each costs the outside a check (20 s for those). The rest
# waits for the next poll; a command (commit, merge, list) takes them all.
QUICK_ENTRIES = 5000
# Bytes of loose objects one poll inflates to check them. A loose object is checked whole, whatever its name: one
# zlib bomb of 1 MB (1 GiB of zeros) copied under 5,000 names cost the outside two hours of checking, per poll.
QUICK_BYTES = 512 * 1024 * 1024
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class AgentGit:
    """The folders of one worktree's git that its sandbox writes, all in `root` (which it cannot)."""

    root: Path  # .worktrees/.agent-git/<name>/: the outside's own

    @property
    def objects(self) -> Path:
        return self.root / "objects"

    @property
    def refs(self) -> Path:
        return self.root / "refs"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def synced(self) -> Path:
        """The branch's value as the outside last gave it to the agent or took it from it."""
        return self.root / "synced"


def branch_leaf(branch: str) -> str:
    """The ref file's name inside the branch's folder (`wt/name` -> `name`)."""
    return branch.rsplit("/", 1)[-1]


# -- the branch ------------------------------------------------------------------------------------------------


def _read_small(dir_fd: int, name: str) -> str | None:
    try:
        fd = os.open(name, _READ, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, REF_LIMIT + 1).decode("ascii", "replace")
    finally:
        os.close(fd)


def _oid(text: str | None) -> str | None:
    value = (text or "").strip()
    return value if len(value) in (40, 64) and set(value) <= HEX else None


def agent_value(paths: AgentGit, branch: str) -> str | None:
    """The commit the agent's own ref file names, or None (missing, a link, a symbolic ref, not an id)."""
    try:
        with real_folder(paths.refs) as refs:
            return _oid(_read_small(refs, branch_leaf(branch)))
    except OSError:
        return None


def _synced(paths: AgentGit) -> str | None:
    try:
        return _oid(paths.synced.read_text(encoding="ascii", errors="replace"))
    except OSError:
        return None


def _real(common_dir: Path, branch: str) -> str | None:
    return g.rev_parse_commit(common_dir, f"refs/heads/{branch}")


def push_down(paths: AgentGit, branch: str, value: str, old: str | None) -> bool:
    """Write `value` into the agent's ref file as git does (`<ref>.lock`, then a rename), only over `old` (the
    value the caller decided on, None: no ref yet), as `git update-ref NEW OLD` would; False while a git of the
    agent's holds the lock, or once it has moved the ref since."""
    leaf = branch_leaf(branch)
    try:
        with real_folder(paths.refs) as refs:
            try:
                fd = os.open(f"{leaf}.lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o644, dir_fd=refs)
            except FileExistsError:
                return False
            try:
                if _oid(_read_small(refs, leaf)) != old:  # its git committed since: that is for bring_in to take
                    os.unlink(f"{leaf}.lock", dir_fd=refs)
                    return False
                os.write(fd, (value + "\n").encode())
            finally:
                os.close(fd)
            os.replace(f"{leaf}.lock", leaf, src_dir_fd=refs, dst_dir_fd=refs)
    except OSError as exc:
        warn(f"sandbox: could not give {branch} to its agent: {exc.strerror or exc}")
        return False
    return True


def whole(common_dir: Path, value: str, kind: str, old: str | None = None) -> bool:
    """`value` is a `kind` (commit, tree) of the shared store and every object it reaches is there, beyond what
    `old` reaches (receive-pack's check). A tree the agent wrote can name a blob that the check refused."""
    found = g.git(common_dir, "cat-file", "-t", value, check=False)
    if found.returncode != 0 or found.stdout.strip() != kind:
        return False
    proc = g.git(common_dir, "rev-list", "--objects", "--quiet", value, "--not", *([old] if old else []),
                 check=False)
    return proc.returncode == 0


def _connected(common_dir: Path, value: str, old: str | None) -> bool:
    return whole(common_dir, value, "commit", old)


def sync_branch(common_dir: Path, branch: str, paths: AgentGit, who: str) -> str | None:
    """Take the agent's commit onto the real branch, or give the real branch to the agent; the branch's value."""
    real = _real(common_dir, branch)
    mine = agent_value(paths, branch)
    synced = _synced(paths)
    if mine is None or mine == real:
        if real is not None and synced != real:
            atomic_write_text(paths.synced, real + "\n")
        return real
    if mine != synced:  # the agent moved it
        if real is not None and real != synced and not g.is_ancestor(common_dir, real, mine):
            warn(f"{who}: its agent moved {branch} to {mine[:12]} while it was moved here to {real[:12]}: kept "
                 f"{real[:12]} (the agent's commit stays in its worktree's reflog)")
            return real
        if not _connected(common_dir, mine, real):
            warn(f"{who}: its agent's commit {mine[:12]} on {branch} is not whole in the repository (objects "
                 "missing or refused): the branch stays where it was")
            return real
        args = ["update-ref", "-m", f"daintree: {who}'s agent moved {branch}", f"refs/heads/{branch}", mine]
        proc = g.git(common_dir, *args, *([real] if real else [""]), check=False)
        if proc.returncode != 0:
            return _real(common_dir, branch)
        atomic_write_text(paths.synced, mine + "\n")
        return mine
    # The agent's is what it was given; the branch moved here since: the agent gets the new value.
    if real is not None and push_down(paths, branch, real, mine):
        atomic_write_text(paths.synced, real + "\n")
    return real


def _has_news(paths: AgentGit, branch: str) -> bool:
    """Whether the agent's git wrote anything since the last bring-in: an object, a pack, a move of its branch.
    A few directory reads, no git: the dashboard asks at every poll."""
    mine = agent_value(paths, branch)
    if mine is not None and mine != _synced(paths):
        return True
    try:
        with os.scandir(paths.objects) as entries:
            for entry in entries:
                if entry.name == "pack" or (len(entry.name) == 2 and set(entry.name) <= HEX):
                    with suppressed(OSError), os.scandir(entry.path) as inner:
                        if any(not e.name.startswith("tmp_") for e in inner):
                            return True
    except OSError:
        return False
    return False


def bring_in(common_dir: Path, branch: str, paths: AgentGit, who: str, quick: bool = False) -> str | None:
    """Objects in (checked), then the branch; the branch's value after (None with `quick` when nothing was new:
    then no git runs at all)."""
    if not paths.root.is_dir():
        return None if quick else _real(common_dir, branch)
    if quick and not _has_news(paths, branch):
        return None
    if ingest(common_dir, paths.objects, *((QUICK_ENTRIES, QUICK_BYTES) if quick else ())).more:
        return None  # the branch waits for its objects: the next poll goes on
    return sync_branch(common_dir, branch, paths, who)


def _make_folder(path: Path, dir_fd: int) -> None:
    """`path.name` in the folder at `dir_fd` as a real folder: a link or file the agent left there is removed."""
    with suppressed(FileExistsError):
        os.mkdir(path.name, 0o755, dir_fd=dir_fd)
    try:
        with real_folder(path.name, dir_fd):
            return
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
    os.unlink(path.name, dir_fd=dir_fd)
    os.mkdir(path.name, 0o755, dir_fd=dir_fd)


def prepare(common_dir: Path, branch: str, paths: AgentGit, who: str) -> None:
    """Make the folders a sandbox binds, after bringing in what a previous one left: the quarantine (with its
    alternates naming the shared store as the sandbox sees it), the agent's ref folder holding its branch."""
    paths.root.mkdir(parents=True, exist_ok=True)
    os.chmod(paths.root, 0o700)
    for folder in (paths.objects, paths.refs, paths.logs):
        folder.mkdir(exist_ok=True)
    bring_in(common_dir, branch, paths, who, quick=True)
    with real_folder(paths.objects) as objects:
        _make_folder(paths.objects / "info", objects)
        _make_folder(paths.objects / "pack", objects)
        with real_folder("info", objects) as info:
            if _read_small(info, "alternates") == f"{SHARED_OBJECTS_MOUNT}\n":
                return _give_branch(common_dir, branch, paths, who)  # as it was: nothing to write (a full disk)
            # A name of this thread's own: the dashboard prepares one worktree from two threads at once (its
            # start-up reconcile and its git facts), and a name per process had one remove the other's file
            # before its rename (FileNotFoundError in a toast). Both write the same line; the last rename wins.
            tmp = f"alternates.{writer_tag()}.daintree-tmp"
            with suppressed(FileNotFoundError):
                os.unlink(tmp, dir_fd=info)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=info)
            try:
                os.write(fd, f"{SHARED_OBJECTS_MOUNT}\n".encode())
            finally:
                os.close(fd)
            os.replace(tmp, "alternates", src_dir_fd=info, dst_dir_fd=info)
    _give_branch(common_dir, branch, paths, who)


def _give_branch(common_dir: Path, branch: str, paths: AgentGit, who: str) -> None:
    """The agent's ref folder holds its branch as it is now (written only when it differs). A move of the
    agent's that was not brought in is brought in first, never written over unseen: its git may commit while a
    sandbox starts for the same worktree (the dashboard's look at a new worktree runs a confined `git status`
    as its agent starts work), after the bring-in above and before this; the old value given back then took
    that commit off its branch. What the bring-in refuses (see `sync_branch`) is written over, as before."""
    real = _real(common_dir, branch)
    if real is None:
        return
    mine = agent_value(paths, branch)
    if mine is not None and mine != real and mine != _synced(paths):
        ingest(common_dir, paths.objects)
        real = sync_branch(common_dir, branch, paths, who)
        if real is None:
            return
    given = mine == real or push_down(paths, branch, real, mine)
    if given and _synced(paths) != real:
        atomic_write_text(paths.synced, real + "\n")
