"""Reading an agent's record files from their tail: only what was appended since the last look, never through a
link, never without end.

Pure: no project, no tmux. A `TailState` remembers where reading stopped in one record file (inode + offset +
an unfinished last line), so each look costs only what was appended since. A file that shrank or was replaced
(truncation, rotation) is read again from its start; the parsers (sessions/usage.py) deduplicate what they have
already counted, so reading a line twice never counts its tokens twice. The agent writes these files: they are
opened without following links (`open_record`), only regular ones are read, at most MAX_RECORD_BYTES of each, and
what made one untrustworthy is said (`TailState.problem`, kept by sessions/records.py).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_CHUNK = 8 * 1024 * 1024  # read at most this much per look; the rest comes at the next
# A record line longer than this is no usage record (an assistant message is bounded by its output tokens): it is
# skipped to its end. The agent writes these files: a line that never ends (a sparse file of zeros) grew the kept
# unfinished line by MAX_CHUNK at every look, in memory and in the session's usage.json.
MAX_LINE = 1024 * 1024
# Of one record file, at most this much is ever read: the agent writes it, and a file that keeps growing (or a
# sparse one) is not read without end. Past it the file counts no more, and its run's usage says so (untrusted).
MAX_RECORD_BYTES = 512 * 1024 * 1024


@dataclass
class TailState:
    """Where reading one file stopped."""

    inode: int | None = None
    offset: int = 0
    partial: bytes = b""
    resets: int = 0  # how often the file was found truncated or replaced
    skipping: bool = False  # inside a line longer than MAX_LINE: dropped up to its end
    read: int = 0  # bytes read from it so far (at most MAX_RECORD_BYTES)
    # Why this look could not trust the file (a link, not a regular file, shrunk, replaced, vanished after it was
    # counted, too large); not kept: the run's usage keeps what was found (see sessions/records.py).
    problem: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"inode": self.inode, "offset": self.offset, "partial": self.partial.decode("utf-8", "replace"),
                "resets": self.resets, "skipping": self.skipping, "read": self.read}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TailState:
        return cls(data.get("inode"), int(data.get("offset") or 0), str(data.get("partial") or "").encode(),
                   int(data.get("resets") or 0), data.get("skipping") is True, int(data.get("read") or 0))


_NO_FOLLOW = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_record(path: Path, root: Path | None = None) -> int:
    """A descriptor of record file `path` for reading, never through a symbolic link: with `root` (the folder the
    outside chose for the session's records), `path` must lie inside it and no folder below `root` down to the file
    may be a link either; each is opened relative to the one above, so a folder swapped for a link after it was
    listed is refused too. Non-blocking: a FIFO opens at once (and is no regular file: see `read_new_lines`).

    Raises:
        OSError: no such file; ELOOP for a link on the way; EINVAL for a path outside `root`.
    """
    if root is None:
        return os.open(path, _NO_FOLLOW)
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        parts = ()
    if not parts or ".." in parts:
        raise OSError(errno.EINVAL, "not inside the session's record folder", str(path))
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the outside's choice: a link of the user's
    try:
        for part in parts[:-1]:
            sub = os.open(part, _DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        return os.open(parts[-1], _NO_FOLLOW, dir_fd=fd)
    finally:
        os.close(fd)


def read_new_lines(path: Path, state: TailState, root: Path | None = None) -> list[str]:
    """Complete lines appended to `path` since `state` (which is updated). A replaced or shrunk file starts over
    (its parser counts nothing twice), and `state.problem` says so; never through a link (see `open_record`)."""
    state.problem = ""
    try:
        fd = open_record(path, root)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EINVAL):
            state.problem = "a symbolic link" if exc.errno != errno.EINVAL else "outside the session's folder"
        elif exc.errno == errno.ENOENT and state.offset:
            state.problem = "deleted after it was counted"
        return []
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                state.problem = "not a regular file"
                return []
            if state.inode is not None and (st.st_ino != state.inode or st.st_size < state.offset):
                state.problem = "replaced after it was counted" if st.st_ino != state.inode else \
                    "shrank after it was counted"
                state.offset, state.partial, state.skipping = 0, b"", False
                state.resets += 1
            state.inode = st.st_ino
            if st.st_size == state.offset:
                return []
            room = MAX_RECORD_BYTES - state.read
            if room <= 0:
                state.problem = f"larger than {MAX_RECORD_BYTES // (1024 * 1024)} MiB"
                return []
            fh.seek(state.offset)
            data = fh.read(min(st.st_size - state.offset, MAX_CHUNK, room))
    except OSError:
        return []
    state.offset += len(data)
    state.read += len(data)
    data = state.partial + data
    if state.skipping:
        end = data.find(b"\n")
        if end < 0:
            state.partial = b""
            return []
        data, state.skipping = data[end + 1:], False
    cut = data.rfind(b"\n")
    state.partial = data[cut + 1:]
    if len(state.partial) > MAX_LINE:
        state.partial, state.skipping = b"", True
    if cut < 0:
        return []
    return [line.decode("utf-8", "replace") for line in data[:cut].split(b"\n")
            if line.strip() and len(line) <= MAX_LINE]
