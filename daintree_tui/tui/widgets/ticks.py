"""TickBox and TickList: a checkbox and a selection list whose box shows a tick when on and nothing when off.

Textual draws the same `X` in both states and tells them apart by colour alone, which reads as "on" in both
states on many themes and in every monochrome terminal; a dialog's "Remove the worktree afterwards" must not
be guessed.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.content import Content
from textual.strip import Strip
from textual.widgets import Checkbox, SelectionList

TICK = "✓"
NO_TICK = " "


def tick_glyph(on: bool) -> str:
    return TICK if on else NO_TICK


class TickBox(Checkbox):
    """A Checkbox whose box reads ✓ when checked and blank when not."""

    def render(self) -> Content:
        # The base class draws BUTTON_INNER for either value; the glyph follows the value at every paint.
        self.BUTTON_INNER = tick_glyph(self.value)
        return super().render()


class TickList(SelectionList[str]):
    """A SelectionList whose boxes read ✓ for a selected row and blank for the others."""

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        segments = list(strip)
        index = self.scroll_offset.y + y
        if len(segments) < 2 or segments[1].text != Checkbox.BUTTON_INNER or index >= self.option_count:
            return strip  # a line without a box (past the last option)
        selected = self.get_option_at_index(index).value in self.selected
        segments[1] = Segment(tick_glyph(selected), segments[1].style)
        return Strip(segments, strip.cell_length)
