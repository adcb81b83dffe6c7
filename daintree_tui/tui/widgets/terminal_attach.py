"""How one session's bytes reach `TerminalView`'s emulator and its keys reach the session: the attachment the
widget holds (`TerminalView.attachment`) while it shows a session.

- `ClientAttachment`: a `tmux attach` client (or an ssh running one) in a PTY of our own; its output is read on
  the event loop (`loop.add_reader`), a small chunk at a time, and parsed by an emulator of ours.
- `FedAttachment`: an emulator another owner parses in its own thread (the PTY fallback host); it says when bytes
  came, and we draw under its lock.

Neither draws nor handles keys (the widget does); the widget knows neither's descriptors, processes or locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from daintree_tui.core.log import suppressed

if TYPE_CHECKING:
    from daintree_tui.sessions.emulator import TerminalEmulator

READ_CHUNK = 4096


class Attachment(Protocol):
    """What `TerminalView` asks of the session it shows."""

    @property
    def emulator(self) -> TerminalEmulator:
        """The screen of the session, as parsed so far."""
        ...

    def locked(self) -> AbstractContextManager[Any]:
        """Hold while reading or resizing `emulator` (another thread may be feeding it)."""
        ...

    def write(self, data: bytes) -> None:
        """Send bytes to the session, as typed."""
        ...

    def resize(self, cols: int, rows: int) -> None:
        """Tell the session its window's new size (`emulator` is resized by the widget)."""
        ...

    def close(self) -> None:
        """Stop showing the session (the session itself keeps running)."""
        ...


class ClientAttachment:
    """A tmux client in a PTY of our own: `on_output(n)` after each read that fed `n` bytes to the emulator,
    `on_closed()` once the client's side of the PTY ends (session killed, server gone)."""

    def __init__(self, argv: Sequence[str], cols: int, rows: int, *, respond: Callable[[bytes], None],
                 on_output: Callable[[int], None], on_closed: Callable[[], None]) -> None:
        from daintree_tui.sessions.emulator import TerminalEmulator  # pyte: not before the first frame
        from daintree_tui.sessions.pty_host import set_winsize

        self._emulator = TerminalEmulator(cols, rows, respond=respond)
        self.on_output = on_output
        self.on_closed = on_closed
        master, slave = os.openpty()
        set_winsize(slave, cols, rows)
        env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
        env.pop("TMUX", None)
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                list(argv), stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        self.fd: int | None = master
        asyncio.get_running_loop().add_reader(master, self.readable)

    @property
    def emulator(self) -> TerminalEmulator:
        return self._emulator

    def locked(self) -> AbstractContextManager[Any]:
        return contextlib.nullcontext()  # fed on the event loop only: nothing to lock against

    def readable(self) -> None:
        if self.fd is None:
            return
        try:
            # Small reads keep each callback short (pyte parses ~0.5 MB/s): the event loop never stalls, and
            # when we fall behind tmux stops streaming and redraws the final screen instead.
            data = os.read(self.fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.on_closed()
            return
        self._emulator.feed(data)
        self.on_output(len(data))

    def write(self, data: bytes) -> None:
        if self.fd is None:
            return
        with suppressed(BlockingIOError):
            view = memoryview(data)
            while view:
                try:
                    written = os.write(self.fd, view)
                except BlockingIOError:
                    continue
                except OSError:
                    return
                view = view[written:]

    def resize(self, cols: int, rows: int) -> None:
        from daintree_tui.sessions.pty_host import set_winsize  # loaded by the attach

        if self.fd is None:
            return
        set_winsize(self.fd, cols, rows)
        if self.proc is not None:
            with suppressed(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGWINCH)

    def close(self) -> None:
        if self.fd is not None:
            with suppressed(Exception):
                asyncio.get_running_loop().remove_reader(self.fd)
            with suppressed(OSError):
                os.close(self.fd)
            self.fd = None
        if self.proc is not None:
            with suppressed(ProcessLookupError):
                self.proc.terminate()
            # Reap the tmux client off the event loop: waiting here could stall the UI.
            threading.Thread(target=self.proc.wait, name="reap-attach", daemon=True).start()
            self.proc = None


class FedAttachment:
    """A session whose bytes another owner parses (the PTY fallback host): `on_bytes` is called from its thread
    whenever bytes came."""

    def __init__(self, emulator: TerminalEmulator, lock: AbstractContextManager[Any],
                 subscribe: Callable[[Callable[[bytes], None]], Callable[[], None]],
                 write: Callable[[bytes], None], resize: Callable[[int, int], None],
                 on_bytes: Callable[[bytes], None]) -> None:
        self._emulator = emulator
        self._lock = lock
        self._write = write
        self._resize = resize
        self._unsubscribe: Callable[[], None] | None = subscribe(on_bytes)

    @property
    def emulator(self) -> TerminalEmulator:
        return self._emulator

    def locked(self) -> AbstractContextManager[Any]:
        return self._lock

    def write(self, data: bytes) -> None:
        with suppressed(Exception):
            self._write(data)

    def resize(self, cols: int, rows: int) -> None:
        self._resize(cols, rows)

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
