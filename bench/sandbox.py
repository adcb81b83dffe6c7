"""Benchmark 8: session start with and without the sandbox, in one run (target: the sandbox adds under 50 ms).

A session counts as started when its agent runs: the agent's first act is to create a file in its TMPDIR, and the
clock stops when that file appears. Runs alternate sandboxed / not, so drift hits both alike.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import generated_repo, table

RUNS = 9
AGENT = "sh -c 'touch \"$TMPDIR/up\"; exec sleep 600'"


def run() -> str:
    from daintree_tui.core.config import AgentConfig
    from daintree_tui.core.project import Project
    from daintree_tui.core.sandbox import BwrapSandbox
    from daintree_tui.core.worktrees import WorktreeService
    from daintree_tui.sessions.manager import SessionManager
    from daintree_tui.sessions.tmux import TmuxHost

    ok, why = BwrapSandbox().available()
    if not ok:
        return table("8. Session start with the sandbox", [["skipped", why, "", ""]], ["what", "median", "", ""])
    socket = f"daintree-bench-{uuid.uuid4().hex[:8]}"
    os.environ["DAINTREE_TMUX_SOCKET"] = socket
    try:
        with tempfile.TemporaryDirectory(prefix="daintree-bench-") as tmp:
            repo = generated_repo(Path(tmp) / "repo", 1000)
            project = Project.discover(repo)
            project.config.agents["bench"] = AgentConfig(command=AGENT, prompt_mode="none")
            worktrees = WorktreeService(project)
            manager = SessionManager(project, TmuxHost(project))
            samples: dict[str, list[float]] = {"off": [], "on": []}
            for i in range(-1, RUNS):  # one warm-up round, discarded
                for mode in ("off", "on"):
                    name = f"{mode}{i + 1}"
                    worktrees.create(name)
                    project.config.sandbox_mode = mode
                    marker = project.tmpdir_for(name) / "up"
                    start = time.perf_counter()
                    manager.start(name, "bench")
                    while not marker.exists():
                        time.sleep(0.0005)
                    elapsed = time.perf_counter() - start
                    manager.stop(name)
                    if i >= 0:
                        samples[mode].append(elapsed)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
        os.environ.pop("DAINTREE_TMUX_SOCKET", None)
    off, on = statistics.median(samples["off"]), statistics.median(samples["on"])
    rows = [
        ["session start, sandbox off (baseline)", f"{off * 1000:.0f} ms", ""],
        ["session start, bubblewrap sandbox", f"{on * 1000:.0f} ms", ""],
        ["added by the sandbox", f"{(on - off) * 1000:.0f} ms", "< 50 ms"],
    ]
    return table(f"8. Session start until the agent runs, median of {RUNS}", rows, ["what", "median", "target"])


if __name__ == "__main__":
    print(run())
