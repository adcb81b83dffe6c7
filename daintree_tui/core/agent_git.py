"""What an agent's git writes, brought in the way git's receive-pack brings in a push (DESIGN.md 2a rule 9).

Inside its sandbox an agent's git sees, at the usual paths of the shared repository:
- `objects/`: its own quarantine, `.worktrees/.agent-git/<name>/objects/` (writable), whose `info/alternates`
  names the shared store, bound read-only at SHARED_OBJECTS_MOUNT: it reads every object and writes only there;
- `refs/heads/<prefix>/` and `logs/refs/heads/<prefix>/`: folders of its own (`refs/`, `logs/` beside the
  quarantine), holding its branch alone. Nothing it plants there (a `<ref>.lock`, a folder, a link) is seen by
  any other worktree, by the user's git or by daintree's.

The outside brings that in (`bring_in`) before it reads the branch (commit, diff, merge, list, remove, doctor,
each sandbox start, the dashboard's poll):
1. Each quarantined loose object is copied into a file of ours while it is checked: a regular file (no link, no
   FIFO), at most OBJECT_LIMIT bytes, a known type, its content hashing to its name. Only then does that copy join
   the shared store. A pack goes through `git index-pack`, which names every object by the content it reads.
2. The branch moves to the agent's commit with `git update-ref NEW OLD`, only when that commit and everything it
   reaches is in the shared store (git's own connectivity check, `rev-list --objects`), and only from the value
   the outside last gave it (`synced`): a branch the user moved meanwhile is never overwritten.
A branch the outside moves (a rebase merge, a commit made here, the user's `git branch -f`) is pushed down into
the agent's folder the same way, under git's own `<ref>.lock`.

Every path under the quarantine and the agent's ref folders is the agent's to write: all of it is opened
relative to a folder descriptor, never through a link (O_NOFOLLOW), never waiting on a FIFO (O_NONBLOCK).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import subprocess
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from daintree_tui.core import git as g
from daintree_tui.core.log import warn
from daintree_tui.core.mounts import SHARED_OBJECTS_MOUNT
from daintree_tui.core.store import atomic_write_text

OBJECT_LIMIT = 1024 * 1024 * 1024  # bytes of one loose object, on disk and inflated
PACK_LIMIT = 4 * 1024 * 1024 * 1024  # bytes of one quarantined pack
# The address space of the `git index-pack` that reads a quarantined pack: a delta may rebuild an object of at
# most OBJECT_LIMIT from a base as large (both held whole while hashed), with room for git itself. Unbounded, a
# pack of 2 KB whose deltas each copy their base twice had index-pack allocate 8 GiB and more, outside the sandbox.
PACK_MEMORY = 3 * OBJECT_LIMIT + 256 * 1024 * 1024
REF_LIMIT = 4096
# Entries of the quarantine (loose objects, what is refused, packs) one poll of the dashboard looks at: the agent
# makes 200,000 empty files in a second or two, and each costs the outside a check (20 s for those). The rest
# waits for the next poll; a command (commit, merge, list) takes them all.
QUICK_ENTRIES = 5000
# Bytes of loose objects one poll inflates to check them. A loose object is checked whole, whatever its name: one
# zlib bomb of 1 MB (1 GiB of zeros) copied under 5,000 names cost the outside two hours of checking, per poll.
QUICK_BYTES = 512 * 1024 * 1024
OBJECT_TYPES = (b"blob", b"tree", b"commit", b"tag")
_CHUNK = 1 << 20
_HEX = frozenset("0123456789abcdef")
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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


@dataclass
class Ingested:
    """What one pass over a quarantine did."""

    objects: int = 0
    packs: int = 0
    rejected: list[str] = field(default_factory=list)
    more: bool = False  # stopped at its limit: entries are left for the next pass
    inflated: int = 0  # bytes of loose objects inflated to check them


def branch_leaf(branch: str) -> str:
    """The ref file's name inside the branch's folder (`wt/name` -> `name`)."""
    return branch.rsplit("/", 1)[-1]


@contextlib.contextmanager
def _folder(path: Path | str, dir_fd: int | None = None) -> Iterator[int]:
    """A descriptor of the real folder at `path`, never a link's target."""
    fd = os.open(path, _DIR, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _object_format(common_dir: Path) -> str:
    proc = g.git(common_dir, "rev-parse", "--show-object-format", check=False)
    algorithm = proc.stdout.strip() or "sha1"
    return algorithm if algorithm in ("sha1", "sha256") else "sha1"


# -- objects ---------------------------------------------------------------------------------------------------


def _copy_checked(src_fd: int, out_fd: int, oid: str, algorithm: str, done: Ingested) -> bool:
    """Copy the loose object at `src_fd` into `out_fd` while checking it; True when it is what its name says.

    The copy is what joins the store, never the agent's file: the agent may still hold that file open, or a hard
    link to it, and change it after the check."""
    info = os.fstat(src_fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > OBJECT_LIMIT:
        return False
    inflate = zlib.decompressobj()
    digest = hashlib.new(algorithm)
    header = b""
    declared: int | None = None
    inflated = 0
    read = 0
    while True:
        data = os.read(src_fd, _CHUNK)
        if not data:
            break
        read += len(data)
        if read > OBJECT_LIMIT:
            return False
        os.write(out_fd, data)
        try:
            chunk = inflate.decompress(data, _CHUNK)
            while True:
                digest.update(chunk)
                done.inflated += len(chunk)
                if declared is None:
                    header += chunk
                    nul = header.find(b"\0")
                    if nul < 0:
                        if len(header) > 32:
                            return False
                    else:
                        kind, _, size = header[:nul].partition(b" ")
                        if kind not in OBJECT_TYPES or not size.isdigit() or len(size) > 12 \
                                or (len(size) > 1 and size.startswith(b"0")):
                            return False
                        declared = int(size)
                        inflated = len(header) - nul - 1
                        header = b""
                else:
                    inflated += len(chunk)
                if inflated > OBJECT_LIMIT or (declared is not None and inflated > declared):
                    return False
                if not inflate.unconsumed_tail:
                    break
                chunk = inflate.decompress(inflate.unconsumed_tail, _CHUNK)
        except zlib.error:
            return False
    return (inflate.eof and not inflate.unused_data and declared is not None and inflated == declared
            and digest.hexdigest() == oid)


def _take_object(fanout_fd: int, name: str, oid: str, shared: Path, algorithm: str, done: Ingested) -> bool:
    """One quarantined object into the shared store (True), or refused (False); the agent's file is removed."""
    try:
        src = os.open(name, _READ, dir_fd=fanout_fd)
    except OSError:  # a link (ELOOP), or gone meanwhile
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=fanout_fd)
        return False
    target_dir = shared / oid[:2]
    target = target_dir / oid[2:]
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode) or not 0 < info.st_size <= OBJECT_LIMIT:
            return False  # before any file of ours is made in the store for it
        if target.exists():
            return True  # the store has it: nothing of the agent's is needed
        target_dir.mkdir(exist_ok=True)
        tmp = target_dir / f"tmp_obj_daintree_{os.getpid()}_{oid[2:10]}"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444)
        try:
            good = _copy_checked(src, out, oid, algorithm, done)
            if good:
                os.fsync(out)
        finally:
            os.close(out)
        try:
            if good:
                with contextlib.suppress(FileExistsError):
                    os.link(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return good
    finally:
        os.close(src)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=fanout_fd)


def _take_pack(pack_fd: int, name: str, common_dir: Path) -> bool:
    """A quarantined pack through `git index-pack`, which writes the store's own copy and names each object by
    the content it reads (the agent's `.idx` is never used)."""
    try:
        src = os.open(name, _READ, dir_fd=pack_fd)
    except OSError:
        return False
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode) or info.st_size > PACK_LIMIT:
            return False
        os.set_blocking(src, True)
        # One thread (each would rebuild objects of its own at once), in an address space of PACK_MEMORY: an
        # object it cannot rebuild there fails the pack, as one over OBJECT_LIMIT fails a loose object.
        argv, env = g.command(common_dir, "-c", "pack.threads=1", "index-pack", "--stdin", "--fix-thin")
        limited = ["sh", "-c", 'ulimit -v "$1" 2>/dev/null; shift; exec "$@"', "sh", str(PACK_MEMORY // 1024),
                   *argv]
        proc = subprocess.run(limited, stdin=src, capture_output=True, env=env, timeout=600)
        return proc.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        os.close(src)


def ingest(common_dir: Path, quarantine: Path, limit: int | None = None,
           limit_bytes: int | None = None) -> Ingested:
    """Bring the quarantine's objects into the shared store, each checked; what fails a check is deleted. With
    `limit` (`limit_bytes`), it stops after that many entries (bytes inflated): `more` says some were left."""
    done = Ingested()
    seen = 0

    def full() -> bool:
        nonlocal seen
        seen += 1
        if (limit is not None and seen > limit) or (limit_bytes is not None and done.inflated >= limit_bytes):
            done.more = True
        return done.more

    try:
        top = os.open(quarantine, _DIR)
    except OSError:
        return done
    shared = common_dir / "objects"
    algorithm = ""
    name_length = 0
    try:
        for entry in os.scandir(top):
            if done.more:
                break
            if len(entry.name) != 2 or not set(entry.name) <= _HEX:
                continue
            if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                done.rejected.append(entry.name)
                with contextlib.suppress(OSError):
                    os.unlink(entry.name, dir_fd=top)
                continue
            with _folder(entry.name, top) as fanout:
                for loose in os.scandir(fanout):
                    if loose.name.startswith("tmp_"):
                        continue  # git writing an object right now
                    if full():
                        break
                    if not algorithm:
                        algorithm = _object_format(common_dir)
                        name_length = hashlib.new(algorithm).digest_size * 2 - 2
                    oid = entry.name + loose.name
                    if len(loose.name) != name_length or not set(loose.name) <= _HEX:
                        done.rejected.append(oid)
                        with contextlib.suppress(OSError):
                            os.unlink(loose.name, dir_fd=fanout)
                    elif _take_object(fanout, loose.name, oid, shared, algorithm, done):
                        done.objects += 1
                    else:
                        done.rejected.append(oid)
        with contextlib.suppress(OSError), _folder("pack", top) as packs:
            names = set() if done.more else {e.name for e in os.scandir(packs)}
            for name in sorted(names):
                # A pack is whole once git has written its index beside it.
                if not (name.startswith("pack-") and name.endswith(".pack")) or name[:-5] + ".idx" not in names:
                    continue
                if full():
                    break
                if _take_pack(packs, name, common_dir):
                    done.packs += 1
                else:
                    done.rejected.append(name)
                for suffix in (".pack", ".idx", ".rev", ".keep", ".bitmap", ".promisor", ".mtimes"):
                    with contextlib.suppress(OSError):
                        os.unlink(name[:-5] + suffix, dir_fd=packs)
    except OSError as exc:
        warn(f"sandbox: could not read the quarantine {quarantine}: {exc.strerror or exc}")
    finally:
        os.close(top)
    if done.rejected:
        shown = ", ".join(done.rejected[:3]) + (", ..." if len(done.rejected) > 3 else "")
        warn(f"sandbox: refused {len(done.rejected)} object(s) an agent wrote ({shown}): a link, not a regular "
             "file, too large, or content that is not what its name says")
    return done


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
    return value if len(value) in (40, 64) and set(value) <= _HEX else None


def agent_value(paths: AgentGit, branch: str) -> str | None:
    """The commit the agent's own ref file names, or None (missing, a link, a symbolic ref, not an id)."""
    try:
        with _folder(paths.refs) as refs:
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


def push_down(paths: AgentGit, branch: str, value: str) -> bool:
    """Write `value` into the agent's ref file as git does (`<ref>.lock`, then a rename); False while a git of
    the agent's holds the lock."""
    leaf = branch_leaf(branch)
    try:
        with _folder(paths.refs) as refs:
            try:
                fd = os.open(f"{leaf}.lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o644, dir_fd=refs)
            except FileExistsError:
                return False
            try:
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
    if real is not None and push_down(paths, branch, real):
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
                if entry.name == "pack" or (len(entry.name) == 2 and set(entry.name) <= _HEX):
                    with contextlib.suppress(OSError), os.scandir(entry.path) as inner:
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
    with contextlib.suppress(FileExistsError):
        os.mkdir(path.name, 0o755, dir_fd=dir_fd)
    try:
        with _folder(path.name, dir_fd):
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
    with _folder(paths.objects) as objects:
        _make_folder(paths.objects / "info", objects)
        _make_folder(paths.objects / "pack", objects)
        with _folder("info", objects) as info:
            if _read_small(info, "alternates") == f"{SHARED_OBJECTS_MOUNT}\n":
                return _give_branch(common_dir, branch, paths)  # as it was: nothing to write (a full disk)
            tmp = f"alternates.{os.getpid()}.daintree-tmp"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=info)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=info)
            try:
                os.write(fd, f"{SHARED_OBJECTS_MOUNT}\n".encode())
            finally:
                os.close(fd)
            os.replace(tmp, "alternates", src_dir_fd=info, dst_dir_fd=info)
    _give_branch(common_dir, branch, paths)


def _give_branch(common_dir: Path, branch: str, paths: AgentGit) -> None:
    """The agent's ref folder holds its branch as it is now (written only when it differs)."""
    real = _real(common_dir, branch)
    if real is None:
        return
    given = agent_value(paths, branch) == real or push_down(paths, branch, real)
    if given and _synced(paths) != real:
        atomic_write_text(paths.synced, real + "\n")
