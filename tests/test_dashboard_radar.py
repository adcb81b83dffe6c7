"""The radar and the merge train in the dashboard, through Pilot over a real repository."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable

from daintree_tui.core.project import Project
from daintree_tui.tui.app import make_app
from daintree_tui.tui.commands import DashboardCommands
from daintree_tui.tui.screens.main import MainScreen
from daintree_tui.tui.screens.train import TrainProgressScreen, TrainScreen
from daintree_tui.tui.widgets.conflicts_bar import ConflictsBar
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.conftest import CLI, git
from tests.helpers.dashboard import main_screen, on_screen, select, until

pytestmark = pytest.mark.usefixtures("tmux_socket")


def commit(wt: Path, name: str, text: str) -> None:
    (wt / name).write_text(text)
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", f"work on {name}")


async def test_conflicts_column_and_detail_follow_an_edit(cli: CLI, repo: Path) -> None:
    commit(repo, "app.py", "one\ntwo\nthree\n")
    for name in ("a", "b", "c"):
        cli.ok("worktree", "create", name)
    wts = repo / ".worktrees"
    commit(wts / "a", "app.py", "one\nA\nthree\n")
    commit(wts / "b", "app.py", "one\nB\nthree\n")
    commit(wts / "c", "c.py", "c\n")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MainScreen) and main_screen(app).started)
        screen = main_screen(app)
        table = screen.query_one(WorktreeTable)
        # The first pass comes with the git facts, once the sessions' status is on screen: late on a loaded machine.
        await until(pilot, lambda: set(screen.radar) == {"a", "b"}, timeout=90)
        await until(pilot, lambda: "conflicts" in table.column_keys)
        await select(pilot, screen, "a")
        bar = screen.query_one(ConflictsBar)
        await until(pilot, lambda: bar.has_class("-found") and "conflicts with b (app.py)" in str(bar.render()))
        await select(pilot, screen, "c")
        await until(pilot, lambda: not bar.has_class("-found"))
        # c's agent edits app.py (uncommitted): the watcher and the radar, off the event loop, follow it.
        (wts / "c" / "app.py").write_text("one\nC\nthree\n")
        try:
            await until(pilot, lambda: {o for o, _ in screen.radar.get("c", ())} == {"a", "b"}, timeout=30)
        except AssertionError:
            report = screen.backend.services.radar.scan(changed=())
            raise AssertionError(f"radar {screen.radar}, facts {screen.facts}, now {report}") from None
        await until(pilot, lambda: bar.has_class("-found") and "app.py" in str(bar.render()))
        # Undone: the conflicts go, and the column with them once none is left.
        (wts / "c" / "app.py").write_text("one\ntwo\nthree\n")
        await until(pilot, lambda: "c" not in screen.radar, timeout=30)
        cli.ok("worktree", "remove", "b", "--force")
        await until(pilot, lambda: not screen.radar and "conflicts" not in table.column_keys, timeout=30)


async def test_train_key_and_palette_land_the_finished_worktrees_with_progress(cli: CLI, repo: Path) -> None:
    for name in ("one", "two"):
        cli.ok("worktree", "create", name)
        commit(repo / ".worktrees" / name, f"{name}.py", f"{name}\n")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MainScreen) and main_screen(app).started)
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.entries) == 2 and screen.rest_started)
        titles = [title for title, _, _ in DashboardCommands(screen, None)._available()]
        assert "Train" in titles  # the palette's entry, from the binding
        await pilot.press("t")
        await on_screen(pilot, app, "TrainScreen")
        assert isinstance(app.screen, TrainScreen) and app.screen.finished == ["one", "two"]
        await pilot.click("#start")
        await on_screen(pilot, app, "TrainProgressScreen")
        progress = app.screen
        assert isinstance(progress, TrainProgressScreen)
        await until(pilot, lambda: progress.done, timeout=60)
        assert {n: r.result for n, r in progress.results.items()} == {"one": "merged", "two": "merged"}
        steps = progress.query_one("#train-steps", DataTable)
        assert all(str(steps.get_cell(n, "step")).startswith("merged") for n in ("one", "two"))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
    assert {"one.py", "two.py"} <= set(git(repo, "ls-tree", "--name-only", "main").split())
