"""An agent's quarantined objects brought into the shared store, each checked first, as git's receive-pack brings
a push in (docs/design.md 2a, rule 9): a loose object is copied into a file of ours while it is checked (a regular file,
no link, no FIFO, at most OBJECT_LIMIT bytes, a known type, content hashing to its name), and only that copy joins
the store; a pack goes through `git index-pack`, which names every object by the content it reads. What fails a
check is deleted. Every path under the quarantine is the agent's to write: all of it is opened relative to a folder
descriptor, never through a link (O_NOFOLLOW), never waiting on a FIFO (O_NONBLOCK).
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from daintree_tui.core import git as g
from daintree_tui.core.fs_safe import real_folder, writer_tag
from daintree_tui.core.log import suppressed, warn

OBJECT_LIMIT = 1024 * 1024 * 1024  # bytes of one loose object, on disk and inflated
PACK_LIMIT = 4 * 1024 * 1024 * 1024  # bytes of one quarantined pack
# The address space of the `git index-pack` that reads a quarantined pack: a delta may rebuild an object of at
# most OBJECT_LIMIT from a base as large (both held whole while hashed), with room for git itself. Unbounded, a
# pack of 2 KB whose deltas each copy their base twice had index-pack allocate 8 GiB and more, outside the sandbox.
PACK_MEMORY = 3 * OBJECT_LIMIT + 256 * 1024 * 1024
OBJECT_TYPES = (b"blob", b"tree", b"commit", b"tag")
_CHUNK = 1 << 20
HEX = frozenset("0123456789abcdef")
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Ingested:
    """What one pass over a quarantine did."""

    objects: int = 0
    packs: int = 0
    rejected: list[str] = field(default_factory=list)
    more: bool = False  # stopped at its limit: entries are left for the next pass
    inflated: int = 0  # bytes of loose objects inflated to check them


def _object_format(common_dir: Path) -> str:
    proc = g.git(common_dir, "rev-parse", "--show-object-format", check=False)
    algorithm = proc.stdout.strip() or "sha1"
    return algorithm if algorithm in ("sha1", "sha256") else "sha1"


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
    except FileNotFoundError:
        # Gone since the listing: another bring-in of the same worktree (the dashboard's facts, its radar, a poll)
        # took it at the same moment. Nothing of it was refused, and nothing of it reached the store here.
        return True
    except OSError:  # a link (ELOOP)
        with suppressed(OSError):
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
        tmp = target_dir / f"tmp_obj_daintree_{writer_tag()}_{oid[2:10]}"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444)
        try:
            good = _copy_checked(src, out, oid, algorithm, done)
            if good:
                os.fsync(out)
        finally:
            os.close(out)
        try:
            if good:
                with suppressed(FileExistsError):
                    os.link(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return good
    finally:
        os.close(src)
        with suppressed(OSError):
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
            if len(entry.name) != 2 or not set(entry.name) <= HEX:
                continue
            if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                done.rejected.append(entry.name)
                with suppressed(OSError):
                    os.unlink(entry.name, dir_fd=top)
                continue
            with real_folder(entry.name, top) as fanout:
                for loose in os.scandir(fanout):
                    if loose.name.startswith("tmp_"):
                        continue  # git writing an object right now
                    if full():
                        break
                    if not algorithm:
                        algorithm = _object_format(common_dir)
                        name_length = hashlib.new(algorithm).digest_size * 2 - 2
                    oid = entry.name + loose.name
                    if len(loose.name) != name_length or not set(loose.name) <= HEX:
                        done.rejected.append(oid)
                        with suppressed(OSError):
                            os.unlink(loose.name, dir_fd=fanout)
                    elif _take_object(fanout, loose.name, oid, shared, algorithm, done):
                        done.objects += 1
                    else:
                        done.rejected.append(oid)
        with suppressed(OSError), real_folder("pack", top) as packs:
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
                    with suppressed(OSError):
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
