"""The dashboard with a remote host: a real sshd on 127.0.0.1 (tests/sshd.py), "localhost over SSH" with its own
repository and a demo agent in the far side's tmux; the dashboard polls it, attaches over ssh in its own PTY,
greys it when sshd dies and reattaches when it is back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text

from daintree_tui.core.project import Project
from daintree_tui.services.remote import RemoteHost, get_host
from daintree_tui.tui.app import make_app
from daintree_tui.tui.hosts import matches, remote_entries
from daintree_tui.tui.screens.main import MainScreen
from daintree_tui.tui.widgets.terminal import TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.conftest import CLI
from tests.sshd import Sshd, sshd_available
from tests.test_remote import far, far_repo, sshd  # noqa: F401 - the real-sshd fixtures

pytestmark = [pytest.mark.usefixtures("tmux_socket"),
              pytest.mark.skipif(not sshd_available(), reason="OpenSSH server or client not installed")]


async def until(pilot: Any, predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await pilot.pause(0.1)


async def eventually(pilot: Any, predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Like `until`, for a predicate that blocks (ssh): it runs in a thread, never on the app's event loop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await asyncio.to_thread(predicate)
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await pilot.pause(0.2)


def row(table: WorktreeTable, key: str) -> dict[str, str]:
    cells = table.get_row(key)
    return {str(column.value): str(cell) for column, cell in zip(table.columns, cells, strict=False)}


def greyed(table: WorktreeTable, key: str) -> bool:
    cells = [c for c in table.get_row(key) if str(c)]
    return all(isinstance(c, Text) and any("grey42" in str(span.style) for span in c.spans) for c in cells)


async def test_remote_host_in_the_dashboard_attach_type_unreachable_and_back(
        far: str, sshd: Sshd, repo: Path, cli: CLI) -> None:  # noqa: F811
    remote = CLI(repo, subprocess=True)
    remote.json("worktree", "create", "agent", "--agent", "demo", "--host", far)
    cli.json("worktree", "create", "agent")  # a local worktree of the same name: never touched from the remote row

    def screen_there() -> str:
        return str(remote.json("session", "capture", "agent", "--host", far)["screen"])

    app = make_app(Project.discover(repo))
    async with app.run_test(size=(220, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        table = screen.query_one(WorktreeTable)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: "agent@far" in [str(k.value) for k in table.rows])
        assert [str(k.value) for k in table.rows] == ["agent", "agent@far"]  # local rows, then each host's
        assert row(table, "agent@far")["host"] == "far" and row(table, "agent@far")["name"] == "agent"
        assert row(table, "agent")["host"] == "local"
        await until(pilot, lambda: "▶" in row(table, "agent@far")["session"]
                    or "WAITING" in row(table, "agent@far")["session"])

        # The host filter.
        await pilot.press("slash", *"host:far", "enter")
        await until(pilot, lambda: [str(k.value) for k in table.rows] == ["agent@far"])
        await pilot.press("slash")
        await pilot.press("escape")
        await until(pilot, lambda: table.row_count == 2)

        # Enter on the remote row: its screen, over ssh, in the terminal's PTY; typing reaches the agent there.
        table.focus()
        table.select_name("agent@far")
        await until(pilot, lambda: screen.selected == "agent@far")
        await pilot.press("enter")
        await until(pilot, lambda: terminal.worktree == "agent@far" and terminal.has_focus)
        # Its question on screen first: typed while it draws its spinner, the echo would be drawn over.
        await until(pilot, lambda: "[y/n]" in terminal.screen_text(), timeout=60)
        await pilot.press(*"hello-from-here")
        await eventually(pilot, lambda: "hello-from-here" in screen_there())
        await until(pilot, lambda: "hello-from-here" in terminal.screen_text())
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: not terminal.has_focus)

        # Local-only actions on the remote row are refused; the local worktree of the same name stays as it was.
        await pilot.press("m")
        await pilot.press("C")
        await pilot.pause(0.3)
        assert isinstance(app.screen, MainScreen)
        assert [w["name"] for w in cli.json("worktree", "list")] == ["agent"]

        # Keep goes through the host's own daintree: kept there, not here.
        await pilot.press("k")
        await eventually(pilot, lambda: [w["status"] for w in remote.json("worktree", "list", "--host", far)]
                         == ["kept"])
        await until(pilot, lambda: "(kept)" in row(table, "agent@far")["name"])
        assert [w["status"] for w in cli.json("worktree", "list")] == ["active"]

        # The connection goes: sshd killed, the master closed. The host is greyed with its last state.
        sshd.kill()
        host = RemoteHost(get_host(far))
        await asyncio.to_thread(host.stop_master)
        await until(pilot, lambda: screen.hosts_watch.states[far].status == "unreachable")
        await until(pilot, lambda: greyed(table, "agent@far"))
        assert row(table, "agent@far")["host"] == "far ✗"
        table.styles.width = 200  # wide enough for the output column, which then says since when
        await until(pilot, lambda: "unreachable, last update" in row(table, "agent@far").get("activity", ""))
        assert row(table, "agent@far")["name"].startswith("agent")  # the last known state stays
        await until(pilot, lambda: terminal.worktree is None)  # the ssh client ended with its connection
        assert "does not answer" in terminal.placeholder

        # sshd is back: the row is live again and the terminal reattaches by itself.
        sshd.start()
        await until(pilot, lambda: screen.hosts_watch.states[far].status == "ok", timeout=40)
        await until(pilot, lambda: not greyed(table, "agent@far"))
        await until(pilot, lambda: terminal.worktree == "agent@far")
        terminal.focus()
        await pilot.press(*"again-here")
        await eventually(pilot, lambda: "again-here" in screen_there())


def test_host_filter_words_and_remote_rows() -> None:
    from daintree_tui.services.hosts_feed import HostState

    raw = {"name": "feat", "path": "/srv/app/.worktrees/feat", "branch": "wt/feat", "base_ref": "main",
           "base_commit": "a" * 40, "status": "active"}
    state = HostState("box", 3, reachable=True, worktrees=(raw,), updated_at=1.0, checked_at=1.0)
    (entry,) = remote_entries(state)
    assert entry.name == "feat@box" and entry.extra["host"] == "box" and entry.extra["reachable"]
    assert matches("host:box", entry) and matches("host:b feat", entry)
    assert not matches("host:local", entry) and not matches("host:vm", entry) and not matches("other", entry)
