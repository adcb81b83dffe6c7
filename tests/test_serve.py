"""`daintree serve` (issue 31): the dashboard in a real headless Chromium (Debian's `chromium`, driven by
Playwright), behind the token of the URL it prints; and the rules for the token and the address."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI, Lines, wait_for
from tests.helpers.dashboard import configure

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture
def served(repo: Path, tmux_socket: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`daintree serve --port 0` for `repo`; yields the URL it printed. Stopped (ours only) after the test."""
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", "serve", "--port", "0", "--json"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        line = Lines(proc.stdout).until(lambda text: text.startswith("{"), timeout=30)
        yield json.loads(line)["url"], proc
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _pane(socket: str, fmt: str) -> str:
    return subprocess.run(["tmux", "-L", socket, "display-message", "-p", "-t", "=dt-alpha:", fmt],
                          capture_output=True, text=True).stdout.strip()


def _capture(socket: str) -> str:
    return subprocess.run(["tmux", "-L", socket, "capture-pane", "-p", "-t", "=dt-alpha:"],
                          capture_output=True, text=True).stdout


def pumped(page: Any, predicate: Any, timeout: float = 20.0) -> Any:
    """`wait_for` that lets Playwright run while it waits: its sync API delivers events (the websocket's frames)
    only inside its own calls."""
    return wait_for(predicate, timeout, pause=lambda: page.wait_for_timeout(100))


class BrowserScreen:
    """What the page's terminal shows: the bytes its websocket received, fed to a terminal emulator at the size
    the page asked for (the page draws them on a canvas, which holds no text to read)."""

    def __init__(self) -> None:
        from daintree_tui.sessions.emulator import TerminalEmulator

        self.emulator = TerminalEmulator(80, 24)
        self.sizes: list[tuple[int, int]] = []

    def watch(self, websocket: Any) -> None:
        websocket.on("framereceived", self._received)
        websocket.on("framesent", self._sent)

    def _received(self, payload: str | bytes) -> None:
        if isinstance(payload, bytes):
            self.emulator.feed(payload)

    def _sent(self, payload: str | bytes) -> None:
        if isinstance(payload, str) and payload.startswith('["resize"'):
            size = json.loads(payload)[1]
            self.sizes.append((int(size["width"]), int(size["height"])))
            self.emulator.resize(*self.sizes[-1])

    def text(self) -> str:
        return self.emulator.text()


# In CI (.ci/run installs both) a missing browser fails the test instead of skipping it.
@pytest.mark.skipif(not (os.path.exists(CHROMIUM) and shutil.which("tmux")) and not os.environ.get("CI"),
                    reason="needs chromium and tmux")
def test_the_dashboard_in_a_headless_browser(repo: Path, tmux_socket: str, tmp_path: Path,
                                             served: tuple[str, Any]) -> None:
    from playwright.sync_api import sync_playwright

    configure(repo)
    CLI(repo).ok("worktree", "create", "alpha", "--agent", "echo")
    wait_for(lambda: "agent ready" in _capture(tmux_socket), timeout=20)
    url, _ = served
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 800})
        try:
            page = context.new_page()
            screen = BrowserScreen()
            page.on("websocket", screen.watch)
            assert page.goto(url).status == 200
            # The page shows the worktrees: the dashboard's table, with the agent's row.
            try:
                pumped(page, lambda: "alpha" in screen.text() and "echo" in screen.text(), timeout=30)
            except AssertionError:
                raise AssertionError(f"the page shows: {screen.text()!r} (sizes {screen.sizes})") from None
            cols_before = _pane(tmux_socket, "#{window_width}")
            # Keys: enter opens the selected agent's terminal, then what is typed reaches the agent.
            page.click("#terminal")
            page.keyboard.press("Enter")
            # The terminal says it has the keys (its title) once it is attached and focused.
            pumped(page, lambda: "keys go to the agent" in screen.text(), timeout=20)
            page.keyboard.type("hello from the browser")
            page.keyboard.press("Enter")
            try:
                pumped(page, lambda: "echo: hello from the browser" in _capture(tmux_socket), timeout=20)
            except AssertionError:
                raise AssertionError(f"page: {screen.text()}\n\npane: {_capture(tmux_socket)}") from None
            # The embedded terminal (in the page) shows the agent's answer too.
            pumped(page, lambda: "echo: hello from the browser" in screen.text(), timeout=20)
            # Resizing the page resizes the dashboard, its terminal and so the agent's pane.
            page.set_viewport_size({"width": 800, "height": 600})
            pumped(page, lambda: _pane(tmux_socket, "#{window_width}") not in (cols_before, ""), timeout=20)
            assert int(_pane(tmux_socket, "#{window_width}")) < int(cols_before)
            # A wrong token is refused, and so is none.
            base, token = url.rstrip("/").rsplit("/", 1)
            wrong = page.goto(f"{base}/{token[:-4]}abcd/")
            assert wrong is not None and wrong.status == 403
        finally:
            context.close()
    assert _status(f"{base}/") == 403 and _status(f"{base}/{token}/static/js/textual.js") == 200
    assert _status(f"{base}/x{token}/ws") == 403


def test_a_plain_get_of_the_websocket_is_a_400_not_a_traceback(repo: Path, tmux_socket: str) -> None:
    """curl of `.../TOKEN/ws` (the trial's) made textual-serve print two tracebacks on the serve terminal."""
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", "serve", "--port", "0", "--json"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        url = json.loads(Lines(proc.stdout).until(lambda text: text.startswith("{"), timeout=30))["url"]
        assert _status(url + "ws") == 400
        assert _status(url.rsplit("/", 2)[0] + "/ws") == 403  # without the token: refused first
        assert _status(url) == 200
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert "Traceback" not in err, err


def test_token_is_private_and_kept(tmp_path: Path) -> None:
    from daintree_tui.cli.serve import load_token, token_path
    from daintree_tui.core.sandbox import secrets_dir

    first = load_token()
    path = token_path()
    assert path.parent == secrets_dir()  # hidden in every sandbox (tests/test_serve_token_hidden.py)
    assert (path.stat().st_mode & 0o777) == 0o600 and (path.parent.stat().st_mode & 0o777) == 0o700
    assert load_token() == first and len(first) >= 32
    path.chmod(0o644)  # readable by others: it may have leaked, so it is replaced
    second = load_token()
    assert second != first and (path.stat().st_mode & 0o777) == 0o600


def test_a_non_loopback_bind_needs_the_users_config(repo: Path) -> None:
    cli = CLI(repo)
    proc = cli("serve", "--bind", "0.0.0.0", "--port", "0")
    assert proc.returncode == 1 and "allow_remote" in proc.stderr
    proc = cli("serve", "--bind", "example.com")
    assert proc.returncode == 2 and "IP address" in proc.stderr
    (repo / ".daintree.toml").write_text("[serve]\nallow_remote = true\n")  # the repository cannot allow it
    proc = cli("serve", "--bind", "0.0.0.0", "--port", "0")
    assert proc.returncode == 1 and "allow_remote" in proc.stderr
    from daintree_tui.cli.serve import check_bind

    user = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text("[serve]\nallow_remote = true\n")
    assert check_bind("0.0.0.0") == "0.0.0.0" and check_bind("localhost") == "127.0.0.1"
