"""Follow a growing file line by line (events, session logs), woken by watchfiles instead of polling."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path


def follow_lines(path: Path, from_end: bool = True, offset: int | None = None) -> Iterator[str]:
    """Yield each new complete line appended to `path` (waits for the file to appear); runs until interrupted.

    `offset`: where the caller stopped reading, so nothing appended since is missed (default: the end now).
    """
    from watchfiles import watch

    path.parent.mkdir(parents=True, exist_ok=True)
    if offset is None:
        offset = path.stat().st_size if from_end and path.exists() else 0
    pending = b""
    for _ in _changes(path, watch):
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        if size < offset:  # truncated or replaced: start over
            offset, pending = 0, b""
        if size == offset:
            continue
        with path.open("rb") as fh:
            fh.seek(offset)
            chunk = fh.read(size - offset)
        offset = size
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", errors="replace")


def _changes(path: Path, watch: object) -> Iterator[object]:
    yield None  # read once before the first change
    for changes in watch(path.parent, debounce=50, step=25, rust_timeout=1000, yield_on_timeout=True):  # type: ignore[operator]
        if not changes or any(os.path.basename(p) == path.name for _, p in changes):
            yield changes


TAIL_CHUNK = 64 * 1024


def read_tail(path: Path, enough: Callable[[bytes], bool], limit: int | None = None) -> tuple[bytes, int]:
    """The end of `path`, read backwards in growing chunks until `enough(data)`, the start, or `limit` bytes; and
    the size it was read at (where a follower goes on). `session log -n 20` of a log of gigabytes reads
    kilobytes, not all of it."""
    with path.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        start, chunk, data = size, TAIL_CHUNK, b""
        while start > 0 and (limit is None or len(data) < limit):
            step = min(start, chunk, limit - len(data)) if limit is not None else min(start, chunk)
            start -= step
            fh.seek(start)
            data = fh.read(step) + data
            if enough(data):
                break
            chunk *= 2
    return data, size


# Where a line of an agent's raw output begins: after a line break, or at a cursor move to a row (`ESC [ row ; col
# H`, or `ESC [ H`), with which a full-screen agent (opencode) draws its screen, and almost never a line break.
LINE_START = re.compile(rb"\n|\x1b\[[0-9;]*[Hf]")


def line_starts(data: bytes) -> list[int]:
    """Where each line of raw terminal output `data` begins (the first may be cut: it begins at 0)."""
    starts = [0]
    for match in LINE_START.finditer(data):
        starts.append(match.end() if match.group() == b"\n" else match.start())
    if starts[-1] == len(data) and len(starts) > 1:  # after a last line break: no line yet
        starts.pop()
    return sorted(set(starts))


def last_lines(data: bytes, count: int) -> bytes:
    """The last `count` lines of raw terminal output, as bytes (see LINE_START)."""
    starts = line_starts(data)
    return data[starts[-count]:] if count < len(starts) else data

