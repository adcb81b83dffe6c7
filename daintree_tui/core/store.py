"""Durable state on disk: atomic JSON files with a `.bak`, one inter-process lock, an append-only event log.

State on disk is the truth; every reader tolerates what a crash can leave behind (a torn JSON file, a torn
last line in the event log) and reports it instead of raising.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.log import warn


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_tree(path: Path) -> None:
    """`shutil.rmtree(path, ignore_errors=True)` for a tree an agent may have written (its worktree, TMPDIR, caches,
    quarantine, inbox). Python's rmtree recurses once per level (up to 3.12): a folder 1,500 levels deep, made in
    a sandbox in a second, raised RecursionError out of `worktree remove`, every `doctor --fix` and the
    dashboard's poll. What it cannot delete for depth, `rm -rf` does (it follows no link either)."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        with contextlib.suppress(OSError):
            subprocess.run(["rm", "-rf", "--", str(path)], stdin=subprocess.DEVNULL, capture_output=True,
                           check=False)


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


def create_new(path: Path, data: str | bytes) -> None:
    """`path` as a new regular file of ours (0600) holding `data`: never over what is there, never through a link
    (O_EXCL, O_NOFOLLOW). Raises OSError (FileExistsError when anything is at `path`)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data.encode() if isinstance(data, str) else data)


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def write_json(path: Path, data: Any) -> None:
    """Atomically write `data` as indented JSON, then keep the same bytes as `<file>.bak`.

    Raises:
        OperationError: `path` was not written (it holds what it held before).
    """
    text = json.dumps(data, indent=2, sort_keys=False) + "\n"
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise OperationError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        atomic_write_text(backup_path(path), text)
    except OSError as exc:
        # The file itself is written (and durable): the change happened. Failing here told the caller it had not
        # (on a nearly full disk, `task create` said "cannot write" of a task it had made, and a create's rollback
        # never undid an index it had written). The old backup stays: still valid, one change behind.
        warn(f"{path} written, but not its backup {backup_path(path).name}: {exc.strerror or exc}")


MAX_STATE_BYTES = 64 * 1024 * 1024


def read_state_file(path: Path) -> bytes:
    """A state file's bytes: a regular file of sane size, never through a symbolic link. State comes with clones
    (`.tasks/`, `.worktrees/`): a committed `.tasks/task_1.json -> /dev/zero` was read until memory ran out, and
    `task list`, `approvals`, `usage` and the dashboard hung on it.

    Raises:
        FileNotFoundError: there is no file; OSError: a link, not a regular file, or too large.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        raw = fh.read(MAX_STATE_BYTES + 1)
    if len(raw) > MAX_STATE_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_STATE_BYTES // (1024 * 1024)} MB", str(path))
    return raw


def read_json(path: Path, what: str) -> tuple[Any, str | None]:
    """Read a JSON file, falling back to its `.bak`.

    Returns:
        (data, problem): data is None when neither file holds valid JSON; problem describes what was
        recovered or lost (None when the file was fine or simply absent).
    """
    try:
        return json.loads(read_state_file(path)), None
    except FileNotFoundError:
        problem = f"{what} {path} is missing"
        if not backup_path(path).exists():
            return None, None
    except (OSError, ValueError, RecursionError) as exc:
        problem = f"{what} {path} is corrupt ({type(exc).__name__})"
    try:
        data = json.loads(read_state_file(backup_path(path)))
    except (OSError, ValueError, RecursionError):
        return None, f"{problem}; no usable backup"
    return data, f"{problem}; recovered from {backup_path(path).name}"


_DEFERRED = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM are held back until the block ends (in the main thread, the one Python's handlers run
    in; other threads' masks do not matter to them)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


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
        held: list[int] = []
        try:
            self._acquire(held)
            self._local.depth = 1
            yield
        finally:
            if held:
                self._local.depth = 0
                fcntl.flock(held[0], fcntl.LOCK_UN)
                os.close(held[0])

    def _acquire(self, held: list[int]) -> None:
        """Take the lock and put its descriptor in `held`, which the caller's `finally` releases."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise OperationError(f"cannot lock {self.path}: {exc.strerror or exc}") from None
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while True:
            # Ctrl-C (or SIGTERM) between taking the lock and recording it would leave it taken for the rest of the
            # process: a `session watch` then waited on a hook thread that waited for this lock. The signal waits
            # for those two steps; while the lock is someone else's, it interrupts as usual.
            with _signals_deferred():
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    pass
                else:
                    held.append(fd)
                    return
            if time.monotonic() >= deadline:
                os.close(fd)
                raise OperationError(
                    f"another daintree process holds {self.path} (waited {self.timeout:.0f}s)") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.02)


DEFAULT_EVENTS_MAX_BYTES = 20 * 1024 * 1024
_TAIL_BLOCK = 64 * 1024


def _private_dir(path: Path) -> None:
    """The folder of a log: made 0700 (it holds hook output and task text: the user's only)."""
    path.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if path.stat().st_mode & 0o077:
            path.chmod(0o700)


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
            _private_dir(self.path.parent)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
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
