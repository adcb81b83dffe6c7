"""The embedded terminal shows what tmux shows, also when lines come faster than it draws."""

from __future__ import annotations

import subprocess
from pathlib import Path

from daintree_tui.core.project import Project
from daintree_tui.core.worktrees import WorktreeService
from daintree_tui.sessions.manager import SessionManager
from daintree_tui.tui.app import make_app
from daintree_tui.tui.widgets.terminal import TerminalView
from tests.conftest import trusted_config
from tests.helpers.dashboard import main_screen, until


def _pane(socket: str, session: str) -> list[str]:
    out = subprocess.run(["tmux", "-L", socket, "capture-pane", "-p", "-t", f"={session}:"],
                         capture_output=True, text=True, check=True).stdout
    return [line.rstrip() for line in out.splitlines()]


async def test_lines_typed_faster_than_a_frame_are_all_on_the_terminal(repo: Path, tmux_socket: str) -> None:
    """Seen by a user typing into a `cat` (and by the echo bench): with lines echoed faster than tmux draws, tmux
    scrolls the attached terminal with `CSI n S` (SU), which pyte ignored: the terminal then showed lines missing
    and others twice, where the session's own screen had them all."""
    trusted_config(repo, "[agents.echo]\ncommand = \"sh -c 'exec cat'\"\nsandbox = \"off\"\n"
                         "[notifications]\nbell = false\ndesktop = false\n")
    project = Project.discover(repo)
    WorktreeService(project).create("aa")
    SessionManager(project).start("aa", "echo")
    app = make_app(project)
    async with app.run_test(size=(200, 50)) as pilot:
        screen = main_screen(app)
        view = screen.query_one(TerminalView)
        await until(pilot, lambda: view.attached and view.worktree == "aa")
        for i in range(80):
            subprocess.run(["tmux", "-L", tmux_socket, "send-keys", "-t", "=dt-aa:", f"line-{i}", "Enter"],
                           check=True)

        # Both copies of the last line (the terminal's echo and cat's) are in: what the terminal shows then is
        # what tmux has, not something a later full redraw puts right.
        await until(pilot, lambda: view.screen_text().count("line-79") == 2, timeout=30)
        shown = [line.rstrip() for line in view.screen_text().splitlines()]
        assert shown == _pane(tmux_socket, "dt-aa")[:len(shown)]
        assert view.emulator.errors == 0
