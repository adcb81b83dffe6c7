"""What a new user met in a first hour with the dashboard and the CLI (trial6), each through the real app, real
git and real tmux on a private socket."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from textual.widgets import Label

from daintree_tui.core.project import Project
from daintree_tui.tui.app import make_app
from tests.test_dashboard import main_screen, on_screen, until

pytestmark = pytest.mark.usefixtures("tmux_socket")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_help_says_how_to_close_it_at_any_size(repo: Path, size: tuple[int, int]) -> None:
    """The help's last line ran past the dialog's edge, so "Esc closes." was cut off at 80 and at 120 columns."""
    app = make_app(Project.discover(repo))
    async with app.run_test(size=size) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.started)
        await pilot.press("question_mark")
        await on_screen(pilot, app, "HelpScreen")
        note = next(label for label in app.screen.query(Label) if "Esc closes" in str(label.render()))
        dialog = app.screen.query_one("#dialog")
        await until(pilot, lambda: note.size.width > 0)
        assert note.region.right <= dialog.content_region.right
        shown = " ".join(line.text for line in note.render_lines(note.region.reset_offset)).split()
        assert "closes." in shown


async def test_opening_the_dashboard_leaves_git_status_clean(repo: Path) -> None:
    """Opening the dashboard in a repository and quitting wrote `.worktrees/.ui.json` (the terminal's size) but not
    the exclude lines, so the user's `git status` showed `?? .worktrees/` afterwards."""
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.started)
        await until(pilot, lambda: (repo / ".worktrees" / ".ui.json").exists())
        await pilot.press("q")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                            capture_output=True, text=True, check=True)
    assert status.stdout == ""
