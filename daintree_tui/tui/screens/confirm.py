"""ConfirmScreen: a yes/no question (opening a PR, trusting a config's hooks)."""

from __future__ import annotations

import time
from typing import ClassVar

from textual import events, on
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

    UNASKED_SETTLE: ClassVar[float] = 0.6
    """Seconds of no key a prompt nobody asked for (trust, an agent's request) waits for before it takes keys, when
    it appears while the user is typing (see `prompts.settle_for`)."""

    def __init__(self, title: str, body: str, yes: str = "Yes", no: str = "Cancel", settle: float = 0.0) -> None:
        """`settle`: for a prompt that appears on its own, while the user may be typing (to the dashboard, to an
        agent): keys are ignored until none has come for `settle` seconds. Without it the keys typed as it
        appeared answered it: shift+tab then enter (in an agent's prompt) trusted a repository's hooks."""
        super().__init__()
        self.question = title
        self.body = body
        self.yes = yes
        self.no = no
        self.settle = settle
        self.quiet_at = 0.0
        """When (monotonic) keys are taken again: `settle` after the last one ignored."""
        self.settling = settle > 0
        """Whether keys are being ignored now."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(plain(self.question), classes="dialog-title")
            with VerticalScroll(id="dirty-files"):
                yield Static(plain(self.body))
            if self.settling:
                yield Label("It appeared on its own: keys wait until you stop typing.", id="settling",
                            classes="dim")
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.yes, variant="primary", id="yes")
                yield Button(self.no, id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus(scroll_visible=False)
        if self.settling:
            self.quiet_at = time.monotonic() + self.settle
            self.set_timer(self.settle, self.check_settled)

    def check_settled(self) -> None:
        left = self.quiet_at - time.monotonic()
        if left > 0:  # a key came meanwhile: wait for the rest of its quiet time
            self.set_timer(left, self.check_settled)
            return
        self.settling = False
        self.query_one("#settling").display = False

    def on_key(self, event: events.Key) -> None:
        if self.settling:
            # Stopped here, the key never reaches the bindings (enter on a button, escape, tab).
            self.quiet_at = time.monotonic() + self.settle
            event.stop()
            event.prevent_default()

    @on(Button.Pressed, "#yes")
    def confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_cancel(self) -> None:
        self.dismiss(False)
