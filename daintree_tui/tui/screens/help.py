"""HelpScreen: every key, generated from the live bindings (remapped keys show as remapped)."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from daintree_tui.tui.bindings import KeyRow


def help_table(rows: list[KeyRow]) -> Table:
    table = Table(box=None, show_header=True, header_style="bold", padding=(0, 1), expand=True)
    table.add_column("Key", style="bold cyan", no_wrap=True, max_width=16)
    table.add_column("Action", ratio=1, overflow="fold")
    for row in rows:
        text = Text(row.help)
        if row.needs_worktree:
            text.append(" (current worktree)", style="dim")
        table.add_row(row.keys, text)
    return table


def column_legend() -> Text:
    """What the tables' terse marks mean (the tasks' glyphs and ⧗ were explained nowhere)."""
    from daintree_tui.tui.agents_view import STATUS_SOURCE_GLYPH, STATUS_SOURCE_MEANING
    from daintree_tui.tui.widgets.task_table import STATUS_GLYPH

    legend = Text("\nTasks: ")
    for status, glyph in STATUS_GLYPH.items():
        legend.append_text(glyph)
        legend.append(f" {status.replace('_', ' ')}, ")
    legend.append("⧗N waits for task N.\n")
    legend.append("Worktree columns: S, where the status comes from: ")
    for source, meaning in STATUS_SOURCE_MEANING.items():
        legend.append_text(STATUS_SOURCE_GLYPH[source])
        legend.append(f" {meaning}; ")
    legend.append("± files changed; ↑↓ commits ahead of and behind the base.")
    return legend


class HelpScreen(ModalScreen[None]):
    """Keys and what they do."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close", id="help_close"),
    ]

    def __init__(self, rows: list[KeyRow]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog help"):
            yield Label("daintree keys", classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(help_table(self.rows))
                yield Static(column_legend(), classes="dim")
            yield Label("In the terminal every key goes to the agent except the leave key. Esc closes.",
                        classes="dim")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
