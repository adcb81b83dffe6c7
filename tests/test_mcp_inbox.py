"""`daintree mcp` inside a session's sandbox: a real MCP client session whose server runs under the session's own
bubblewrap mount table (state read-only), with `daintree session watch` outside applying its calls from the
session's inbox. What a call may do is decided outside, by the inbox it arrived in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.sandbox import BwrapSandbox
from tests.conftest import CLI, events, wait_for
from tests.helpers.mcp_client import call, fails, mcp_client, task_file, tool_names

_OK, _WHY = BwrapSandbox().available()
pytestmark = pytest.mark.skipif(not _OK, reason=f"bubblewrap cannot run here: {_WHY}")


@pytest.fixture
def worker_session(repo: Path, cli: CLI, tmux_socket: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Tasks 1 (`mine`) and 2 (`theirs`), a worktree for each, and a sandboxed session of role `worker` in
    `mine`. HOME holds the user config, so the server inside reads the same config as the outside."""
    config_home = Path(os.environ["XDG_CONFIG_HOME"])
    monkeypatch.setenv("HOME", str(config_home.parent))
    (config_home / "daintree").mkdir(parents=True, exist_ok=True)
    (config_home / "daintree" / "config.toml").write_text('default_role = "worker"\n[roles.worker]\nmcp = "worker"\n')
    cli.ok("task", "create", "mine")
    cli.ok("task", "create", "theirs")
    cli.ok("worktree", "create", "mine", "--task", "1")
    cli.ok("worktree", "create", "theirs", "--task", "2")
    started = cli.json("session", "start", "mine", "--agent", "shell")
    assert started["sandbox"]["active"] is True, started["sandbox"]
    record = json.loads((repo / ".worktrees" / ".sessions" / "mine.json").read_text())
    assert record["role"] == "worker"
    return repo / ".worktrees" / ".inbox" / "mine"


@pytest.fixture
def session_watch(repo: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`daintree session watch` outside: the acting observer that applies the inbox requests."""
    with open(tmp_path / "watch.log", "wb") as log:
        watcher = subprocess.Popen([sys.executable, "-m", "daintree_tui", "session", "watch", "--repo", str(repo),
                                    "--interval", "0.2"], stdout=subprocess.DEVNULL, stderr=log)
    try:
        yield watcher
    finally:
        watcher.terminate()
        watcher.wait(timeout=20)


def sandboxed_server(repo: Path, name: str, *flags: str) -> tuple[list[str], dict[str, str]]:
    """`daintree mcp` as the agent of `name`'s session would start it: under that session's own sandbox."""
    from daintree_tui.core.index import Index, find
    from daintree_tui.core.project import Project
    from daintree_tui.sessions.presets import resolve_preset
    from daintree_tui.sessions.sandbox import session_sandbox

    project = Project.discover(repo)
    entry = find(Index(project).load(), name)
    assert entry is not None
    env = dict(os.environ)
    sandbox = session_sandbox(project, entry, resolve_preset(project.config, "shell"))
    argv = sandbox.wrap([sys.executable, "-m", "daintree_tui", "mcp", "--repo", str(repo), *flags], env)
    assert "bwrap" in [Path(arg).name for arg in argv[:3]], argv  # a pane's: under env, which ignores Ctrl-C
    return argv, env


def inbox_events(repo: Path) -> list[tuple[str, str, str]]:
    return [(e["event"], e["worktree"]["name"], e["kind"]) for e in events(repo)
            if e["event"].startswith("inbox.")]


async def test_worker_calls_go_through_its_inbox(repo: Path, cli: CLI, worker_session: Path,
                                                 session_watch: subprocess.Popen[bytes]) -> None:
    argv, env = sandboxed_server(repo, "mine", "--role", "lead")  # a role flag the record overrules
    async with mcp_client(repo / ".worktrees" / "mine", command=argv, env=env) as mcp:
        names = await tool_names(mcp)
        assert "worktree_create" not in names and "task_create" not in names
        assert {"task_get", "task_update", "worktree_status", "session_status"} <= names

        # A read of files runs inside; it writes nothing and asks nothing of the outside.
        assert (await call(mcp, "task_get", task_id=1))["subject"] == "mine"
        assert inbox_events(repo) == []

        # Its own task: applied outside, through the inbox, with the CLI's JSON.
        updated = await call(mcp, "task_update", task_id=1, owner="agent-1")
        assert updated["owner"] == "agent-1" and task_file(repo, 1)["owner"] == "agent-1"
        assert inbox_events(repo) == [("inbox.applied", "mine", "mcp")]
        assert updated == cli.json("task", "show", "1")

        # Session facts need tmux, which only the outside reaches.
        assert (await call(mcp, "session_status"))["name"] == "mine"

        # Another worktree, another task, a lead's tool: refused outside, nothing written.
        assert "not this session's worktree" in await fails(mcp, "worktree_status", name="theirs")
        assert "not this session's task" in await fails(mcp, "task_update", task_id=2, owner="agent-1")
        assert task_file(repo, 2).get("owner", "") == ""
        assert "unknown tool 'worktree_create' for role worker" in await fails(mcp, "worktree_create", name="x")
        assert not (repo / ".worktrees" / "x").exists()

        # Bad input: the CLI's message and exit code, as a tool error.
        result = await mcp.call_tool("task_update", {"task_id": 1, "status": "done"})
        expected = cli("task", "update", "1", "--status", "done")
        assert result.is_error and result.content[0].text == expected.stderr.strip()  # type: ignore[union-attr]
        assert result.structured_content == {"error": expected.stderr.strip(), "exit_code": 2}
    assert [e for e in inbox_events(repo) if e[0] == "inbox.refused"] == [("inbox.refused", "mine", "mcp")] * 4
    assert not list(worker_session.glob("req-*"))


def test_a_forged_role_or_sender_in_the_request_is_ignored(repo: Path, worker_session: Path,
                                                           session_watch: subprocess.Popen[bytes]) -> None:
    """Identity is the inbox a request arrived in: whatever role, worktree or access it claims."""
    lead = {"level": "lead", "role": "lead", "worktree": "theirs", "task_id": 2}
    forged: dict[str, dict[str, Any]] = {
        "a" * 32: {"tool": "task_update", "arguments": {"task_id": 2, "owner": "forger"}, **lead, "access": lead},
        "b" * 32: {"tool": "worktree_create", "arguments": {"name": "forged"}, "role": "lead", "access": lead},
        "c" * 32: {"tool": "task_update", "arguments": {"task_id": 1, "owner": "still-me", "role": "lead"}},
    }
    for request_id, payload in forged.items():
        body = {"id": request_id, "kind": "mcp", "worktree": "theirs", "role": "lead", "payload": payload}
        (worker_session / f"req-{request_id}.json").write_text(json.dumps(body))

    def replies() -> dict[str, dict[str, Any]] | None:
        found = {r: worker_session / f"reply-{r}.json" for r in forged}
        if not all(p.exists() for p in found.values()):
            return None
        return {r: json.loads(p.read_text()) for r, p in found.items()}

    answered = wait_for(replies, timeout=30)
    assert not answered["a" * 32]["ok"] and "not this session's task (its task is 1)" in answered["a" * 32]["error"]
    assert not answered["b" * 32]["ok"] and "for role worker" in answered["b" * 32]["error"]
    assert not answered["c" * 32]["ok"] and "unknown argument 'role'" in answered["c" * 32]["error"]
    assert answered["c" * 32]["exit_code"] == 2
    assert task_file(repo, 2).get("owner", "") == "" and task_file(repo, 1).get("owner", "") == ""
    assert not (repo / ".worktrees" / "forged").exists()
    assert {e["worktree"]["name"] for e in events(repo) if e["event"] == "inbox.refused"} == {"mine"}


async def test_without_anyone_outside_a_write_times_out_with_a_clear_error(repo: Path,
                                                                           worker_session: Path) -> None:
    argv, env = sandboxed_server(repo, "mine", "--reply-wait", "1")
    async with mcp_client(repo / ".worktrees" / "mine", command=argv, env=env) as mcp:
        assert (await call(mcp, "task_get", task_id=1))["subject"] == "mine"  # reads still work
        message = await fails(mcp, "task_update", task_id=1, owner="agent-1")
    assert "dashboard or `daintree session watch`" in message and "withdrawn" in message, message
    assert not list(worker_session.glob("req-*"))  # withdrawn: nobody applies it later
    assert task_file(repo, 1).get("owner", "") == ""
    assert CLI(repo)("mcp", "--reply-wait", "0").returncode == 2


async def test_a_sandboxed_lead_creates_tasks_and_worktrees_through_its_inbox(
        repo: Path, cli: CLI, tmux_socket: str, monkeypatch: pytest.MonkeyPatch,
        session_watch: subprocess.Popen[bytes]) -> None:
    config_home = Path(os.environ["XDG_CONFIG_HOME"])
    monkeypatch.setenv("HOME", str(config_home.parent))
    (config_home / "daintree").mkdir(parents=True, exist_ok=True)
    (config_home / "daintree" / "config.toml").write_text('default_role = "lead"\n[roles.lead]\nmcp = "lead"\n')
    cli.ok("worktree", "create", "boss")
    assert cli.json("session", "start", "boss", "--agent", "shell")["sandbox"]["active"] is True
    argv, env = sandboxed_server(repo, "boss")
    async with mcp_client(repo / ".worktrees" / "boss", command=argv, env=env) as mcp:
        assert "worktree_create" in await tool_names(mcp)
        task = await call(mcp, "task_create", subject="Build login page")
        created = await call(mcp, "worktree_create", name="ui-login", task_id=task["id"])
        assert created["branch"] == "wt/ui-login"
        assert (repo / ".worktrees" / "ui-login" / "app.py").is_file()
        assert task_file(repo, task["id"])["worktree"] == "ui-login"
        assert [t["subject"] for t in await call(mcp, "task_list")] == ["Build login page"]
    assert inbox_events(repo) == [("inbox.applied", "boss", "mcp")] * 2


async def test_a_sandboxed_lead_cannot_force_away_another_agents_uncommitted_work(
        repo: Path, cli: CLI, tmux_socket: str, monkeypatch: pytest.MonkeyPatch,
        session_watch: subprocess.Popen[bytes]) -> None:
    """`force` came through the inbox to `worktree_remove` and deleted another worktree's uncommitted files, where
    the session's own `daintree worktree remove --force` is refused from inside a sandbox."""
    config_home = Path(os.environ["XDG_CONFIG_HOME"])
    monkeypatch.setenv("HOME", str(config_home.parent))
    (config_home / "daintree").mkdir(parents=True, exist_ok=True)
    (config_home / "daintree" / "config.toml").write_text(
        'default_role = "lead"\n[roles.lead]\nmcp = "lead"\nallow = ["remove"]\napproval = "none"\n')
    cli.ok("worktree", "create", "boss")
    cli.ok("worktree", "create", "victim")
    (repo / ".worktrees" / "victim" / "notes.txt").write_text("an afternoon of work\n")
    assert cli.json("session", "start", "boss", "--agent", "shell")["sandbox"]["active"] is True
    argv, env = sandboxed_server(repo, "boss")
    async with mcp_client(repo / ".worktrees" / "boss", command=argv, env=env) as mcp:
        message = await fails(mcp, "worktree_remove", name="victim", force=True)
        assert "force is not available from inside a sandbox" in message, message
        assert "uncommitted" in await fails(mcp, "worktree_remove", name="victim")  # without force: refused as ever
    assert (repo / ".worktrees" / "victim" / "notes.txt").read_text() == "an afternoon of work\n"
