"""Durable state on disk: atomic JSON files with a `.bak`, and the one inter-process lock (the event log is
`event_log`).

State on disk is the truth; every reader tolerates what a crash can leave behind (a torn JSON file, a torn
last line in the event log) and reports it instead of raising.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from daintree_tui.core.errors import OperationError
from daintree_tui.core.fs_safe import read_state_file
from daintree_tui.core.log import suppressed, warn


def _fsync_dir(directory: Path) -> None:
    with suppressed(OSError):
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
        with suppressed(OSError):
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
        with suppressed(OSError):
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
