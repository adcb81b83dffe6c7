"""The radar reads an agent's uncommitted work in its sandbox, but the hashing and compressing is the
outside's CPU, in no cgroup of the agent's, on files the agent chose."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.conftest import CLI
from tests.helpers.radar import setup_repo, three_lines


def test_a_huge_sparse_file_does_not_stall_the_radar(cli: CLI, repo: Path) -> None:
    wts = setup_repo(repo, cli)
    (wts / "a" / "app.py").write_text(three_lines("A"))
    (wts / "b" / "app.py").write_text(three_lines("B"))
    with open(wts / "a" / "huge.bin", "wb") as fh:  # 64 GiB that take no disk: the agent's for nothing
        fh.truncate(64 << 30)
    started = time.monotonic()
    proc = cli("worktree", "conflicts", "--json")
    took = time.monotonic() - started
    assert proc.returncode == 0 and "gave no answer" not in proc.stderr, proc.stderr
    assert '"app.py"' in proc.stdout, proc.stdout  # the rest of a's work is still read
    assert took < 30, f"one pass took {took:.0f} s"
    quarantine = repo / ".worktrees" / ".agent-git" / "a"
    written = sum(f.stat().st_size for f in quarantine.rglob("*") if f.is_file() and not f.is_symlink())
    assert written < 16 << 20, f"the radar wrote {written} bytes for it"
    assert os.path.getsize(wts / "a" / "huge.bin") == 64 << 30
