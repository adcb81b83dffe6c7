"""MergeScreen: choose how to merge a worktree's branch back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from daintree_tui.tui.widgets.ticks import TickBox


@dataclass(frozen=True)
class MergeChoice:
    strategy: str
    into: str | None
    remove: bool
    complete_task: bool


class MergeScreen(ModalScreen[MergeChoice | None]):
    """Strategy, target branch, and what to do with the worktree and task afterwards."""

    # on_mount focuses the button, without scrolling: Textual's first-focusable pick (a file list) and a plain
    # focus() scroll a short window's dialog down, past its question, to the buttons docked below it anyway.
    AUTO_FOCUS = ""
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="dialog_cancel")]

    def __init__(self, name: str, target: str) -> None:
        super().__init__()
        self.worktree = name
        self.target = target

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(f"Merge {self.worktree} back", classes="dialog-title")
            with Horizontal(classes="dialog-row"):
                yield Label("Strategy", classes="field-label")
                yield Select([("fast-forward", "ff"), ("squash", "squash"), ("rebase", "rebase")], value="ff",
                             allow_blank=False, id="strategy")
                yield Label("Into", classes="field-label")
                yield Input(value=self.target, id="into")
            yield TickBox("Remove the worktree afterwards", value=True, id="remove")
            yield TickBox("Mark its task completed", value=True, id="complete")
            yield Label("pre_merge hooks run first; a conflict changes nothing.", classes="dim")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Merge", variant="primary", id="merge")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        # The defaults are the usual choice: Enter merges. On the strategy Select, Enter opened its list instead.
        self.query_one("#merge", Button).focus(scroll_visible=False)

    @on(Input.Submitted, "#into")
    @on(Button.Pressed, "#merge")
    def merge(self) -> None:
        strategy = self.query_one("#strategy", Select).value
        into = self.query_one("#into", Input).value.strip() or None
        self.dismiss(MergeChoice(str(strategy), into, self.query_one("#remove", TickBox).value,
                                 self.query_one("#complete", TickBox).value))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
