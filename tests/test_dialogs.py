"""The dialogs on their own, in a bare App: how their boxes read and what Enter does."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.screen import ModalScreen
from textual.widgets import Checkbox, SelectionList

from daintree_tui.tui.screens.bakeoff_new import BakeoffNewScreen
from daintree_tui.tui.screens.commit import CommitScreen
from daintree_tui.tui.screens.merge import MergeChoice, MergeScreen
from daintree_tui.tui.screens.remove import RemoveScreen


class Host(App[None]):
    """Pushes one dialog and keeps what it was dismissed with."""

    def __init__(self, dialog: ModalScreen[Any]) -> None:
        super().__init__()
        self.dialog = dialog
        self.results: list[Any] = []

    def on_mount(self) -> None:
        self.push_screen(self.dialog, self.results.append)


def box_of(widget: Checkbox) -> str:
    """The three cells of the box, as drawn."""
    return widget.render_line(0).text[:3]


async def test_a_checkbox_reads_differently_on_and_off() -> None:
    """Both states drew `▐X▌` (only the colour changed): "Remove the worktree afterwards" read as on either way."""
    app = Host(MergeScreen("feature", "main"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        box = app.screen.query_one("#remove", Checkbox)
        on = box_of(box)
        box.value = False
        await pilot.pause()
        off = box_of(box)
        assert on != off
        assert "✓" in on and "✓" not in off and "X" not in off


async def test_a_selection_list_reads_differently_on_and_off() -> None:
    """The bake-off's agent list drew the same `X` for a picked and an unpicked agent."""
    facts = {"claude": {"installed": True}, "codex": {"installed": True}}
    app = Host(BakeoffNewScreen("Refactor auth", facts, default="claude"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        agents = app.screen.query_one(SelectionList)
        picked, unpicked = agents.render_line(0).text, agents.render_line(1).text
        assert "✓" in picked and "claude" in picked
        assert "✓" not in unpicked and "X" not in unpicked and "codex" in unpicked


async def test_dialog_checkboxes_all_tick() -> None:
    for dialog in (CommitScreen("feature", ["a.py"], "msg"), RemoveScreen("feature", [], has_task=True)):
        app = Host(dialog)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            for box in app.screen.query(Checkbox):
                assert "X" not in box_of(box)


async def test_enter_in_the_merge_dialog_merges() -> None:
    """Enter opened the strategy list (the Select had the focus) instead of confirming the merge."""
    app = Host(MergeScreen("feature", "main"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == [MergeChoice("ff", "main", remove=True, complete_task=True)]


async def test_enter_in_the_merge_target_merges() -> None:
    app = Host(MergeScreen("feature", "main"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        app.screen.query_one("#into").focus()
        await pilot.press("end", "backspace", "backspace", "backspace", "backspace", *"dev", "enter")
        await pilot.pause()
        assert app.results == [MergeChoice("ff", "dev", remove=True, complete_task=True)]
