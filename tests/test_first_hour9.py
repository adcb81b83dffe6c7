"""A new user's first five minutes with real agents (trial 9): what they saw that was wrong, fixed."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets._toast import Toast, ToastRack

from daintree_tui.core.project import Project
from daintree_tui.tui.app import make_app
from tests.test_dashboard import main_screen, until

pytestmark = pytest.mark.usefixtures("tmux_socket")


async def test_a_toast_at_80_columns_is_wide_enough_for_a_worktrees_path(repo: Path) -> None:
    """At 80x24 a toast was 40 columns wide (Textual's half of the screen): `c` said 'sent to the terminal's
    clipboard: /tmp/trial9-repo/.worktrees/with-ope' and 'ncode' on the next line, and the toast rack's
    scrollbar gutter showed the tab line under it ('━━') and a scrollbar thumb ('▅▅') at the screen's edge."""
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = main_screen(app)
        path = "/tmp/trial9-repo/.worktrees/with-opencode"
        app.notify(f"sent to the terminal's clipboard: {path}", timeout=60)
        toast = await until(pilot, lambda: screen.query(Toast).first() if screen.query(Toast) else None)
        await pilot.pause()
        assert toast.region.width >= 56, toast.region
        assert path in "".join(str(toast.render()).split("\n")), str(toast.render())
        rack = screen.query_one(ToastRack)
        assert rack.scrollbar_size_vertical == 0 or not rack.show_vertical_scrollbar
