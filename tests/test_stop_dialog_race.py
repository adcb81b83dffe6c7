"""S (stop, after asking) against a session that ends on its own while the question is open."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual.widgets import Button
from textual.widgets._toast import Toast

from daintree_tui.core.project import Project
from daintree_tui.tui.app import make_app
from tests.conftest import CLI, trusted_config, wait_for
from tests.helpers.dashboard import main_screen, on_screen, until

pytestmark = pytest.mark.usefixtures("tmux_socket")


async def test_stop_confirmed_after_the_agent_failed_on_its_own_keeps_its_failure(repo: Path, cli: CLI) -> None:
    """The agent failed (exit 3) while 'Stop claude?' was open: confirming killed its dead pane, said 'Stopped',
    and the failure's code and screen went with it. The agent that was asked about is gone: nothing is stopped,
    and the toast says how it ended."""
    flag = repo / "fail-now"
    code = (f"import os, time\\nprint('working', flush=True)\\nwhile not os.path.exists({str(flag)!r}): "
            "time.sleep(0.05)\\nprint('boom: out of credits', flush=True)\\nraise SystemExit(3)\\n")
    script = repo / "agent.py"
    script.write_text(code.encode().decode("unicode_escape"))
    trusted_config(repo, f"[agents.flaky]\ncommand = \"{sys.executable} {script}\"\n[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "w", "--agent", "flaky")
    wait_for(lambda: "working" in cli.ok("session", "capture", "w").stdout)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "w" in screen.sessions and screen.selected == "w")
        await pilot.press("S")
        await on_screen(pilot, app, "ConfirmScreen")
        flag.write_text("")
        wait_for(lambda: cli.json("session", "list")[0]["status"] == "exited")
        app.screen.query_one("#yes", Button).press()
        await until(pilot, lambda: app.screen is screen)
        await until(pilot, lambda: any("already" in str(t.render()) for t in screen.query(Toast)))
        assert not any("Stopped" in str(t.render()) for t in screen.query(Toast))
    sessions = cli.json("session", "list")
    assert sessions and sessions[0]["exit_code"] == 3, sessions
    assert "boom: out of credits" in cli.ok("session", "capture", "w").stdout
