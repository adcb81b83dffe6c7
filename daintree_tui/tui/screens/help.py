"""HelpScreen: every key, from the live bindings (so remapped keys show as remapped)."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

KEY_HELP = [
    ("new_task", "n", "New task (Enter in the subject: task + worktree + session at once)"),
    ("open_session", "enter", "Focus the selected session's terminal (starting one if none)"),
    ("leave_terminal", "ctrl+]", "Leave the terminal, back to the lists"),
    ("jump_session", "alt+1..9", "Jump to session N"),
    ("prev_session", "[", "Previous session"),
    ("next_session", "]", "Next session"),
    ("start_session", "s", "Start or restart a session with a chosen agent"),
    ("keep", "k", "Keep the worktree"),
    ("remove", "x", "Remove the worktree (asks; discarding work asks twice)"),
    ("diff", "d", "Diff against the base"),
    ("commit", "C", "Commit the agent's work"),
    ("merge", "m", "Merge back (ff, squash or rebase; pre_merge hooks first)"),
    ("pr", "p", "Push and open a pull request (gh)"),
    ("inject_task", "i", "Send the task's text into the session"),
    ("copy_path", "c", "Copy the worktree's path"),
    ("events", "e", "Events log"),
    ("bakeoff", "b", "Bake-off: several agents on the selected task"),
    ("auto_queue", "a", "Auto queue: start ready tasks by themselves (max_sessions at a time)"),
    ("filter", "/", "Filter tasks and worktrees"),
    ("help", "?", "This help"),
    ("command_palette", "ctrl+p", "Command palette"),
    ("quit", "q", "Quit (agents keep running)"),
]


class HelpScreen(ModalScreen[None]):
    """Keys and what they do."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close", id="help_close"),
    ]

    def __init__(self, keymap: dict[str, str] | None = None) -> None:
        super().__init__()
        self.keymap = keymap or {}

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=True, header_style="bold", padding=(0, 2))
        table.add_column("Key", style="bold cyan", no_wrap=True)
        table.add_column("Action")
        for binding_id, default, text in KEY_HELP:
            table.add_row(self.keymap.get(binding_id, default), text)
        with Vertical(id="dialog", classes="dialog"):
            yield Label("daintree keys", classes="dialog-title")
            with VerticalScroll():
                yield Static(table)
            yield Label("In the terminal every key goes to the agent except ctrl+]. Esc closes.", classes="dim")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
