"""`tree_changes`: a recursive watch of folders an agent may write, that never goes through a link.

watchfiles (notify underneath) follows links as it walks a recursive watch, and offers no way not to: one
`ln -s / x` in an agent's worktree made the dashboard's watch walk the whole machine (29 s, 15.8 s of it in the
kernel, measured here) and then tell of every change in /proc. Here each folder is watched alone, by inotify with
IN_DONT_FOLLOW | IN_ONLYDIR (a folder swapped for a link between the look and the watch is refused, not
followed), a folder made later is added when its making is told, and a link is an entry like any other. Where
inotify cannot start (its instances used up, 128 a user by default), the folders are polled by a walk that does
not follow links either.
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
_ONLYDIR, _DONT_FOLLOW, _EXCL_UNLINK = 0x1000000, 0x2000000, 0x4000000
_MASK = (_MODIFY | _ATTRIB | _MOVED_FROM | _MOVED_TO | _CREATE | _DELETE | _DELETE_SELF | _MOVE_SELF
         | _ONLYDIR | _DONT_FOLLOW | _EXCL_UNLINK)
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then `len` bytes of name
_CANNOT_START = (errno.EMFILE, errno.ENFILE, errno.ENOSYS, errno.ENOMEM)
_STOP_CHECK_S = 0.25  # how often a quiet watch looks whether it was asked to stop


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


class _Inotify:
    def __init__(self, skip_dir: SkipDir) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        self.fd = fd
        self.skip_dir = skip_dir
        self.folders: dict[int, tuple[Path, bool]] = {}  # watch descriptor -> (folder, recursive)
        self._full = False

    def close(self) -> None:
        os.close(self.fd)

    def add(self, folder: Path, recursive: bool, found: set[str] | None = None) -> None:
        """Watch `folder` (and, `recursive`, each folder below it); the entries met on the way go to `found`. Each
        folder is watched before it is listed, so what is made in it after the listing is told."""
        todo = [folder]
        while todo:
            path = todo.pop()
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), _MASK)
            if wd < 0:
                if ctypes.get_errno() == errno.ENOSPC and not self._full:
                    self._full = True
                    warn(f"inotify watches used up (fs.inotify.max_user_watches): {path} and more are not watched")
                continue  # gone, a link, not a folder, not ours to read: nothing to watch
            self.folders[wd] = (path, recursive)
            if not recursive:
                continue
            try:
                with os.scandir(path) as entries:
                    for entry in entries:
                        if found is not None:
                            found.add(entry.path)
                        if entry.is_dir(follow_symlinks=False) and not self.skip_dir(entry.name):
                            todo.append(Path(entry.path))
            except OSError:
                continue

    def run(self, roots: Sequence[Root], stop: threading.Event, debounce_ms: int) -> Iterator[set[str]]:
        for root in roots:
            self.add(root.path, root.recursive)
        quiet_since = time.monotonic()
        while not stop.is_set():
            changes = self._read(min(_STOP_CHECK_S, max(0.0, quiet_since + QUIET_ANSWER_MS / 1000
                                                        - time.monotonic())), roots)
            if changes:
                deadline = time.monotonic() + debounce_ms / 1000
                while (left := deadline - time.monotonic()) > 0:
                    changes |= self._read(left, roots)
            if changes or time.monotonic() - quiet_since >= QUIET_ANSWER_MS / 1000:
                yield changes
                quiet_since = time.monotonic()

    def _read(self, timeout: float, roots: Sequence[Root]) -> set[str]:
        changes: set[str] = set()
        if not select.select([self.fd], [], [], timeout)[0]:
            return changes
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return changes
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size:offset + _EVENT.size + size].split(b"\0", 1)[0]
            offset += _EVENT.size + size
            if mask & _OVERFLOW:
                changes.update(str(root.path) for root in roots)
                continue
            if mask & _IGNORED:
                self.folders.pop(wd, None)
                continue
            known = self.folders.get(wd)
            if known is None:
                continue
            folder, recursive = known
            if not raw:
                changes.add(str(folder))
                continue
            path = folder / os.fsdecode(raw)
            changes.add(str(path))
            if recursive and mask & _ISDIR and mask & (_CREATE | _MOVED_TO) and not self.skip_dir(path.name):
                self.add(path, True, changes)  # what was made in it before its watch counts as changed too
        return changes


def _snapshot(roots: Sequence[Root], skip_dir: SkipDir) -> dict[str, tuple[int, int, int]]:
    seen: dict[str, tuple[int, int, int]] = {}
    for root in roots:
        todo = [str(root.path)]
        while todo:
            path = todo.pop()
            try:
                with os.scandir(path) as entries:
                    for entry in entries:
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        seen[entry.path] = (st.st_mtime_ns, st.st_size, st.st_mode)
                        if root.recursive and stat.S_ISDIR(st.st_mode) and not skip_dir(entry.name):
                            todo.append(entry.path)
            except OSError:
                continue
    return seen


def _polled(roots: Sequence[Root], stop: threading.Event, skip_dir: SkipDir) -> Iterator[set[str]]:
    """Without inotify: a walk every POLL_MS (links not followed), telling what it finds added, changed or gone."""
    before = _snapshot(roots, skip_dir)
    while not stop.wait(POLL_MS / 1000):
        now = _snapshot(roots, skip_dir)
        yield {path for path in before.keys() | now.keys() if before.get(path) != now.get(path)}
        before = now
