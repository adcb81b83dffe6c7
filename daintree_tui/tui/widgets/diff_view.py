"""DiffView: the selected worktree's changes against its base commit, with syntax colour."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import RichLog

from daintree_tui.core.review import IGNORED_MARK
from daintree_tui.core.validate import escape_controls
from daintree_tui.core.validate import files as count_files


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
    """A read-only, scrollable diff of the current worktree (cleared when the current worktree changes)."""

    selected: reactive[str | None] = reactive(None, init=False)
    """The current worktree; a diff of another one is never left on show."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, wrap=False, highlight=False, markup=False, auto_scroll=False)
        self.worktree: str | None = None

    def watch_selected(self, name: str | None) -> None:
        if self.worktree is not None and name != self.worktree:
            self.clear()
            self.worktree = None
            if name:
                self.write(Text(f"{name}: press d for its diff", style="dim"))

    def show(self, name: str, diff: str) -> None:
        # The agent's files, byte for byte: an ESC in one (`ESC ] 52`, the clipboard) would reach the terminal,
        # which Textual passes a Text's controls to as they are. Shown escaped (`\x1b`), as the CLI's diff is.
        diff = escape_controls(diff)
        self.clear()
        self.worktree = name
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
        from rich.syntax import Syntax  # pygments is slow to import: load it on the first diff

        self.write(Syntax(diff, "diff", theme="ansi_dark", background_color="default", word_wrap=False))
