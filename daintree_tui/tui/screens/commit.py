"""CommitScreen: commit the agent's work in its worktree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from daintree_tui.tui.widgets.plain import plain
from daintree_tui.tui.widgets.ticks import TickBox


@dataclass(frozen=True)
class CommitChoice:
    message: str
    all_changes: bool


class CommitScreen(ModalScreen[CommitChoice | None]):
    """A message and whether to stage everything."""

    AUTO_FOCUS = ""  # on_mount focuses the first field without scrolling a short window's dialog past its title
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="dialog_cancel")]

    def __init__(self, name: str, dirty: list[str], suggestion: str) -> None:
        super().__init__()
        self.worktree = name
        self.dirty = dirty
        self.suggestion = suggestion

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(f"Commit in {self.worktree}", classes="dialog-title")
            yield Input(value=self.suggestion, placeholder="commit message", id="message")
            with VerticalScroll(id="dirty-files"):
                yield Static(plain("\n".join(f"  {f}" for f in self.dirty[:200]) or "  (nothing changed)"))
            yield TickBox("Stage everything (untracked files too)", value=True, id="all")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Commit", variant="primary", id="commit")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#message", Input).focus(scroll_visible=False)

    @on(Input.Submitted, "#message")
    @on(Button.Pressed, "#commit")
    def commit(self) -> None:
        message = self.query_one("#message", Input).value.strip()
        if not message:
            self.notify("A commit needs a message", severity="warning")
            return
        self.dismiss(CommitChoice(message, self.query_one("#all", TickBox).value))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
