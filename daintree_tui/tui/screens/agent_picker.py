"""AgentPickerScreen: choose the agent preset for a new or restarted session, or resume the last conversation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from daintree_tui.tui.agents_view import (
    NOT_INSTALLED,
    AgentFacts,
    agent_label,
    can_resume,
    is_installed,
    not_installed_notice,
)

RESUME_PREFIX = "resume:"


@dataclass(frozen=True)
class AgentChoice:
    """The agent to start, and whether it continues its last conversation in the worktree."""

    agent: str
    resume: bool = False


class AgentPickerScreen(ModalScreen[AgentChoice | None]):
    """A list of presets (those not installed are dimmed and say so; enter on one says how to get it, rather than
    the arrows skipping it without a word); on a restart of an agent that can resume, "resume" comes first. Enter
    picks."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="dialog_cancel"),
    ]

    def __init__(self, worktree: str, facts: AgentFacts, default: str, restart: bool,
                 current: str | None = None, failed: bool = False) -> None:
        super().__init__()
        self.worktree = worktree
        self.facts = facts
        self.agents = sorted(facts)
        self.default = default
        self.restart = restart
        self.current = current
        """The agent the worktree ran last (offered to resume when it can)."""
        self.failed = failed
        """Its last session died with an error (maybe at launch, with no conversation): a fresh start comes first."""

    def options(self) -> list[Option]:
        options = []
        current = self.current
        if self.restart and current is not None and can_resume(self.facts, current):
            label = Text.assemble(("resume ", "bold"), current, ("  continue its last conversation", "dim"))
            if not is_installed(self.facts, current):
                label.append(f"  {NOT_INSTALLED}", style="dim italic")
            options.append(Option(label, id=RESUME_PREFIX + current))
        options += [Option(agent_label(self.facts, a), id=a) for a in self.agents]
        return options

    def compose(self) -> ComposeResult:
        verb = "Restart" if self.restart else "Start"
        with Vertical(id="dialog", classes="dialog narrow"):
            yield Label(f"{verb} a session in {self.worktree} with:", classes="dialog-title")
            yield OptionList(*self.options(), id="agents")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        resume = RESUME_PREFIX + str(self.current)
        if resume in ids and not self.failed:
            first = resume
        elif self.failed and self.current is not None and self.current in ids:
            first = self.current
        else:
            first = self.default
        if first in ids:
            options.highlighted = ids.index(first)
        options.focus()

    @on(OptionList.OptionSelected)
    def picked(self, event: OptionList.OptionSelected) -> None:
        picked = str(event.option.id)
        agent = picked.removeprefix(RESUME_PREFIX)
        if not is_installed(self.facts, agent):
            self.notify(not_installed_notice(agent), severity="warning")
            return
        if picked.startswith(RESUME_PREFIX):
            self.dismiss(AgentChoice(picked.removeprefix(RESUME_PREFIX), resume=True))
        else:
            self.dismiss(AgentChoice(picked))

    def action_cancel(self) -> None:
        self.dismiss(None)
