"""Benchmarks 2, 3 and 6: the dashboard in a real terminal (a tmux pane) with 50 worktrees and 20 live sessions.

2. First paint vs a hello-world Textual app, both started the same way, timed by a capture-pane loop.
3. Idle CPU of the dashboard, its attach client and its tmux server over 10 s.
6. Peak RSS of the dashboard process.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import DAINTREE_LINE, ensure_bytecode, idle_sessions, kill_tmux, small_repo, table

WORKTREES = 50
SESSIONS = 20
RUNS = 5
HELLO = ("from textual.app import App\nfrom textual.widgets import Static\n"
         "class Hello(App):\n    def compose(self):\n        yield Static('hello world marker')\n"
         "Hello().run()\n")


class Viewer:
    """A private tmux server that plays the user's terminal."""

    def __init__(self) -> None:
        self.socket = f"daintree-bench-view-{uuid.uuid4().hex[:6]}"

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True)

    def launch(self, command: str, cwd: Path, env: dict[str, str], size: tuple[int, int] = (160, 50)) -> float:
        exports = " ".join(f"{k}={v}" for k, v in env.items())
        # A fresh server each time: a new session on a server that is still shutting down dies with it.
        self.close()
        self.socket = f"daintree-bench-view-{uuid.uuid4().hex[:6]}"
        start = time.perf_counter()
        self.tmux("new-session", "-d", "-x", str(size[0]), "-y", str(size[1]), "-c", str(cwd),
                  f"env {exports} {command}")
        return start

    def wait_for(self, marker: str, timeout: float = 30.0) -> float:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if marker in self.tmux("capture-pane", "-p").stdout:
                return time.perf_counter()
            time.sleep(0.005)
        shown = self.tmux("capture-pane", "-p").stdout.strip()[:500]
        raise RuntimeError(f"{marker!r} never appeared; the pane shows: {shown!r}")

    def pane_pid(self) -> int:
        return int(self.tmux("display-message", "-p", "#{pane_pid}").stdout.strip())

    def close(self) -> None:
        kill_tmux(self.socket)


def cpu_ticks(pid: int) -> int:
    """User + system time of a process and of its children that have exited (the tmux and git calls)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return sum(int(f) for f in fields[11:15])


def descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        p, pp = (int(x) for x in line.split())
        children.setdefault(pp, []).append(p)
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(children.get(current, []))
    return found


def build(root: Path, socket: str) -> Path:
    return idle_sessions(small_repo(root / "repo", 200), socket, WORKTREES, SESSIONS)


def run() -> str:
    ensure_bytecode()
    socket = f"daintree-bench-{uuid.uuid4().hex[:6]}"
    viewer = Viewer()
    env = {"DAINTREE_TMUX_SOCKET": socket, "TERM": "xterm-256color"}
    data_home = tempfile.mkdtemp(prefix="daintree-bench-data-")  # the trust record: never the user's own
    os.environ["XDG_DATA_HOME"] = env["XDG_DATA_HOME"] = data_home
    try:
        with tempfile.TemporaryDirectory(prefix="daintree-bench-", ignore_cleanup_errors=True) as tmp:
            repo = build(Path(tmp), socket)
            hello = Path(tmp) / "hello.py"
            hello.write_text(HELLO)
            daintree = DAINTREE_LINE
            hello_times, dash_times = [], []
            for _ in range(RUNS):
                start = viewer.launch(f"{sys.executable} {hello}", repo, env)
                hello_times.append(viewer.wait_for("hello world marker") - start)
                start = viewer.launch(daintree, repo, env)
                dash_times.append(viewer.wait_for("wt-00 ") - start)
            # Idle CPU and RSS of the last dashboard, once its sessions are listed and settled.
            viewer.wait_for("wt-19")
            time.sleep(10)  # let start-up finish: reconcile, git facts for 50 worktrees, the first polls
            pid = viewer.pane_pid()
            server = int(subprocess.run(["tmux", "-L", socket, "display-message", "-p", "#{pid}"],
                                        capture_output=True, text=True).stdout.strip())
            procs = [*descendants(pid), server]
            before = {p: cpu_ticks(p) for p in procs if Path(f"/proc/{p}").exists()}
            time.sleep(10)
            after = {p: cpu_ticks(p) for p in before if Path(f"/proc/{p}").exists()}
            ticks = sum(after[p] - before[p] for p in after)
            cpu = ticks / os.sysconf("SC_CLK_TCK") / 10 * 100
            rss_kb = max(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                         if line.startswith("VmHWM"))
    finally:
        shutil.rmtree(data_home, ignore_errors=True)
        viewer.close()
        kill_tmux(socket)
    hello_ms = statistics.median(hello_times) * 1000
    dash_ms = statistics.median(dash_times) * 1000
    rows = [
        ["2. first paint: hello-world Textual app (baseline)", f"{hello_ms:.0f} ms", "1.00x", ""],
        [f"2. first paint: dashboard, {WORKTREES} worktrees, {SESSIONS} sessions", f"{dash_ms:.0f} ms",
         f"{dash_ms / hello_ms:.2f}x", "<= 1.6x"],
        [f"3. idle CPU, dashboard + tmux server, {SESSIONS} idle sessions, 10 s", f"{cpu:.2f}% of a core", "",
         "< 2%"],
        ["6. peak RSS of the dashboard", f"{rss_kb / 1024:.0f} MB", "", "< 150 MB"],
    ]
    return table(f"2, 3, 6. Dashboard in a real terminal (160x50), median of {RUNS}", rows,
                 ["what", "result", "ratio", "target"])


if __name__ == "__main__":
    print(run())
