"""DiffView: the selected worktree's changes against its base commit, with syntax colour, and a cursor on its
lines: `r` comments on the line under it (the screen's key), as file and new-side line.

Keys (while it has focus, `bindings.DIFF_BINDINGS`):

| key | action |
|---|---|
| up, down | move the cursor a line |
"""

from __future__ import annotations

import re
from typing import ClassVar, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.reactive import reactive
from textual.strip import Strip
from textual.widgets import RichLog

from daintree_tui.core.review import IGNORED_MARK
from daintree_tui.core.validate import escape_controls
from daintree_tui.core.validate import files as count_files
from daintree_tui.tui.bindings import DIFF_BINDINGS

_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
CURSOR = Style(reverse=True)


class Place(NamedTuple):
    """A line of the new side: the file, its line number there (from 1) and its text."""

    path: str
    line: int
    text: str


def new_side_places(lines: list[str]) -> list[Place | None]:
    """For each line of a unified diff, the new-side line it shows (added or unchanged), else None (headers,
    removed lines). Hunks are counted out by their headers, so a removed `-- x` line is never read as a header."""
    places: list[Place | None] = []
    path: str | None = None
    old_left = new_left = number = 0
    for line in lines:
        if old_left > 0 or new_left > 0:
            if line.startswith("-"):
                old_left -= 1
                places.append(None)
                continue
            if line.startswith(("+", " ")) or line == "":
                kind = line[:1] or " "
                places.append(Place(path, number, line[1:]) if path is not None else None)
                number += 1
                new_left -= 1
                old_left -= kind == " "
                continue
            if line.startswith("\\"):  # "\ No newline at end of file"
                places.append(None)
                continue
            old_left = new_left = 0
        hunk = _HUNK.match(line)
        if hunk is not None:
            old_left = int(hunk.group(1) or 1)
            number = int(hunk.group(2))
            new_left = int(hunk.group(3) or 1)
        elif line.startswith("diff --git "):
            path = None
        elif line.startswith("+++ "):
            name = line[4:]
            path = None if name == "/dev/null" else name[2:] if name.startswith("b/") else name
        places.append(None)
    return places


def changed_files(diff: str) -> list[str]:
    files = []
    for line in diff.splitlines():
        if line.startswith("+++ ") and line[4:] != "/dev/null":
            files.append(line[6:] if line[4:6] == "b/" else line[4:])
    return files


def ignored_marks(diff: str) -> list[str]:
    """The paths the diff's first lines mark as replacing an ignored file of the target's checkout (so its
    merge is refused until they are dealt with)."""
    marks = []
    for line in diff.splitlines():
        if not line.startswith(IGNORED_MARK):
            break
        marks.append(line[len(IGNORED_MARK):])
    return marks


class DiffView(RichLog):
    """A read-only, scrollable diff of the current worktree (cleared when the current worktree changes), with a
    cursor line."""

    BINDINGS: ClassVar[list[BindingType]] = DIFF_BINDINGS

    selected: reactive[str | None] = reactive(None, init=False)
    """The current worktree; a diff of another one is never left on show."""
    cursor: reactive[int] = reactive(0, init=False)
    """The line under the cursor (an index into the lines shown)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, wrap=False, highlight=False, markup=False, auto_scroll=False)
        self.worktree: str | None = None
        self.places: list[Place | None] = []
        """Per line shown, the new-side line it is (what a comment there names)."""
        self.set_reactive(DiffView.cursor, 0)

    def place(self) -> Place | None:
        """The new-side line under the cursor, if it is one."""
        return self.places[self.cursor] if 0 <= self.cursor < len(self.places) else None

    def first_place(self) -> None:
        """The cursor on the first line a comment can go on."""
        self.cursor = next((row for row, place in enumerate(self.places) if place is not None), 0)

    def action_cursor(self, step: int) -> None:
        self.cursor = max(0, min(len(self.places) - 1, self.cursor + step))
        top, height = self.scroll_offset.y, self.scrollable_content_region.height
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif height and self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False)

    def watch_cursor(self) -> None:
        self.refresh()

    def on_click(self, event: events.Click) -> None:
        row = self.scroll_offset.y + event.y
        if 0 <= row < len(self.places):
            self.cursor = row

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        if self.places and self.scroll_offset.y + y == self.cursor:
            return Strip(Segment.apply_style(list(strip), post_style=CURSOR), strip.cell_length)
        return strip

    def watch_selected(self, name: str | None) -> None:
        if self.worktree is not None and name != self.worktree:
            self.clear()
            self.worktree = None
            self.places = []
            if name:
                self.write(Text(f"{name}: press d for its diff", style="dim"))

    def show(self, name: str, diff: str) -> None:
        # The agent's files, byte for byte: an ESC in one (`ESC ] 52`, the clipboard) would reach the terminal,
        # which Textual passes a Text's controls to as they are. Shown escaped (`\x1b`), as the CLI's diff is.
        diff = escape_controls(diff)
        self.clear()
        self.worktree = name
        self.places = []
        files = changed_files(diff)
        if not diff.strip():
            self.write(Text(f"{name}: no changes against its base", style="dim"))
            return
        header = Text(f"{name}: {count_files(len(files))} changed: ", style="bold")
        header.append(", ".join(files), style="cyan")
        self.write(header)
        marks = ignored_marks(diff)
        for path in marks:
            warning = Text(IGNORED_MARK, style="bold red")
            warning.append(path, style="bold")
            self.write(warning)
        diff = "".join(diff.splitlines(keepends=True)[len(marks):])
        # One line shown per line of the diff (no wrapping): the header and the marks, then the diff's own.
        heading: list[Place | None] = [None] * (1 + len(marks))
        self.places = heading + new_side_places(diff.splitlines())
        self.first_place()
        from rich.syntax import Syntax  # pygments is slow to import: load it on the first diff

        self.write(Syntax(diff, "diff", theme="ansi_dark", background_color="default", word_wrap=False))
