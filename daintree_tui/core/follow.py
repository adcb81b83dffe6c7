"""Follow a growing file line by line (events, session logs), woken by watchfiles instead of polling."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from daintree_tui.core.fs_watch import watching


def follow_lines(path: Path, from_end: bool = True, offset: int | None = None,
                 stop: threading.Event | None = None) -> Iterator[str]:
    """Yield each new complete line appended to `path` (waits for the file to appear); runs until `stop` is set
    (the CLI's Ctrl-C sets it: `cli.common.ctrl_c_stops`) or it is interrupted.

    `offset`: where the caller stopped reading, so nothing appended since is missed (default: the end now).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if offset is None:
        offset = path.stat().st_size if from_end and path.exists() else 0
    # The line begun and not ended yet, in the pieces read: only what is new is searched for a line break (a line
    # of megabytes, read as it grew, was copied and split again whole at each change).
    pending: list[bytes] = []
    for _ in _changes(path, stop):
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        if size < offset:  # truncated or replaced: start over
            offset, pending = 0, []
        if size == offset:
            continue
        with path.open("rb") as fh:
            fh.seek(offset)
            chunk = fh.read(size - offset)
        offset = size
        *lines, rest = chunk.split(b"\n")
        if lines:
            lines[0], pending = b"".join([*pending, lines[0]]), []
        pending.append(rest)
        for line in lines:
            yield line.decode("utf-8", errors="replace")


def _changes(path: Path, stop: threading.Event | None) -> Iterator[object]:
    yield None  # read once before the first change
    for changes in watching((path.parent,), stop, debounce=50, step=25):
        if not changes or any(os.path.basename(p) == path.name for _, p in changes):
            yield changes


TAIL_CHUNK = 64 * 1024


def read_tail(path: Path, enough: Callable[[bytes, bool], bool], limit: int | None = None) -> tuple[bytes, int]:
    """The end of `path`, read backwards in growing chunks until `enough(data, whole)` (`whole`: `data` is all of
    the file), the start, or `limit` bytes; and the size it was read at (where a follower goes on). `session log
    -n 20` of a log of gigabytes reads kilobytes, not all of it."""
    with path.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        start, chunk, data = size, TAIL_CHUNK, b""
        while start > 0 and (limit is None or len(data) < limit):
            step = min(start, chunk, limit - len(data)) if limit is not None else min(start, chunk)
            start -= step
            fh.seek(start)
            data = fh.read(step) + data
            if enough(data, start == 0):
                break
            chunk *= 2
    return data, size


# Where a line of an agent's raw output begins: after a line break, or at a cursor move to a row (`ESC [ row ; col
# H`, or `ESC [ H`), with which a full-screen agent (opencode) draws its screen, and almost never a line break.
LINE_START = re.compile(rb"\n|\x1b\[[0-9;]*[Hf]")


# LINE_START read backwards (`ESC [ row ; col H` reversed): the last lines of a tail of megabytes are found from its
# end, at the regex engine's speed. Read forwards, the cursor moves before them (millions, in a log of `ESC [ H`
# only) took a Python step each, seconds of CPU for `session log -n 5`. The matches are the same either way: each
# holds one ESC, at its start, or is one line break. Written to begin with one set of bytes, the engine skips to
# them (5 ns a byte); but where they are many (megabytes of "H") it tries each (45 ns), and the alternation, which
# tries every byte, costs less (25 ns).
_LINE_START_REVERSED = re.compile(rb"[\nHf](?:(?<=\n)|[0-9;]*\[\x1b)")
_LINE_START_REVERSED_DENSE = re.compile(rb"\n|[Hf][0-9;]*\[\x1b")


def _starts_from_end(data: bytes) -> Iterator[int]:
    """Where lines of `data` begin, from the last on: each once, none at 0 nor at the end (after a last line break
    no line begins yet)."""
    size = last = len(data)
    dense = (data.count(b"H") + data.count(b"f")) * 8 > size
    for match in (_LINE_START_REVERSED_DENSE if dense else _LINE_START_REVERSED).finditer(data[::-1]):
        start = size - match.start() if match.group() == b"\n" else size - match.end()
        if 0 < start < last:  # "\n ESC[H" begins one line, not two
            last = start
            yield start


# What of a cursor move to a row may be at a place in the bytes: one begun before it ends after it.
_MOVE_REST = re.compile(rb"\x1b?\[?[0-9;]*[Hf]?")


class LastLines:
    """The last `count` lines of raw terminal output (see LINE_START), found as `read_tail` reads it backwards: as
    its `enough`, true once the tail holds them and a line before (that one may be cut). Each byte is scanned
    once, not again in each longer tail."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.seen = 0  # how much of the end was scanned
        self.found: list[int] = []  # where the lines begin, as distances from the end, from the last on

    def __call__(self, tail: bytes, whole: bool = False) -> bool:
        new = len(tail) - self.seen  # tail[:new] is new, and a cursor move begun there may end after it
        rest = _MOVE_REST.match(tail, new)
        end = min(len(tail), (rest.end() if rest else new) + 1)
        for start in _starts_from_end(tail[:end]) if len(self.found) < self.count else ():
            if start <= new:  # (the ones after were found before)
                self.found.append(len(tail) - start)
                if len(self.found) == self.count:
                    break
        self.seen = len(tail)
        return len(self.found) >= self.count

    def of(self, tail: bytes) -> bytes:
        """The last lines of `tail` (the one last read): all of it when it holds no more."""
        return tail[len(tail) - self.found[self.count - 1]:] if len(self.found) >= self.count > 0 else tail


def first_line_start(data: bytes) -> int:
    """Where the first whole line of `data` begins (a tail cut in a line, or in a cursor move: the part before it is
    not shown as a line of its own); 0 when none does."""
    match = LINE_START.search(data)
    if match is None:
        return 0
    return match.end() if match.group() == b"\n" else match.start()
