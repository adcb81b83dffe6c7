"""The radar's repositories: four worktrees over a three-line file."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import CLI
from tests.conftest import commit_file as commit


def three_lines(middle: str) -> str:
    return f"one\n{middle}\nthree\n"


def setup_repo(repo: Path, cli: CLI) -> Path:
    commit(repo, "app.py", three_lines("two"), "app")
    for name in ("a", "b", "c", "d"):
        cli.ok("worktree", "create", name)
    return repo / ".worktrees"
