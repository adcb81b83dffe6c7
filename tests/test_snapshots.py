"""Snapshot tests of the dashboard's screens at 80x24, 120x40 and 200x50, with frozen times and no live sessions."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.project import Project
from daintree_tui.tui.app import DaintreeApp, make_app
from daintree_tui.tui.screens.main import MainScreen
from daintree_tui.tui.widgets.ticks import TickBox
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.conftest import CLI, git, make_repo, path_without_agents


@pytest.fixture(autouse=True)
def no_agent_clis(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot shows which agents are installed (the new-task dialog's list): the same picture whether or not
    the real agent CLIs are on this machine."""
    monkeypatch.setenv("PATH", path_without_agents())

pytestmark = pytest.mark.usefixtures("tmux_socket")

SHOWN_PATH = "/tmp/daintree-snapshot/shop"  # the header shows the repository's path: the same in every snapshot
SIZE = (120, 40)
SIZES = [(80, 24), (120, 40), (200, 50)]


def frozen_clock() -> float:
    return 1_700_000_000.0


def build_repo(root: Path) -> Path:
    repo = make_repo(root / "shop")
    (repo / ".daintree.toml").write_text('default_agent = "shell"\n[ports]\nrange = [4100, 4999]\n')
    cli = CLI(repo)
    cli.ok("task", "create", "Refactor auth to use salted hashes")
    cli.ok("task", "create", "Add a discount to the cart total")
    cli.ok("task", "create", "Speed up the test suite", "--blocked-by", "1")
    cli.ok("worktree", "create", "auth-refactor", "--task", "1")
    cli.ok("worktree", "create", "cart-discount", "--task", "2")
    (repo / ".worktrees" / "cart-discount" / "app.py").write_text("print('discount')\n")
    (repo / ".worktrees" / "cart-discount" / "cart.py").write_text("def total(): ...\n")
    wt = repo / ".worktrees" / "auth-refactor"
    (wt / "auth.py").write_text("import hashlib\n")
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", "auth")
    return repo


def app_for(repo: Path) -> DaintreeApp:
    return make_app(Project.discover(repo), clock=frozen_clock, clock_format=lambda _: "12:00:00")


def settled(app: DaintreeApp) -> Callable[[Any], Any]:
    async def run_before(pilot: Any) -> None:
        await until_still(app, pilot, lambda: isinstance(app.screen, MainScreen) and app.screen.later_mounted
                          and len(app.screen.facts) == 2)
        screen = app.screen
        assert isinstance(screen, MainScreen)
        screen.sub_title = SHOWN_PATH
        await until_still(app, pilot, lambda: True)
    return run_before


async def until_still(app: DaintreeApp, pilot: Any, condition: Callable[[], bool], timeout: float = 30) -> None:
    """Wait until `condition` holds and the screen shows the same in three looks in a row (what workers load
    has landed), however busy the machine is."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    looks: list[str] = []
    while loop.time() < deadline:
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(0.05)
        looks = [*looks[-2:], app.export_screenshot()] if condition() else []
        if len(looks) == 3 and len(set(looks)) == 1:
            return
    raise AssertionError(f"the screen did not settle within {timeout} s")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_main_screen(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """Columns hide by priority: the name and status always show; footer and placeholder fit at 80."""
    app = app_for(build_repo(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=settled(app))


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_new_task_dialog(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """The dialog's buttons are whole at 80x24."""
    app = app_for(build_repo(tmp_path))

    async def run_before(pilot: Any) -> None:
        await settled(app)(pilot)
        await press_for_screen(app, pilot, "n")
        from textual.widgets import Input

        app.screen.query_one("#subject", Input).cursor_blink = False  # the same cursor in every look
        await pilot.press(*"Fix the flaky test")
        await until_still(app, pilot, lambda: True)  # every key typed has been drawn

    assert snap_compare(app, terminal_size=size, run_before=run_before)


async def open_dialog(app: DaintreeApp, pilot: Any, name: str, key: str) -> None:
    """Select worktree `name` and press `key`; back once the dialog it opens is on screen and settled."""
    screen = app.screen
    assert isinstance(screen, MainScreen)
    screen.query_one(WorktreeTable).select_name(name)
    while screen.selected != name:
        await pilot.pause(0.05)
    await press_for_screen(app, pilot, key)


async def press_for_screen(app: DaintreeApp, pilot: Any, key: str) -> None:
    """Press `key`; back once the screen it opens is on top and settled."""
    before = app.screen
    await pilot.press(key)
    while app.screen is before:
        await pilot.pause(0.05)
    await pilot.wait_for_scheduled_animations()


def test_remove_dialog(snap_compare: Any, tmp_path: Path) -> None:
    app = app_for(build_repo(tmp_path))

    async def run_before(pilot: Any) -> None:
        await settled(app)(pilot)
        await open_dialog(app, pilot, "cart-discount", "x")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_help(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """Generated from the bindings; wraps and scrolls in a small window."""
    app = app_for(build_repo(tmp_path))

    async def run_before(pilot: Any) -> None:
        await settled(app)(pilot)
        await press_for_screen(app, pilot, "question_mark")

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_full_screen_diff(snap_compare: Any, tmp_path: Path) -> None:
    app = app_for(build_repo(tmp_path))

    async def run_before(pilot: Any) -> None:
        await settled(app)(pilot)
        screen = app.screen
        assert isinstance(screen, MainScreen)
        from daintree_tui.tui.widgets.diff_view import DiffView

        screen.query_one(WorktreeTable).select_name("cart-discount")
        while screen.selected != "cart-discount":
            await pilot.pause(0.05)
        await pilot.press("D")
        diff = screen.query_one(DiffView)
        await until_still(app, pilot, lambda: diff.worktree == "cart-discount")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_merge_dialog(snap_compare: Any, tmp_path: Path) -> None:
    """Its boxes read ✓ when on, blank when off (Textual's own box drew the same X in both states)."""
    app = app_for(build_repo(tmp_path))

    async def run_before(pilot: Any) -> None:
        await settled(app)(pilot)
        await open_dialog(app, pilot, "auth-refactor", "m")
        app.screen.query_one("#complete", TickBox).value = False  # one box of each kind
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)
