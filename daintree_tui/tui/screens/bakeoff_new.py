"""BakeoffNewScreen: pick the agents (and an optional score command) for a bake-off on a task."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, SelectionList
from textual.widgets.selection_list import Selection

from daintree_tui.tui.agents_view import AgentFacts, agent_label, is_installed, not_installed_notice
from daintree_tui.tui.widgets.plain import plain
from daintree_tui.tui.widgets.ticks import TickList


@dataclass(frozen=True)
class BakeoffRequest:
    agents: list[str]
    score: str | None


class BakeoffNewScreen(ModalScreen[BakeoffRequest | None]):
    """Several agents race on one task, each in its own worktree."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="dialog_cancel")]

    def __init__(self, subject: str, facts: AgentFacts, default: str) -> None:
        super().__init__()
        self.subject = subject
        self.facts = facts
        self.agents = sorted(facts)
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(plain(f"Bake-off: {self.subject}"), classes="dialog-title")
            # Rows of agents that are not installed say so and can be reached (the arrows skipped them without a
            # word); ticking one says how to get it.
            yield TickList(*[Selection(agent_label(self.facts, a), a, a == self.default and
                                       is_installed(self.facts, a)) for a in self.agents], id="agents")
            yield Input(placeholder="score command (prints SCORE: N; default: bakeoff.score)", id="score")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Start", variant="primary", id="start")
                yield Button("Cancel", id="cancel")

    @on(SelectionList.SelectionToggled)
    def toggled(self, event: SelectionList.SelectionToggled[str]) -> None:
        agent = str(event.selection.value)
        if agent in event.selection_list.selected and not is_installed(self.facts, agent):
            event.selection_list.deselect(agent)
            self.notify(not_installed_notice(agent), severity="warning")

    @on(Button.Pressed, "#start")
    def start(self) -> None:
        agents = list(self.query_one(SelectionList).selected)
        if not agents:
            self.notify("Pick at least one agent", severity="warning")
            return
        score = self.query_one("#score", Input).value.strip() or None
        self.dismiss(BakeoffRequest(agents, score))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
