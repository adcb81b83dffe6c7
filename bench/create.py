"""Benchmark 1: worktree create (includes, links, ports, index, event) vs bare `git worktree add`."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import GIT_ENV, generated_repo, git, median_times, table

FILES = 10_000
RUNS = 7


def run() -> str:
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService

    with tempfile.TemporaryDirectory(prefix="daintree-bench-") as tmp:
        repo = generated_repo(Path(tmp) / "repo", FILES)
        service = WorktreeService(Project.discover(repo))
        baseline, library, cli = median_times([
            # Same parent directory as ours: where a directory lands measurably changes ext4 write cost.
            lambda i: git(repo, "worktree", "add", "-q", "-b", f"base{i}", str(repo / ".worktrees" / f"base{i}")),
            lambda i: service.create(f"lib{i}"),
            lambda i: subprocess.run([sys.executable, "-m", "daintree_tui", "worktree", "create", f"cli{i}"],
                                     cwd=repo, check=True, capture_output=True, env=GIT_ENV),
        ], RUNS)
    rows = [
        ["git worktree add (baseline)", f"{baseline * 1000:.0f} ms", "1.00x", ""],
        ["daintree library create", f"{library * 1000:.0f} ms", f"{library / baseline:.2f}x", "<= 1.2x"],
        ["daintree CLI create", f"{cli * 1000:.0f} ms", f"{cli / baseline:.2f}x", "<= 1.3x"],
    ]
    return table(f"1. Worktree create, {FILES:,}-file repo, median of {RUNS}", rows,
                 ["what", "median", "ratio", "target"])


if __name__ == "__main__":
    print(run())
