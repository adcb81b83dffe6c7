"""DESIGN.md read word by word against the real CLI and MCP server: each test here is a promise of the contract
that the product once broke (names, flags, `--json` shapes, files written, events)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import CLI, Lines


def events(repo: Path) -> list[dict[str, object]]:
    lines = (repo / ".worktrees" / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_events_follow_prints_readable_lines_without_json(cli: CLI, repo: Path) -> None:
    """`worktree events [--limit N] [--follow]`: following without `--json` prints the same lines as without
    `--follow` (it failed with an internal error: only `--json` worked)."""
    cli.ok("task", "create", "Follow me")
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", "worktree", "events", "--follow"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = Lines(proc.stdout)
        first = lines.until(lambda line: "task.created" in line)
        assert not first.startswith("{"), first  # a human line, not JSON
        cli.ok("task", "create", "Later")
        lines.until(lambda line: "task.created" in line)
        assert proc.poll() is None  # still following
    finally:
        proc.terminate()
        proc.wait(timeout=10)
