"""ConfirmScreen: a yes/no question (opening a PR, trusting a config's hooks)."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from daintree_tui.tui.widgets.plain import plain


class ConfirmScreen(ModalScreen[bool]):
    """Yes or no, with an explanation."""

    # on_mount focuses the button, without scrolling: Textual's first-focusable pick (a file list) and a plain
    # focus() scroll a short window's dialog down, past its question, to the buttons docked below it anyway.
    AUTO_FOCUS = ""
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="dialog_cancel")]

    def __init__(self, title: str, body: str, yes: str = "Yes", no: str = "Cancel") -> None:
        super().__init__()
        self.question = title
        self.body = body
        self.yes = yes
        self.no = no

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(plain(self.question), classes="dialog-title")
            with VerticalScroll(id="dirty-files"):
                yield Static(plain(self.body))
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.yes, variant="primary", id="yes")
                yield Button(self.no, id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus(scroll_visible=False)

    @on(Button.Pressed, "#yes")
    def confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_cancel(self) -> None:
        self.dismiss(False)
