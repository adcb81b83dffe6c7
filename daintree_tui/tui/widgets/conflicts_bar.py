"""ConflictsBar: under the session title, with which worktrees (and its base's tip) the current worktree's work is
predicted to conflict, and in which files. Hidden while it conflicts with nothing."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from daintree_tui.core.validate import escape_controls
from daintree_tui.tui.widgets.plain import first_of

Found = dict[str, tuple[tuple[str, tuple[str, ...]], ...]]
"""Per worktree: (the other worktree or branch, the files), one each."""

FILES_SHOWN = 3


def describe(found: tuple[tuple[str, tuple[str, ...]], ...]) -> Text:
    text = Text(" ⚠ conflicts with ", style="bold red")
    for i, (other, files) in enumerate(found):
        if i:
            text.append("; ", style="dim")
        text.append(escape_controls(other), style="bold")
        # File names are the agents' to choose: shown as text, never as markup or controls.
        text.append(f" ({first_of(list(files), FILES_SHOWN)})", style="dim")
    return text


class ConflictsBar(Static):
    """One line naming the current worktree's predicted conflicts."""

    DEFAULT_CSS = """
    ConflictsBar { height: 1; width: 1fr; display: none; }
    ConflictsBar.-found { display: block; }
    """

    radar: reactive[Found] = reactive(dict, init=False, repaint=False)
    """What the radar last predicted, for every worktree."""
    selected: reactive[str | None] = reactive(None, init=False, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def _changed(self) -> None:
        found = self.radar.get(self.selected or "", ())
        if found == self._shown:
            return
        self._shown = found
        self.set_class(bool(found), "-found")  # a class, not `display`: the screen's layouts may still hide it
        if found:
            self.update(describe(found))

    watch_radar = watch_selected = _changed
