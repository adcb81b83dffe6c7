"""Each request the allow-list refuses is a `sandbox.denied` event in the project's event log, written
outside by the proxy. The log keeps one rotated file: a flood of refusals is the agent's way to erase the
outside's record (train results, sessions' transitions the notifier has not read yet, every earlier event)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import CLI
from tests.helpers.config import write_user_config

FLOOD = r"""
import socket
def ask(host):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
    answer = s.recv(100)
    s.close()
    return answer
print(ask("first.example").split(b"\r\n")[0].decode())
for i in range(300):
    ask("same.example")
for i in range(300):
    ask(f"h{i}.example")
print("FLOODED")
"""


def test_a_flood_of_refusals_does_not_flood_the_event_log(repo: Path, sandbox_env: Path) -> None:
    write_user_config('[sandbox]\nnetwork = ["127.0.0.1:9"]\n')
    cli = CLI(repo)
    cli.ok("worktree", "create", "noisy")
    log = repo / ".worktrees" / "events.jsonl"
    before = log.stat().st_size
    proc = cli("worktree", "run", "noisy", "--", "python3", "-c", FLOOD, timeout=180)
    assert "403 Forbidden" in proc.stdout and "FLOODED" in proc.stdout, proc.stdout + proc.stderr
    with open(log, "rb") as fh:
        fh.seek(before)
        denied = [r for r in map(json.loads, fh.read().splitlines()) if r.get("event") == "sandbox.denied"]
    hosts = [r["host"] for r in denied]
    assert hosts[:2] == ["first.example", "same.example"] and hosts.count("same.example") == 1, hosts[:5]
    assert len(denied) <= 64, f"{len(denied)} events for one command's refusals"
    status = cli.json("worktree", "status", "noisy")
    assert "first.example:443" in status["denied_hosts"], status
