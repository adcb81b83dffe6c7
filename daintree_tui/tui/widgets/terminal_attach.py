"""The attaching half of `TerminalView`: which session the terminal shows, and how its bytes reach the emulator.

A session is shown either through a `tmux attach` client running in a PTY of our own (its output is read by
`TerminalView._on_readable` on the event loop), or through an emulator another owner feeds (the PTY fallback
host). Kept apart from the widget's drawing and key handling so each module stays one responsibility.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from daintree_tui.core.log import suppressed

if TYPE_CHECKING:
    from daintree_tui.sessions.emulator import TerminalEmulator


class SessionAttachment(Widget):
    """Base of `TerminalView`: attaching to and detaching from one session."""

    worktree: reactive[str | None] = reactive(None, layout=False)
    """The worktree whose session is attached (None: nothing attached)."""

    # Set by TerminalView.__init__; declared here for the type checker.
    _emulator: TerminalEmulator | None
    _fd: int | None
    _proc: subprocess.Popen[bytes] | None
    _lines: dict[int, Strip]
    _external_lock: Any
    _unsubscribe: Callable[[], None] | None
    _write_external: Callable[[bytes], None] | None
    _resize_external: Callable[[int, int], None] | None

    def _write(self, data: bytes) -> None:
        raise NotImplementedError

    def _on_readable(self) -> None:
        raise NotImplementedError

    def _schedule_refresh(self) -> None:
        raise NotImplementedError

    @property
    def emulator(self) -> TerminalEmulator:
        """The emulator of the session shown, or a blank one of the grid's size, made when first asked for: pyte
        and wcwidth are imported then (tens of milliseconds), not before the dashboard's first frame."""
        if self._emulator is None:
            from daintree_tui.sessions.emulator import TerminalEmulator

            self._emulator = TerminalEmulator(*self._grid_size(), respond=self._write)
        return self._emulator

    @property
    def has_emulator(self) -> bool:
        return self._emulator is not None

    # -- attaching -------------------------------------------------------------------------------------------

    def attach_command(self, worktree: str, argv: Sequence[str]) -> None:
        """Show `worktree` by running `argv` (a `tmux attach`) in a PTY of our own."""
        from daintree_tui.sessions.emulator import TerminalEmulator
        from daintree_tui.sessions.pty_host import set_winsize

        self.detach()
        cols, rows = self._grid_size()
        self._emulator = TerminalEmulator(cols, rows, respond=self._write)
        self._lines.clear()
        master, slave = os.openpty()
        set_winsize(slave, cols, rows)
        env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
        env.pop("TMUX", None)
        try:
            self._proc = subprocess.Popen(
                list(argv), stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        self._fd = master
        asyncio.get_running_loop().add_reader(master, self._on_readable)
        self.set_reactive(SessionAttachment.worktree, worktree)
        self.refresh()

    def attach_emulator(self, worktree: str, emulator: TerminalEmulator, lock: Any,
                        subscribe: Callable[[Callable[[bytes], None]], Callable[[], None]],
                        write: Callable[[bytes], None], resize: Callable[[int, int], None]) -> None:
        """Show a session whose bytes another owner parses (the PTY fallback host)."""
        self.detach()
        self._emulator = emulator
        self._external_lock = lock
        self._write_external = write
        self._resize_external = resize
        app = self.app

        def on_bytes(_: bytes) -> None:
            app.call_from_thread(self._schedule_refresh)

        self._unsubscribe = subscribe(on_bytes)
        self.set_reactive(SessionAttachment.worktree, worktree)
        self._lines.clear()
        cols, rows = self._grid_size()
        resize(cols, rows)
        self.refresh()

    def detach(self) -> None:
        """Stop showing the current session (the session itself keeps running)."""
        if self._fd is not None:
            with suppressed(Exception):
                asyncio.get_running_loop().remove_reader(self._fd)
            with suppressed(OSError):
                os.close(self._fd)
            self._fd = None
        if self._proc is not None:
            with suppressed(ProcessLookupError):
                self._proc.terminate()
            # Reap the tmux client off the event loop: waiting here could stall the UI.
            threading.Thread(target=self._proc.wait, name="reap-attach", daemon=True).start()
            self._proc = None
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._unsubscribe = self._write_external = self._resize_external = None
        self._external_lock = None
        self.set_reactive(SessionAttachment.worktree, None)
        self._emulator = None  # a blank one when next asked for
        self._lines.clear()
        self.refresh()

    @property
    def attached(self) -> bool:
        return self.worktree is not None

    def on_unmount(self) -> None:
        self.detach()

    def _grid_size(self) -> tuple[int, int]:
        width, height = self.size
        return max(width, 20), max(height, 5)
