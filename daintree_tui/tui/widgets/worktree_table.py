"""WorktreeTable: the worktrees pane (name, branch, port, dirty count, ahead/behind, session status)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.widgets import DataTable

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.worktrees import Facts
from daintree_tui.sessions.manager import SessionInfo
from daintree_tui.tui.widgets.rows import Cell, sync_rows

SESSION_GLYPH = {
    "starting": Text("◌ starting", style="dim"),
    "running": Text("▶ running", style="green"),
    "waiting": Text("● WAITING", style="bold black on yellow"),
    "exited": Text("■ exited", style="red"),
}


def session_cell(info: SessionInfo | None) -> Text:
    if info is None:
        return Text("-", style="dim")
    cell = SESSION_GLYPH[str(info.status)].copy()
    if str(info.status) == "exited" and info.exit_code is not None:
        cell.append(f" {info.exit_code}")
    return cell


def last_output_line(screen: str, width: int = 48) -> str:
    """The last non-empty line of a session's screen, for the preview column."""
    for line in reversed(screen.splitlines()):
        if line.strip():
            line = " ".join(line.split())
            return line if len(line) <= width else line[: width - 1] + "…"
    return ""


class WorktreeTable(DataTable[Cell]):
    """Live worktrees, one row each, keyed by name."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row")

    def on_mount(self) -> None:
        self.add_column("#", key="n", width=2)
        self.add_column("Worktree", key="name")
        self.add_column("Agent", key="session")
        self.add_column("Port", key="port", width=5)
        self.add_column("±", key="dirty", width=3)
        self.add_column("↑↓", key="ab", width=6)
        self.add_column("Disk", key="disk")
        self.add_column("Branch", key="branch")
        self.add_column("Latest output", key="activity")

    def show(self, entries: Sequence[WorktreeEntry], facts: Mapping[str, Facts],
             sessions: Mapping[str, SessionInfo], numbers: Mapping[str, int], filter_text: str = "",
             previews: Mapping[str, str] | None = None, disk: Mapping[str, int] | None = None) -> None:
        from daintree_tui.services.hygiene import human

        needle = filter_text.lower()
        rows = []
        for entry in entries:
            if needle and needle not in f"{entry.name} {entry.branch} {entry.task_id or ''}".lower():
                continue
            fact = facts.get(entry.name)
            dirty = Text("…", style="dim") if fact is None else (
                Text("gone", style="red") if not fact.exists else
                Text(str(fact.dirty), style="yellow" if fact.dirty else "dim"))
            ab = Text("", style="dim") if fact is None else Text(f"↑{fact.ahead}↓{fact.behind}", style="dim")
            name = Text(entry.name, style="bold" if entry.status == "active" else "italic")
            if entry.status == "kept":
                name.append(" (kept)", style="dim")
            number = str(numbers[entry.name]) if entry.name in numbers else ""
            rows.append((entry.name, (number, name, session_cell(sessions.get(entry.name)),
                                      str(entry.ports[0]) if entry.ports else "-", dirty, ab,
                                      Text(human(disk[entry.name]) if disk and entry.name in disk else "…",
                                           style="dim"),
                                      Text(entry.branch, style="dim"),
                                      Text(last_output_line((previews or {}).get(entry.name, "")), style="dim"))))
        sync_rows(self, rows)

    @property
    def selected_name(self) -> str | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return str(key.value) if key.value is not None else None

    def select_name(self, name: str) -> None:
        for index, key in enumerate(self.rows):
            if key.value == name:
                self.move_cursor(row=index)
                return
