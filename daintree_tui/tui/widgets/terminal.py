"""TerminalView: an embedded, interactive terminal showing one agent session.

A PTY runs `tmux attach -t=dt-<name>`; its output is read with `loop.add_reader` and fed to the sessions
layer's emulator. tmux absorbs output floods and redraws only the final screen, so this widget parses only what
is on screen. Lines are rendered from pyte's dirty set as cached Strips; the answer to a key is drawn at once,
other output at most once a frame (`FramePacer`). Attaching and detaching live in the base class
(`terminal_attach.py`).

Keys (while focused):

| Key      | Action                                              |
|----------|-----------------------------------------------------|
| ctrl+]   | Leave the terminal (the only key not forwarded)     |
| anything | Encoded and sent to the agent, ctrl+q and tab too   |
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import textwrap
from collections.abc import Callable
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.timer import Timer

from daintree_tui.core.log import suppressed
from daintree_tui.sessions.keys import WHEEL_DOWN, WHEEL_UP, encode_key, encode_mouse_sgr, encode_paste
from daintree_tui.tui.widgets.frame_pacer import FramePacer
from daintree_tui.tui.widgets.terminal_attach import SessionAttachment
from daintree_tui.tui.widgets.terminal_render import render_screen_line

READ_CHUNK = 4096

NO_SESSION = "No session here. Press enter to start one, s to pick the agent."
LOOKING = "Looking for this worktree's session…"
"""Before the first poll has said which sessions there are: "no session" was wrong while they started."""


class TerminalView(SessionAttachment, can_focus=True):
    """Shows one session; interactive while focused."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+right_square_bracket", "leave", "Back to lists", id="leave_terminal", priority=False,
                tooltip="Leave the terminal, back to the lists (the one key the agent does not get)"),
    ]

    DEFAULT_CSS = """
    TerminalView {
        width: 1fr;
        height: 1fr;
        min-height: 3;
    }
    """

    leave_keys: ClassVar[set[str]] = {"ctrl+right_square_bracket", "ctrl+]"}
    """Keys that leave the terminal instead of going to the agent (remapped from config `keys.leave_terminal`)."""

    class Detached(Message):
        """The attach client ended (session killed, server gone)."""

        def __init__(self, terminal: TerminalView, worktree: str | None) -> None:
            super().__init__()
            self.terminal = terminal
            self.worktree = worktree

        @property
        def control(self) -> TerminalView:
            return self.terminal

    class Left(Message):
        """The user pressed the leave key."""

    class Resized(Message):
        """The terminal's grid changed size (columns, rows)."""

        def __init__(self, terminal: TerminalView, cols: int, rows: int) -> None:
            super().__init__()
            self.terminal = terminal
            self.cols = cols
            self.rows = rows

        @property
        def control(self) -> TerminalView:
            return self.terminal

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._emulator = None  # made when first needed (see `emulator`)
        self._fd: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._flush_timer: Timer | None = None
        self.pacer = FramePacer()  # when output is repainted (tests give it a frame interval of their own)
        self._lines: dict[int, Strip] = {}
        self._cursor_line: int | None = None
        self._external_lock: Any = None
        self._unsubscribe: Callable[[], None] | None = None
        self._write_external: Callable[[bytes], None] | None = None
        self._resize_external: Callable[[int, int], None] | None = None
        self.bytes_read = 0

    # -- output ----------------------------------------------------------------------------------------------

    def _on_readable(self) -> None:
        if self._fd is None:
            return
        try:
            # Small reads keep each callback short (pyte parses ~0.5 MB/s): the event loop never stalls, and
            # when we fall behind tmux stops streaming and redraws the final screen instead.
            data = os.read(self._fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            worktree = self.worktree
            self.detach()
            self.post_message(self.Detached(self, worktree))
            return
        self.bytes_read += len(data)
        self.emulator.feed(data)
        self._schedule_refresh()

    def _schedule_refresh(self) -> None:
        wait = self.pacer.delay()
        if wait <= 0:
            self._flush()  # no hop through the message queue: this is the echo a typist waits for
        elif self._flush_timer is None:
            self._flush_timer = self.set_timer(wait, self._flush)

    def _flush(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self.pacer.flushed()
        with self._locked():
            dirty = self.emulator.take_dirty()
            cursor_y = self.emulator.screen.cursor.y
        if self._cursor_line is not None:
            dirty.add(self._cursor_line)
        dirty.add(cursor_y)
        for y in dirty:
            self._lines.pop(y, None)
        width, height = self.size
        if len(dirty) * 2 >= height:
            self.refresh()
        else:
            # Repaint only the changed lines: an echo then costs one line of output, not the whole pane.
            self.refresh(*[Region(0, y, width, 1) for y in sorted(dirty) if y < height])

    def _locked(self) -> Any:
        return self._external_lock if self._external_lock is not None else contextlib.nullcontext()

    placeholder: reactive[str] = reactive(NO_SESSION)
    """What an unattached terminal says."""
    no_worktree: reactive[bool] = reactive(False)
    """No worktree is current (none exists yet, or the filter hides them all): enter and s would do nothing."""

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if not self.attached:
            text = "No worktree yet. Press n to create a task and its worktree." if self.no_worktree \
                else self.placeholder
            lines = textwrap.wrap(text, max(width - 2, 10))
            row = y - (self.size.height - len(lines)) // 2
            if 0 <= row < len(lines):
                return Strip([Segment(lines[row].center(width)[:width], Style(dim=True))])
            return Strip.blank(width)
        with self._locked():
            screen = self.emulator.screen
            if y >= screen.lines:
                return Strip.blank(width)
            show_cursor = self.has_focus and self.emulator.cursor_visible and y == screen.cursor.y
            if show_cursor:
                self._cursor_line = y
                return render_screen_line(self.emulator, y, width, screen.cursor.x)
            strip = self._lines.get(y)
            if strip is None or strip.cell_length != width:
                strip = render_screen_line(self.emulator, y, width, None)
                self._lines[y] = strip
            return strip

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return container.height

    # -- input -----------------------------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        self.pacer.key_sent()
        if self._write_external is not None:
            with suppressed(Exception):
                self._write_external(data)
            return
        if self._fd is None:
            return
        with suppressed(BlockingIOError):
            view = memoryview(data)
            while view:
                try:
                    written = os.write(self._fd, view)
                except BlockingIOError:
                    continue
                except OSError:
                    return
                view = view[written:]

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes to the session (used by context injection and tests)."""
        self._write(data)

    async def on_key(self, event: events.Key) -> None:
        if event.key in self.leave_keys or not self.attached:
            return  # let the leave binding (and, unattached, everything else) run
        data = encode_key(event.key, event.character, app_cursor=self.emulator.app_cursor)
        if data is None and event.character:
            data = event.character.encode()
        if data is not None:
            self._write(data)
        event.stop()
        event.prevent_default()

    def on_paste(self, event: events.Paste) -> None:
        if self.attached:
            self._write(encode_paste(event.text, self.emulator.bracketed_paste))
            event.stop()

    def _wheel(self, event: events.MouseScrollUp | events.MouseScrollDown, button: int) -> None:
        if not self.attached:
            return
        event.stop()
        if self.emulator.mouse_tracking:
            self._write(encode_mouse_sgr(button, max(0, event.x), max(0, event.y)))
        else:
            key = "up" if button == WHEEL_UP else "down"
            self._write((encode_key(key, None, app_cursor=self.emulator.app_cursor) or b"") * 3)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, WHEEL_UP)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, WHEEL_DOWN)

    def action_leave(self) -> None:
        self.post_message(self.Left())

    # -- size ------------------------------------------------------------------------------------------------

    def on_resize(self, event: events.Resize) -> None:
        cols, rows = self._grid_size()
        self.post_message(self.Resized(self, cols, rows))
        if self.has_emulator:  # one made later starts at this size
            with self._locked():
                self.emulator.resize(cols, rows)
        self._lines.clear()
        if self._resize_external is not None:
            self._resize_external(cols, rows)
        elif self._fd is not None:
            from daintree_tui.sessions.pty_host import set_winsize  # loaded by the attach

            set_winsize(self._fd, cols, rows)
            if self._proc is not None:
                with suppressed(ProcessLookupError):
                    os.kill(self._proc.pid, signal.SIGWINCH)
        self.refresh()

    def on_focus(self) -> None:
        self._schedule_refresh()

    def on_blur(self) -> None:
        self._schedule_refresh()

    def screen_text(self) -> str:
        with self._locked():
            return self.emulator.text()
