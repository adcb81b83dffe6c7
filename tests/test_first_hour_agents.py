"""A new user's first five minutes with real agents (trial 9): what they saw that was wrong, fixed."""

from __future__ import annotations

import sys
from pathlib import Path

import pyperclip
import pytest
from textual.widgets import Button, Label
from textual.widgets._toast import Toast, ToastRack

from daintree_tui.core.project import Project
from daintree_tui.sessions.links import links_in
from daintree_tui.tui.app import make_app
from daintree_tui.tui.widgets.terminal import TerminalView
from tests.conftest import CLI, events, trusted_config, wait_for
from tests.helpers.dashboard import configure, main_screen, on_screen, until

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


SIGN_IN = ("https://claude.ai/oauth/authorize?code=true&client_id=9d1c250a-e61b-44d9-88ed-5944d1962f5e"
           "&response_type=code&redirect_uri=https%3A%2F%2Fconsole.anthropic.com%2Foauth%2Fcode%2Fcallback"
           "&scope=org%3Acreate_api_key+user%3Aprofile+user%3Ainference&code_challenge=Xq3v9kB0dFh2"
           "&code_challenge_method=S256&state=a1b2c3d4e5f6")


def test_links_in_puts_a_broken_url_back_together() -> None:
    width = 60
    pieces = [SIGN_IN[i:i + width - 2] for i in range(0, len(SIGN_IN), width - 2)]
    # claude's layout breaks the URL itself, two spaces in; a box adds its border; the terminal's own wrap
    # leaves full lines.
    laid_out = "Browser didn't open? Visit:\n" + "\n".join(f"  {p}" for p in pieces) + "\n\nPaste code here >"
    assert links_in(laid_out, width) == [SIGN_IN]
    boxed = "\n".join(f"│ {p.ljust(width - 4)} │" for p in [SIGN_IN[i:i + width - 4]
                                                           for i in range(0, len(SIGN_IN), width - 4)])
    assert links_in(boxed, width) == [SIGN_IN]
    wrapped = "\n".join(SIGN_IN[i:i + width] for i in range(0, len(SIGN_IN), width))
    assert links_in(wrapped, width) == [SIGN_IN]
    # A short link is not glued to the text under it, even a single word; two links stay two.
    assert links_in("Visit https://example.com/device.\nPaste", 80) == ["https://example.com/device"]
    edge = "x" * 34 + " https://example.com/a"
    assert links_in(f"{edge}\nPaste code here\nhttps://b.example/x", 60) == ["https://example.com/a",
                                                                             "https://b.example/x"]
    assert links_in(f"{edge}\nhttps://b.example/x", 60) == ["https://example.com/a", "https://b.example/x"]


async def test_u_copies_the_sign_in_link_the_agent_shows_whole(repo: Path, cli: CLI) -> None:
    """claude's sign-in screen shows a URL of some 300 characters over six lines of the dashboard's terminal:
    the mouse goes to the agent, and the user's own terminal copies the line breaks and the dashboard's border
    with it, so the URL could not be copied at all. `u` copies the last link on the agent's screen, whole."""
    code = (f"import time; print('Browser did not open? Visit:'); print('{SIGN_IN}'); "
            "print('Paste code here if prompted >', flush=True); time.sleep(120)")
    trusted_config(repo, f"[agents.signin]\ncommand = '''{sys.executable} -c \"{code}\"'''\n"
                         "[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "login", "--agent", "signin")
    wait_for(lambda: "Paste code" in cli.ok("session", "capture", "login").stdout)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = main_screen(app)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: terminal.attached and "Paste code" in terminal.screen_text())
        assert SIGN_IN not in terminal.screen_text()  # broken over lines on screen
        await pilot.press("u")
        toast = "the link to claude.ai: https://claude.ai/oauth/authorize?code=true&clie…"
        await until(pilot, lambda: any(toast in "".join(str(t.render()).split("\n")) for t in screen.query(Toast)))
        copied = pyperclip.paste() if "Copied" in str(screen.query(Toast).last().render()) else app.clipboard
        assert copied == SIGN_IN


def test_session_log_n_into_a_pipe_counts_the_rows_a_full_screen_agent_draws(repo: Path, cli: CLI) -> None:
    """`daintree session log with-opencode -n 5 | ...` printed 160 KB: opencode draws its screen row by row with
    cursor moves and almost never a line break, and -n counted line breaks only. A cursor move to a row begins a
    line too; the bytes are still the agent's (colours and cursor moves)."""
    code = ("import sys, time\\n"
            "for frame in range(300):\\n"
            "    sys.stdout.write('\\\\x1b[H' + ''.join(f'\\\\x1b[{row};1H\\\\x1b[38;2;255;255;255mrow {row} of frame "
            "{frame}' for row in range(1, 25)))\\n"
            "sys.stdout.write('\\\\x1b[24;1Hlast row'); sys.stdout.flush(); time.sleep(120)\\n")
    script = repo / "draw.py"
    script.write_text(code.encode().decode("unicode_escape"))
    trusted_config(repo, f"[agents.draw]\ncommand = \"{sys.executable} {script}\"\n")
    cli.ok("worktree", "create", "tui", "--agent", "draw")
    log = repo / ".worktrees" / ".logs" / "tui.log"
    wait_for(lambda: log.exists() and b"last row" in log.read_bytes())
    assert log.stat().st_size > 100_000
    out = cli.ok("session", "log", "tui", "-n", "3").stdout
    assert len(out) < 300, len(out)
    assert out.startswith("\x1b[23;1H") and out.endswith("\x1b[24;1Hlast row"), repr(out)
    assert "row 23 of frame 299" in out and "row 22 of" not in out
    raw = cli.ok("session", "log", "tui", "-n", "1", "--raw").stdout
    assert raw == "\x1b[24;1Hlast row"
    assert cli.json("session", "log", "tui", "-n", "1")["text"] == "\x1b[24;1Hlast row"


async def test_shift_s_stops_the_agent_and_keeps_the_worktree(repo: Path, cli: CLI) -> None:
    """A new user could not stop an agent from the dashboard: no key, no palette entry; `x` removes the worktree
    with it, `s` starts another. `S` asks, then stops the agent; the worktree stays, enter starts it again."""
    configure(repo)
    cli.ok("worktree", "create", "busy", "--agent", "echo")
    wait_for(lambda: cli.json("session", "list")[0]["status"] in ("running", "waiting"))
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "busy" in screen.sessions and screen.selected == "busy")
        await pilot.press("S")
        await on_screen(pilot, app, "ConfirmScreen")
        assert "Stop echo?" in " ".join(str(label.render()) for label in app.screen.query(Label))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        assert "busy" in cli.ok("session", "list", "--json").stdout and "exited" not in cli.ok("session", "list").stdout
        await pilot.press("S")
        await on_screen(pilot, app, "ConfirmScreen")
        app.screen.query_one("#yes", Button).press()
        await until(pilot, lambda: app.screen is screen)
        await until(pilot, lambda: all(s["status"] == "exited" for s in cli.json("session", "list")))
        assert cli.json("worktree", "list")[0]["name"] == "busy"
        assert any(e["event"] == "session.exited" and e.get("reason") == "stopped" for e in events(repo)), events(repo)
        await until(pilot, lambda: "busy" not in screen.sessions or screen.sessions["busy"].status == "exited")
        await pilot.press("S")
        await until(pilot, lambda: any("No agent runs in busy" in str(t.render()) for t in screen.query(Toast)))


def test_one_file_is_one_file_not_one_file_s(repo: Path, cli: CLI) -> None:
    """`worktree commit` said 'committed 1 file(s) in w', `worktree status` 'dirty:   1 file(s)', the dashboard
    'Committed 1 file(s)' and '1 uncommitted file(s) would be lost'."""
    cli.ok("worktree", "create", "w")
    (repo / ".worktrees" / "w" / "a.txt").write_text("a\n")
    assert "  dirty:   1 file\n" in cli.ok("worktree", "status", "w").stdout
    assert cli.ok("worktree", "commit", "w", "-m", "a", "--all").stdout.startswith("committed 1 file in w: ")
    for name in ("b.txt", "c.txt"):
        (repo / ".worktrees" / "w" / name).write_text("x\n")
    assert "  dirty:   2 files\n" in cli.ok("worktree", "status", "w").stdout
    assert cli.ok("worktree", "commit", "w", "-m", "bc", "--all").stdout.startswith("committed 2 files in w: ")
