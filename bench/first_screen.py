"""Benchmark 2b: the first useful screen, seen from an outer terminal, on a 9,000-file repository.

The dashboard runs in a pane of a private tmux server (the user's terminal); the pane is captured until the
worktree table lists every worktree with a session and that session's status (the poll's answer, not the first
frame's placeholder). The baseline is a hello-world Textual app started the same way, timed until its first frame
shows; samples are interleaved. The repository is generated (no 9,000-file repository is available offline):
9,000 small files in 100 folders, an ignored `.env` and `node_modules`, 5 worktrees, 3 of them with a session.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import DAINTREE_LINE, ensure_bytecode, generated_repo, idle_sessions, kill_tmux, table
from bench.dashboard import HELLO, Viewer

FILES = 9_000
WORKTREES = 5
SESSIONS = 3
RUNS = 5
STATUS = re.compile(r"\b(wt-\d\d)\b.*(running|WAITING|starting|exited)")


def build(root: Path, socket: str) -> Path:
    return idle_sessions(generated_repo(root / "repo", FILES), socket, WORKTREES, SESSIONS)


def wait_for_status(viewer: Viewer, timeout: float = 30.0) -> float:
    """When every session's row shows its status."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        shown = {m.group(1) for m in STATUS.finditer(viewer.tmux("capture-pane", "-p").stdout)}
        if len(shown) >= SESSIONS:
            return time.perf_counter()
        time.sleep(0.005)
    raise RuntimeError(f"session status never showed; the pane shows: {viewer.tmux('capture-pane', '-p').stdout!r}")


def run() -> str:
    ensure_bytecode()
    socket = f"daintree-bench-{uuid.uuid4().hex[:6]}"
    viewer = Viewer()
    env = {"DAINTREE_TMUX_SOCKET": socket, "TERM": "xterm-256color"}
    data_home = tempfile.mkdtemp(prefix="daintree-bench-data-")  # the trust record: never the user's own
    os.environ["XDG_DATA_HOME"] = env["XDG_DATA_HOME"] = data_home
    load = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory(prefix="daintree-bench-", ignore_cleanup_errors=True) as tmp:
            repo = build(Path(tmp), socket)
            hello = Path(tmp) / "hello.py"
            hello.write_text(HELLO)
            hello_times, paint_times, dash_times = [], [], []
            for _ in range(RUNS):
                start = viewer.launch(f"{sys.executable} {hello}", repo, env)
                hello_times.append(viewer.wait_for("hello world marker") - start)
                start = viewer.launch(DAINTREE_LINE, repo, env)
                paint_times.append(viewer.wait_for("wt-00 ") - start)
                dash_times.append(wait_for_status(viewer) - start)
    finally:
        shutil.rmtree(data_home, ignore_errors=True)
        viewer.close()
        kill_tmux(socket)
    hello_ms = statistics.median(hello_times) * 1000
    dash_ms = statistics.median(dash_times) * 1000
    paint_ms = statistics.median(paint_times) * 1000
    spread = f"{min(dash_times) / max(hello_times):.2f}x-{max(dash_times) / min(hello_times):.2f}x"
    rows = [
        ["hello-world Textual app, first frame (baseline)", f"{hello_ms:.0f} ms", "1.00x", ""],
        ["dashboard, first frame with the worktree rows", f"{paint_ms:.0f} ms", f"{paint_ms / hello_ms:.2f}x", ""],
        [f"dashboard, worktrees with session status, {FILES:,} files", f"{dash_ms:.0f} ms",
         f"{dash_ms / hello_ms:.2f}x ({spread})", "<= 2x"],
    ]
    return table(f"2b. First useful screen from an outer terminal (160x50), median of {RUNS}, load {load:.1f}",
                 rows, ["what", "result", "ratio", "target"])


if __name__ == "__main__":
    print(run())
