"""Benchmark 1: worktree create (includes, links, ports, index, event) vs bare `git worktree add`."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import DAINTREE, GIT_ENV, ensure_bytecode, generated_repo, git, median_times, table

FILES = 10_000
RUNS = 7

# The least any Python command could take: the interpreter's start, the standard library that running git needs,
# and the git calls our create makes (in the same order, started as ours are: discovery and the tracked listing at
# once, the branch check beside the `checkout.workers` question, the add with the ignored-file scan beside it), with
# none of our checks, writes or imports.
FLOOR = """
import subprocess, sys
name = sys.argv[1]
def start(*args):
    return subprocess.Popen(["git", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
discovery = start("rev-parse", "--path-format=absolute", "--git-common-dir", "--show-toplevel", "--git-path",
                  "hooks", "--verify", "--quiet", "HEAD^{commit}")
tracked = start("ls-files", "-z", "--", ":(literal).worktrees/")
discovery.communicate()
tracked.communicate()
workers = start("config", "--get", "checkout.workers")
start("rev-parse", "--verify", "--quiet", "refs/heads/wt/" + name).communicate()
workers.communicate()
add = start("-c", "checkout.workers=0", "worktree", "add", "--quiet", "-b", "wt/" + name, ".worktrees/" + name)
scan = start("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
scan.communicate()
add.communicate()
"""


def run() -> str:
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService

    ensure_bytecode()
    with tempfile.TemporaryDirectory(prefix="daintree-bench-") as tmp:
        repo = generated_repo(Path(tmp) / "repo", FILES)
        service = WorktreeService(Project.discover(repo))
        baseline, parallel, library, floor, cli = median_times([
            # Same parent directory as ours: where a directory lands measurably changes ext4 write cost.
            lambda i: git(repo, "worktree", "add", "-q", "-b", f"base{i}", str(repo / ".worktrees" / f"base{i}")),
            # What our create runs (unless the user's git config sets checkout.workers): how much of a difference
            # is git's parallel checkout rather than our own code.
            lambda i: git(repo, "-c", "checkout.workers=0", "worktree", "add", "-q", "-b", f"par{i}",
                          str(repo / ".worktrees" / f"par{i}")),
            lambda i: service.create(f"lib{i}"),
            lambda i: subprocess.run([sys.executable, "-c", FLOOR, f"floor{i}"], cwd=repo, check=True, env=GIT_ENV),
            lambda i: subprocess.run([*DAINTREE, "worktree", "create", f"cli{i}"],
                                     cwd=repo, check=True, capture_output=True, env=GIT_ENV),
        ], RUNS)
    rows = [
        ["git worktree add (baseline)", f"{baseline * 1000:.0f} ms", "1.00x", ""],
        ["the same, checkout.workers=0 (as ours)", f"{parallel * 1000:.0f} ms", f"{parallel / baseline:.2f}x", ""],
        ["daintree library create", f"{library * 1000:.0f} ms", f"{library / baseline:.2f}x", "<= 1.2x"],
        ["python floor: start + the same git calls", f"{floor * 1000:.0f} ms", f"{floor / baseline:.2f}x", ""],
        ["daintree CLI create", f"{cli * 1000:.0f} ms", f"{cli / baseline:.2f}x", "<= 1.3x"],
    ]
    return table(f"1. Worktree create, {FILES:,}-file repo, median of {RUNS}", rows,
                 ["what", "median", "ratio", "target"])


if __name__ == "__main__":
    print(run())
