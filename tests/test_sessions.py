"""Sessions on real tmux (a unique private socket per test) and real PTYs."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.project import Project
from daintree_tui.core.store import write_json
from daintree_tui.sessions.manager import SessionManager
from daintree_tui.sessions.presets import resolve_preset
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.sessions.tmux import TmuxHost
from tests.conftest import CLI, Lines, events, make_repo, trusted_config, wait_for

pytestmark = pytest.mark.usefixtures("tmux_socket")

ECHO_AGENT = f"{sys.executable} -c \"import sys; print('agent ready', flush=True); [print('echo:', l.strip(), flush=True) for l in sys.stdin]\""  # noqa: E501


def configure_agents(repo: Path, extra: str = "") -> None:
    trusted_config(repo,
        f"[agents.echo]\ncommand = '''{ECHO_AGENT}'''\n"
        f"[agents.exit3]\ncommand = \"sh -c 'echo bye; exit 3'\"\n"
        "[agents.ghost]\ncommand = \"no-such-agent-binary --flag\"\n"
        "[sessions]\nwaiting_debounce = 0.5\n" + extra
    )


def test_start_verify_log_send_and_echo(cli: CLI, repo: Path) -> None:
    configure_agents(repo)
    cli.ok("worktree", "create", "one")
    info = cli.json("session", "start", "one", "--agent", "echo")
    assert info["session"] == "dt-one" and info["agent"] == "echo"
    log = repo / ".worktrees" / ".logs" / "one.log"
    wait_for(lambda: log.exists() and b"agent ready" in log.read_bytes(), timeout=5)
    cli.ok("session", "send", "one", "hello there")
    wait_for(lambda: b"echo: hello there" in log.read_bytes(), timeout=5)
    assert "echo: hello there" in cli("session", "capture", "one").stdout
    listed = cli.json("session", "list")
    assert [s["name"] for s in listed] == ["one"]
    assert any(e["event"] == "session.started" for e in events(repo))


def test_send_takes_its_text_after_its_options(cli: CLI, repo: Path) -> None:
    """`session send NAME --paste --no-enter TEXT`, as the help's usage line invites: argparse had taken TEXT as
    absent at NAME and refused the text as an unrecognized argument."""
    configure_agents(repo)
    cli.ok("worktree", "create", "late")
    cli.ok("session", "start", "late", "--agent", "echo")
    log = repo / ".worktrees" / ".logs" / "late.log"
    wait_for(lambda: log.exists() and b"agent ready" in log.read_bytes(), timeout=5)
    cli.ok("session", "send", "late", "--no-enter", "after the options")
    cli.ok("session", "keys", "late", "Enter")
    wait_for(lambda: b"echo: after the options" in log.read_bytes(), timeout=5)
    extra = cli("session", "send", "late", "--no-enter", "one", "two")
    assert extra.returncode == 2 and "unrecognized arguments: two" in extra.stderr


def test_a_waiting_pattern_ending_in_a_space_matches_the_prompt(cli: CLI, repo: Path) -> None:
    """`waiting_pattern = '> $'` (the docs' example; aider's preset ends the same way): the screen keeps no trailing
    blank, so the pattern had never matched and only output quiet for the debounce made such an agent `waiting`."""
    trusted_config(repo, "[agents.prompter]\ncommand = \"sh -c 'printf \\\"ready\\\\n> \\\"; sleep 60'\"\n"
                         "waiting_pattern = '> $'\n[sessions]\nwaiting_debounce = 120\n")
    cli.ok("worktree", "create", "pat")
    cli.ok("session", "start", "pat", "--agent", "prompter")
    wait_for(lambda: "ready" in cli("session", "capture", "pat").stdout, timeout=10)
    wait_for(lambda: [s["status"] for s in cli.json("session", "list")] == ["waiting"], timeout=10)


def test_pane_runs_agent_as_first_process_with_env_in_worktree(cli: CLI, repo: Path) -> None:
    trusted_config(repo,
        "[agents.envdump]\ncommand = \"sh -c 'echo CWD=$PWD; echo WT=$DAINTREE_WORKTREE PORT=$PORT "
        "CC=${CLAUDECODE:-unset} CT=${COLORTERM:-unset} TMPDIR=$TMPDIR; sleep 30'\"\n")
    entry = cli.json("worktree", "create", "envw")
    proc = cli("session", "start", "envw", "--agent", "envdump", env={"CLAUDECODE": "1", "COLORTERM": ""})
    assert proc.returncode == 0, proc.stderr
    log = repo / ".worktrees" / ".logs" / "envw.log"
    text = wait_for(lambda: log.exists() and "TMPDIR" in log.read_text() and log.read_text())
    assert f"CWD={entry['path']}" in text
    assert f"WT=envw PORT={entry['ports'][0]} CC=unset CT=truecolor" in text  # the panes take 24-bit colour
    assert f"TMPDIR={repo / '.worktrees' / '.tmp' / 'envw'}" in text


def test_status_transitions_and_exit_code(cli: CLI, repo: Path) -> None:
    configure_agents(repo)
    cli.ok("worktree", "create", "st")
    cli.ok("session", "start", "st", "--agent", "echo")
    assert wait_for(lambda: cli.json("session", "list")[0]["status"] == "waiting", timeout=10)
    cli.ok("session", "signal", "st", "running")
    assert cli.json("session", "list")[0]["status"] == "running"
    cli.ok("session", "signal", "st", "waiting")
    assert cli.json("session", "list")[0]["status"] == "waiting"
    cli.ok("worktree", "create", "ex")
    cli.ok("session", "start", "ex", "--agent", "exit3")
    done = wait_for(lambda: [s for s in cli.json("session", "list") if s["name"] == "ex" and s["status"] == "exited"])
    assert done[0]["exit_code"] == 3
    # listing observed the exit but recorded nothing; the observer records it, once
    assert not [e for e in events(repo) if e["event"] == "session.exited"]
    recorded = cli.json("session", "watch", "--once")
    assert {"name": "ex", "status": "exited", "exit_code": 3} in recorded
    exited = [e for e in events(repo) if e["event"] == "session.exited"]
    assert [e["worktree"]["name"] for e in exited] == ["ex"] and exited[0]["exit_code"] == 3
    # the same change observed twice is logged once
    assert cli.json("session", "watch", "--once") == []
    assert len([e for e in events(repo) if e["event"] == "session.exited"]) == 1
    assert cli("session", "signal", "st", "sleepy").returncode == 2


def test_a_signal_before_the_first_frame_is_one_waiting_once_it_draws(cli: CLI, repo: Path) -> None:
    """An agent's hook may say `waiting` before its screen has drawn anything (Claude Code's SessionStart): the
    session is `starting` until it draws, and then `waiting` is logged once, not `waiting` at the signal and again
    after the `starting` the next look saw."""
    trusted_config(repo, "[agents.mute]\ncommand = \"sh -c 'read line; echo drawn; sleep 60'\"\n")
    cli.ok("worktree", "create", "early")
    cli.ok("session", "start", "early", "--agent", "mute")
    cli.ok("session", "signal", "early", "waiting")
    assert cli.json("session", "watch", "--once") == []
    assert cli.json("session", "list")[0]["status"] == "starting"
    cli.ok("session", "send", "early", "go")
    log = repo / ".worktrees" / ".logs" / "early.log"
    wait_for(lambda: b"drawn" in log.read_bytes(), timeout=10)
    assert cli.json("session", "watch", "--once") == [{"name": "early", "status": "waiting", "exit_code": None}]
    assert cli.json("session", "watch", "--once") == []
    assert [e["event"] for e in events(repo) if e["event"] in ("session.waiting", "session.running")] == [
        "session.waiting"]


def test_missing_program_is_a_clear_error(cli: CLI, repo: Path) -> None:
    configure_agents(repo)
    cli.ok("worktree", "create", "m")
    proc = cli("session", "start", "m", "--agent", "ghost")
    assert proc.returncode == 2 and "no-such-agent-binary" in proc.stderr and "not on PATH" in proc.stderr
    proc = cli("session", "start", "m", "--agent", "nope")
    assert proc.returncode == 2 and "unknown agent preset" in proc.stderr
    proc = cli("worktree", "create", "m2", "--agent", "ghost")
    assert proc.returncode == 2 and not (repo / ".worktrees" / "m2").exists()
    assert cli("session", "start", "nowt").returncode == 2


def test_sessions_survive_the_starter_being_killed(cli: CLI, repo: Path) -> None:
    configure_agents(repo)
    cli.ok("worktree", "create", "surv")
    code = ("import sys, os; from daintree_tui.core.project import Project;"
            "from daintree_tui.sessions.manager import SessionManager;"
            "SessionManager(Project.discover(sys.argv[1])).start('surv', 'echo'); os.kill(os.getpid(), 9)")
    proc = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == -signal.SIGKILL
    listed = cli.json("session", "list")
    assert [s["name"] for s in listed] == ["surv"] and listed[0]["status"] != "exited"
    cli.ok("session", "send", "surv", "still here")
    log = repo / ".worktrees" / ".logs" / "surv.log"
    wait_for(lambda: b"echo: still here" in log.read_bytes())


def test_worktree_create_with_agent_and_remove_stops_session(cli: CLI, repo: Path, tmux_socket: str) -> None:
    configure_agents(repo)
    cli.ok("task", "create", "Fix the parser", "--description", "it breaks on tabs")
    out = cli.json("worktree", "create", "parser", "--task", "1", "--agent", "echo")
    assert out["session"]["session"] == "dt-parser"
    log = repo / ".worktrees" / ".logs" / "parser.log"
    wait_for(lambda: log.exists() and b"agent ready" in log.read_bytes())
    cli.ok("worktree", "remove", "parser", "--force")
    assert cli.json("session", "list") == []
    assert subprocess.run(["tmux", "-L", tmux_socket, "has-session", "-t", "=dt-parser"],
                          capture_output=True).returncode != 0
    # it was the last session: the private server is gone too
    assert subprocess.run(["tmux", "-L", tmux_socket, "list-sessions"], capture_output=True).returncode != 0


def test_first_prompt_from_task(cli: CLI, repo: Path) -> None:
    trusted_config(repo,
        "[agents.args]\ncommand = \"sh -c 'printf \\\"ARG=%s\\\\n\\\" \\\"$0\\\"; sleep 30'\"\n"
        "prompt = \"Task: {subject} in {worktree}\"\n")
    cli.ok("task", "create", "Make it fast")
    cli.ok("worktree", "create", "fast", "--task", "1")
    cli.ok("session", "start", "fast", "--agent", "args")
    log = repo / ".worktrees" / ".logs" / "fast.log"
    assert "ARG=Task: Make it fast in fast" in wait_for(lambda: log.exists() and log.read_text())


def test_demo_agent_edits_asks_and_answers(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "demo1")
    cli.ok("session", "start", "demo1", "--agent", "demo")
    wt = repo / ".worktrees" / "demo1"
    wait_for(lambda: "[y/n]" in cli("session", "capture", "demo1").stdout, timeout=15)
    assert (wt / "NOTES.md").exists()
    assert cli.json("worktree", "status", "demo1")["facts"]["dirty"] == 1
    assert wait_for(lambda: cli.json("session", "list")[0]["status"] == "waiting")
    cli.ok("session", "send", "demo1", "y")
    wait_for(lambda: "updating the docs" in cli("session", "capture", "demo1").stdout)


def test_demo_repository_starts_demo_agents_by_default(tmp_path: Path) -> None:
    """In the demo, `n` + a subject started `shell`, which has nothing to do with a task."""
    from daintree_tui.demo.repo import create_demo_repo

    root = create_demo_repo(tmp_path / "demo", start_agents=False)
    cli = CLI(root)
    cli.ok("task", "create", "Add a logout endpoint")
    cli.ok("worktree", "create", "logout", "--task", "5")
    assert cli.json("session", "start", "logout")["agent"] == "demo"
    wait_for(lambda: "Task: Add a logout endpoint" in cli("session", "capture", "logout").stdout, timeout=15)


def test_demo_agent_is_deterministic_with_a_seed(repo: Path) -> None:
    def run() -> str:
        return subprocess.run([sys.executable, "-m", "daintree_tui.demo.agent", "--seed", "7", "--speed", "1000",
                               "--exit"], input="n\n", capture_output=True, text=True, cwd=repo).stdout

    first, second = run(), run()
    assert first == second and "leaving the docs" in first


def test_keys_and_stale_socket(cli: CLI, repo: Path, tmux_socket: str) -> None:
    configure_agents(repo)
    cli.ok("worktree", "create", "k")
    cli.ok("session", "start", "k", "--agent", "echo")
    cli.ok("session", "keys", "k", "a", "b", "Enter")
    log = repo / ".worktrees" / ".logs" / "k.log"
    wait_for(lambda: b"echo: ab" in log.read_bytes())
    host = TmuxHost(Project.discover(repo))
    pid = int(subprocess.run(["tmux", "-L", tmux_socket, "display-message", "-p", "#{pid}"], capture_output=True,
                             text=True).stdout.strip())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: host.list() == [])
    cli.ok("session", "start", "k", "--agent", "echo")  # a fresh server on the same socket name


def test_exact_match_never_prefix(cli: CLI, repo: Path) -> None:
    configure_agents(repo)
    cli.ok("worktree", "create", "ab")
    cli.ok("worktree", "create", "a")
    cli.ok("session", "start", "ab", "--agent", "echo")
    assert cli("session", "send", "a", "x").returncode == 2  # `-t a` would have matched dt-ab


def test_an_unknown_worktree_is_an_error_a_worktree_without_a_session_is_not(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "quiet")
    assert "no session running for quiet" in cli.ok("session", "stop", "quiet").stdout
    for command in (["stop", "typo"], ["send", "typo", "hi"], ["capture", "typo"]):
        proc = cli("session", *command)
        assert (proc.returncode, proc.stderr) == (2, "daintree: no worktree named 'typo'\n"), command


def test_tmux_config_is_private(repo: Path, tmux_socket: str) -> None:
    project = Project.discover(repo)
    configure_agents(repo)
    from daintree_tui.core.worktrees import WorktreeService

    WorktreeService(project).create("cfg")
    SessionManager(project).start("cfg", "echo")

    def opt(name: str) -> str:
        return subprocess.run(["tmux", "-L", tmux_socket, "show-options", "-gv", name], capture_output=True,
                              text=True).stdout.strip()

    assert opt("status") == "off" and opt("prefix") == "None" and opt("remain-on-exit") == "on"
    assert opt("history-limit") == "50000" and opt("mouse") == "on"
    assert subprocess.run(["tmux", "-L", tmux_socket, "show-options", "-sv", "escape-time"], capture_output=True,
                          text=True).stdout.strip() == "0"


def test_presets_are_overridable_and_extendable(repo: Path) -> None:
    trusted_config(repo, 'default_agent = "mine"\n[agents.claude]\ncommand = "claude --fast"\n'
                                         '[agents.mine]\ncommand = "my-agent"\n')
    cfg = Project.discover(repo).config
    assert resolve_preset(cfg, "claude").argv("hi") == ["claude", "--fast", "hi"]
    assert resolve_preset(cfg, None).name == "mine"
    assert resolve_preset(cfg, "gemini").argv("do it") == ["gemini", "--prompt-interactive", "do it"]
    assert resolve_preset(cfg, "aider").argv("typed later") == ["aider"]


def test_prompt_mode_is_configurable(repo: Path, cli: CLI) -> None:
    trusted_config(repo, '[agents.quiet]\ncommand = "sleep 30"\nprompt_mode = "none"\n'
                                         '[agents.flagged]\ncommand = "tool"\nprompt_mode = "flag:--ask"\n')
    cfg = Project.discover(repo).config
    assert resolve_preset(cfg, "quiet").argv("ignored") == ["sleep", "30"]
    assert resolve_preset(cfg, "flagged").argv("go") == ["tool", "--ask", "go"]
    cli.ok("task", "create", "a task whose text must not reach sleep")
    cli.ok("worktree", "create", "q", "--task", "1", "--agent", "quiet")
    assert cli.json("session", "list")[0]["status"] != "exited"
    trusted_config(repo, '[agents.bad]\ncommand = "x"\nprompt_mode = "shout"\n')
    proc = cli("session", "list")
    assert proc.returncode == 2 and "agents.bad.prompt_mode" in proc.stderr


def test_pty_host_fallback_when_tmux_is_absent(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAINTREE_NO_TMUX", "1")
    configure_agents(repo)
    from daintree_tui.core.worktrees import WorktreeService
    from daintree_tui.sessions.host_choice import host_for

    project = Project.discover(repo)
    WorktreeService(project).create("ptyw")
    host = host_for(project)
    assert host is not None and host.persistent is False
    manager = SessionManager(project, host)
    info = manager.start("ptyw", "echo")
    assert info.persistent is False
    log = repo / ".worktrees" / ".logs" / "ptyw.log"
    wait_for(lambda: log.exists() and b"agent ready" in log.read_bytes())
    manager.send("ptyw", "via pty")
    wait_for(lambda: b"echo: via pty" in log.read_bytes())
    assert "echo: via pty" in manager.capture("ptyw")
    assert manager.stop("ptyw")
    # the CLI, whose sessions would die with it, refuses with a clear message (its own process: this one has a
    # PTY host)
    proc = CLI(repo, subprocess=True)("session", "start", "ptyw", "--agent", "echo", env={"DAINTREE_NO_TMUX": "1"})
    assert proc.returncode == 1 and "tmux is not installed" in proc.stderr


def test_session_log_follow(cli: CLI, repo: Path) -> None:
    configure_agents(repo)
    cli.ok("worktree", "create", "f")
    cli.ok("session", "start", "f", "--agent", "echo")
    log = repo / ".worktrees" / ".logs" / "f.log"
    wait_for(lambda: log.exists() and b"agent ready" in log.read_bytes())
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", "session", "log", "f", "--follow"], cwd=repo,
                            stdout=subprocess.PIPE, text=True)
    try:
        lines = Lines(proc.stdout)
        lines.until(lambda line: "agent ready" in line)
        cli.ok("session", "send", "f", "followed")
        lines.until(lambda line: "echo: followed" in line)
    finally:
        proc.terminate()
        proc.wait(timeout=5)


def test_json_list_shape(cli: CLI, repo: Path) -> None:
    configure_agents(repo)
    cli.ok("worktree", "create", "js")
    cli.ok("session", "start", "js", "--agent", "echo")
    proc = cli("session", "list", "--json")
    data = json.loads(proc.stdout)
    assert set(data[0]) >= {"name", "session", "agent", "status", "exit_code", "pid", "log"}


# The hooks write in their TMPDIR: where the sandbox works, a hook writes only its worktree and TMPDIR.
HOOKS = ('[hooks]\non_waiting = ["echo $DAINTREE_WORKTREE >> $TMPDIR/waiting.txt"]\n'
         'on_session_exit = ["echo $DAINTREE_WORKTREE:$DAINTREE_EXIT_CODE >> $TMPDIR/exited.txt"]\n')


def configure_hooks(cli: CLI, repo: Path, name: str) -> tuple[Path, Path]:
    configure_agents(repo, HOOKS)
    cli.ok("trust")
    tmpdir = repo / ".worktrees" / ".tmp" / name
    return tmpdir / "waiting.txt", tmpdir / "exited.txt"


def run_cli(capsys: pytest.CaptureFixture[str], repo: Path, *args: str) -> Any:
    """The CLI in this process; its JSON output."""
    from daintree_tui.cli import main

    capsys.readouterr()
    assert main([*args, "--repo", str(repo), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_listing_never_records_nor_runs_hooks(cli: CLI, repo: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    marker, _ = configure_hooks(cli, repo, "lw")
    cli.ok("worktree", "create", "lw")
    cli.ok("session", "start", "lw", "--agent", "echo")
    record = repo / ".worktrees" / ".sessions" / "lw.json"
    before = record.read_text()
    wait_for(lambda: run_cli(capsys, repo, "session", "list")[0]["status"] == "waiting")
    assert run_cli(capsys, repo, "worktree", "list")[0]["session"]["status"] == "waiting"
    assert run_cli(capsys, repo, "worktree", "status", "lw")["session"]["status"] == "waiting"
    assert not marker.exists()
    assert record.read_text() == before
    assert not [e for e in events(repo) if e["event"].startswith("session.") and e["event"] != "session.started"]
    # the same configuration does run the hook once an observer records the change
    recorded = run_cli(capsys, repo, "session", "watch", "--once")
    assert recorded == [{"name": "lw", "status": "waiting", "exit_code": None}]
    assert marker.read_text() == "lw\n"


def test_racing_observers_record_each_transition_once(cli: CLI, repo: Path, tmp_path: Path) -> None:
    marker, exit_marker = configure_hooks(cli, repo, "race")
    cli.ok("worktree", "create", "race")
    watchers = [subprocess.Popen([sys.executable, "-m", "daintree_tui", "session", "watch", "--interval", "0.02"],
                                 cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
    try:
        cli.ok("session", "start", "race", "--agent", "echo")
        wait_for(lambda: marker.exists(), timeout=20)
        cli.ok("session", "signal", "race", "running")  # an agent's own word: a transition, recorded once
        cli.ok("session", "keys", "race", "C-d")  # end of input: the agent exits 0
        wait_for(lambda: exit_marker.exists(), timeout=20)
        wait_for(lambda: len([e for e in events(repo) if e["event"] == "session.exited"]) >= 1)
    finally:
        for proc in watchers:
            proc.send_signal(signal.SIGINT)
        outputs = [proc.communicate(timeout=30) for proc in watchers]
    assert all(proc.returncode == 130 for proc in watchers), outputs
    kinds = [e["event"] for e in events(repo) if e["event"].startswith("session.")]
    assert kinds.count("session.waiting") == 1 and kinds.count("session.exited") == 1, kinds
    assert kinds[kinds.index("session.waiting"):] == ["session.waiting", "session.running", "session.exited"], kinds
    assert all(a != b for a, b in itertools.pairwise(kinds)), kinds  # no transition logged twice
    assert marker.read_text() == "race\n"
    assert exit_marker.read_text() == "race:0\n"
    reported = [line for out, _ in outputs for line in out.splitlines()]
    assert sum(": waiting" in line for line in reported) == 1 and sum(": exited" in line for line in reported) == 1



def test_a_shared_tmux_socket_keeps_each_repositorys_sessions_apart(tmp_path: Path, tmux_socket: str) -> None:
    """DAINTREE_TMUX_SOCKET (the tests' setting) puts two repositories on one tmux server: the second listed the
    first one's sessions as its own, and stopping its own `feat` would have killed the first one's agent."""
    first, second = CLI(make_repo(tmp_path / "first")), CLI(make_repo(tmp_path / "second"))
    first.ok("worktree", "create", "feat", "--agent", "shell")
    first.ok("worktree", "create", "only-first", "--agent", "shell")
    assert second.json("session", "list") == []
    proc = second("worktree", "create", "feat", "--agent", "shell")
    assert proc.returncode == 1 and str(tmp_path / "first") in proc.stderr and "DAINTREE_TMUX_SOCKET" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert second.json("worktree", "list") == []  # rolled back
    assert second("session", "stop", "only-first").returncode == 2  # not its worktree, not its session
    assert {s["name"] for s in first.json("session", "list")} == {"feat", "only-first"}
    assert all(s["status"] != "exited" for s in first.json("session", "list"))


def test_a_new_sessions_record_survives_an_observers_transition_of_the_old_one(cli: CLI, repo: Path) -> None:
    """Seen in the dashboard: `s` -> shell on a worktree whose codex session had been stopped left a record saying
    codex (hooks, its old start time) for the shell's session. The observer saw the new pane, read the old record
    under the lock, and wrote it back with its new status after start() had written the new one without it.
    start() now writes the record, under the lock, before the pane exists: an observer holding the old record
    never sees the new pane, and its write lands first."""
    import threading

    configure_agents(repo)
    cli.ok("worktree", "create", "w", "--agent", "shell")
    cli.ok("session", "stop", "w")
    manager = SessionManager(Project.discover(repo))
    holding = threading.Event()
    pane_seen: list[bool] = []

    def observer() -> None:
        with manager.project.lock.hold():
            stale = manager.meta("w")
            assert stale["agent"] == "shell"
            holding.set()
            # Give start() every chance to start its pane now (it must not while the lock is held).
            with contextlib.suppress(AssertionError):
                wait_for(lambda: manager.host.exists("w"), timeout=1)
            pane_seen.append(manager.host.exists("w"))
            stale["status"] = "waiting"
            write_json(manager.meta_path("w"), stale)

    watcher = threading.Thread(target=observer)
    watcher.start()
    try:
        holding.wait(10)
        manager.start("w", "echo")
    finally:
        watcher.join()
    assert pane_seen == [False]
    assert manager.meta("w")["agent"] == "echo"


def test_a_sessions_record_is_written_before_its_pane_starts(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """The dashboard showed a quick-created session's agent as `?`: its first poll saw the pane before start()
    had written the record. A tmux hook copies the record the moment the session exists (a few milliseconds
    before start() has its answer from tmux; the old order wrote the record after that)."""
    configure_agents(repo)
    cli.ok("worktree", "create", "other", "--agent", "shell")  # the server runs
    record, seen = repo / ".worktrees" / ".sessions" / "w.json", repo / "seen.json"
    subprocess.run(["tmux", "-L", tmux_socket, "set-hook", "-g", "session-created",
                    f"run-shell 'cat {record} > {seen}.part 2>&1; mv {seen}.part {seen}'"], check=True)
    cli.ok("worktree", "create", "w")
    cli.ok("session", "start", "w", "--agent", "echo")
    wait_for(seen.exists)
    assert seen.read_text().startswith("{") and json.loads(seen.read_text())["agent"] == "echo"


def test_a_start_that_fails_gives_the_previous_record_back(tmp_path: Path, tmux_socket: str) -> None:
    first, second = CLI(make_repo(tmp_path / "first")), CLI(make_repo(tmp_path / "second"))
    second.ok("worktree", "create", "feat", "--agent", "shell")
    second.ok("session", "stop", "feat")
    first.ok("worktree", "create", "feat", "--agent", "shell")  # dt-feat is the first one's now
    record = tmp_path / "second" / ".worktrees" / ".sessions" / "feat.json"
    before = record.read_bytes()
    proc = second("session", "start", "feat", "--agent", "shell")
    assert proc.returncode == 1 and "DAINTREE_TMUX_SOCKET" in proc.stderr
    assert record.read_bytes() == before
    third = CLI(make_repo(tmp_path / "third"))
    third.ok("worktree", "create", "feat")
    assert third("session", "start", "feat", "--agent", "shell").returncode == 1
    assert not (tmp_path / "third" / ".worktrees" / ".sessions" / "feat.json").exists()
    assert not (tmp_path / "third" / ".worktrees" / ".sessions" / "feat.json.bak").exists()


def test_a_change_on_its_way_when_the_session_is_stopped_does_not_undo_the_stop(cli: CLI, repo: Path) -> None:
    """Seen under load: the dashboard's quiet timer said `waiting` just after `S` stopped the agent; the record
    went from exited back to waiting, and the dashboard took the stopped session for one the tmux server had lost
    (its prompt took the next key)."""
    from daintree_tui.services import Services

    configure_agents(repo)
    cli.ok("worktree", "create", "w", "--agent", "echo")
    services = Services(Project.discover(repo))
    assert services.sessions.stop("w")
    wait_for(lambda: not services.sessions.host.exists("w"))
    assert services.observer.record("w", SessionStatus.WAITING, None) is None  # the late change
    assert services.observer.record("w", SessionStatus.RUNNING, None) is None
    record = services.sessions.record("w")
    assert record is not None and record.status == "exited"
    assert services.lost_sessions({"w": None}) == {}
    kinds = [e["event"] for e in events(repo) if e["event"].startswith("session.")]
    assert kinds[-1] == "session.exited" and "session.waiting" not in kinds[kinds.index("session.exited"):]
    cli.ok("session", "start", "w", "--agent", "echo")  # a new run records its own changes
    assert services.observer.record("w", SessionStatus.WAITING, None) is not None


def test_aider_is_waiting_at_its_yes_no_questions(cli: CLI, repo: Path) -> None:
    """aider's preset pattern knew its prompt only: at one of its questions (its sign-in, "add this file?") it asks
    and waits for you, and it showed `running` for ever, with no notice. The question is aider's own text."""
    trusted_config(repo, "[agents.aider]\ncommand = \"sh -c 'echo No LLM model was specified; printf \\\"Login to "
                         "OpenRouter or create a free account? (Y)es/(N)o [Yes]: \\\"; sleep 60'\"\n"
                         "[sessions]\nwaiting_debounce = 120\n")
    cli.ok("worktree", "create", "yn")
    cli.ok("session", "start", "yn", "--agent", "aider")
    wait_for(lambda: "(Y)es/(N)o [Yes]:" in cli("session", "capture", "yn").stdout, timeout=10)
    wait_for(lambda: [s["status"] for s in cli.json("session", "list")] == ["waiting"], timeout=10)


@pytest.mark.parametrize("sandbox", ["off", "auto"])
def test_stop_ends_an_agent_that_outlives_its_terminals_hang_up(cli: CLI, repo: Path, tmux_socket: str,
                                                                sandbox: str) -> None:
    """Killing the tmux session hangs up the pane's terminal; an agent that ignores the hang-up (gemini, without
    the sandbox: its two node processes went on in the worktree after `session stop`, parent 1) outlived it, with
    what it had started. What is left of the pane's terminal session now gets SIGTERM."""
    (repo / "deaf.sh").write_text('trap "" HUP\nsleep 600 &\necho child $!\nwait\n')
    trusted_config(repo, f"[agents.deaf]\ncommand = \"sh {repo / 'deaf.sh'}\"\nsandbox = \"{sandbox}\"\n")
    cli.ok("worktree", "create", "d")
    cli.ok("session", "start", "d", "--agent", "deaf")
    wait_for(lambda: re.search(r"child (\d+)", cli("session", "capture", "d").stdout), timeout=30)
    leader = int(TmuxHost(Project.discover(repo)).tmux("display-message", "-p", "-t", "=dt-d:",
                                                      "#{pane_pid}").stdout)
    assert _in_session(leader), "the agent's processes are in the pane's terminal session"
    cli.ok("session", "stop", "d")
    wait_for(lambda: _in_session(leader) == [], timeout=10)  # SIGKILLed by now: ending takes its moment


def _in_session(sid: int) -> list[int]:
    from daintree_tui.sessions.pane_end import session_processes

    return session_processes(sid)


def test_stop_ends_what_an_exited_agent_left_running_in_its_pane(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """The pane stays (remain-on-exit) after its agent exits, and its terminal with it: no hang-up came to what the
    agent had started in the background (a dev server, a `sleep &`), and `session stop` left it running."""
    # Deaf to the hang-up, as an interactive shell's background job is (in a process group of its own, it gets none).
    # The agent exits once its child is deaf (before, the hang-up of its exit could come first).
    (repo / "leaves.sh").write_text("sh -c 'trap \"\" HUP; echo $$ > ready; exec sleep 600' &\n"
                                    "while [ ! -s ready ]; do sleep 0.05; done\necho child $(cat ready)\n")
    trusted_config(repo, f"[agents.leaves]\ncommand = \"sh {repo / 'leaves.sh'}\"\nsandbox = \"off\"\n")
    cli.ok("worktree", "create", "l")
    cli.ok("session", "start", "l", "--agent", "leaves")
    child = int(wait_for(lambda: re.search(r"child (\d+)", cli("session", "capture", "l", "--history", "50").stdout),
                         timeout=30)[1])
    wait_for(lambda: cli.json("session", "list")[0]["status"] == "exited", timeout=30)
    assert b") Z" not in Path(f"/proc/{child}/stat").read_bytes()  # alive
    cli.ok("session", "stop", "l")
    wait_for(lambda: not Path(f"/proc/{child}").exists() or b") Z" in Path(f"/proc/{child}/stat").read_bytes(),
             timeout=10)
