"""Benchmarks 4 and 5: the embedded terminal over a real tmux session, in-process (App.run_test).

4. A 5 MB coloured flood in the focused terminal: time until its last line is on screen, against the same flood
   in a bare tmux pane read by a capture-pane loop; and the worst event-loop stall meanwhile.
5. Keystroke-to-screen latency: key bytes written to the PTY until the echo is parsed on screen (200 keys).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import git, kill_tmux, small_repo, table

FLOOD_MB = 5
FLOOD = (
    "import sys\n"
    "line = ''.join(f'\\x1b[3{i % 8}m' + 'colour ' for i in range(12)) + '\\x1b[0m\\n'\n"
    "n = {size} // len(line.encode())\n"
    "sys.stdin.readline()\n"
    "w = sys.stdout.write\n"
    "for i in range(n):\n    w(f'{i:08d} ' + line)\n"
    "w('FLOOD-END\\n'); sys.stdout.flush()\n"
    "sys.stdin.readline()\n"
)


def make_repo(root: Path) -> Path:
    repo = small_repo(root / "repo")
    # Committed, so every worktree has it: a session's sandbox sees its worktree, not the bench's temp dir.
    (repo / "flood.py").write_text(FLOOD.replace("{size}", str(FLOOD_MB * 1024 * 1024)))
    git(repo, "add", "flood.py")
    git(repo, "commit", "-q", "-m", "flood")
    (repo / ".daintree.toml").write_text(
        f"[agents.flood]\ncommand = \"{sys.executable} flood.py\"\n"
        "[agents.echo]\ncommand = \"sh -c 'exec cat'\"\n[notifications]\nbell = false\n")
    # The agents are the repository's commands: trusted, with the trust record in the bench's own data home.
    os.environ["XDG_DATA_HOME"] = str(root / "data")
    from daintree_tui.core.project import Project
    from daintree_tui.core.trust import trust

    trust(Project.discover(repo))
    return repo


def bare_flood(repo: Path) -> float:
    """The same flood in a tmux pane nobody embeds: time until capture-pane shows the last line."""
    from daintree_tui.core.project import Project
    from daintree_tui.sessions.manager import SessionManager

    manager = SessionManager(Project.discover(repo))
    manager.start("bare", "flood", size=(120, 40))
    time.sleep(0.5)
    start = time.perf_counter()
    manager.send("bare", "", enter=True)
    while "FLOOD-END" not in manager.capture("bare"):
        time.sleep(0.002)
    return time.perf_counter() - start


async def embedded(repo: Path) -> tuple[float, float, list[float]]:
    from daintree_tui.core.project import Project
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.screens.main import MainScreen
    from daintree_tui.tui.widgets.terminal import TerminalView
    from daintree_tui.tui.widgets.worktree_table import WorktreeTable

    app = make_app(Project.discover(repo))
    async with app.run_test(size=(160, 50)) as pilot:
        while not (isinstance(app.screen, MainScreen) and {"embedded", "typing"} <= set(app.screen.sessions)):
            await pilot.pause(0.05)
        screen = app.screen
        terminal = screen.query_one(TerminalView)
        screen.query_one(WorktreeTable).select_name("embedded")
        screen.attach_and_focus("embedded")
        while "FLOOD" in terminal.screen_text() or terminal.bytes_read == 0:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        # 4. the flood, with an event-loop lag probe running alongside
        stalls: list[float] = []
        done = False

        async def probe() -> None:
            loop = asyncio.get_running_loop()
            while not done:
                before = loop.time()
                await asyncio.sleep(0.005)
                stalls.append(loop.time() - before - 0.005)

        prober = asyncio.create_task(probe())
        start = time.perf_counter()
        terminal.send_bytes(b"\r")
        while "FLOOD-END" not in terminal.screen_text():
            await asyncio.sleep(0.001)
        flood = time.perf_counter() - start
        done = True
        await prober
        terminal.send_bytes(b"\r")
        # 5. keystroke to screen, in the echo session
        screen.attach_and_focus("typing")
        while terminal.worktree != "typing" or terminal.bytes_read == 0:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        latencies = []
        for i in range(200):
            char = "abcdefghij"[i % 10]
            row, col = terminal.emulator.screen.cursor.y, terminal.emulator.screen.cursor.x
            start = time.perf_counter()
            terminal.send_bytes(char.encode())
            while terminal.emulator.screen.buffer[row][col].data != char:
                await asyncio.sleep(0)
            latencies.append(time.perf_counter() - start)
            if i % 50 == 49:
                terminal.send_bytes(b"\r")
                await pilot.pause(0.05)
        return flood, max(stalls), latencies


def run() -> str:
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService
    from daintree_tui.sessions.manager import SessionManager

    socket = f"daintree-bench-{uuid.uuid4().hex[:6]}"
    os.environ["DAINTREE_TMUX_SOCKET"] = socket
    data_home = os.environ.get("XDG_DATA_HOME")
    try:
        with tempfile.TemporaryDirectory(prefix="daintree-bench-") as tmp:
            repo = make_repo(Path(tmp))
            project = Project.discover(repo)
            service = WorktreeService(project)
            for name in ("bare", "embedded", "typing"):
                service.create(name)
            baseline = bare_flood(repo)
            manager = SessionManager(project)
            manager.start("embedded", "flood", size=(150, 44))
            manager.start("typing", "echo", size=(150, 44))
            flood, stall, latencies = asyncio.run(asyncio.wait_for(embedded(repo), timeout=120))
    finally:
        if data_home is None:
            os.environ.pop("XDG_DATA_HOME", None)
        else:
            os.environ["XDG_DATA_HOME"] = data_home
        kill_tmux(socket)
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p95 = latencies[int(len(latencies) * 0.95) - 1] * 1000
    rows = [
        [f"4. {FLOOD_MB} MB coloured flood, bare tmux pane (baseline)", f"{baseline * 1000:.0f} ms", "1.00x", ""],
        [f"4. {FLOOD_MB} MB coloured flood, focused embedded terminal", f"{flood * 1000:.0f} ms",
         f"{flood / baseline:.2f}x", "<= 2x"],
        ["4. worst event-loop stall during the flood", f"{stall * 1000:.1f} ms", "", "<= 50 ms"],
        ["5. keystroke to screen, p50 / p95 (200 keys)", f"{p50:.2f} / {p95:.2f} ms", "", "p95 < 5 ms"],
    ]
    return table("4, 5. Embedded terminal over tmux (in-process)", rows, ["what", "result", "ratio", "target"])


if __name__ == "__main__":
    print(run())
