"""Benchmark 12: the dashboard's watch of the worktrees' files, ours (`core/tree_watch.py`) against watchfiles'
recursive watch (what it used before), over the same 100 worktrees (each a copy of this project's source, tests
and docs), and again with one worktree holding a link to `/` that an agent made.

Each watch runs in a process of its own, interleaved with the other: the CPU (user and system) it took until its
first answer (all its watches in place), the time to that answer (which comes after its first second of quiet),
and its CPU while nothing changes, over 10 s. watchfiles follows the link and walks the whole machine; ours does not
follow links at all.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import loadavg, table

WORKTREES = 100
IDLE_S = 10
WATCH = """
import resource, sys, threading, time
from pathlib import Path
roots = sorted(Path(sys.argv[2]).iterdir())
stop = threading.Event()
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
began, cpu0 = time.monotonic(), cpu()
if sys.argv[1] == "ours":
    from daintree_tui.core.tree_watch import Root, tree_changes
    from watchfiles import DefaultFilter
    answers = tree_changes([Root(p) for p in roots], stop, skip_dir=lambda n: n in DefaultFilter.ignore_dirs)
else:
    from daintree_tui.core.fs_watch import watching
    answers = watching(tuple(roots), stop, ignore_permission_denied=True)
next(answers)
in_place, cpu1 = time.monotonic(), cpu()
while time.monotonic() - in_place < float(sys.argv[3]):
    next(answers)
print(in_place - began, cpu1 - cpu0, (cpu() - cpu1) / (time.monotonic() - in_place))
stop.set()
"""
SOURCE = Path(__file__).resolve().parent.parent


def _worktrees(base: Path) -> int:
    for i in range(WORKTREES):
        for part in ("daintree_tui", "tests", "docs"):
            shutil.copytree(SOURCE / part, base / f"w{i:03d}" / part,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return sum(1 for p in base.rglob("*") if p.is_dir())


def _sample(which: str, base: Path) -> tuple[float, float, float]:
    out = subprocess.run([sys.executable, "-c", WATCH, which, str(base), str(IDLE_S)], check=True,
                         capture_output=True, text=True, timeout=300).stdout.split()
    return float(out[0]), float(out[1]), float(out[2])


def run() -> str:
    with tempfile.TemporaryDirectory(prefix="daintree-bench-watch-") as tmp:
        base = Path(tmp)
        folders = _worktrees(base)
        load_start = loadavg()
        rows = []
        for linked in (False, True):
            if linked:
                (base / "w000" / "rootlink").symlink_to("/")
            samples = {which: _sample(which, base) for which in ("ours", "watchfiles")}
            floor_cpu = samples["ours"][1]
            for which, (in_place, setup_cpu, idle) in samples.items():
                rows.append([f"{which}{', a link to / in one' if linked else ''}", f"{in_place:.2f} s",
                             f"{setup_cpu:.3f} s", f"{setup_cpu / floor_cpu:.1f}x", f"{idle * 100:.2f}%"])
        load_end = loadavg()
    return table(f"Benchmark 12: the worktrees' watch, {WORKTREES} worktrees ({folders:,} folders), load "
                 f"{load_start} -> {load_end}", rows,
                 ["watch", "in place after", "its CPU until then", "vs ours", f"idle CPU over {IDLE_S} s"])
