"""`events.jsonl`, the append-only event log (docs/design.md section 1): one JSON object a line, readable past torn
lines, rotated past a size and read from its tail."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.fs_safe import private_dir
from daintree_tui.core.log import warn

DEFAULT_EVENTS_MAX_BYTES = 20 * 1024 * 1024
_TAIL_BLOCK = 64 * 1024


class EventLog:
    """`events.jsonl`: one JSON object a line, append-only, readable past torn lines.

    The file is the user's only (0600 in a 0700 folder). When it passes `max_bytes` it is renamed to
    `events.jsonl.1` (one rotated file kept; the older one goes), and readers read from the end, so a long
    history costs nothing to a reader that wants the last few records.
    """

    def __init__(self, path: Path, max_bytes: int = DEFAULT_EVENTS_MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes

    @property
    def rotated_path(self) -> Path:
        return self.path.with_name(self.path.name + ".1")

    def append(self, event: str, *, task: dict[str, Any] | None = None,
               worktree: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """Append one record as a single write; start it on a fresh line if the last one was torn."""
        record: dict[str, Any] = {"event": event, "ts": time.time(), "task": task or {}, "worktree": worktree or {}}
        record.update({k: v for k, v in extra.items() if v is not None})
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        try:
            private_dir(self.path.parent)  # it holds hook output and task text: the user's only
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OperationError as exc:
            warn(f"cannot append to {self.path}: {exc}")
            return record
        except OSError as exc:
            warn(f"cannot append to {self.path}: {exc.strerror or exc}")
            return record
        try:
            st = os.fstat(fd)
            if st.st_mode & 0o077:
                os.fchmod(fd, 0o600)
            if st.st_size >= self.max_bytes:
                fd = self._rotate(fd)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = "\n" + line
            data = line.encode("utf-8")
            while data:  # a full disk takes part of a write (the rest of a page) and says so only by its count
                data = data[os.write(fd, data):]
        except OSError as exc:
            # What did go in is a torn line: readers skip it, and the next record starts on a fresh line.
            warn(f"cannot append to {self.path} ({event} lost): {exc.strerror or exc}")
        finally:
            os.close(fd)
        return record

    def _rotate(self, fd: int) -> int:
        """Move the full log to `.1` (under an exclusive flock, so two writers never rotate twice) and return a
        descriptor of the fresh file. A flock that stays taken (anyone who can read the log can hold one: a
        sandboxed agent) costs a second, then this append goes to the full log and a later one rotates."""
        deadline = time.monotonic() + 1.0
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return fd
                time.sleep(0.01)
        try:
            # Another writer may have rotated while we waited: only the file still at `path` is ours to move.
            current = os.stat(self.path, follow_symlinks=False)
            mine = os.fstat(fd)
            if (current.st_ino, current.st_dev) == (mine.st_ino, mine.st_dev) and mine.st_size >= self.max_bytes:
                os.replace(self.path, self.rotated_path)
        except FileNotFoundError:
            pass
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        return os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)

    def read(self, limit: int | None = None, end: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """The records (the last `limit` when given, read from the end of the file) and how many torn or foreign
        lines were skipped. Without a limit: the rotated file's records too, then the current file's.
        `end`: read the current file only up to this byte (`complete_end()`, where a follower then starts)."""
        if limit is not None:
            if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0 or limit > 10_000_000:
                raise InputError(f"--limit must be a whole number from 0 to 10000000 (got {limit!r})")
            if limit == 0:
                return [], 0
            return self._tail(limit, end)
        records: list[dict[str, Any]] = []
        skipped = 0
        for path in (self.rotated_path, self.path):
            try:
                with open_log(path) as fh:
                    raw = fh.read() if end is None or path != self.path else fh.read(end)
            except FileNotFoundError:
                continue
            except OSError as exc:
                warn(f"cannot read {path}: {exc.strerror or exc}")
                continue
            if path == self.path and end is not None:
                raw = raw[:end]
            got, bad = parse_event_lines(raw.split(b"\n"))
            records += got
            skipped += bad
        return records, skipped

    def _tail(self, limit: int, end: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """The last `limit` records: blocks read backwards from the end until enough lines are parsed."""
        records: list[dict[str, Any]] = []
        skipped = 0
        for path in (self.path, self.rotated_path):
            got, bad = tail_records(path, limit - len(records), end if path == self.path else None)
            records = got + records
            skipped += bad
            if len(records) >= limit:
                break
        return records[-limit:], skipped

    def complete_end(self) -> int:
        """The byte just after the current file's last complete record: read up to it, then follow from it, and
        no record is missed or printed twice however fast others append."""
        try:
            with open_log(self.path) as fh:
                return _last_newline(fh, os.fstat(fh.fileno()).st_size)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            warn(f"cannot read {self.path}: {exc.strerror or exc}")
            return 0

    def read_since(self, offset: int, max_records: int = 1000) -> tuple[list[dict[str, Any]], int]:
        """Records appended since byte `offset` (complete lines only) and the new offset. A reader that is far
        behind (or starting at 0) gets only the last `max_records`, read from the end: never the whole file."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return [], 0
        if size < offset:  # rotated or truncated: start over
            offset = 0
        if size == offset:
            return [], offset
        try:
            with self.path.open("rb") as fh:
                if size - offset > max_records * 1024:
                    records, _ = tail_records(self.path, max_records, end=size)
                    fh.seek(size - 1)
                    return records, size if fh.read(1) == b"\n" else _last_newline(fh, size)
                fh.seek(offset)
                data = fh.read(size - offset)
        except OSError as exc:
            warn(f"cannot read {self.path}: {exc.strerror or exc}")
            return [], offset
        cut = data.rfind(b"\n")
        if cut < 0:
            return [], offset
        records, _ = parse_event_lines(data[:cut].split(b"\n"))
        return records, offset + cut + 1


def open_log(path: Path) -> Any:
    """An event log for reading: a regular file of ours, never through a symlink and never a FIFO or device
    (a committed `.worktrees/events.jsonl -> /dev/zero` would be read forever; a FIFO would block the open)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return os.fdopen(fd, "rb")


def _last_newline(fh: Any, size: int) -> int:
    """The offset just after the last newline before `size` (the start of a torn last line)."""
    pos = size
    while pos > 0:
        start = max(0, pos - _TAIL_BLOCK)
        fh.seek(start)
        chunk = fh.read(pos - start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        pos = start
    return 0


def tail_records(path: Path, limit: int, end: int | None = None) -> tuple[list[dict[str, Any]], int]:
    """The last `limit` event records of a file up to byte `end`, reading fixed-size blocks backwards."""
    if limit <= 0:
        return [], 0
    try:
        fh = open_log(path)
    except FileNotFoundError:
        return [], 0
    except OSError as exc:
        warn(f"cannot read {path}: {exc.strerror or exc}")
        return [], 0
    with fh:
        pos = os.fstat(fh.fileno()).st_size if end is None else end
        pending = b""
        records: list[dict[str, Any]] = []
        skipped = 0
        while pos > 0 and len(records) < limit:
            start = max(0, pos - _TAIL_BLOCK)
            fh.seek(start)
            chunk = fh.read(pos - start) + pending
            pos = start
            lines = chunk.split(b"\n")
            # The first piece may be the end of a line that starts in an earlier block: keep it for the next round.
            pending = lines.pop(0) if pos > 0 else b""
            got, bad = parse_event_lines(lines)
            records = got + records
            skipped += bad
        return records[-limit:], skipped


def parse_event_lines(lines: list[bytes]) -> tuple[list[dict[str, Any]], int]:
    """Parse event lines, skipping blank ones and counting those that are not a JSON object."""
    records: list[dict[str, Any]] = []
    skipped = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            skipped += 1
            continue
        if isinstance(value, dict) and "event" in value:
            records.append(value)
        else:
            skipped += 1
    return records, skipped


def event_detail(record: dict[str, Any]) -> tuple[str, bool]:
    """What a listing of events shows after an event's name, and whether it is an error: its error or fix, the host
    a sandbox's proxy refused (so it can be allowed, `worktree status NAME` gives the line), or why a limit stopped
    a command. Terminal controls are shown, never obeyed."""
    from daintree_tui.core.validate import escape_controls

    if record.get("error"):
        return escape_controls(str(record["error"])), True
    if record.get("fix"):
        return escape_controls(str(record["fix"])), False
    event = record.get("event")
    if event == "sandbox.denied" and record.get("host"):
        port = record.get("port")
        shown = f"{record['host']}:{port}" if isinstance(port, int) else str(record["host"])
        return escape_controls(f"refused {shown}"), True
    if event == "train.conflict" and isinstance(record.get("files"), list) and record["files"]:
        files = [str(f) for f in record["files"]]
        return escape_controls("in " + ", ".join(files[:3]) + (f" +{len(files) - 3}" if len(files) > 3 else "")), \
            False
    if event == "sandbox.limit" and record.get("reason"):
        kind = record.get("kind")
        return escape_controls(f"{kind} stopped: {record['reason']}" if kind else str(record["reason"])), True
    return "", False
