"""The dashboard through Pilot: a trusted echo agent, waiting for what the screen shows, finding the main screen."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daintree_tui.tui.app import DaintreeApp
from daintree_tui.tui.screens.main import MainScreen
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.conftest import trusted_config

ECHO_AGENT = (f"{sys.executable} -c \"import sys; print('agent ready', flush=True); "
              "[print('echo:', l.strip(), flush=True) for l in sys.stdin]\"")


def configure(repo: Path) -> None:
    trusted_config(repo,
        f'default_agent = "echo"\n[agents.echo]\ncommand = \'\'\'{ECHO_AGENT}\'\'\'\n'
        "[notifications]\nbell = false\n")


async def until(pilot: Any, predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await pilot.pause(0.05)


async def select(pilot: Any, screen: MainScreen, name: str) -> None:
    """Move the worktree cursor to `name` as a user would, and wait until it is the current worktree."""
    screen.query_one(WorktreeTable).select_name(name)
    await until(pilot, lambda: screen.selected == name)


async def on_screen(pilot: Any, app: DaintreeApp, name: str, timeout: float = 30.0) -> None:
    """Wait until screen `name` is on top and composed (a dialog pushed from a worker mounts a moment later)."""
    await until(pilot, lambda: type(app.screen).__name__ == name and app.screen.is_mounted
                and bool(app.screen.children), timeout)


def main_screen(app: DaintreeApp) -> MainScreen:
    screen = app.screen
    assert isinstance(screen, MainScreen)
    return screen


def title_text(screen: MainScreen) -> str:
    from daintree_tui.tui.widgets.session_title import SessionTitle

    return str(screen.query_one(SessionTitle).describe())


def toasts(app: DaintreeApp) -> list[str]:
    return [str(t.render()) for t in app.screen.query("Toast")]


async def confirm(pilot: Any, app: DaintreeApp) -> None:
    """Answer yes to the question the last key asked (a ConfirmScreen)."""
    from daintree_tui.tui.screens.confirm import ConfirmScreen

    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted)
    await pilot.click("#yes")
