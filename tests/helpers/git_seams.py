"""The seams of git, attacked from inside a worktree's sandbox: where its admin dir and common dir are, and a
script run there."""

from __future__ import annotations

from tests.conftest import CLI

ADMIN = '"$(git rev-parse --absolute-git-dir)"'
COMMON = '"$(git rev-parse --path-format=absolute --git-common-dir)"'


def run_in_worktree(cli: CLI, name: str, script: str) -> str:
    """`script` run by `sh` in worktree `name` (`daintree worktree run`, so in its sandbox): what it printed."""
    proc = cli("worktree", "run", name, "--", "sh", "-c", script)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout
