"""`daintree serve` as seen from inside a sandbox. A sandboxed agent shares the host's network by default
(`network = true`), so it reaches the dashboard's port on 127.0.0.1 like any local process; the token is all that
stands between it and a dashboard that runs outside its sandbox (merges, trust, sessions of its own choosing)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CLI, Lines

# What the agent runs: look for the serve token where the user's dirs keep things, then open the dashboard's page.
ATTACK = r"""
import os, sys, urllib.error, urllib.request
port = sys.argv[1]
home = os.environ["HOME"]
found = None
for top in (home, "/root", "/home"):
    for folder, _, files in os.walk(top):
        if "serve-token" in files:
            try:
                found = open(os.path.join(folder, "serve-token")).read().strip()
            except OSError:
                continue
            break
    if found:
        break
if not found:
    print("NO-TOKEN")
    sys.exit(0)
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{found}/", timeout=10) as r:
        print("STATUS", r.status)
except urllib.error.HTTPError as exc:
    print("STATUS", exc.code)
except OSError as exc:
    print("UNREACHABLE", exc)
"""


@pytest.fixture
def served_port(repo: Path, sandbox_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    # The user's dirs where they are on a real machine: in the home the sandbox shows (read-only).
    monkeypatch.setenv("XDG_STATE_HOME", str(sandbox_env / ".local" / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(sandbox_env / ".local" / "share"))
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", "serve", "--port", "0", "--json"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        line = Lines(proc.stdout).until(lambda text: text.startswith("{"), timeout=30)
        yield int(json.loads(line)["port"])
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_a_sandboxed_agent_cannot_read_the_serve_token(repo: Path, served_port: int) -> None:
    cli = CLI(repo)
    cli.ok("worktree", "create", "spy")
    proc = cli("worktree", "run", "spy", "--", "python3", "-c", ATTACK, str(served_port))
    assert proc.returncode == 0, proc.stderr
    assert "NO-TOKEN" in proc.stdout, f"the agent opened the dashboard: {proc.stdout}"
