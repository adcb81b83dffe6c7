"""Rendering a terminal emulator's screen as Strips: run-length grouped cells with cached Styles."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

if TYPE_CHECKING:
    from daintree_tui.sessions.emulator import TerminalEmulator

# pyte's names for the ANSI colours, as Rich names them ("brown" is yellow; pyte spells 105 "bfightmagenta").
_COLOR_NAMES = {"brown": "yellow", "brightbrown": "bright_yellow", "bfightmagenta": "bright_magenta"}


def rich_color(value: str) -> str:
    """A pyte cell colour as a Rich colour name.

    The 16 ANSI colours stay ANSI (Rich `ColorType.STANDARD`) and pyte's `default` stays the terminal's default
    (`ColorType.DEFAULT`), so the user's terminal theme colours them; 256-colour and truecolor cells arrive as hex
    and stay truecolor.
    """
    if value == "default" or not value:
        return "default"
    if value in _COLOR_NAMES:
        return _COLOR_NAMES[value]
    if value.startswith("bright") and not value.startswith("bright_"):
        return "bright_" + value[6:]
    if len(value) == 6 and all(c in "0123456789abcdefABCDEF" for c in value):
        return "#" + value
    return value


@lru_cache(maxsize=4096)
def cell_style(fg: str, bg: str, bold: bool, italics: bool, underscore: bool, reverse: bool,
               strikethrough: bool, blink: bool) -> Style:
    """A Rich Style for a pyte cell's attributes (cached: a screen uses few distinct ones)."""
    try:
        return Style(color=rich_color(fg), bgcolor=rich_color(bg), bold=bold or None, italic=italics or None,
                     underline=underscore or None, reverse=reverse or None, strike=strikethrough or None,
                     blink=blink or None)
    except Exception:
        return Style()


CURSOR_STYLE = Style(reverse=True)


def render_screen_line(emulator: TerminalEmulator, y: int, width: int, cursor_x: int | None) -> Strip:
    """One screen line as a Strip, grouping runs of cells with the same attributes into one Segment."""
    screen = emulator.screen
    line = screen.buffer[y]
    segments: list[Segment] = []
    text: list[str] = []
    current: Style | None = None
    columns = min(width, screen.columns)
    for x in range(columns):
        cell = line[x]
        style = cell_style(cell.fg, cell.bg, cell.bold, cell.italics, cell.underscore, cell.reverse,
                           cell.strikethrough, cell.blink)
        if x == cursor_x:
            style = style + CURSOR_STYLE
        char = cell.data
        if char == "":  # the stub after a wide character
            continue
        if style is not current:
            if text:
                segments.append(Segment("".join(text), current))
            text, current = [], style
        text.append(char or " ")
    if text:
        segments.append(Segment("".join(text), current))
    strip = Strip(segments)
    return strip.crop_extend(0, width, None)
