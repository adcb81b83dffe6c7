"""Regenerate the README's screenshots: the dashboard at 120x40 on the demo repository with demo agents working.

    make screenshots
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEMO = Path("/tmp/daintree-screenshot/shop")
SIZE = (120, 40)  # the layout most people see; columns give way by priority below it


async def shoot() -> None:
    from daintree_tui.core.project import Project
    from daintree_tui.demo.repo import create_demo_repo
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.screens.main import MainScreen
    from daintree_tui.tui.widgets.terminal import TerminalView

    shutil.rmtree(DEMO.parent, ignore_errors=True)
    create_demo_repo(DEMO)
    app = make_app(Project.discover(DEMO))
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(200):
            screen = app.screen
            if isinstance(screen, MainScreen) and len(screen.sessions) == 3:
                break
            await pilot.pause(0.05)
        await pilot.pause(6)  # let the agents work
        await pilot.press("enter")
        await pilot.pause(0.5)
        await pilot.press(*"y", "enter")
        await pilot.pause(1.5)
        assert "docs" in app.screen.query_one(TerminalView).screen_text()
        app.save_screenshot(str(HERE / "dashboard.svg"))
        await pilot.press("ctrl+right_square_bracket", "d")
        await pilot.pause(1.0)
        app.save_screenshot(str(HERE / "dashboard-diff.svg"))


def main() -> None:
    socket = f"daintree-shot-{uuid.uuid4().hex[:8]}"
    os.environ["DAINTREE_TMUX_SOCKET"] = socket
    os.environ["DAINTREE_DEMO_SPEED"] = "3"
    try:
        asyncio.run(shoot())
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
    print(f"wrote {HERE / 'dashboard.svg'} and {HERE / 'dashboard-diff.svg'}")


if __name__ == "__main__":
    main()
