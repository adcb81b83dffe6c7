"""The size sessions start at: the last size the dashboard showed a session's pane at.

The dashboard records its embedded terminal's size in `.worktrees/.ui.json`; a session started from the CLI (or
the queue, or a bake-off) starts at that size, so attaching the dashboard later resizes nothing under a running
agent (Ink agents leave a broken copy of their box on screen when resized). The reader is tolerant: a missing,
malformed or absurd file means the default.
"""

from __future__ import annotations

import json
from pathlib import Path

from daintree_tui.core.fs_safe import read_state_file
from daintree_tui.core.project import Project
from daintree_tui.core.store import atomic_write_text

DEFAULT_SIZE = (200, 50)
UI_STATE = ".ui.json"
LIMITS = ((20, 1000), (5, 500))


def ui_state_path(project: Project) -> Path:
    return project.state_dir / UI_STATE


def load_pane_size(project: Project) -> tuple[int, int]:
    """The last recorded pane size (columns, rows), or the default."""
    try:
        # A state file: a clone may commit `.worktrees/.ui.json -> /dev/zero`, read until memory ran out at every
        # session start.
        data = json.loads(read_state_file(ui_state_path(project)))
        cols, rows = (int(v) for v in data["pane_size"])
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return DEFAULT_SIZE
    (min_cols, max_cols), (min_rows, max_rows) = LIMITS
    if not (min_cols <= cols <= max_cols and min_rows <= rows <= max_rows):
        return DEFAULT_SIZE
    return cols, rows


def save_pane_size(project: Project, cols: int, rows: int) -> None:
    """Record the pane size (best effort: a read-only state dir only means the default next time)."""
    if (cols, rows) == load_pane_size(project):
        return
    try:
        # Often the first thing daintree writes in a repository (the dashboard opened, looked at, quit): without
        # the exclude lines, `git status` then showed `?? .worktrees/`.
        project.ensure_excluded()
        project.state_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(ui_state_path(project), json.dumps({"pane_size": [cols, rows]}) + "\n")
    except OSError:
        pass
