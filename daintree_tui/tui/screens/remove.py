"""RemoveScreen: confirm removing a worktree, listing its uncommitted files; discarding them needs a second yes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from daintree_tui.core.validate import files
from daintree_tui.tui.widgets.plain import plain
from daintree_tui.tui.widgets.ticks import TickBox


@dataclass(frozen=True)
class RemoveChoice:
    force: bool
    complete_task: bool


class RemoveScreen(ModalScreen[RemoveChoice | None]):
    """Remove a worktree. With uncommitted files, the first yes arms a second, explicit discard."""

    # on_mount focuses the button, without scrolling: Textual's first-focusable pick (a file list) and a plain
    # focus() scroll a short window's dialog down, past its question, to the buttons docked below it anyway.
    AUTO_FOCUS = ""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="dialog_cancel"),
    ]

    def __init__(self, name: str, dirty: list[str], has_task: bool, live_agent: str | None = None) -> None:
        super().__init__()
        self.worktree = name
        self.dirty = dirty
        self.has_task = has_task
        self.live_agent = live_agent
        """The agent still running there, which removing stops (the dialog said nothing of it)."""
        self.armed = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(f"Remove worktree {self.worktree}?", classes="dialog-title")
            if self.dirty:
                lost = files(len(self.dirty)).replace(" file", " uncommitted file")
                warning = Text(f"{lost} would be lost:", style="bold red")
                yield Static(warning)
                with VerticalScroll(id="dirty-files"):
                    yield Static(plain("\n".join(f"  {f}" for f in self.dirty[:200])))
            else:
                yield Static(Text("The worktree is clean; its branch stays.", style="dim"))
            if self.live_agent:
                yield Static(Text(f"Its {self.live_agent} session is still running: removing stops it.",
                                  style="bold"))
            yield TickBox("Mark its task completed", value=False, id="complete", disabled=not self.has_task)
            with Horizontal(classes="dialog-buttons"):
                label = "Discard changes and remove" if self.dirty else "Remove"
                yield Button(label, variant="error", id="remove")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus(scroll_visible=False)

    @on(Button.Pressed, "#remove")
    def confirm(self) -> None:
        complete = self.query_one("#complete", TickBox).value
        if not self.dirty:
            self.dismiss(RemoveChoice(force=False, complete_task=complete))
            return
        if not self.armed:
            self.armed = True
            button = self.query_one("#remove", Button)
            button.label = f"Yes, discard {files(len(self.dirty))} for good"
            # A Button's width follows its label only at layout, and a new label asks for no layout: the longer
            # one was cut to the old one's width ("Yes, discard 1 file for").
            button.refresh(layout=True)
            self.notify("Press again to discard the uncommitted work", severity="warning")
            return
        self.dismiss(RemoveChoice(force=True, complete_task=complete))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
