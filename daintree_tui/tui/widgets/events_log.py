"""EventsLog: a live tail of `.worktrees/events.jsonl`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import RichLog

from daintree_tui.core.event_log import event_detail
from daintree_tui.core.validate import escape_controls

EVENT_STYLE = {"failed": "red", "removed": "magenta", "remove": "magenta", "created": "green", "create": "green",
               "waiting": "yellow", "stalled": "yellow", "exited": "red", "completed": "green", "fixed": "cyan"}


def format_event(record: dict[str, Any], clock_format: Callable[[float], str] | None = None) -> Text:
    ts = float(record.get("ts") or 0)
    when = clock_format(ts) if clock_format else time.strftime("%H:%M:%S", time.localtime(ts))
    name = escape_controls(str(record.get("event", "?")))
    style = next((s for k, s in EVENT_STYLE.items() if k in name), "")
    text = Text(f"{when} ", style="dim")
    text.append(f"{name:<24}", style=style)
    worktree = (record.get("worktree") or {}).get("name")
    task = (record.get("task") or {}).get("id")
    if worktree:
        text.append(f" {escape_controls(str(worktree))}", style="cyan")
    if task:
        text.append(f" #{task}", style="dim")
    detail, error = event_detail(record)
    if detail:
        text.append(f"  {detail}", style="red" if error else "")
    return text


def event_worktree(record: dict[str, Any]) -> str | None:
    worktree = record.get("worktree")
    return str(worktree.get("name")) if isinstance(worktree, dict) and worktree.get("name") else None


class EventsLog(RichLog):
    """Lifecycle events, newest last: the current worktree's and the project's own (those of no worktree)."""

    MAX_RECORDS = 2000

    selected: reactive[str | None] = reactive(None, init=False)
    """The current worktree: other worktrees' events are left out."""

    def __init__(self, *, id: str | None = None, clock_format: Callable[[float], str] | None = None) -> None:
        super().__init__(id=id, max_lines=self.MAX_RECORDS, wrap=False, highlight=False, markup=False,
                         auto_scroll=True)
        self.clock_format = clock_format
        self.records: list[dict[str, Any]] = []

    def shows(self, record: dict[str, Any]) -> bool:
        name = event_worktree(record)
        return name is None or self.selected is None or name == self.selected

    def add(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            self.records.append(record)
            if self.shows(record):
                self.write(format_event(record, self.clock_format))
        del self.records[: -self.MAX_RECORDS]

    def watch_selected(self) -> None:
        self.clear()
        for record in self.records:
            if self.shows(record):
                self.write(format_event(record, self.clock_format))
