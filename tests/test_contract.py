"""DESIGN.md read word by word against the real CLI and MCP server: each test here is a promise of the contract
that the product once broke (names, flags, `--json` shapes, files written, events)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, Lines, git, trusted_config, wait_for


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


def test_session_log_with_json_is_one_document(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """"With `--json`, stdout is one JSON document and nothing else": `session log` printed the raw log bytes;
    `-n N` kept one line too many when the log's last line was unfinished (a prompt)."""
    trusted_config(repo, "[agents.lines]\ncommand = \"sh -c 'echo first; echo second; printf prompt; sleep 60'\"\n")
    cli.ok("worktree", "create", "talk", "--agent", "lines")
    log = repo / ".worktrees" / ".logs" / "talk.log"
    wait_for(lambda: log.exists() and b"prompt" in log.read_bytes())
    doc = cli.json("session", "log", "talk")
    assert doc["name"] == "talk" and doc["path"] == str(log)
    assert "first" in doc["text"] and doc["text"].endswith("prompt")
    assert cli.json("session", "log", "talk", "-n", "1")["text"] == "prompt"
    assert cli.ok("session", "log", "talk", "-n", "2").stdout == "second\r\nprompt"
    bad = cli("session", "log", "talk", "-n", "-1")
    assert bad.returncode == 2 and bad.stdout == ""


def test_session_log_of_a_name_that_is_no_worktree_says_so(cli: CLI, repo: Path) -> None:
    """A typo in `session log` gets the error every command gives ("no worktree named"), followed or not; it said
    "no log", and `--follow` waited for ever on a worktree that will never be."""
    for follow in ((), ("--follow",)):
        bad = cli("session", "log", "nonexist", *follow)
        assert bad.returncode == 2 and "no worktree named 'nonexist'" in bad.stderr, bad.stderr
    cli.ok("worktree", "create", "quiet")
    bad = cli("session", "log", "quiet")
    assert bad.returncode == 2 and "no log for worktree 'quiet'" in bad.stderr


def test_following_the_log_of_no_running_session_says_so_on_a_terminal(cli: CLI, repo: Path) -> None:
    """`session log --follow` of a session that ended waits for lines that will not come, as `tail -f` does: on a
    terminal it says so first (it looked hung to a new user)."""
    import select
    import signal

    cli.ok("worktree", "create", "ended")
    log = repo / ".worktrees" / ".logs" / "ended.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"last words\n")
    leader, follower = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", "session", "log", "ended", "--follow"], cwd=repo,
                            stdout=subprocess.DEVNULL, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    said = b""
    try:
        def noted() -> bool:
            nonlocal said
            if select.select([leader], [], [], 0.05)[0]:
                said += os.read(leader, 4096)
            return b"following its log until Ctrl-C" in said

        wait_for(noted, timeout=30, interval=0.01)
        assert b"no session running for ended" in said
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
        os.close(leader)


def test_create_after_event_shows_the_task_bound(cli: CLI, repo: Path) -> None:
    """`create` binds the task (pending -> in_progress) before `create.after`; the event showed it still pending."""
    cli.ok("task", "create", "Bind me")
    cli.ok("worktree", "create", "bound", "--task", "1")
    after = [e for e in events(repo) if e["event"] == "worktree.create.after"]
    assert after[-1]["task"] == {"id": 1, "subject": "Bind me", "status": "in_progress"}


@pytest.mark.tmux  # `session stop` is among the commands
def test_every_state_changing_command_first_recovers_a_torn_index(cli: CLI, repo: Path) -> None:
    """"every state-changing CLI command first recovers a torn index from its `.bak`" (create, keep and remove
    did; `task create`, `session stop`, `worktree run`... left it torn); a read only reports it."""
    cli.ok("worktree", "create", "kept-safe")
    index = repo / ".worktrees" / "index.json"
    torn = index.read_text()[:20]
    for command in (["worktree", "list"], ["worktree", "status", "kept-safe"], ["task", "list"]):
        index.write_text(torn)
        cli.ok(*command)
        assert index.read_text() == torn  # reads report, and leave the repair to doctor --fix
    for command in (["task", "create", "After the crash"], ["worktree", "run", "kept-safe", "--", "true"],
                    ["session", "stop", "kept-safe"]):
        index.write_text(torn)
        cli.ok(*command)
        assert [e["name"] for e in json.loads(index.read_text())["worktrees"]] == ["kept-safe"], command


async def test_mcp_worktree_create_returns_what_the_cli_prints(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """The MCP tools return "the same JSON data the CLI prints with --json": `worktree_create` left out what the
    create copied and linked (`copied`, `linked`), which `worktree create --json` prints."""
    from tests.helpers.mcp_client import call, mcp_client

    (repo / ".gitignore").write_text(".env\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore .env")
    (repo / ".env").write_text("SECRET=1\n")
    by_cli = cli.json("worktree", "create", "by-cli")
    async with mcp_client(repo) as mcp:
        by_mcp = await call(mcp, "worktree_create", name="by-mcp")
    assert set(by_mcp) == set(by_cli)
    assert by_mcp["copied"] == by_cli["copied"] == [".env"] and by_mcp["linked"] == by_cli["linked"] == []


def test_approve_with_json_prints_one_document(cli: CLI, repo: Path) -> None:
    """`approve ID --json` printed "approved request 1: running ..." and then the command's JSON on stdout (two
    documents' worth); `reject x` called the request id a task id."""
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('default_role = "careful"\n[roles.careful]\nallow = ["commit", "merge", "remove"]\n'
                      'approval = "human"\n')
    cli.ok("worktree", "create", "asks")
    inside = repo / ".worktrees" / "asks"
    queued = cli("worktree", "remove", "asks", "--json", cwd=inside, env={"DAINTREE_WORKTREE": "asks"})
    request = json.loads(queued.stdout)["request"]
    approved = cli("approve", str(request), "--json")
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["removed"] is True
    assert f"approved request {request}" in approved.stderr
    bad = cli("reject", "x")
    assert bad.returncode == 2 and "invalid request id 'x'" in bad.stderr


def test_session_send_takes_several_files_after_one_flag(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """`daintree session send NAME --file PATH...`: several paths after one `--file` were an argparse error (only
    `--file A --file B` worked; both do now)."""
    trusted_config(repo, "[agents.cat]\ncommand = \"cat\"\n")
    cli.ok("worktree", "create", "ctx", "--agent", "cat")
    inside = repo / ".worktrees" / "ctx"
    (inside / "one.txt").write_text("first file\n")
    (inside / "two.txt").write_text("second file\n")
    sent = cli("session", "send", "ctx", "--file", "one.txt", "two.txt", "--json", cwd=inside)
    assert sent.returncode == 0, sent.stderr
    log = repo / ".worktrees" / ".logs" / "ctx.log"
    wait_for(lambda: b"first file" in log.read_bytes() and b"second file" in log.read_bytes())
    repeated = cli("session", "send", "ctx", "--file", "one.txt", "--file", "two.txt", "--json", cwd=inside)
    assert json.loads(repeated.stdout)["sent"] == json.loads(sent.stdout)["sent"]


def test_run_says_not_executable_as_a_shell_would(cli: CLI, repo: Path) -> None:
    """`worktree run` returns the exit code of CMD, with a shell's codes when it cannot start: 127 not found
    (it was), and 126 for a file or folder that cannot be executed (it was the sandbox's own exit 1)."""
    cli.ok("worktree", "create", "runs")
    inside = repo / ".worktrees" / "runs"
    (inside / "script.sh").write_text("#!/bin/sh\necho ran\n")
    (inside / "folder").mkdir()
    for program in ("./script.sh", "./folder"):
        proc = cli("worktree", "run", "runs", "--", program)
        assert (proc.returncode, proc.stderr) == (126, f"permission denied: {program}\n")
    assert cli("worktree", "run", "runs", "--", "./missing.sh").returncode == 127
    (inside / "script.sh").chmod(0o755)
    ran = cli("worktree", "run", "runs", "--", "./script.sh")
    assert (ran.returncode, ran.stdout) == (0, "ran\n")


def test_doctor_reports_what_doctor_fix_then_fixes(cli: CLI, repo: Path) -> None:
    """`doctor` without `--fix` "only reports" what `--fix` would fix. With the index lost, it predicted that
    the bound task would be unbound and its worktree's temp dir deleted, while `--fix` adopts the worktree and
    keeps both: the report did not see the adoption it had just reported."""
    cli.ok("task", "create", "Survive a lost index")
    cli.ok("worktree", "create", "orphaned", "--task", "1")
    for name in ("index.json", "index.json.bak"):
        (repo / ".worktrees" / name).unlink()
    report = cli("doctor", "--json")
    assert report.returncode == 1
    predicted = json.loads(report.stdout)["findings"]
    assert cli.json("doctor", "--fix")["findings"] == predicted
    assert cli.json("doctor")["findings"] == []
    assert cli.json("task", "show", "1")["worktree"] == "orphaned"
    assert (repo / ".worktrees" / ".tmp" / "orphaned").is_dir()


def test_an_untrusted_agent_is_refused_before_create_makes_anything(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """`worktree create NAME --agent P` and `bakeoff create` with an agent whose command the untrusted repo config
    sets: refused (exit 1, naming `daintree trust`) as the session start was, but after the worktrees were made,
    so a retry found "already exists" and a half-made bake-off stayed listed."""
    (repo / ".daintree.toml").write_text('[agents.repo-agent]\ncommand = "sh -c \'sleep 60\'"\n')
    cli.ok("task", "create", "Race")
    for command in (["worktree", "create", "half", "--agent", "repo-agent"],
                    ["bakeoff", "create", "1", "--agents", "shell,repo-agent"]):
        proc = cli(*command)
        assert proc.returncode == 1 and "daintree trust" in proc.stderr, proc.stderr
    assert cli.json("worktree", "list", "--all") == [] and cli.json("bakeoff", "list") == []
    assert git(repo, "branch", "--list", "wt/*") == ""
    assert not (repo / ".worktrees" / "events.jsonl").read_text().count("worktree.create")


def test_create_logs_its_steps_in_the_order_it_takes_them(cli: CLI, repo: Path) -> None:
    """DESIGN 3: create.before -> add -> copy included files -> link dependencies -> assign ports -> write index ->
    bind task -> create.after. The log said the task was bound (task.updated) before the files were copied and
    the ports assigned, which were logged last."""
    (repo / ".gitignore").write_text(".env\nnode_modules/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore")
    (repo / ".env").write_text("A=1\n")
    (repo / "node_modules").mkdir()
    cli.ok("task", "create", "In order")
    cli.ok("worktree", "create", "ordered", "--task", "1")
    kinds = [e["event"] for e in events(repo) if e["event"] != "task.created"]
    assert kinds == ["worktree.create.before", "deps.linked", "port.assigned", "task.updated",
                     "worktree.create.after"]
    assigned = next(e for e in events(repo) if e["event"] == "port.assigned")
    assert assigned["task"] == {"id": 1, "subject": "In order", "status": "pending"}


def test_an_edited_trusted_config_says_it_changed_and_trust_show_shows_the_change(cli: CLI, repo: Path) -> None:
    """Tried for real: a `.daintree.toml` trusted, then edited, was only "not trusted", as if never trusted, and
    nothing showed what had changed. The user's data dir keeps a copy of what was trusted, beside the record."""
    import stat

    from daintree_tui.core.trust import trust_file

    config = repo / ".daintree.toml"
    config.write_text('[hooks]\npost_create = ["echo first"]\n')
    never = cli("worktree", "create", "before")
    assert "is not trusted" in never.stderr and "changed since" not in never.stderr, never.stderr
    cli.ok("trust")
    copies = list((trust_file().parent / "trusted").iterdir())
    assert [c.read_text() for c in copies] == [config.read_text()]
    assert stat.S_IMODE(copies[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(copies[0].parent.stat().st_mode) == 0o700
    config.write_text('[hooks]\npost_create = ["echo first", "echo second"]\n')
    created = cli("worktree", "create", "after")
    assert created.returncode == 0
    assert "skipped 'echo second': .daintree.toml changed since you trusted it" in created.stderr, created.stderr
    assert "daintree trust --show" in created.stderr
    shown = cli.ok("trust", "--show").stdout
    assert f"{config}: changed since you trusted it" in shown, shown
    assert '-post_create = ["echo first"]' in shown and '+post_create = ["echo first", "echo second"]' in shown
    status = cli.json("trust", "--show")
    assert status["trusted"] is False and status["changed"] is True
    assert '+post_create = ["echo first", "echo second"]' in status["diff"]
    cli.ok("trust")  # reviewed, trusted again: trusted as it is now
    again = cli.json("trust", "--show")
    assert again["trusted"] is True and again["changed"] is False and again["diff"] is None
    gate = '[hooks]\npre_merge = ["true"]\n'
    config.write_text(gate)
    cli.ok("worktree", "create", "gated")
    (repo / ".worktrees" / "gated" / "work.txt").write_text("work\n")
    cli.ok("worktree", "commit", "gated", "-m", "work", "--all")
    refused = cli("worktree", "merge", "gated")
    assert refused.returncode == 1 and "changed since you trusted it" in refused.stderr, refused.stderr


def test_trust_is_refused_from_inside_a_session(cli: CLI, repo: Path) -> None:
    """DESIGN 2a: what is trusted is "the user's own command line outside a session". An unsandboxed agent could
    run `daintree trust` itself and let the repository's commands run (approve and --no-verify were refused
    there already); `trust --show` still works."""
    (repo / ".daintree.toml").write_text('[hooks]\npost_create = ["true"]\n')
    cli.ok("worktree", "create", "agent-side")
    inside = repo / ".worktrees" / "agent-side"
    for cwd, env in ((inside, {}), (repo, {"DAINTREE_WORKTREE": "agent-side"})):
        proc = cli("trust", cwd=cwd, env=env)
        assert proc.returncode == 1 and "refused from inside a session" in proc.stderr
        assert cli.json("trust", "--show", cwd=cwd)["trusted"] is False
    cli.ok("trust")
    assert cli.json("trust", "--show")["trusted"] is True


def test_trust_given_in_many_repositories_at_once_holds_for_each(tmp_path: Path) -> None:
    """A new user trusted six repositories from six shells at once: each `daintree trust` said done, and four were
    untrusted after (each rewrote the whole record from what it had read), so their `sandbox = "off"` was
    ignored. One lock now spans each read-modify-write of the record."""
    from tests.conftest import make_repo

    repos = [make_repo(tmp_path / f"r{i}") for i in range(8)]
    for index, repo in enumerate(repos):
        (repo / ".daintree.toml").write_text(f'[hooks]\npost_create = ["echo {index}"]\n')
    trusting = [subprocess.Popen([sys.executable, "-m", "daintree_tui", "trust", "--repo", str(repo)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for repo in repos]
    for proc in trusting:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "trusted" in out, err
    assert [CLI(repo).json("trust", "--show")["trusted"] for repo in repos] == [True] * len(repos)


def test_queue_refuses_an_untrusted_agent_before_making_its_worktree(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """`queue run` said "task N: ... not trusted" only after it had created the task's worktree and bound the
    task to it (a worktree with no session, and a task in_progress that nobody works on)."""
    (repo / ".daintree.toml").write_text('[agents.repo-agent]\ncommand = "sh -c \'sleep 60\'"\n')
    cli.ok("task", "create", "Queued", "--agent", "repo-agent")
    proc = cli("queue", "run", "--once")
    assert proc.returncode == 1 and "task 1:" in proc.stderr and "daintree trust" in proc.stderr
    assert cli.json("worktree", "list", "--all") == []
    task = cli.json("task", "show", "1")
    assert (task["status"], task["worktree"]) == ("pending", "")


def test_a_worktree_dir_inside_the_repo_keeps_the_primarys_status_clean(cli: CLI, repo: Path) -> None:
    """"the primary workspace's `git status` stays clean": with the repository's `worktree_dir = "trees"`, every
    worktree showed as `?? trees/` in the primary; that folder is excluded like `/.worktrees/`."""
    (repo / ".daintree.toml").write_text('worktree_dir = "trees"\n')
    git(repo, "add", ".daintree.toml")
    git(repo, "commit", "-qm", "worktrees in trees/")
    cli.ok("worktree", "create", "inside")
    assert (repo / "trees" / "inside" / "app.py").exists()
    assert git(repo, "status", "--short") == ""
    assert "/trees/" in (repo / ".git" / "info" / "exclude").read_text().splitlines()


def test_create_with_a_prompt_but_no_agent_is_bad_input(cli: CLI, repo: Path) -> None:
    """`worktree create NAME --prompt TEXT` without `--agent` created the worktree and dropped the prompt without
    a word; it is rejected before anything (exit 2)."""
    proc = cli("worktree", "create", "quiet", "--prompt", "do the thing")
    assert proc.returncode == 2 and "--agent" in proc.stderr
    assert cli.json("worktree", "list", "--all") == []


def test_a_first_prompt_for_the_shell_is_bad_input(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """The shell never gets a first prompt (DESIGN 5, 2a.3); `--prompt` with `--agent shell` was dropped without a
    word, where `session send --task` to a shell is refused: both commands now reject it (exit 2)."""
    proc = cli("worktree", "create", "sh-prompt", "--agent", "shell", "--prompt", "rm -rf ~")
    assert proc.returncode == 2 and "takes no first prompt" in proc.stderr
    assert cli.json("worktree", "list", "--all") == []
    cli.ok("worktree", "create", "sh-later")
    proc = cli("session", "start", "sh-later", "--agent", "shell", "--prompt", "rm -rf ~")
    assert proc.returncode == 2 and "takes no first prompt" in proc.stderr
    assert cli.json("session", "list") == []


async def test_mcp_session_start_refuses_a_prompt_for_the_shell(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """MCP `session_start(name, agent="shell", prompt=...)` dropped the prompt without a word; it gets the CLI's
    error, and no session starts."""
    from tests.helpers.mcp_client import fails, mcp_client

    cli.ok("worktree", "create", "mcp-shell")
    async with mcp_client(repo) as mcp:
        message = await fails(mcp, "session_start", name="mcp-shell", agent="shell", prompt="rm -rf ~")
    assert "takes no first prompt" in message
    assert cli.json("session", "list") == []


def test_hosts_are_changed_only_from_outside_a_session(cli: CLI, repo: Path) -> None:
    """Hosts live in the user's own config: an agent in an unsandboxed session must not add a machine of its
    choosing (where the queue would then place sessions) or remove the user's."""
    cli.ok("worktree", "create", "agent-side")
    inside = repo / ".worktrees" / "agent-side"
    for cwd, env in ((inside, {}), (repo, {"DAINTREE_WORKTREE": "agent-side"})):
        added = cli("host", "add", "evil", "--ssh", "attacker.example", "--repo", "/srv", cwd=cwd, env=env)
        assert added.returncode == 1 and "refused from inside a session" in added.stderr
    assert cli.json("host", "list") == []
    cli.ok("host", "add", "mine", "--ssh", "box.example", "--repo", "/srv")
    removed = cli("host", "remove", "mine", env={"DAINTREE_WORKTREE": "agent-side"})
    assert removed.returncode == 1 and [h["name"] for h in cli.json("host", "list")] == ["mine"]
    cli.ok("host", "remove", "mine")
