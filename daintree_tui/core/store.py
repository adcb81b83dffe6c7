"""Durable state on disk: atomic JSON files with a `.bak`, one inter-process lock, an append-only event log.

State on disk is the truth; every reader tolerates what a crash can leave behind (a torn JSON file, a torn
last line in the event log) and reports it instead of raising.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from daintree_tui.core.errors import OperationError
from daintree_tui.core.log import warn


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader sees the old content or the new, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def write_json(path: Path, data: Any) -> None:
    """Atomically write `data` as indented JSON, then keep the same bytes as `<file>.bak`."""
    text = json.dumps(data, indent=2, sort_keys=False) + "\n"
    try:
        atomic_write_text(path, text)
        atomic_write_text(backup_path(path), text)
    except OSError as exc:
        raise OperationError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_json(path: Path, what: str) -> tuple[Any, str | None]:
    """Read a JSON file, falling back to its `.bak`.

    Returns:
        (data, problem): data is None when neither file holds valid JSON; problem describes what was
        recovered or lost (None when the file was fine or simply absent).
    """
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        problem = f"{what} {path} is missing"
        if not backup_path(path).exists():
            return None, None
    except (OSError, ValueError) as exc:
        problem = f"{what} {path} is corrupt ({type(exc).__name__})"
    try:
        data = json.loads(backup_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, f"{problem}; no usable backup"
    return data, f"{problem}; recovered from {backup_path(path).name}"


class StateLock:
    """The one inter-process lock (`.worktrees/.lock`) around every read-modify-write of the state.

    `flock` on a file of its own: exclusive across processes and across threads (each outermost acquisition
    opens its own descriptor), re-entrant within a thread. Written on fcntl rather than the filelock package,
    whose import (it pulls in asyncio) cost a third of the CLI's start-up; see the closing note.
    """

    def __init__(self, path: Path, timeout: float = 60.0) -> None:
        self.path = path
        self.timeout = timeout
        self._local = threading.local()

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        fd = self._acquire()
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _acquire(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise OperationError(f"cannot lock {self.path}: {exc.strerror or exc}") from None
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise OperationError(
                        f"another daintree process holds {self.path} (waited {self.timeout:.0f}s)") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.02)


class EventLog:
    """`events.jsonl`: one JSON object a line, append-only, readable past torn lines."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, event: str, *, task: dict[str, Any] | None = None,
               worktree: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """Append one record as a single write; start it on a fresh line if the last one was torn."""
        record: dict[str, Any] = {"event": event, "ts": time.time(), "task": task or {}, "worktree": worktree or {}}
        record.update({k: v for k, v in extra.items() if v is not None})
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            warn(f"cannot append to {self.path}: {exc.strerror or exc}")
            return record
        try:
            size = os.fstat(fd).st_size
            if size:
                with open(self.path, "rb") as fh:
                    fh.seek(size - 1)
                    if fh.read(1) != b"\n":
                        line = "\n" + line
            os.write(fd, line.encode("utf-8"))
        except OSError as exc:
            warn(f"cannot append to {self.path}: {exc.strerror or exc}")
        finally:
            os.close(fd)
        return record

    def read(self, limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """All records (the last `limit` when given) and how many torn or foreign lines were skipped."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return [], 0
        except OSError as exc:
            warn(f"cannot read {self.path}: {exc.strerror or exc}")
            return [], 0
        records, skipped = parse_event_lines(raw.split(b"\n"))
        if limit is not None:
            records = records[-limit:] if limit > 0 else []
        return records, skipped


def parse_event_lines(lines: list[bytes]) -> tuple[list[dict[str, Any]], int]:
    """Parse event lines, skipping blank ones and counting those that are not a JSON object."""
    records: list[dict[str, Any]] = []
    skipped = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if isinstance(value, dict) and "event" in value:
            records.append(value)
        else:
            skipped += 1
    return records, skipped
