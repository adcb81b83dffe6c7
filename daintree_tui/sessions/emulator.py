"""Terminal emulation core: a pyte screen that survives what real agents print, behind a `feed` that never raises.

Traps fixed here (see shared TERMINAL.md):
- pyte 0.8.2 stops drawing a text run at U+FE0F / U+200D (`ok ✔️ tests passed` showed as `ok ✔`), and emoji
  modifier sequences (skin tones, flags) took 4 cells: joiners, variation selectors and modifiers are folded
  into the previous cell here.
- pyte raises TypeError on private CSI sequences it does not know (vim's `CSI ? 4 m`), losing the rest of the
  chunk: every CSI handler here accepts and ignores `private`.
- Multibyte characters split across reads: bytes go through pyte's ByteStream (an incremental UTF-8 decoder).
- pyte 0.8.2 knows no SU, SD or REP (`CSI n S`, `CSI n T`, `CSI n b`), which xterm-256color's terminfo offers
  (indn, rin, rep) and tmux uses: typed lines echoed faster than a frame scroll with `CSI n S`, and each one
  lost overwrote a line (an agent's terminal showed lines missing and others twice). They are handled here.
"""

from __future__ import annotations

import inspect
import unicodedata
from collections.abc import Callable
from typing import Any

import pyte
from pyte import modes as mo
from wcwidth import wcwidth

ZWJ = "\u200d"
_VARIATION_SELECTORS = frozenset(chr(c) for c in range(0xFE00, 0xFE10))
_SKIN_TONES = range(0x1F3FB, 0x1F400)
_REGIONAL = range(0x1F1E6, 0x1F200)

# pyte stores DEC private modes shifted left by 5.
MODE_APP_CURSOR = 1 << 5  # DECCKM
MODE_BRACKETED_PASTE = 2004 << 5
MODE_MOUSE_X10 = 1000 << 5
MODE_MOUSE_BUTTON = 1002 << 5
MODE_MOUSE_ANY = 1003 << 5
MODE_MOUSE_SGR = 1006 << 5
MODE_CURSOR_VISIBLE = mo.DECTCEM


def indexed_to_ansi(attrs: tuple[int, ...]) -> list[int]:
    """Rewrite `38;5;N` / `48;5;N` with N < 16 as the plain SGR codes of the same ANSI colour (30-37, 90-97,
    40-47, 100-107); 256-colour indexes above 15 and `38;2;r;g;b` pass through unchanged."""
    out: list[int] = []
    i = 0
    while i < len(attrs):
        code = attrs[i]
        if code in (38, 48) and i + 1 < len(attrs):
            kind = attrs[i + 1]
            if kind == 5 and i + 2 < len(attrs):
                index = attrs[i + 2]
                if 0 <= index < 16:
                    base = (30 if index < 8 else 90) + (10 if code == 48 else 0)
                    out.append(base + index % 8)
                else:
                    out.extend(attrs[i:i + 3])
                i += 3
                continue
            if kind == 2:
                out.extend(attrs[i:i + 5])
                i += 5
                continue
        out.append(code)
        i += 1
    return out


def _tolerant(method: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a CSI handler so a private (`CSI ? ...`) form it does not know is ignored instead of raising."""

    def handler(*args: Any, private: bool = False, **kwargs: Any) -> Any:
        if private:
            return None
        return method(*args, **kwargs)

    handler.__name__ = method.__name__
    return handler


class SafeScreen(pyte.Screen):
    """A pyte Screen for real agent output: emoji sequences, unknown private modes, query answers."""

    def __init__(self, columns: int, lines: int, respond: Callable[[str], None] | None = None) -> None:
        super().__init__(columns, lines)
        self._respond = respond
        self._join_next = False
        self._last_graphic = ""
        for name in set(EmulatorStream.csi.values()):
            method = getattr(self, name, None)
            if method is None:
                continue
            params = inspect.signature(method).parameters
            takes_private = "private" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
            if not takes_private:
                setattr(self, name, _tolerant(method))

    def select_graphic_rendition(self, *attrs: int, private: bool = False) -> None:
        """SGR, with the 16 ANSI colours kept as ANSI names whichever way they were written (`38;5;6` is cyan,
        not pyte's fixed `00cdcd`), so the user's terminal palette applies to them."""
        if private:
            return
        super().select_graphic_rendition(*indexed_to_ansi(attrs))

    def write_process_input(self, data: str) -> None:
        """pyte answers device-attribute queries through here: send the answer back to the PTY."""
        if self._respond is not None:
            self._respond(data)

    def _fold_into_previous(self, char: str) -> None:
        line = self.buffer[self.cursor.y]
        x = self.cursor.x - 1
        if x >= 1 and line[x].data == "":  # the stub cell after a wide character
            x -= 1
        if x < 0:
            return
        cell = line[x]
        line[x] = cell._replace(data=unicodedata.normalize("NFC", cell.data + char))
        self.dirty.add(self.cursor.y)

    def draw(self, data: str) -> None:
        """Draw text, folding joiners, variation selectors and emoji modifiers into the previous cell."""
        data = data.translate(self.g1_charset if self.charset else self.g0_charset)
        run: list[str] = []
        prev_regional = False

        def flush() -> None:
            if run:
                super(SafeScreen, self).draw("".join(run))
                run.clear()

        for char in data:
            code = ord(char)
            joins = (
                self._join_next or char == ZWJ or char in _VARIATION_SELECTORS or code in _SKIN_TONES
                or (prev_regional and code in _REGIONAL)
            )
            width = wcwidth(char)
            if joins or (width == 0 and unicodedata.combining(char)):
                flush()
                self._fold_into_previous(char)
                self._join_next = char == ZWJ
                prev_regional = False
                continue
            if width <= 0:
                continue  # unprintable or zero-width format character: pyte would stop the whole run here
            run.append(char)
            self._last_graphic = char
            prev_regional = code in _REGIONAL
        flush()

    def _scroll_count(self, count: int | None) -> tuple[int, int, int]:
        top, bottom = self.margins or pyte.screens.Margins(0, self.lines - 1)
        return top, bottom, min(max(count or 1, 1), bottom - top + 1)

    def scroll_up(self, count: int | None = None, *rest: int, private: bool = False) -> None:
        """SU: the lines within the margins move up `count`, blank lines come in at the bottom; the cursor
        stays. (`CSI ? Pn S` is another sequence: ignored.)"""
        if private or rest:
            return
        top, bottom, n = self._scroll_count(count)
        self.dirty.update(range(self.lines))
        for y in range(top, bottom + 1):
            if y + n <= bottom:
                self.buffer[y] = self.buffer[y + n]
            else:
                self.buffer.pop(y, None)

    def scroll_down(self, count: int | None = None, *rest: int, private: bool = False) -> None:
        """SD: the lines within the margins move down `count`, blank lines come in at the top. (With more
        parameters `CSI T` is xterm's mouse highlight tracking: ignored.)"""
        if private or rest:
            return
        top, bottom, n = self._scroll_count(count)
        self.dirty.update(range(self.lines))
        for y in range(bottom, top - 1, -1):
            if y - n >= top:
                self.buffer[y] = self.buffer[y - n]
            else:
                self.buffer.pop(y, None)

    def repeat_character(self, count: int | None = None, *rest: int, private: bool = False) -> None:
        """REP: the character drawn last, `count` more times, at most a line's width: the count is the agent's,
        and six bytes asking for a screenful each would make a read of its output cost hundreds of times what
        the same bytes of text do, on the event loop (what programs repeat is a run within a line)."""
        if private or rest or not self._last_graphic:
            return
        n = min(max(count or 1, 1), self.columns)
        super().draw(self._last_graphic * n)


class EmulatorStream(pyte.ByteStream):
    """pyte's byte stream with the CSI sequences SafeScreen adds (SU, SD, REP)."""

    csi = {**pyte.ByteStream.csi, "S": "scroll_up", "T": "scroll_down", "b": "repeat_character"}


class TerminalEmulator:
    """A screen fed with bytes from a PTY. `feed` never raises; answers to terminal queries go to `respond`."""

    def __init__(self, columns: int = 80, lines: int = 24, respond: Callable[[bytes], None] | None = None) -> None:
        self._respond = respond
        self.screen = SafeScreen(columns, lines, self._answer)
        self.stream = EmulatorStream(self.screen)
        self.errors = 0

    def _answer(self, data: str) -> None:
        if self._respond is not None:
            self._respond(data.encode("utf-8"))

    def feed(self, data: bytes) -> None:
        """Parse output; a sequence pyte cannot handle is dropped, never raised into the caller."""
        try:
            self.stream.feed(data)
        except Exception:
            # pyte re-initialises its parser after a handler raises; count it and carry on.
            self.errors += 1

    def resize(self, columns: int, lines: int) -> None:
        if (columns, lines) != (self.screen.columns, self.screen.lines) and columns > 0 and lines > 0:
            self.screen.resize(lines, columns)
            self.screen.dirty.update(range(lines))

    def take_dirty(self) -> set[int]:
        dirty = set(self.screen.dirty)
        self.screen.dirty.clear()
        return dirty

    def has_mode(self, mode: int) -> bool:
        return mode in self.screen.mode

    @property
    def app_cursor(self) -> bool:
        return self.has_mode(MODE_APP_CURSOR)

    @property
    def bracketed_paste(self) -> bool:
        return self.has_mode(MODE_BRACKETED_PASTE)

    @property
    def mouse_tracking(self) -> bool:
        return any(self.has_mode(m) for m in (MODE_MOUSE_X10, MODE_MOUSE_BUTTON, MODE_MOUSE_ANY))

    @property
    def cursor_visible(self) -> bool:
        return self.has_mode(MODE_CURSOR_VISIBLE) and not self.screen.cursor.hidden

    def line_text(self, y: int) -> str:
        """One screen line as plain text (for tests and previews; rendering uses the cells)."""
        line = self.screen.buffer[y]
        return "".join(line[x].data for x in range(self.screen.columns)).rstrip()

    def text(self) -> str:
        return "\n".join(self.line_text(y) for y in range(self.screen.lines)).rstrip("\n")
