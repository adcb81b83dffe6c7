"""`tree_changes`: a recursive watch of folders an agent may write, that never goes through a link.

watchfiles (notify underneath) follows links as it walks a recursive watch, and offers no way not to: one
`ln -s / x` in an agent's worktree made the dashboard's watch walk the whole machine (29 s, 15.8 s of it in the
kernel, measured here) and then tell of every change in /proc. Here each folder is watched alone, by inotify
through a descriptor of it opened with O_NOFOLLOW (a folder swapped for a link between the look and the watch is
refused, not followed), a folder made later is added when its making is told, and a link is an entry like any
other. Where
inotify cannot start (its instances used up, 128 a user by default), the folders are polled by a walk that does
not follow links either.

IN_DONT_FOLLOW guards a path's last name only: a folder found in a listing and then watched or listed by its path
went through whatever link the agent had swapped in for one of the folders above it in between. So each folder is
opened first, without following a link, and kept only when it is the very folder (device, inode) its parent's
listing showed; the watch is placed, and the listing made, through that descriptor.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from daintree_tui.core.fs_watch import POLL_MS, QUIET_ANSWER_MS
from daintree_tui.core.log import warn

_MODIFY, _ATTRIB, _MOVED_FROM, _MOVED_TO, _CREATE, _DELETE = 0x2, 0x4, 0x40, 0x80, 0x100, 0x200
_DELETE_SELF, _MOVE_SELF, _OVERFLOW, _IGNORED, _ISDIR = 0x400, 0x800, 0x4000, 0x8000, 0x40000000
_ONLYDIR, _EXCL_UNLINK = 0x1000000, 0x4000000
# No IN_DONT_FOLLOW: a watch is placed through /proc/self/fd/N, a link the kernel resolves to that very descriptor.
_MASK = (_MODIFY | _ATTRIB | _MOVED_FROM | _MOVED_TO | _CREATE | _DELETE | _DELETE_SELF | _MOVE_SELF
         | _ONLYDIR | _EXCL_UNLINK)
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then `len` bytes of name
_CANNOT_START = (errno.EMFILE, errno.ENFILE, errno.ENOSYS, errno.ENOMEM)
_STOP_CHECK_S = 0.25  # how often a quiet watch looks whether it was asked to stop
_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO is never opened


@dataclass(frozen=True)
class Root:
    """A folder to watch; `recursive`: with every folder below it (but those `skip_dir` names)."""

    path: Path
    recursive: bool = True


SkipDir = Callable[[str], bool]


def tree_changes(roots: Sequence[Root], stop: threading.Event, *, skip_dir: SkipDir = lambda name: False,
                 debounce_ms: int = 150) -> Iterator[set[str]]:
    """The paths changed under `roots` until `stop` is set, a batch at a time, and an empty set after each
    QUIET_ANSWER_MS without a change. The first answer, whichever it is, comes once every folder is watched. When
    the kernel dropped events (its queue overflowed), the roots themselves are told."""
    try:
        watch = _Inotify(skip_dir)
    except OSError as exc:
        if exc.errno not in _CANNOT_START:
            raise
        yield from _polled(roots, stop, skip_dir)
        return
    try:
        yield from watch.run(roots, stop, debounce_ms)
    finally:
        watch.close()


Folder = Callable[[str, int, os.stat_result], bool]
"""Told each folder of a walk (its path, a descriptor of it, open while told, its stat); False: leave it
unlisted."""

Entry = Callable[[str, os.DirEntry[str]], None]
"""Told each entry of a folder listed (the folder's path; the entry's `stat` works while it is told)."""


def walk(top: Path, recursive: bool, skip_dir: SkipDir, stop: threading.Event, folder: Folder,
         entry: Entry = lambda path, entry: None, seen: tuple[int, int] | None = None) -> None:
    """Each folder from `top` down (with `recursive`; but those `skip_dir` names), opened and listed through its
    own descriptor, never through a link (see the module's doc); `seen`: the (device, inode) `top` must have. Ends
    early when `stop` is set (a watch started again while it walked a million folders)."""
    todo: list[tuple[str, tuple[int, int] | None]] = [(str(top), seen)]
    while todo and not stop.is_set():
        path, seen = todo.pop()
        try:
            fd = os.open(path, _DIR_OPEN)
        except OSError:
            continue  # gone, a link, not a folder, not ours to read, too long a path (git cannot read it either)
        try:
            st = os.fstat(fd)
            if seen is not None and (st.st_dev, st.st_ino) != seen:
                continue  # not the folder listed: one above it was swapped for a link since
            if not folder(path, fd, st):
                continue
            with os.scandir(fd) as entries:
                for met in entries:
                    entry(path, met)
                    if recursive and met.is_dir(follow_symlinks=False) and not skip_dir(met.name):
                        try:
                            found = met.stat(follow_symlinks=False)
                        except OSError:
                            continue  # gone since the listing: the rest of the listing is still walked
                        todo.append((f"{path}/{met.name}", (found.st_dev, found.st_ino)))
        except OSError:
            continue
        finally:
            os.close(fd)


class _Inotify:
    def __init__(self, skip_dir: SkipDir) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        self.fd = fd
        if not os.path.exists(f"/proc/self/fd/{fd}"):  # no /proc: no way to watch a folder by its descriptor
            os.close(fd)
            raise OSError(errno.ENOSYS, "no /proc/self/fd")
        self._poll = select.poll()  # not select(): it takes no descriptor past 1023, and this one may well be
        self._poll.register(fd, select.POLLIN)
        self.skip_dir = skip_dir
        self.stop = threading.Event()
        # watch descriptor -> (folder, recursive, its (device, inode)): a folder's path may name another later
        self.folders: dict[int, tuple[Path, bool, tuple[int, int]]] = {}
        self._full = False

    def close(self) -> None:
        os.close(self.fd)

    def add(self, folder: Path, recursive: bool, found: set[str] | None = None,
            seen: tuple[int, int] | None = None) -> None:
        """Watch `folder` (and, `recursive`, each folder below it); the entries met on the way go to `found`. Each
        folder is watched before it is listed, so what is made in it after the listing is told. `seen`: the
        (device, inode) `folder` must have."""

        def watch(path: str, fd: int, st: os.stat_result) -> bool:
            wd = self._libc.inotify_add_watch(self.fd, f"/proc/self/fd/{fd}".encode(), _MASK)
            if wd < 0:
                if ctypes.get_errno() == errno.ENOSPC and not self._full:
                    self._full = True
                    warn(f"inotify watches used up (fs.inotify.max_user_watches): {path} and more are not watched")
                return False
            self.folders[wd] = (Path(path), recursive, (st.st_dev, st.st_ino))
            return recursive

        def met(path: str, entry: os.DirEntry[str]) -> None:
            if found is not None:
                found.add(f"{path}/{entry.name}")

        walk(folder, recursive, self.skip_dir, self.stop, watch, met, seen)

    def made(self, parent: Path, seen: tuple[int, int], name: str) -> tuple[int, int] | None:
        """The (device, inode) of the folder `name` in the watched folder `parent`, found through `parent` itself
        (when its path still names it): None when it is not a folder, or `parent` is not there any more."""
        try:
            fd = os.open(parent, _DIR_OPEN)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != seen:
                return None
            child = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None
        finally:
            os.close(fd)
        return (child.st_dev, child.st_ino) if stat.S_ISDIR(child.st_mode) else None

    def run(self, roots: Sequence[Root], stop: threading.Event, debounce_ms: int) -> Iterator[set[str]]:
        self.stop = stop
        for root in roots:
            self.add(root.path, root.recursive)
        quiet_since = time.monotonic()
        while not stop.is_set():
            changes = self._read(min(_STOP_CHECK_S, max(0.0, quiet_since + QUIET_ANSWER_MS / 1000
                                                        - time.monotonic())), roots)
            if changes:
                deadline = time.monotonic() + debounce_ms / 1000
                while (left := deadline - time.monotonic()) > 0 and not stop.is_set():
                    changes |= self._read(left, roots)
            if changes or time.monotonic() - quiet_since >= QUIET_ANSWER_MS / 1000:
                yield changes
                quiet_since = time.monotonic()

    def _read(self, timeout: float, roots: Sequence[Root]) -> set[str]:
        changes: set[str] = set()
        if not self._poll.poll(timeout * 1000):
            return changes
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return changes
        offset, overflowed = 0, False
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size:offset + _EVENT.size + size].split(b"\0", 1)[0]
            offset += _EVENT.size + size
            if mask & _OVERFLOW:
                overflowed = True
                continue
            if mask & _IGNORED:
                self.folders.pop(wd, None)
                continue
            known = self.folders.get(wd)
            if known is None:
                continue
            folder, recursive, seen = known
            if not raw:
                changes.add(str(folder))
                continue
            path = folder / os.fsdecode(raw)
            changes.add(str(path))
            if recursive and mask & _ISDIR and mask & (_CREATE | _MOVED_TO) and not self.skip_dir(path.name):
                made = self.made(folder, seen, path.name)
                if made is not None:
                    self.add(path, True, changes, made)  # what was made in it before its watch counts as changed
        if overflowed:
            # The events dropped may have told of a folder made: never watched, no edit in it would be told.
            # Watching every folder again adds those (a folder watched already keeps its watch).
            changes.update(str(root.path) for root in roots)
            for root in roots:
                self.add(root.path, root.recursive)
        return changes


Stamp = tuple[int, int, int, int, int]


def _snapshot(roots: Sequence[Root], skip_dir: SkipDir, stop: threading.Event) -> dict[str, Stamp]:
    seen: dict[str, Stamp] = {}

    def met(path: str, entry: os.DirEntry[str]) -> None:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            return
        # The inode and ctime too: a file replaced by one of its size within the clock's tick has its mtime.
        seen[f"{path}/{entry.name}"] = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_mode)

    for root in roots:
        walk(root.path, root.recursive, skip_dir, stop, lambda path, fd, st: True, met)
    return seen


def _polled(roots: Sequence[Root], stop: threading.Event, skip_dir: SkipDir) -> Iterator[set[str]]:
    """Without inotify: a walk every POLL_MS (links not followed), telling what it finds added, changed or gone."""
    before = _snapshot(roots, skip_dir, stop)
    while not stop.wait(POLL_MS / 1000):
        now = _snapshot(roots, skip_dir, stop)
        if stop.is_set():
            return  # a walk cut short: what it did not reach is not gone
        yield {path for path in before.keys() | now.keys() if before.get(path) != now.get(path)}
        before = now
