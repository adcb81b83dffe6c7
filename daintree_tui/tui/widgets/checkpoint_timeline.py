"""CheckpointTimeline: a worktree's checkpoints, one row a turn of its agent, oldest first."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable

from daintree_tui.core.checkpoints import Checkpoint
from daintree_tui.tui.widgets.plain import plain

# Widths fixed (the prompt cut at its 200 characters): auto widths stayed at the labels' now and then (the rows
# came while the table was refilled), which cut the prompt to "Prompt"'s six cells.
COLUMNS = (("#", 6), ("When", 14), ("Why", 9), ("Files", 5), ("Prompt", 200))


class CheckpointTimeline(DataTable[str | Text]):
    """The checkpoints of one worktree; the cursor's row is the step whose diff is shown. Row keys are the ids."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.checkpoints: tuple[Checkpoint, ...] = ()

    def on_mount(self) -> None:
        for label, width in COLUMNS:
            self.add_column(label, key=label.lower(), width=width)

    def show(self, checkpoints: Sequence[Checkpoint], select: int | None = None) -> None:
        """Fill the table; the cursor on checkpoint `select` (default: the newest)."""
        self.checkpoints = tuple(checkpoints)
        self.clear()
        for c in self.checkpoints:
            when = time.strftime("%m-%d %H:%M:%S", time.localtime(c.ts)) if c.ts else "?"
            # The prompt is task or typed text (a lead agent's `session_send` too): a str cell is parsed as markup
            # (`[/x]` crashed the dashboard, `[@click=...]` made a link), so a Text, controls shown escaped.
            self.add_row(str(c.id), when, c.reason, str(c.files), plain(c.prompt or ""), key=str(c.id))
        if self.checkpoints:
            # An id is the place in the whole chain; the rows are its newest (ids 4801.. of 5000): found by id.
            rows = [n for n, c in enumerate(self.checkpoints) if c.id == select]
            self.move_cursor(row=rows[0] if rows else len(self.checkpoints) - 1)

    @property
    def selected(self) -> Checkpoint | None:
        """The checkpoint under the cursor."""
        if not self.checkpoints or not 0 <= self.cursor_row < len(self.checkpoints):
            return None
        return self.checkpoints[self.cursor_row]
