"""`daintree mcp` driven by the MCP SDK's own client over stdio: the s12 "Try it" script with the files on disk
checked after each step, bad input against the CLI's messages, role filtering, and the wiring into an agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI, mcp_http_server, trusted_config, wait_for
from tests.helpers.mcp_client import call, fails, mcp_client, task_file, tool_names

pytestmark = pytest.mark.usefixtures("tmux_socket")


def index(repo: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((repo / ".worktrees" / "index.json").read_text())
    return {e["name"]: e for e in data["worktrees"]}


async def test_s12_try_it_script(repo: Path, cli: CLI) -> None:
    async with mcp_client(repo) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        assert {"task_create", "task_list", "task_get", "task_update", "worktree_create", "worktree_list",
                "worktree_status", "worktree_run", "worktree_keep", "worktree_remove", "worktree_events",
                "session_start", "session_send", "session_status", "session_capture", "bakeoff_create",
                "bakeoff_score", "bakeoff_pick", "review_get", "checkpoint_list"} == set(tools)
        create_schema = tools["worktree_create"].input_schema
        assert create_schema["required"] == ["name"]
        assert create_schema["properties"]["task_id"]["type"] == "integer"
        assert tools["task_update"].input_schema["properties"]["status"]["enum"] == ["pending", "in_progress",
                                                                                    "completed"]

        # 1. tasks for the auth backend and the login page
        auth = await call(mcp, "task_create", subject="Implement auth backend",
                          description="JWT sessions behind /api/login")
        login = await call(mcp, "task_create", subject="Build login page")
        assert (auth["id"], login["id"], auth["status"]) == (1, 2, "pending")
        assert task_file(repo, 1)["subject"] == "Implement auth backend"
        assert task_file(repo, 2)["status"] == "pending"
        listed = await call(mcp, "task_list")
        assert [t["subject"] for t in listed] == ["Implement auth backend", "Build login page"]
        assert listed == cli.json("task", "list")  # the same JSON as the CLI's --json

        # 2. a worktree per task
        wt1 = await call(mcp, "worktree_create", name="auth-refactor", task_id=1)
        await call(mcp, "worktree_create", name="ui-login", task_id=2)
        assert wt1["branch"] == "wt/auth-refactor" and wt1["task_id"] == 1
        assert (repo / ".worktrees" / "auth-refactor" / "app.py").is_file()
        assert (repo / ".worktrees" / "ui-login").is_dir()
        entries = index(repo)
        assert entries["auth-refactor"]["status"] == "active" and entries["auth-refactor"]["task_id"] == 1
        assert entries["ui-login"]["task_id"] == 2
        assert (task_file(repo, 1)["status"], task_file(repo, 1)["worktree"]) == ("in_progress", "auth-refactor")
        assert (task_file(repo, 2)["status"], task_file(repo, 2)["worktree"]) == ("in_progress", "ui-login")

        # 3. run a command in auth-refactor
        (repo / ".worktrees" / "auth-refactor" / "notes.txt").write_text("draft\n")
        run = await call(mcp, "worktree_run", name="auth-refactor", command="git status --short")
        assert run["exit_code"] == 0
        assert "?? notes.txt" in run["stdout"]
        (repo / ".worktrees" / "auth-refactor" / "notes.txt").unlink()

        # 4. keep ui-login, list worktrees, read the events
        kept = await call(mcp, "worktree_keep", name="ui-login")
        assert kept["status"] == "kept" and index(repo)["ui-login"]["status"] == "kept"
        assert "kept_at" in index(repo)["ui-login"]
        worktrees = await call(mcp, "worktree_list")
        assert {w["name"]: w["status"] for w in worktrees} == {"auth-refactor": "active", "ui-login": "kept"}
        assert all(w["facts"]["exists"] for w in worktrees)
        assert worktrees == cli.json("worktree", "list")  # the same JSON as the CLI's --json
        assert await call(mcp, "worktree_status", name="ui-login") == cli.json("worktree", "status", "ui-login")
        events = await call(mcp, "worktree_events", limit=50)
        names = [e["event"] for e in events]
        for expected in ("task.created", "worktree.create.before", "worktree.create.after", "worktree.keep"):
            assert expected in names
        assert names.index("worktree.create.before") < names.index("worktree.create.after")
        assert len(await call(mcp, "worktree_events", limit=2)) == 2
        on_disk = [json.loads(line) for line in (repo / ".worktrees" / "events.jsonl").read_text().splitlines()]
        assert events == on_disk[-50:]

        # 5. remove auth-refactor, completing its task; list again
        removed = await call(mcp, "worktree_remove", name="auth-refactor", complete_task=True)
        assert removed["removed"] is True
        assert not (repo / ".worktrees" / "auth-refactor").exists()
        assert index(repo)["auth-refactor"]["status"] == "removed"
        assert (task_file(repo, 1)["status"], task_file(repo, 1)["worktree"]) == ("completed", "")
        assert task_file(repo, 2)["status"] == "in_progress"
        assert [w["name"] for w in await call(mcp, "worktree_list")] == ["ui-login"]
        assert (repo / ".worktrees" / "ui-login").is_dir()

        # the resources: the task board and the event log
        uris = {str(r.uri) for r in (await mcp.list_resources()).resources}
        assert uris == {"daintree://tasks", "daintree://events"}
        board = json.loads((await mcp.read_resource("daintree://tasks")).contents[0].text)  # type: ignore[union-attr]
        assert [t["status"] for t in board] == ["completed", "in_progress"]
        log = json.loads((await mcp.read_resource("daintree://events")).contents[0].text)  # type: ignore[union-attr]
        assert log[-1]["event"] in {"worktree.remove.after", "task.completed", "port.released"}


async def test_bad_input_gets_the_cli_message(repo: Path, cli: CLI) -> None:
    cli.ok("task", "create", "one")
    cases = [
        (("worktree_create", {"name": "bad name"}), ("worktree", "create", "bad name")),
        (("worktree_create", {"name": "ok", "task_id": 7}), ("worktree", "create", "ok", "--task", "7")),
        (("task_get", {"task_id": 7}), ("task", "show", "7")),
        (("task_update", {"task_id": 1, "status": "done"}), ("task", "update", "1", "--status", "done")),
        (("task_get", {"task_id": "x"}), ("task", "show", "x")),
        (("worktree_keep", {"name": "nope"}), ("worktree", "keep", "nope")),
    ]
    async with mcp_client(repo) as mcp:
        for (tool, arguments), argv in cases:
            message = await fails(mcp, tool, **arguments)
            proc = cli(*argv)
            assert proc.returncode == 2, proc.stderr
            assert message == proc.stderr.strip(), (tool, arguments)
            assert "\n" not in message
        result = await mcp.call_tool("task_update", {"task_id": 1, "status": "done"})
        assert result.structured_content == {"error": message_of(result), "exit_code": 2}
        assert "unknown argument 'colour'" in await fails(mcp, "task_create", subject="x", colour="red")
        assert "required: subject" in await fails(mcp, "task_create")
        assert "must be a string" in await fails(mcp, "worktree_status", name=3)
        assert "limit must be a whole number, zero or more" in await fails(mcp, "worktree_events", limit="5")
        # nothing was written by the rejected calls
        assert not (repo / ".worktrees" / "ok").exists()
        assert json.loads((repo / ".tasks" / "task_1.json").read_text())["status"] == "pending"


def message_of(result: Any) -> str:
    return str(result.content[0].text)


async def test_worker_sees_its_own_task_and_status_only(repo: Path, cli: CLI) -> None:
    cli.ok("task", "create", "mine")
    cli.ok("task", "create", "theirs")
    cli.ok("worktree", "create", "mine", "--task", "1")
    cli.ok("worktree", "create", "theirs", "--task", "2")
    # A worktree without a session record: its server offers the worker's tools whatever --role claims.
    async with mcp_client(repo, "--role", "lead", env={"DAINTREE_WORKTREE": "mine"}) as mcp:
        names = await tool_names(mcp)
        assert "worktree_create" not in names and "task_create" not in names and "worktree_remove" not in names
        assert {"task_get", "task_update", "worktree_status", "worktree_events"} <= names
        assert (await call(mcp, "task_get", task_id=1))["subject"] == "mine"
        assert "not this session's task" in await fails(mcp, "task_get", task_id=2)
        assert "not this session's worktree" in await fails(mcp, "worktree_status", name="theirs")
        updated = await call(mcp, "task_update", task_id=1, owner="agent-1")
        assert updated["owner"] == "agent-1" and task_file(repo, 1)["owner"] == "agent-1"
        assert "unknown tool 'worktree_create'" in await fails(mcp, "worktree_create", name="x")
        events = await call(mcp, "worktree_events")
        assert events and all((e.get("worktree") or {}).get("name") == "mine"
                              or (e.get("task") or {}).get("id") == 1 for e in events)
        board = json.loads((await mcp.read_resource("daintree://tasks")).contents[0].text)  # type: ignore[union-attr]
        assert [t["id"] for t in board] == [1]
    # Without the variable, a server started inside the worktree's directory is that worktree's worker too;
    # started in the primary it is a person's own server.
    plain = [sys.executable, "-m", "daintree_tui", "mcp"]
    async with mcp_client(repo / ".worktrees" / "mine", command=plain, env={"DAINTREE_WORKTREE": ""}) as mcp:
        assert "worktree_create" not in await tool_names(mcp)
        assert "not this session's task" in await fails(mcp, "task_get", task_id=2)
    async with mcp_client(repo, command=plain, env={"DAINTREE_WORKTREE": ""}) as mcp:
        assert "worktree_create" in await tool_names(mcp)
    # A server whose flag, variable and directory name different sessions refuses to start.
    proc = cli("mcp", "--worktree", "theirs", cwd=repo / ".worktrees" / "mine")
    assert proc.returncode == 1 and "conflicting session identity: mine, theirs" in proc.stderr


async def test_session_role_and_wiring_into_claude(repo: Path, cli: CLI, tmp_path: Path) -> None:
    """A `lead` role with `mcp = "lead"`: its claude session gets `--mcp-config` with a server that, started as
    claude would start it, offers the lead's tools; a worker role's session gets a worker's server."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_claude = bin_dir / "claude"
    fake_claude.write_text("#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$TMPDIR/argv.txt\"\nexec sleep 300\n")
    fake_claude.chmod(0o755)
    (repo / ".daintree.toml").write_text(
        '[roles.lead]\nmcp = "lead"\n[roles.dev]\nmcp = "worker"\nallow = ["commit"]\n'
        '[agents.lead]\ncommand = "claude"\nrole = "lead"\nprompt_mode = "none"\n'
        '[agents.dev]\ncommand = "claude"\nrole = "dev"\nprompt_mode = "none"\n')
    cli.ok("trust")
    cli.ok("task", "create", "plan the release")
    cli.ok("task", "create", "fix the bug")
    cli.ok("worktree", "create", "boss", "--task", "1")
    cli.ok("worktree", "create", "bug", "--task", "2")
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    cli.ok("session", "start", "boss", "--agent", "lead", env=env)
    cli.ok("session", "start", "bug", "--agent", "dev", env=env)
    try:
        servers = {}
        for name in ("boss", "bug"):
            argv_file = repo / ".worktrees" / ".tmp" / name / "argv.txt"
            argv = wait_for(lambda f=argv_file: f.exists() and f.read_text().split("\n")[:2], timeout=20)
            assert argv[0] == "--mcp-config"
            config = json.loads(Path(argv[1]).read_text())
            assert oct(Path(argv[1]).stat().st_mode & 0o777) == "0o600"
            server = config["mcpServers"]["daintree"]
            servers[name] = [server["command"], *server["args"]]
            record = json.loads((repo / ".worktrees" / ".sessions" / f"{name}.json").read_text())
            assert record["role"] == {"boss": "lead", "bug": "dev"}[name]
        worktree_dir = repo / ".worktrees"
        async with mcp_client(worktree_dir / "boss", command=servers["boss"]) as mcp:
            assert "worktree_create" in await tool_names(mcp)
            status = await call(mcp, "session_status", name="bug")
            assert status["agent"] == "dev"
        async with mcp_client(worktree_dir / "bug", command=[*servers["bug"], "--role", "lead"]) as mcp:
            names = await tool_names(mcp)
            assert "worktree_create" not in names and "session_start" not in names
            assert (await call(mcp, "session_status"))["name"] == "bug"
    finally:
        cli("session", "stop", "boss")
        cli("session", "stop", "bug")


def test_wiring_of_each_agent(tmp_path: Path) -> None:
    from daintree_tui.sessions.presets import Preset, mcp_agent_kind, mcp_snippet, mcp_wiring, unwire_mcp

    server = ["daintree", "mcp", "--worktree", "a b"]
    codex = mcp_wiring("codex", server, tmp_path, {})
    assert codex.args == ("-c", 'mcp_servers.daintree.command="daintree"',
                          "-c", 'mcp_servers.daintree.args=["mcp", "--worktree", "a b"]')
    existing = tmp_path / "defaults.json"
    existing.write_text(json.dumps({"ui": {"theme": "x"}}))
    gemini = mcp_wiring("gemini", server, tmp_path, {"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(existing)})
    (path, text), = gemini.files.items()
    assert gemini.env == {"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(path)} and not gemini.args
    assert json.loads(text) == {"ui": {"theme": "x"}, "mcpServers": {"daintree": {"command": "daintree",
                                                                                  "args": server[1:]}}}
    opencode = mcp_wiring("opencode", server, tmp_path, {"OPENCODE_CONFIG_CONTENT": '{"theme": "y"}'})
    assert json.loads(opencode.env["OPENCODE_CONFIG_CONTENT"]) == {
        "theme": "y", "mcp": {"daintree": {"type": "local", "command": server, "enabled": True}}}
    # A worker started from a wired lead session does not inherit the lead's wiring.
    inherited = {**gemini.env, **opencode.env}
    unwire_mcp(inherited)
    assert inherited == {"OPENCODE_CONFIG_CONTENT": json.dumps({"theme": "y", "mcp": {}})}
    assert mcp_agent_kind(Preset("lead", "/opt/bin/claude --model opus")) == "claude"
    assert mcp_agent_kind(Preset("aider", "aider")) is None
    assert "[mcp_servers.daintree]" in mcp_snippet("codex", ["daintree", "mcp"])


def test_mcp_config_command_and_lazy_sdk(repo: Path, cli: CLI) -> None:
    out = cli.ok("mcp", "config", "--agent", "claude").stdout
    program = str(Path(sys.executable).parent / "daintree")  # absolute: an agent's PATH may have no daintree
    assert json.loads(out) == {"mcpServers": {"daintree": {"command": program, "args": ["mcp"]}}}
    assert cli("mcp", "config", "--agent", "aider").returncode == 2
    assert cli("mcp", "--http", "0").returncode == 2
    import socket

    with socket.socket() as busy:  # a port that is taken: one line, exit 2 (its URL, a traceback line, exit 3)
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = cli("mcp", "--http", str(busy.getsockname()[1]))
    assert taken.returncode == 2 and len(taken.stderr.strip().splitlines()) == 1, taken.stderr
    assert "is taken" in taken.stderr and "Traceback" not in taken.stderr
    code = ("import sys, daintree_tui.cli as c; c.main(['task', 'list', '--repo', sys.argv[1]]);"
            "print('mcp' if 'mcp' in sys.modules else 'clean')")
    proc = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True, text=True, check=True)
    assert proc.stdout.strip().endswith("clean")


async def test_streamable_http_on_loopback(repo: Path, cli: CLI) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from daintree_tui.mcp.server import http_token

    cli.ok("task", "create", "over http")
    with mcp_http_server(repo) as port:
        # Any local process reaches a loopback port: without the token (0600, hidden in sandboxes) it gets 401.
        with pytest.raises(Exception):  # noqa: B017 (the SDK's wrapping of an HTTP error varies)
            async with Client(f"http://127.0.0.1:{port}/mcp") as stranger:
                await stranger.call_tool("task_create", {"subject": "planted"})
        assert [t["subject"] for t in cli.json("task", "list")] == ["over http"]
        token, path = http_token()
        assert path.stat().st_mode & 0o777 == 0o600
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
            result = await client.call_tool("task_list", {})
            assert not result.is_error
            assert [t["subject"] for t in json.loads(result.content[0].text)] == ["over http"]  # type: ignore[union-attr]


def test_role_mcp_key_is_checked(repo: Path, cli: CLI) -> None:
    (repo / ".daintree.toml").write_text('[roles.boss]\nmcp = "king"\n')
    proc = cli("policy", "show")
    assert proc.returncode == 2 and "roles.boss.mcp" in proc.stderr
    (repo / ".daintree.toml").write_text('[roles.boss]\nmcp = "lead"\n[roles.lead]\nmcp = "worker"\n[roles.dev]\n')
    from daintree_tui.core.project import Project
    from daintree_tui.mcp.access import level_of

    cfg = Project.discover(repo).config
    assert [level_of(cfg, r) for r in ("boss", "lead", "dev", None)] == ["lead", "worker", "worker", "worker"]
    assert cli("mcp", "--role", "nobody").stderr.strip() == (
        "daintree: unknown role 'nobody' (known: boss, dev, lead, worker)")


def test_mcp_package_layering() -> None:
    """The MCP package sits at the CLI's level: it imports core, sessions and services (and the SDK); only the CLI
    imports it. Function-level imports count."""
    import ast

    root = Path(__file__).resolve().parent.parent / "daintree_tui"
    for path in root.rglob("*.py"):
        package = path.relative_to(root).parts[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            ours = [n for n in names if n.startswith("daintree_tui.")]
            if package not in ("mcp", "cli"):
                assert not any(n.startswith("daintree_tui.mcp") for n in ours), f"{path} imports the MCP package"
            if package == "mcp":
                layers = {n.split(".")[1] for n in ours if n.count(".") >= 1}
                assert layers <= {"core", "sessions", "services", "mcp", "__version__"}, f"{path}: {layers}"


async def test_bakeoff_tools_return_the_cli_json(repo: Path, cli: CLI) -> None:
    """bakeoff_create and bakeoff_score answer with JSON, like `daintree bakeoff ... --json`."""
    async with mcp_client(repo) as session:
        task = await call(session, "task_create", subject="Speed up parser", description="")
        created = await call(session, "bakeoff_create", task_id=task["id"], agents=["demo", "demo"],
                             score="echo 1")
        assert created["task_id"] == task["id"]
        assert len(created["candidates"]) == 2
        scores = await call(session, "bakeoff_score", bakeoff_id=created["id"])
        assert len(scores) == 2
    assert cli.json("bakeoff", "show", created["id"])["id"] == created["id"]


async def test_bakeoff_pick_merges_the_winner_and_answers_to_the_sessions_role(repo: Path, cli: CLI) -> None:
    """`bakeoff_pick` is `bakeoff pick --json`, refused as that is: a session whose role does not allow merge is
    refused, one whose role needs a person's approval gets the command for that person (nothing queued)."""
    agents = ("[agents.a]\ncommand = \"sh -c 'echo 3 > answer.txt; exec cat'\"\n"
              "[agents.b]\ncommand = \"sh -c 'echo 7 > answer.txt; exec cat'\"\n"
              "[agents.boss]\ncommand = \"sh -c 'exec cat'\"\nrole = \"boss\"\nprompt_mode = \"none\"\n")
    trusted_config(repo, agents + '[roles.boss]\nmcp = "lead"\nallow = ["commit"]\n')
    cli.ok("task", "create", "Find the answer")
    record = cli.json("bakeoff", "create", "1", "--agents", "a,b", "--score", "echo SCORE: $(cat answer.txt)")
    a, b = record["candidates"]
    for name in (a, b):
        wait_for(lambda n=name: (repo / ".worktrees" / n / "answer.txt").exists())
        cli.ok("worktree", "commit", name, "-m", f"answer from {name}", "--all")
    assert cli.json("bakeoff", "score", record["id"])[0]["name"] == b
    cli.ok("worktree", "create", "boss", "--agent", "boss")
    try:
        inside = {"DAINTREE_WORKTREE": "boss"}
        async with mcp_client(repo, env=inside) as mcp:
            assert "bakeoff_pick" in await tool_names(mcp)  # a lead's tool
            assert "role 'boss' does not allow merge" in await fails(mcp, "bakeoff_pick", bakeoff_id=record["id"],
                                                                      best=True)
        trusted_config(repo, agents + '[roles.boss]\nmcp = "lead"\nallow = ["commit", "merge", "remove"]\n'
                       'approval = "human"\n')
        async with mcp_client(repo, env=inside) as mcp:
            message = await fails(mcp, "bakeoff_pick", bakeoff_id=record["id"], name=b, strategy="squash")
        assert "needs a person's approval to merge" in message, message
        assert f"daintree bakeoff pick {record['id']} {b} --strategy squash" in message, message
        assert cli.json("approvals") == []  # no request a person could approve and never run
        # The CLI in that session refuses the same way.
        proc = cli("bakeoff", "pick", record["id"], b, env=inside)
        assert proc.returncode == 1 and "needs a person's approval to merge" in proc.stderr, proc.stderr
        assert not (repo / "answer.txt").exists()
    finally:
        cli("session", "stop", "boss")
    async with mcp_client(repo) as mcp:  # a person's own server
        assert "name the winner" in await fails(mcp, "bakeoff_pick", bakeoff_id=record["id"])
        assert "not a candidate" in await fails(mcp, "bakeoff_pick", bakeoff_id=record["id"], name="stranger")
        assert "invalid strategy" in await fails(mcp, "bakeoff_pick", bakeoff_id=record["id"], name=b,
                                                 strategy="octopus")
        picked = await call(mcp, "bakeoff_pick", bakeoff_id=record["id"], best=True, strategy="squash")
    assert picked["winner"] == b and picked["removed"] == [a] and picked["kept"] == []
    assert (repo / "answer.txt").read_text() == "7\n"
    assert cli.json("task", "show", "1")["status"] == "completed"
    assert cli.json("bakeoff", "show", record["id"])["picked"] == b


async def test_stdio_serves_without_the_sdk(repo: Path, cli: CLI, tmp_path: Path) -> None:
    """The stdio server imports neither the SDK nor pydantic (their import was 90% of an agent's wait for its
    tools); the SDK's own clients still talk to it: the handshake client, and the one that first probes the
    stateless revision (`server/discover`, answered "method not found": it falls back to the handshake)."""
    from mcp import Client, StdioServerParameters

    report = tmp_path / "modules.txt"
    code = ("import sys, atexit, daintree_tui.cli as c\n"
            "atexit.register(lambda: open(sys.argv[1], 'w').write(' '.join(sorted(sys.modules))))\n"
            "c.main(['mcp', '--repo', sys.argv[2]])\n")
    command = [sys.executable, "-c", code, str(report), str(repo)]
    cli.ok("task", "create", "over stdio")
    async with mcp_client(repo, command=command) as session:
        assert "task_list" in await tool_names(session)
        assert [t["subject"] for t in await call(session, "task_list")] == ["over stdio"]
        await session.send_ping()
    loaded = set(report.read_text().split())
    assert not {"mcp", "pydantic", "anyio"} & loaded
    params = StdioServerParameters(command=sys.executable, args=["-m", "daintree_tui", "mcp", "--repo", str(repo)],
                                   cwd=str(repo))
    async with Client(params) as client:  # mode "auto": discover first
        result = await client.call_tool("task_list", {})
        assert not result.is_error
        assert [t["subject"] for t in json.loads(result.content[0].text)] == ["over stdio"]  # type: ignore[union-attr]
