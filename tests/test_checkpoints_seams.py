"""Checkpoints with the agent as the attacker (issue 30 item 4, the class of issue 26): what an agent (or a lead
agent that instructs it) puts into a checkpoint is data for the outside, never markup, a control or a cost
without a bound."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import CLI, wait_for
from tests.test_checkpoints import TURNS, listed, user_config, watcher

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

__all__ = ["watcher"]  # the fixture, used by name


@needs_tmux
async def test_a_prompt_with_markup_is_shown_as_text_in_the_timeline(repo: Path, tmux_socket: str,
                                                                      watcher: None) -> None:
    """A lead agent's `session_send` is the worker's turn prompt, named in its checkpoint: `[/x]` in it crashed
    the dashboard when the timeline drew it (a DataTable parses a str cell as markup: MarkupError), and
    `[@click=...]` made the cell a link to an action."""
    from daintree_tui.core.project import Project
    from daintree_tui.mcp.access import Access
    from daintree_tui.mcp.tools import DaintreeTools
    from daintree_tui.services import Services
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.screens.checkpoints import CheckpointsScreen
    from daintree_tui.tui.screens.main import MainScreen
    from daintree_tui.tui.widgets.checkpoint_timeline import CheckpointTimeline
    from daintree_tui.tui.widgets.worktree_table import WorktreeTable
    from tests.test_dashboard import until

    user_config(TURNS)
    cli = CLI(repo)
    cli.ok("worktree", "create", "w", "--agent", "turns")
    wait_for(lambda: listed(cli, "w"), timeout=30)
    prompt = "[/x] [@click=app.quit]fix[/] the [red]bug"
    lead = DaintreeTools(Services(Project.discover(repo)), Access("lead"))
    lead.call("session_send", {"name": "w", "text": prompt})
    found = wait_for(lambda: (found := listed(cli, "w")) and len(found) == 2 and found, timeout=30)
    assert found[1]["prompt"] == prompt  # kept as it was given (the JSON is data)

    app = make_app(Project.discover(repo))
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MainScreen) and len(app.screen.entries) == 1)
        main = app.screen
        main.query_one(WorktreeTable).select_name("w")
        await until(pilot, lambda: main.selected == "w")
        await pilot.press("h")
        await until(pilot, lambda: isinstance(app.screen, CheckpointsScreen) and app.screen.is_mounted)
        timeline = app.screen.query_one(CheckpointTimeline)
        await until(pilot, lambda: timeline.row_count == 2)
        await pilot.pause()
        assert prompt in timeline.render_line(2).text  # row 2 under the header: every bracket shown as typed
        assert app.is_running and isinstance(app.screen, CheckpointsScreen)
