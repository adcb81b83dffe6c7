"""AgentPickerScreen: choose the agent preset for a new or restarted session."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option


class AgentPickerScreen(ModalScreen[str | None]):
    """A list of presets; enter picks one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="dialog_cancel"),
    ]

    def __init__(self, worktree: str, agents: list[str], default: str, restart: bool) -> None:
        super().__init__()
        self.worktree = worktree
        self.agents = agents
        self.default = default
        self.restart = restart

    def compose(self) -> ComposeResult:
        verb = "Restart" if self.restart else "Start"
        with Vertical(id="dialog", classes="dialog narrow"):
            yield Label(f"{verb} a session in {self.worktree} with:", classes="dialog-title")
            yield OptionList(*[Option(a, id=a) for a in self.agents], id="agents")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.default in self.agents:
            options.highlighted = self.agents.index(self.default)
        options.focus()

    @on(OptionList.OptionSelected)
    def picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
