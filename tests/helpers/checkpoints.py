"""Checkpoints: an agent of turns, the list the CLI gives, the dashboard's timeline."""

from __future__ import annotations

from typing import Any

from tests.conftest import CLI

# An agent of two turns: it writes, asks, waits for a line; writes again (deleting what it wrote first), asks
# again; writes once more and exits.
TURNS_SCRIPT = ("echo one > one.txt; printf \\\"go? \\\"; read a; echo two > two.txt; rm one.txt; "
                "printf \\\"go? \\\"; read b; echo three > three.txt; exit 0")
TURNS = f"""
[checkpoints]
auto = true
[sessions]
waiting_debounce = 1
[agents.turns]
command = "sh -c '{TURNS_SCRIPT}'"
prompt_mode = "none"
"""


def listed(cli: CLI, name: str) -> list[dict[str, Any]]:
    return cli.json("checkpoint", "list", name)


async def open_timeline(pilot: Any, name: str) -> Any:
    """The dashboard's checkpoint timeline of worktree `name` (the only one), opened with `h`: its table."""
    from daintree_tui.tui.screens.checkpoints import CheckpointsScreen
    from daintree_tui.tui.screens.main import MainScreen
    from daintree_tui.tui.widgets.checkpoint_timeline import CheckpointTimeline
    from daintree_tui.tui.widgets.worktree_table import WorktreeTable
    from tests.helpers.dashboard import until

    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, MainScreen) and len(app.screen.entries) == 1)
    main = app.screen
    main.query_one(WorktreeTable).select_name(name)
    await until(pilot, lambda: main.selected == name)
    await pilot.press("h")
    await until(pilot, lambda: isinstance(app.screen, CheckpointsScreen) and app.screen.is_mounted)
    return app.screen.query_one(CheckpointTimeline)
