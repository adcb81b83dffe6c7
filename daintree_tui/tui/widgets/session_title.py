"""SessionTitle: the bar above the terminal (current worktree, agent, status, port, branch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.validate import escape_controls
from daintree_tui.tui.agents_view import STATUS_SOURCE_MEANING, short_count, status_source_glyph
from daintree_tui.tui.widgets.worktree_cells import session_cell

if TYPE_CHECKING:
    from daintree_tui.sessions.manager import SessionInfo

TYPING_HINT = "ctrl+] leaves; keys go to the agent"  # the key first: a long name cuts the end


def typing_hint(leave_key: str, exited: bool, failed: bool = False) -> str:
    """What typing does now. A dead pane takes keys and does nothing with them, so "keys go to the agent" was
    wrong once the agent had exited (an agent without a login exits at once, while the terminal has the focus).
    A failed agent restarted by enter that fails again is not restarted at the next: enter shows why and asks."""
    if failed:
        return f"{leave_key} leaves, then enter restarts the agent (it failed)"
    if exited:
        return f"{leave_key} leaves, then enter restarts the agent (it has exited)"
    return TYPING_HINT.replace("ctrl+]", leave_key)


class SessionTitle(Static):
    """One line describing the current worktree; it never names a worktree that is not in `entries`."""

    DEFAULT_CSS = """
    SessionTitle { height: 1; width: 1fr; }
    """

    # The line is redrawn by `_changed` when it reads differently; a repaint on every new value would be one per poll.
    entries: reactive[tuple[WorktreeEntry, ...]] = reactive(tuple, init=False, repaint=False)
    sessions: reactive[dict[str, SessionInfo]] = reactive(dict, init=False, repaint=False)
    selected: reactive[str | None] = reactive(None, init=False, repaint=False)
    sessions_known: reactive[bool] = reactive(False, init=False, repaint=False)
    """Whether a poll has said which sessions there are (before it, a starting one is not "no session")."""
    focused: reactive[bool] = reactive(False, init=False, repaint=False)
    """Keys go to the agent: say so, and how to leave."""

    def __init__(self, *, id: str | None = None, persistent: bool = True, leave_key: str = "ctrl+]") -> None:
        super().__init__(id=id)
        self.persistent = persistent
        self.leave_key = leave_key
        self._shown = Text()

    def on_mount(self) -> None:
        self._shown = self.describe()
        self.update(self._shown)

    def _changed(self) -> None:
        # Every poll brings a new `sessions`; repaint only when the line reads differently, and never lay the
        # screen out again for it (the line is one row whatever it says).
        text = self.describe()
        if text != self._shown:
            self._shown = text
            self.update(text, layout=False)
        info = self.sessions.get(self.selected or "")
        self.tooltip = STATUS_SOURCE_MEANING.get(info.status_source) if info else None  # what the glyph means

    watch_entries = watch_sessions = watch_sessions_known = watch_selected = watch_focused = _changed

    def describe(self) -> Text:
        entry = next((e for e in self.entries if e.name == self.selected), None)
        info = self.sessions.get(self.selected or "")
        text = Text()
        if entry is None:
            text.append(" no worktree selected", style="dim")
        else:
            text.append(f" {entry.name} ", style="bold reverse")
            if self.focused:  # right after the name: a narrow pane cuts the end of the line, never the way out
                exited = info is not None and str(info.status) == "exited"
                failed = exited and info is not None and info.exit_code != 0
                text.append(f" ⌨ {typing_hint(self.leave_key, exited, failed)} ", style="italic")
            # The agent's name and the branch may come from a host (its own word): shown, never obeyed.
            if info is None and not self.sessions_known:
                text.append(" looking for its session… ", style="dim")
            else:
                text.append(f" {escape_controls(info.agent) if info else 'no session'} ", style="bold")
            text.append_text(session_cell(info))
            tokens = int(((info.usage or {}).get("tokens") or {}).get("total") or 0) if info else 0
            if tokens:
                text.append(f" {short_count(tokens)} tok", style="dim")  # the cost is in the status cell
            if info is not None:
                text.append(" ").append_text(status_source_glyph(info.status_source))
            if entry.ports:
                text.append(f"  port {entry.ports[0]}", style="cyan")
            text.append(f"  {escape_controls(entry.branch)}", style="dim")
        if not self.persistent:
            text.append("  ⚠ no tmux: sessions end when the dashboard quits", style="bold red")
        return text
