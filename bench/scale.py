"""Benchmark 7: create 100 worktrees, list them, remove them; time per operation must stay flat.

The slope (extra milliseconds per operation for each worktree already there) comes from a least-squares fit; a
flat operation has a slope near 0. The baseline is the same fit for bare `git worktree add` / `remove`.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench.common import git, table

COUNT = 100


def slope(samples: list[float]) -> float:
    xs = list(range(len(samples)))
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(samples)
    num = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, samples, strict=True))
    den = sum((x - mean_x) ** 2 for x in xs)
    return num / den


def timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def run() -> str:
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService

    with tempfile.TemporaryDirectory(prefix="daintree-bench-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        for i in range(300):
            (repo / f"f{i}.txt").write_text(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "i")
        (repo / ".daintree.toml").write_text("[ports]\nrange = [30000, 39999]\n")
        service = WorktreeService(Project.discover(repo))
        base_create = [timed(lambda i=i: git(repo, "worktree", "add", "-q", "-b", f"b{i}",
                                             str(repo / ".worktrees" / f"b{i}"))) for i in range(COUNT)]
        create = [timed(lambda i=i: service.create(f"w{i}")) for i in range(COUNT)]
        list_all = timed(lambda: service.facts_for(service.entries()))
        list_entries = timed(service.entries)
        remove = [timed(lambda i=i: service.remove(f"w{i}")) for i in range(COUNT)]
        base_remove = [timed(lambda i=i: git(repo, "worktree", "remove", str(repo / ".worktrees" / f"b{i}")))
                       for i in range(COUNT)]

    def ms(x: float) -> str:
        return f"{x * 1000:.1f} ms"

    rows = [
        ["create: git worktree add (baseline)", ms(statistics.median(base_create)),
         f"{slope(base_create) * 1000:+.3f} ms"],
        ["create: daintree", ms(statistics.median(create)), f"{slope(create) * 1000:+.3f} ms"],
        ["remove: git worktree remove (baseline)", ms(statistics.median(base_remove)),
         f"{slope(base_remove) * 1000:+.3f} ms"],
        ["remove: daintree (trash + background delete)", ms(statistics.median(remove)),
         f"{slope(remove) * 1000:+.3f} ms"],
        [f"list: index of {COUNT} entries", ms(list_entries), ""],
        [f"list: with git facts for {COUNT} worktrees", ms(list_all), ""],
    ]
    return table(f"7. Scale: {COUNT} worktrees created, listed, removed (300-file repo)", rows,
                 ["operation", "median", "slope per existing worktree"])


if __name__ == "__main__":
    print(run())
