"""ReviewCommentScreen: a comment on one line of a worktree's diff (its file and new-side line)."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from daintree_tui.tui.widgets.plain import plain


class ReviewCommentScreen(ModalScreen[str | None]):
    """The comment's text, under the line it is on (the agent's text, shown as it is)."""

    AUTO_FOCUS = ""
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="dialog_cancel")]

    def __init__(self, name: str, path: str, line: int, text: str) -> None:
        super().__init__()
        self.worktree, self.path, self.line, self.text = name, path, line, text

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(plain(f"Comment on {self.path}:{self.line} in {self.worktree}"), classes="dialog-title")
            yield Static(plain(f"> {self.text}"), id="quoted")
            yield Input(placeholder="what the agent should change here", id="comment")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Add comment", variant="primary", id="add")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#comment", Input).focus(scroll_visible=False)

    @on(Input.Submitted, "#comment")
    @on(Button.Pressed, "#add")
    def add(self) -> None:
        text = self.query_one("#comment", Input).value.strip()
        if not text:
            self.notify("A comment needs some text", severity="warning")
            return
        self.dismiss(text)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
