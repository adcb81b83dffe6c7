"""SessionTitle: the bar above the terminal (worktree, agent, status, port)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.sessions.manager import SessionInfo
from daintree_tui.tui.widgets.worktree_table import session_cell


class SessionTitle(Static):
    """One line describing what the terminal below shows."""

    DEFAULT_CSS = """
    SessionTitle { height: 1; width: 1fr; }
    """

    def show(self, entry: WorktreeEntry | None, info: SessionInfo | None, focused: bool, persistent: bool) -> None:
        text = Text()
        if entry is None:
            text.append(" no worktree selected", style="dim")
        else:
            text.append(f" {entry.name} ", style="bold reverse")
            text.append(f" {info.agent if info else 'no session'} ", style="bold")
            text.append_text(session_cell(info))
            if entry.ports:
                text.append(f"  port {entry.ports[0]}", style="cyan")
            text.append(f"  {entry.branch}", style="dim")
            if focused:
                text.append("  — typing goes to the agent; ctrl+] to leave", style="italic dim")
        if not persistent:
            text.append("  ⚠ no tmux: sessions end when the dashboard quits", style="bold red")
        self.update(text)
