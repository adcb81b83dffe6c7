"""NewTaskScreen: subject, description, agent, base and (with remote hosts configured) where; Enter in the subject
creates and starts at once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, TextArea

from daintree_tui.tui.agents_view import AgentFacts, agent_label, is_installed, not_installed_notice

LOCAL = "\x00local"  # the choice "here": no host name can hold a NUL


@dataclass(frozen=True)
class NewTask:
    """What the dialog returns: a task, and whether to create its worktree and session right away."""

    subject: str
    description: str
    agent: str
    base: str
    start: bool = True
    host: str | None = None
    """The remote host to create it on (None: here)."""


class NewTaskScreen(ModalScreen[NewTask | None]):
    """Create a task; `enter` in the subject creates task + worktree + session with the chosen agent."""

    AUTO_FOCUS = "#subject"  # at once, so a subject typed right after `n` lands in it
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="dialog_cancel"),
    ]

    def __init__(self, facts: AgentFacts, default_agent: str, hosts: Sequence[tuple[str, str]] = (),
                 host: str | None = None) -> None:
        """`hosts`: (label, name) of each remote host it may go to; `host`: the one chosen first (None: here)."""
        super().__init__()
        self.facts = facts
        self.agents = sorted(facts)
        self.default_agent = default_agent if default_agent in self.agents else self.agents[0]
        self.hosts = list(hosts)
        self.default_host = host if host in {name for _, name in self.hosts} else LOCAL

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label("New task", classes="dialog-title")
            yield Input(placeholder="What should the agent do? (Enter: create and start)", id="subject")
            # The lists open downwards over what lies below them: above the description they open inside the
            # dialog (below it, the agent list ran past the dialog's border).
            with Horizontal(classes="dialog-row"):
                yield Label("Agent", classes="field-label")
                yield Select([(agent_label(self.facts, a), a) for a in self.agents], value=self.default_agent,
                             allow_blank=False, id="agent")
                yield Label("Base", classes="field-label")
                yield Input(placeholder="HEAD", id="base")
            if self.hosts:
                with Horizontal(classes="dialog-row"):
                    yield Label("Where", classes="field-label")
                    yield Select([("here (local)", LOCAL), *self.hosts], value=self.default_host,
                                 allow_blank=False, id="host")
            yield TextArea(id="description", soft_wrap=True, show_line_numbers=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Create and start", variant="primary", id="start")
                yield Button("Task only", id="task-only")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#description", TextArea).border_title = "Description"
        self.query_one("#subject", Input).focus(scroll_visible=False)
        # Textual scrolls a short window's dialog a line or two on that first focus, past the title: back to it.
        self.call_after_refresh(self.query_one("#dialog").scroll_home, animate=False)

    def _result(self, start: bool) -> NewTask | None:
        subject = self.query_one("#subject", Input).value.strip()
        if not subject:
            self.notify("A task needs a subject", severity="warning")
            return None
        value = self.query_one("#agent", Select).value
        agent = str(value) if isinstance(value, str) else self.default_agent
        host = self.chosen_host()
        if start and host is None and not is_installed(self.facts, agent):  # a host checks its own agents
            self.notify(not_installed_notice(agent), severity="warning")
            return None
        return NewTask(subject, self.query_one("#description", TextArea).text.strip(), agent,
                       self.query_one("#base", Input).value.strip(), start, host)

    def chosen_host(self) -> str | None:
        if not self.hosts:
            return None
        value = self.query_one("#host", Select).value
        return value if isinstance(value, str) and value != LOCAL else None

    @on(Input.Submitted, "#subject")
    @on(Button.Pressed, "#start")
    def create_and_start(self) -> None:
        result = self._result(start=True)
        if result is not None:
            self.dismiss(result)

    @on(Button.Pressed, "#task-only")
    def create_task_only(self) -> None:
        result = self._result(start=False)
        if result is not None:
            self.dismiss(result)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
