"""TerminalView: an embedded, interactive terminal showing one agent session.

A PTY runs `tmux attach -t=dt-<name>`; its output is read with `loop.add_reader` and fed to the sessions
layer's emulator. tmux absorbs output floods and redraws only the final screen, so this widget parses only what
is on screen. Lines are rendered from pyte's dirty set as cached Strips; the answer to a key is drawn at once,
other output at most once a frame (`FramePacer`). How the bytes come and go is the attachment's business
(`terminal_attach.py`): the widget holds one while it shows a session.

Keys (while focused):

| Key      | Action                                              |
|----------|-----------------------------------------------------|
| ctrl+]   | Leave the terminal (the only key not forwarded)     |
| anything | Encoded and sent to the agent, ctrl+q and tab too   |

A remote session whose connection drops while the terminal has focus leaves it *holding* keys: what the person
types next was meant for the agent, so it is dropped (with one notice) until they leave with ctrl+] or the session
is attached again; never run as a dashboard shortcut (`x`, `m`, `n` would act while nobody looks).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from daintree_tui.sessions.keys import WHEEL_DOWN, WHEEL_UP, encode_key, encode_mouse_sgr, encode_paste
from daintree_tui.tui.widgets.frame_pacer import FramePacer
from daintree_tui.tui.widgets.terminal_attach import Attachment, ClientAttachment, FedAttachment
from daintree_tui.tui.widgets.terminal_render import render_screen_line

if TYPE_CHECKING:
    from daintree_tui.sessions.emulator import TerminalEmulator

NO_SESSION = "No session here. Press enter to start one, s to pick the agent."
LOOKING = "Looking for this worktree's session…"
"""Before the first poll has said which sessions there are: "no session" was wrong while they started."""


class TerminalView(Widget, can_focus=True):
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

    worktree: reactive[str | None] = reactive(None, layout=False)
    """The worktree whose session is attached (None: nothing attached)."""
    placeholder: reactive[str] = reactive(NO_SESSION)
    """What an unattached terminal says."""
    no_worktree: reactive[bool] = reactive(False)
    """No worktree is current (none exists yet, or the filter hides them all): enter and s would do nothing."""

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.attachment: Attachment | None = None
        """How the session shown reaches us (None: nothing attached)."""
        self._blank: TerminalEmulator | None = None  # what `emulator` is unattached: made when first asked for
        self._paint_timer: Timer | None = None
        self.pacer = FramePacer()  # when output is repainted (tests give it a frame interval of their own)
        self._strips: dict[int, Strip] = {}
        """Each screen line's strip, by its line number (dropped when the line changed)."""
        self._lines: dict[tuple[object, ...], Strip] = {}
        """Strips by what their line holds (width, columns and cells), the last ~two screens of them."""
        self._cursor_line: int | None = None
        self.bytes_read = 0
        self.held: str | None = None
        """The remote worktree whose connection dropped while we had focus: keys are dropped, not dispatched."""
        self._hold_on_drop = False
        self._told_held = False

    @property
    def owns_keys(self) -> bool:
        """Whether every key typed here is the agent's (attached, or holding for a session that dropped)."""
        return self.attached or self.held is not None

    def hold(self, worktree: str) -> None:
        """Drop the keys typed here from now on, until the person leaves or `worktree` is attached again."""
        if self.has_focus:
            self.held = worktree
            self._told_held = False

    @property
    def emulator(self) -> TerminalEmulator:
        """The emulator of the session shown, or a blank one of the grid's size, made when first asked for: pyte
        and wcwidth are imported then (tens of milliseconds), not before the dashboard's first frame."""
        if self.attachment is not None:
            return self.attachment.emulator
        if self._blank is None:
            from daintree_tui.sessions.emulator import TerminalEmulator

            self._blank = TerminalEmulator(*self._grid_size(), respond=self._write)
        return self._blank

    @property
    def has_emulator(self) -> bool:
        return self.attachment is not None or self._blank is not None

    @property
    def attached(self) -> bool:
        return self.worktree is not None

    # -- attaching -------------------------------------------------------------------------------------------

    def attach_command(self, worktree: str, argv: Sequence[str], *, hold_on_drop: bool = False) -> None:
        """Show `worktree` by running `argv` (a `tmux attach`) in a PTY of our own; `hold_on_drop`: when it ends
        while focused (a remote connection that dropped), the keys typed next are held (see the module's doc)."""
        self.detach()
        self._hold_on_drop = hold_on_drop
        cols, rows = self._grid_size()
        self._attached(worktree, ClientAttachment(argv, cols, rows, respond=self._write,
                                                  on_output=self._session_output, on_closed=self._session_ended))

    def attach_emulator(self, worktree: str, emulator: TerminalEmulator, lock: AbstractContextManager[Any],
                        subscribe: Callable[[Callable[[bytes], None]], Callable[[], None]],
                        write: Callable[[bytes], None], resize: Callable[[int, int], None]) -> None:
        """Show a session whose bytes another owner parses (the PTY fallback host)."""
        self.detach()
        app = self.app  # the host's thread calls on_bytes: it has no active app to look up

        def on_bytes(_: bytes) -> None:
            app.call_from_thread(self._schedule_refresh)

        self._attached(worktree, FedAttachment(emulator, lock, subscribe, write, resize, on_bytes))
        resize(*self._grid_size())

    def _attached(self, worktree: str, attachment: Attachment) -> None:
        self.attachment = attachment
        self.held = None
        self.set_reactive(TerminalView.worktree, worktree)
        self._strips.clear()
        self._lines.clear()
        self.refresh()

    def detach(self) -> None:
        """Stop showing the current session (the session itself keeps running)."""
        attachment, self.attachment = self.attachment, None
        if attachment is not None:
            attachment.close()
        self.set_reactive(TerminalView.worktree, None)
        self._blank = None  # a blank one when next asked for
        self._strips.clear()
        self._lines.clear()
        self.refresh()

    def on_unmount(self) -> None:
        self.detach()

    # -- output ----------------------------------------------------------------------------------------------

    def _session_output(self, count: int) -> None:
        self.bytes_read += count
        self._schedule_refresh()

    def _session_ended(self) -> None:
        worktree = self.worktree
        hold = self._hold_on_drop
        self.detach()
        if hold and worktree is not None:
            self.hold(worktree)
        self.post_message(self.Detached(self, worktree))

    def _schedule_refresh(self) -> None:
        wait = self.pacer.delay()
        if wait <= 0:
            self._paint()  # no hop through the message queue: this is the echo a typist waits for
        elif self._paint_timer is None:
            self._paint_timer = self.set_timer(wait, self._paint)

    def _paint(self) -> None:
        if self._paint_timer is not None:
            self._paint_timer.stop()
            self._paint_timer = None
        self.pacer.flushed()
        with self._locked():
            dirty = self.emulator.take_dirty()
            cursor_y = self.emulator.screen.cursor.y
        if self._cursor_line is not None:
            dirty.add(self._cursor_line)
        dirty.add(cursor_y)
        for y in dirty:
            self._strips.pop(y, None)
        width, height = self.size
        if len(dirty) * 2 >= height:
            self.refresh()
        else:
            # Repaint only the changed lines: an echo then costs one line of output, not the whole pane.
            self.refresh(*[Region(0, y, width, 1) for y in sorted(dirty) if y < height])

    def _locked(self) -> AbstractContextManager[Any]:
        return self.attachment.locked() if self.attachment is not None else nullcontext()

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
            strip = self._strips.get(y)
            if strip is None or strip.cell_length != width:
                # By content too: a line that scrolled up is the one drawn a line lower before (a session
                # printing a line a second scrolls every line of the pane once a second).
                key = (width, screen.columns, tuple(screen.buffer[y].items()))
                strip = self._lines.get(key)
                if strip is None:
                    strip = render_screen_line(self.emulator, y, width, None)
                    self._lines[key] = strip
                    if len(self._lines) > 2 * screen.lines + 8:
                        del self._lines[next(iter(self._lines))]  # the oldest: gone from the screen first
                self._strips[y] = strip
            return strip

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return container.height

    # -- input -----------------------------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        self.pacer.key_sent()
        if self.attachment is not None:
            self.attachment.write(data)

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes to the session (used by context injection and tests)."""
        self._write(data)

    async def on_key(self, event: events.Key) -> None:
        if event.key in self.leave_keys:
            return  # let the leave binding run
        if not self.attached:
            if self.held is not None:
                self._drop_held_key(event)
            return  # unattached, the dashboard's keys run (enter starts a session, s picks the agent)
        data = encode_key(event.key, event.character, app_cursor=self.emulator.app_cursor)
        if data is None and event.character:
            data = event.character.encode()
        if data is not None:
            self._write(data)
        event.stop()
        event.prevent_default()

    def _drop_held_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        if not self._told_held:
            self._told_held = True
            self.app.notify(f"{self.held}: the connection dropped; keys typed here are not sent (ctrl+] leaves "
                            "the terminal)", title="not sent", severity="warning")

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
        self._strips.clear()
        self._lines.clear()
        if self.attachment is not None:
            self.attachment.resize(cols, rows)
        self.refresh()

    def on_focus(self) -> None:
        self._schedule_refresh()

    def on_blur(self) -> None:
        self.held = None  # the person left: their keys are the dashboard's again
        self._schedule_refresh()

    def screen_text(self) -> str:
        with self._locked():
            return self.emulator.text()

    def _grid_size(self) -> tuple[int, int]:
        width, height = self.size
        return max(width, 20), max(height, 5)
