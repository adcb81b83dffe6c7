"""NewTaskScreen: subject, description, agent, base and (with remote hosts configured) where; Enter in the subject
creates and starts at once.

Where a host is chosen, the Agent list becomes that host's presets (its own config's, read over ssh off the
event loop); the agent shown stays when the host has it, so choosing Where never resets a choice made. A host
that is not reached leaves this machine's list, with a note saying so."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, TextArea

from daintree_tui.tui.agents_view import AgentFacts, agent_label, is_installed, not_installed_notice

LOCAL = "\x00local"  # the choice "here": no host name can hold a NUL

HostAgents = Mapping[str, Mapping[str, bool]]
"""A host's presets: name -> {"installed": ..., "default": ...} (services.hosts_feed.read_agents)."""
HostAgentsReader = Callable[[str], "HostAgents | str"]
"""Called in a worker thread with a host's name: its presets, or why they are not known (`is not reached`)."""


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
                 host: str | None = None, host_agents: HostAgentsReader | None = None) -> None:
        """`hosts`: (label, name) of each remote host it may go to; `host`: the one chosen first (None: here);
        `host_agents`: reads a host's presets (None: every host is offered this machine's)."""
        super().__init__()
        self.facts = facts
        self.agents = sorted(facts)
        self.default_agent = default_agent if default_agent in self.agents else self.agents[0]
        self.hosts = list(hosts)
        self.default_host = host if host in {name for _, name in self.hosts} else LOCAL
        self.host_agents = host_agents
        self.offered = LOCAL
        """Whose presets the Agent list shows (LOCAL, or a host's name once its answer came)."""
        self.shown_agents = list(self.agents)
        """The names the Agent list offers now."""
        self._asked: str = LOCAL
        # The agent the person chose (None: none yet): it stays wherever the list has it. Told from the list's
        # own default by the choosing, not by the name: one who picks the name the default also has picked it.
        self._picked: str | None = None
        self._shown = self.default_agent  # the value the list was last given (its Changed on mount is no pick)

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
                note = Label("", id="agent-note", classes="dim")
                note.display = False  # shown while it says something (whose agents, or why not the host's)
                yield note
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
        if self.hosts:
            self.offer(self.default_host)

    # -- the agents of where it goes ------------------------------------------------------------------------------

    @on(Select.Changed, "#host")
    def where_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str):
            self.offer(event.value)

    @on(Select.Changed, "#agent")
    def agent_picked(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and event.value != self._shown:
            self._picked = self._shown = event.value

    def offer(self, where: str) -> None:
        """Show the presets of `where` (LOCAL: this machine's), a host's once it answered."""
        if where == self._asked:
            return
        self._asked = where
        if where == LOCAL or self.host_agents is None:
            self._show(LOCAL, self.facts, self.default_agent, "")
            return
        self._note(f"Reading the agents of host {where}…")
        self.run_worker(partial(self._read, where), thread=True, exclusive=True, group="host-agents",
                        exit_on_error=False, description=f"agents of host {where}")

    def _read(self, where: str) -> None:
        assert self.host_agents is not None
        answer = self.host_agents(where)
        self.app.call_from_thread(self._answered, where, answer)

    def _answered(self, where: str, answer: HostAgents | str) -> None:
        if where != self._asked or not self.is_attached:
            return  # Where changed meanwhile, or the dialog is gone
        if isinstance(answer, str) or not answer:
            why = answer or "lists no agents"
            self._show(LOCAL, self.facts, self.default_agent, f"Host {where} {why}: this machine's agents are "
                       "listed (the host checks the one you pick)")
            return
        default = next((name for name, facts in answer.items() if facts.get("default")), sorted(answer)[0])
        self._show(where, answer, default, f"The agents of host {where}")

    def _show(self, where: str, facts: AgentFacts, default: str, note: str) -> None:
        """Agent list of `facts`: an agent the person picked stays when it is there; else `default` (the
        default agent of `where`)."""
        select = self.query_one("#agent", Select)
        names = sorted(facts)
        keep = self._picked if self._picked in names else default
        with select.prevent(Select.Changed):
            select.set_options([(agent_label(facts, a), a) for a in names])
            select.value = self._shown = keep if keep in names else names[0]
        self.offered, self.shown_agents = where, names
        self._note(note)

    def _note(self, text: str) -> None:
        note = self.query_one("#agent-note", Label)
        note.update(text)
        note.display = bool(text)

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
