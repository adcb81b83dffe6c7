"""Benchmark 9: the conflict radar over 50 worktrees of a 9,000-file repository, each with 5 changed files, 10
pairs of them overlapping (and conflicting).

A full pass is what the dashboard runs when every worktree is new to it: the git facts (which the dashboard has
anyway) say which worktrees are clean, their work is their branch, and git is asked for one listing of the
branches, each worktree's fork point and changed paths, and the merges of the overlapping pairs. The cold pass
without facts is `daintree worktree conflicts` (every worktree read inside its sandbox, through a temporary
index); an unchanged pass is the dashboard's next one, when nothing changed. The same again with the 5 files
uncommitted in every worktree: each is read in its sandbox.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import DAINTREE, GIT_ENV, generated_repo, git, loadavg, table

FILES = 9000
WORKTREES = 50
CHANGED = 5
PAIRS = 10
RUNS = 3


def _setup(repo: Path) -> list[str]:
    """The worktrees, each committing CHANGED files of its own; worktrees 2k and 2k+1 (k < PAIRS) share one of
    them, with different lines."""
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService

    (repo / ".daintree.toml").write_text("[ports]\nrange = [40000, 49999]\n")
    service = WorktreeService(Project.discover(repo))
    names = []
    for i in range(WORKTREES):
        name = f"w{i:02d}"
        entry = service.create(name)
        wt = Path(entry.path)
        for j in range(CHANGED):
            index = i * CHANGED + j
            if j == 0 and i < 2 * PAIRS:
                index = (i // 2) * CHANGED  # the pair's shared file (the first of the even one's)
            path = wt / f"src/pkg{index % 100}/mod{index}.py"
            path.write_text(f"VALUE = {index}  # changed by {name}\n" + f"VALUE = {index}\n" * 4)
        git(wt, "add", "-A")
        git(wt, "commit", "-q", "-m", f"work of {name}")
        names.append(name)
    return names


def _say(what: str) -> None:
    """Where the bench is, on stderr (its setup writes 450,000 files)."""
    print(f"  radar bench: {what} (load {loadavg()})", file=sys.stderr, flush=True)


def _timed(fn: object) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()  # type: ignore[operator]
    return time.perf_counter() - start, out


def run() -> str:
    from daintree_tui.core.project import Project
    from daintree_tui.core.radar import Radar
    from daintree_tui.core.worktrees import WorktreeService

    load_before = loadavg()
    with tempfile.TemporaryDirectory(prefix="daintree-bench-radar-") as tmp:
        repo = generated_repo(Path(tmp) / "repo", FILES)
        _say("repository made")
        names = _setup(repo)
        _say(f"{len(names)} worktrees made")
        project = Project.discover(repo)
        entries = WorktreeService(project).entries
        clean = dict.fromkeys(names, 0)

        def fresh(dirty: dict[str, int] | None = None) -> object:
            return Radar(project, entries).scan(dirty=dirty)

        full = [_timed(lambda: fresh(clean)) for _ in range(RUNS)]
        cold = [_timed(fresh) for _ in range(RUNS)]
        warm = Radar(project, entries)
        warm.scan(dirty=clean)
        unchanged = [_timed(lambda: warm.scan(changed=())) for _ in range(RUNS)]
        report = full[0][1]
        found = len(report.conflicts)  # type: ignore[attr-defined]
        merges = report.merges  # type: ignore[attr-defined]
        cli = [_timed(lambda: subprocess.run([*DAINTREE, "worktree", "conflicts", "--json"], cwd=repo,
                                             capture_output=True, check=True, env=GIT_ENV)) for _ in range(RUNS)]
        _say("committed work measured")
        # The same work, uncommitted: every worktree is read inside its sandbox.
        for name in names:
            git(repo / ".worktrees" / name, "reset", "-q", "--mixed", "HEAD~1")
        dirty = dict.fromkeys(names, CHANGED)
        dirty_cold = [_timed(lambda: fresh(dirty)) for _ in range(RUNS)]
        warm = Radar(project, entries)
        warm.scan(dirty=dirty)
        one = repo / ".worktrees" / names[-1] / "src" / "pkg0" / "extra.py"

        def one_changed() -> object:
            one.write_text(f"X = {time.time()}\n")
            return warm.scan(dirty=dirty, changed={names[-1]})

        dirty_one = [_timed(one_changed) for _ in range(RUNS)]
        dirty_unchanged = [_timed(lambda: warm.scan(changed=())) for _ in range(RUNS)]
        dirty_found = len(warm.scan(changed=()).conflicts)

    def ms(samples: list[tuple[float, object]]) -> str:
        return f"{statistics.median(s for s, _ in samples) * 1000:.0f} ms"

    rows = [
        ["full pass, committed work (facts known: no sandbox)", ms(full), "< 1 s",
         f"{found} conflicts, {merges} merges"],
        ["cold pass, committed work (each read in its sandbox)", ms(cold), "", ""],
        ["unchanged pass", ms(unchanged), "near 0", "0 merges"],
        ["`daintree worktree conflicts --json` (whole command)", ms(cli), "", ""],
        ["full pass, uncommitted work (each read in its sandbox)", ms(dirty_cold), "", f"{dirty_found} conflicts"],
        ["one worktree's files changed, uncommitted work", ms(dirty_one), "", ""],
        ["unchanged pass, uncommitted work", ms(dirty_unchanged), "near 0", ""],
    ]
    return table(f"9. Conflict radar: {WORKTREES} worktrees, {FILES:,}-file repo, {CHANGED} changed files each, "
                 f"{PAIRS} overlapping pairs; median of {RUNS}, {os.cpu_count()} cores, load {load_before} to "
                 f"{loadavg()}", rows, ["pass", "median", "target", "found"])


if __name__ == "__main__":
    print(run())
