"""Remote hosts over a real sshd on 127.0.0.1: a throwaway host key and user key, a client config of our own
(`-F`, via DAINTREE_SSH_CONFIG), nothing of ~/.ssh or the system's ssh config read or written.

"localhost over SSH" is a remote host with its own repository; the far side runs this venv's `daintree` (the
host's `daintree` setting) with user dirs of its own (sshd's SetEnv), so local and remote state never mix.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CLI, Lines, make_repo, wait_for
from tests.helpers.remote import DAINTREE, run_in_pty
from tests.sshd import Sshd, sshd_available

pytestmark = pytest.mark.skipif(
    not sshd_available(),
    reason="OpenSSH server or client not installed (/usr/sbin/sshd, ssh, ssh-keygen): apt-get install "
           "openssh-server openssh-client",
)


def remote(name: str = "far") -> object:
    from daintree_tui.services.remote import RemoteHost, get_host

    return RemoteHost(get_host(name))


# -- config and validation ------------------------------------------------------------------------------------------


def test_host_add_list_check_over_real_sshd(sshd: Sshd, far_repo: Path, cli: CLI) -> None:
    proc = cli.ok("host", "add", "far", "--ssh", "dt-far", "--repo", str(far_repo), "--daintree", DAINTREE,
                  "--max-sessions", "4", "--ssh-config", str(sshd.client_config))
    assert "added host far" in proc.stdout
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    assert "[hosts.far]" in config.read_text()
    listed = cli.json("host", "list")
    assert listed == [{"name": "far", "ssh": "dt-far", "repo": str(far_repo), "max_sessions": 4,
                       "daintree": DAINTREE, "ssh_config": str(sshd.client_config)}]
    again = cli("host", "add", "far", "--ssh", "dt-far", "--repo", str(far_repo))
    assert again.returncode == 2 and "already exists" in again.stderr

    check = cli("host", "check", "far", "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    report = json.loads(check.stdout)
    assert report["reachable"] and report["problems"] == []
    assert report["daintree"] == __import__("daintree_tui").__version__
    assert report["tmux"].startswith("tmux ") and report["git"].startswith("git version")
    assert report["repo"] == str(far_repo)
    assert abs(report["clock_skew"]) < 1 and report["clock_skew"] != round(report["clock_skew"])  # sub-second
    # The same machine: its clock is in sync, not "-0.8s off" as whole seconds of `date +%s` made it.
    assert "clock in sync" in cli.ok("host", "check", "far").stdout

    # No name: every host is checked, each in its line (and in --json, a list).
    from daintree_tui.services.remote import HostConfig, save_host

    save_host(HostConfig("other", "dt-other", str(far_repo), daintree=DAINTREE))
    every = cli.ok("host", "check").stdout.splitlines()
    assert [ln.split(":")[0] for ln in every] == ["host far", "host other"], every
    assert [r["name"] for r in cli.json("host", "check")] == ["far", "other"]


def test_host_check_reports_each_problem_and_exits_1(sshd: Sshd, tmp_path: Path, cli: CLI) -> None:
    from daintree_tui.services.remote import HostConfig, save_host

    save_host(HostConfig("broken", "dt-far", str(tmp_path / "no-such-repo"), daintree="/nonexistent/daintree"))
    proc = cli("host", "check", "broken")
    assert proc.returncode == 1
    problems = [ln for ln in proc.stderr.splitlines() if ln.startswith("problem:")]
    assert len(problems) == 2, proc.stderr
    assert "daintree not runnable" in problems[0] and "no-such-repo is not a git repository" in problems[1]

    # Killing sshd alone leaves the master connection (its own sshd child) up: close that too.
    assert remote("broken").stop_master()  # type: ignore[attr-defined]
    sshd.kill()
    down = cli("host", "check", "broken")
    assert down.returncode == 1
    assert "host broken unreachable:" in down.stderr and len(down.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("target", ["-oProxyCommand=touch /tmp/x", "user@box name", "box\n", "", "box\x07"])
def test_hostile_ssh_targets_are_rejected(target: str, cli: CLI) -> None:
    proc = cli("host", "add", "h", "--ssh", target, "--repo", "/srv/app")
    assert proc.returncode == 2, proc.stderr
    assert not (Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml").exists()


@pytest.mark.parametrize("name", ["-x", "a b", "a/b", "", ".hidden", "x" * 64, "ok."])
def test_bad_host_names_are_rejected(name: str, cli: CLI) -> None:
    proc = cli("host", "add", name, "--ssh", "box", "--repo", "/srv/app")
    assert proc.returncode == 2, proc.stderr


def test_repo_config_cannot_add_hosts(repo: Path, cli: CLI) -> None:
    (repo / ".daintree.toml").write_text('[hosts.evil]\nssh = "attacker@example.invalid"\nrepo = "/srv"\n')
    proc = cli.ok("worktree", "list")
    assert "[hosts] in" in proc.stderr and "ignored" in proc.stderr
    assert cli.json("host", "list") == []
    bad = cli("worktree", "list", "--host", "evil")
    assert bad.returncode == 2 and "unknown host 'evil'" in bad.stderr


def test_argv_quotes_every_word_and_guards_the_target() -> None:
    import shlex

    from daintree_tui.services.remote import HostConfig, RemoteHost

    host = RemoteHost(HostConfig("h", "box", "~/src/my app", daintree="~/.local/bin/daintree"),
                      controls=Path("/tmp/c"))
    hostile = ["task", "create", "$(touch /tmp/pwned); `id` 'q' \"d\" \\ ; | & > <"]
    command = host.daintree_command(hostile)
    assert command.startswith('"$HOME"/.local/bin/daintree --repo "$HOME"/')
    words = shlex.split(command.replace('"$HOME"', "HOME"))
    assert words[-3:] == hostile
    argv = host.command_argv(command)
    assert argv[-3:-1] == ["--", "box"] and unwrapped(argv[-1]) == command
    assert "ControlPath=/tmp/c/%C" in argv and "ControlMaster=auto" in argv
    attach = host.attach_argv("dt-x", "daintree-abc", "/srv/app/.worktrees/tmux.conf")
    assert attach[-4:-2] == ["-t", "--"] and attach[-2] == "box"
    assert shlex.split(unwrapped(attach[-1])) == ["tmux", "-u", "-L", "daintree-abc", "-f",
                                                  "/srv/app/.worktrees/tmux.conf", "attach-session", "-t", "=dt-x"]


def unwrapped(wrapped: str) -> str:
    """The POSIX command inside a `for_any_login_shell` wrapper, printed by a real sh instead of run."""
    assert wrapped.startswith("sh -c 'eval ")
    return subprocess.run(["sh", "-c", wrapped.replace("eval", "printf %s", 1)], capture_output=True, text=True,
                          check=True).stdout


# Text that each shell's quoting treats its own way: fish reads \' and \\ inside single quotes, tcsh reads !,
# and a word ending in a backslash followed by `'; ...` is how a task subject would break out of its quotes.
HOSTILE_WORDS = ["a\\", "; touch pwned; echo ", "it's", "\\'", "$(touch pwned)", "`touch pwned`", "!1", "~",
                 "%s %n", "-n", "line\nbreak", "tab\there", "é ✓ 漢字", '"$HOME"', "\\\\", "*", "{a,b}", "#x", "",
                 "(a)|b&c;d<e>f?g[h]^{}~#", "\u00a0\u2028\u0085\u200f", "漢\\", "é\n", "é'"]


@pytest.mark.parametrize("shell", ["sh", "bash", "dash", "zsh", "fish", "tcsh"])
def test_remote_command_lines_mean_the_same_to_every_login_shell(shell: str, tmp_path: Path) -> None:
    """sshd hands the command line to the user's login shell, whatever it is: every argument must arrive as it
    was, and none may run. (Shells that are not installed are skipped; CI installs fish and tcsh.)"""
    from daintree_tui.services.remote import for_any_login_shell, remote_command

    if not shutil.which(shell):
        pytest.skip(f"{shell} not installed")
    line = for_any_login_shell(remote_command(["printf", "[%s]\\n", *HOSTILE_WORDS]))
    proc = subprocess.run([shell, "-c", line], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "".join(f"[{word}]\n" for word in HOSTILE_WORDS)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("shell", ["sh", "bash", "dash", "zsh", "fish", "tcsh"])
def test_bytes_that_are_not_utf8_arrive_as_they_were(shell: str, tmp_path: Path) -> None:
    """An argument read with surrogateescape (a file name or text that is not UTF-8) is sent as its bytes, in the
    C locale too; it raised UnicodeEncodeError (an internal error) before."""
    from daintree_tui.services.remote import for_any_login_shell, remote_command

    if not shutil.which(shell):
        pytest.skip(f"{shell} not installed")
    words = [b"\xff\xfe", b"\xc3", b"\xc3'", b"\x81\\", b"caf\xe9 \xe2\x80\xae"]
    line = for_any_login_shell(remote_command(["printf", "[%s]\\n", *(os.fsdecode(w) for w in words)]))
    proc = subprocess.run([shell, "-c", os.fsencode(line)], cwd=tmp_path, capture_output=True,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LC_ALL": "C"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"".join(b"[" + w + b"]\n" for w in words)


def test_remote_lines_stay_within_one_argument() -> None:
    """40 KB of UTF-8 text fits in one remote command line (octal escapes made it 160 KB: `Argument list too
    long`, an internal error); past Linux's 128 KiB for one argument it is one line of bad input."""
    from daintree_tui.core.errors import InputError
    from daintree_tui.services.remote import MAX_REMOTE_LINE, for_any_login_shell, remote_command

    line = for_any_login_shell(remote_command(["printf", "%s", "é" * 20_000 + "漢字" * 5_000]))
    assert len(os.fsencode(line)) < 80_000
    with pytest.raises(InputError, match="too long"):
        for_any_login_shell(remote_command(["printf", "%s", "\n" * (MAX_REMOTE_LINE // 4)]))


def test_control_dir_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from daintree_tui.core.errors import OperationError
    from daintree_tui.services.remote import control_dir

    monkeypatch.setenv("DAINTREE_SSH_CONTROL_DIR", str(tmp_path / "c"))
    path = control_dir()
    assert path.stat().st_mode & 0o777 == 0o700
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("DAINTREE_SSH_CONTROL_DIR", str(tmp_path / "link"))
    with pytest.raises(OperationError, match="not a link"):
        control_dir()


# -- every command with --host ----------------------------------------------------------------------------------


def test_create_list_run_remove_with_host(far: str, far_repo: Path, repo: Path, cli: CLI) -> None:
    created = cli.json("worktree", "create", "feat", "--host", far)
    assert created["path"] == str(far_repo / ".worktrees" / "feat")
    assert (far_repo / ".worktrees" / "feat").is_dir() and not (repo / ".worktrees" / "feat").exists()
    listed = cli.json("worktree", "list", "--host", far)
    assert [w["name"] for w in listed] == ["feat"]
    plain = cli.ok("--host", far, "worktree", "list")
    assert plain.stdout.startswith("NAME") and "feat" in plain.stdout  # the user's choice: no --json, plain text

    run = cli("worktree", "run", "feat", "--host", far, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert (run.returncode, run.stdout, run.stderr) == (7, "out\n", "err\n")

    bad = cli("worktree", "create", "bad name!", "--host", far)
    assert bad.returncode == 2 and bad.stderr.startswith("daintree: ") and "invalid" in bad.stderr

    (far_repo / ".worktrees" / "feat" / "scratch.txt").write_text("uncommitted work\n")
    dirty = cli("worktree", "remove", "feat", "--host", far)
    assert dirty.returncode == 1 and "scratch.txt" in dirty.stderr
    assert (far_repo / ".worktrees" / "feat" / "scratch.txt").exists()
    cli.ok("worktree", "remove", "feat", "--force", "--host", far)
    assert cli.json("worktree", "list", "--host", far) == []


def test_hostile_arguments_arrive_unchanged(far: str, cli: CLI, tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    subject = f"$(touch {canary}); `touch {canary}` ' \" \\ ; | & > < *"
    created = cli.json("task", "create", subject, "--description", "a\nb\tc", "--host", far)
    assert created["subject"] == subject and created["description"] == "a\nb\tc"
    assert [t["subject"] for t in cli.json("task", "list", "--host", far)] == [subject]
    assert not canary.exists()
    assert cli.json("task", "list") == []  # nothing happened here


@pytest.mark.parametrize("sshd", ["fish", "tcsh"], indirect=True)
def test_hostile_arguments_stay_text_under_a_login_shell_that_is_not_posix(sshd: Sshd, far: str, cli: CLI,
                                                                          tmp_path: Path) -> None:
    """fish reads `\\'` inside single quotes as a quote: a subject ending in a backslash would close its quotes
    early and the description would run as commands on the far host."""
    canary = tmp_path / "pwned"
    subject, description = "fix the parser \\", f"'; touch {canary}; echo '"
    created = cli.json("task", "create", subject, "--description", description, "--host", far)
    assert (created["subject"], created["description"]) == (subject, description)
    streamed = cli("worktree", "events", "--host", far, "--json")
    assert streamed.returncode == 0, streamed.stderr
    assert not canary.exists()


@pytest.mark.parametrize("sshd", ["fish"], indirect=True)
def test_long_text_and_raw_bytes_reach_a_host(sshd: Sshd, far: str, cli: CLI) -> None:
    """A 45 KB task description in UTF-8 arrives whole through a fish login shell; text that is not UTF-8 arrives
    as its bytes; text too long for one command line is one line, exit 2 (each was an internal error)."""
    description = "é" * 15_000 + "漢字\n" * 2_000 + "it's a \\ `$(x)`"
    created = cli.json("task", "create", "long", "--description", description, "--host", far)
    assert created["description"] == description
    raw = cli("task", "create", "caf\udce9", "--host", far, "--json")
    assert raw.returncode == 0 and "internal error" not in raw.stderr, raw.stderr
    too_long = cli("task", "create", "huge", "--description", "\n" * 40_000, "--host", far)
    assert too_long.returncode == 2 and too_long.stderr.count("\n") == 1 and "too long" in too_long.stderr


def test_unreachable_host_is_one_line_exit_1(far: str, sshd: Sshd, cli: CLI) -> None:
    sshd.kill()
    proc = cli("worktree", "list", "--host", far)
    assert proc.returncode == 1
    assert proc.stderr.startswith("daintree: host far unreachable: ") and proc.stderr.count("\n") == 1, proc.stderr


def test_host_refuses_local_only_and_repo(far: str, cli: CLI) -> None:
    assert cli("--host", far).returncode == 2
    assert cli("host", "list", "--host", far).returncode == 2
    assert cli("worktree", "list", "--host", far, "--repo", ".").returncode == 2
    inside = cli("worktree", "merge", "x", "--host", far, env={"DAINTREE_WORKTREE": "agent"})
    assert inside.returncode == 1 and "inside an agent's session" in inside.stderr


def test_doctor_fix_on_the_host_repairs_a_half_finished_create(far: str, far_repo: Path, cli: CLI) -> None:
    cli.json("worktree", "create", "half", "--host", far)
    shutil.rmtree(far_repo / ".worktrees" / "half")  # as if the create (or the connection) died halfway
    found = cli("doctor", "--host", far)
    assert found.returncode == 1 and "half" in found.stdout
    fixed = cli.json("doctor", "--fix", "--host", far)
    assert fixed["fixed"] and any("half" in f for f in fixed["findings"])
    assert cli("doctor", "--host", far).returncode == 0


# -- sessions, streaming, faults ------------------------------------------------------------------------------------


def _session(cli: CLI, host: str, name: str) -> dict[str, object]:
    return next(s for s in cli.json("session", "list", "--host", host) if s["name"] == name)


def test_remote_session_capture_attach_and_dropped_connection(far: str, sshd: Sshd, cli: CLI) -> None:
    from daintree_tui.services.hosts_feed import HostsFeed

    cli.json("worktree", "create", "agent", "--agent", "shell", "--host", far)
    info = _session(cli, far, "agent")
    assert info["socket"] and info["tmux_conf"] and info["status"] != "exited"
    cli.ok("session", "send", "agent", "echo remote-$((6*7))", "--host", far)
    wait_for(lambda: "remote-42" in cli.json("session", "capture", "agent", "--host", far)["screen"], timeout=20)

    host = remote(far)
    assert host.master_running()  # type: ignore[attr-defined]
    feed = HostsFeed([host])  # type: ignore[list-item]
    assert feed.poll()["far"].status == "ok"

    # The connection goes: master closed, sshd killed. The agent lives in the remote tmux and keeps running.
    assert host.stop_master()  # type: ignore[attr-defined]
    sshd.kill()
    state = feed.poll()["far"]
    assert state.status == "unreachable" and state.error
    assert [w["name"] for w in state.worktrees] == ["agent"]  # last known state kept, with its time
    assert state.updated_at is not None and state.checked_at is not None and state.checked_at > state.updated_at
    alive = subprocess.run(["tmux", "-L", str(info["socket"]), "has-session", "-t", f"={info['session']}"],
                           capture_output=True)
    assert alive.returncode == 0

    sshd.start()
    assert wait_for(lambda: feed.poll()["far"].status == "ok", timeout=30)
    assert _session(cli, far, "agent")["status"] != "exited"
    cli.ok("session", "send", "agent", "echo again-$((7*6))", "--host", far)
    wait_for(lambda: "again-42" in cli.json("session", "capture", "agent", "--host", far)["screen"], timeout=20)

    # What the dashboard's terminal runs in its PTY to show the remote session.
    attach = host.attach_argv(str(info["session"]), str(info["socket"]), str(info["tmux_conf"]))  # type: ignore
    shown = run_in_pty(attach, until=b"again-42")
    assert b"again-42" in shown


def followers(repo: Path) -> list[str]:
    """Processes following this repo's event log (only ours: the path is this test's)."""
    out = subprocess.run(["pgrep", "-f", f"{repo} worktree events --follow"], capture_output=True, text=True)
    return out.stdout.split()


def test_follow_streams_and_ends_with_us(far: str, far_repo: Path, cli: CLI) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", "worktree", "events", "--follow", "--json",
                             "--host", far], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        cli.json("worktree", "create", "streamed", "--host", far)
        Lines(proc.stdout).until(lambda line: json.loads(line).get("event") == "worktree.create.after")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 128 + signal.SIGTERM
    wait_for(lambda: not followers(far_repo), timeout=20)  # the far side's follower ended with us


def test_stream_api_yields_lines_and_stops_the_remote_follower(far: str, far_repo: Path, cli: CLI) -> None:
    host = remote(far)
    with host.stream(["worktree", "events", "--follow", "--json"]) as lines:  # type: ignore[attr-defined]
        cli.json("task", "create", "streamed task", "--host", far)
        first = json.loads(next(iter(lines)))
        assert first["event"] == "task.created"
        assert followers(far_repo)
    wait_for(lambda: not followers(far_repo), timeout=20)


# -- the feed and placement -----------------------------------------------------------------------------------------


def test_queue_placement_fills_two_hosts_by_free_slots(sshd: Sshd, tmp_path: Path, cli: CLI) -> None:
    from daintree_tui.services.hosts_feed import HostsFeed, free_slots, place
    from daintree_tui.services.remote import HostConfig, RemoteHost, save_host

    repo_a, repo_b = make_repo(tmp_path / "repo-a"), make_repo(tmp_path / "repo-b")
    save_host(HostConfig("a", "dt-far", str(repo_a), max_sessions=2, daintree=DAINTREE))
    save_host(HostConfig("b", "dt-other", str(repo_b), max_sessions=3, daintree=DAINTREE))
    cli.json("worktree", "create", "busy", "--agent", "shell", "--host", "a")  # a: 1 of 2 slots taken
    feed = HostsFeed([RemoteHost(HostConfig("a", "dt-far", str(repo_a), 2, DAINTREE)),
                      RemoteHost(HostConfig("b", "dt-other", str(repo_b), 3, DAINTREE))])
    states = feed.poll()
    assert free_slots(states) == {"a": 1, "b": 3}
    placed = place(["t1", "t2", "t3", "t4", "t5"], free_slots(states))
    assert placed == [("t1", "b"), ("t2", "b"), ("t3", "a"), ("t4", "b")]  # t5 waits: no slot left
    for task, host in placed:
        cli.json("worktree", "create", task, "--agent", "shell", "--host", host)
    states = feed.poll()
    assert free_slots(states) == {"a": 0, "b": 0}
    assert sorted(w["name"] for w in states["b"].worktrees) == ["t1", "t2", "t4"]
    assert sorted(w["name"] for w in states["a"].worktrees) == ["busy", "t3"]


def test_place_is_pure_and_skips_hosts_without_slots() -> None:
    from daintree_tui.services.hosts_feed import place

    assert place(["x", "y"], {"a": 0, "b": 0}) == []
    assert place(["x", "y", "z"], {"a": 1, "b": 1}) == [("x", "a"), ("y", "b")]
    assert place([], {"a": 5}) == []


def test_host_queue_places_ready_tasks_and_completes_them_when_the_agent_exits(
        sshd: Sshd, tmp_path: Path, repo: Path, cli: CLI, project: object) -> None:
    from daintree_tui.services.host_queue import HostQueue
    from daintree_tui.services.remote import HostConfig, RemoteHost, save_host

    repo_a, repo_b = make_repo(tmp_path / "repo-a"), make_repo(tmp_path / "repo-b")
    hosts = [HostConfig("a", "dt-far", str(repo_a), max_sessions=1, daintree=DAINTREE),
             HostConfig("b", "dt-other", str(repo_b), max_sessions=2, daintree=DAINTREE)]
    for host in hosts:
        save_host(host)
    ids = [cli.json("task", "create", f"job {n}", "--agent", "shell")["id"] for n in range(1, 5)]
    queue = HostQueue(project, [RemoteHost(h) for h in hosts])  # type: ignore[arg-type]

    first = cli.json("queue", "run", "--hosts", "a,b", "--once")
    assert first["errors"] == [] and first["free"] == {"a": 1, "b": 2}
    assert first["placed"] == {"b": [ids[0], ids[2]], "a": [ids[1]]}
    assert first["waiting_tasks"] == 1
    local = {t["id"]: t for t in cli.json("task", "list")}
    assert local[ids[1]]["owner"] == "host:a" and local[ids[1]]["remote"]["worktree"] == "job-2"
    assert local[ids[3]]["status"] == "pending" and local[ids[3]]["owner"] == ""
    # The local list shows where each placed task's work is (it showed `-`): NAME@HOST, in the table and in
    # `where`; the `worktree` binding stays a local name (none here), as reconcile and remove read it.
    assert local[ids[1]]["where"] == "job-2@a" and local[ids[1]]["worktree"] == ""
    assert local[ids[3]]["where"] == ""
    rows = {ln.split()[1]: ln for ln in cli.ok("task", "list").stdout.splitlines()[1:]}
    assert rows[str(ids[1])].split()[5] == "job-2@a", rows
    assert "worktree:   job-2@a" in cli.ok("task", "show", str(ids[1])).stdout
    far_tasks = cli.json("task", "list", "--host", "a")
    assert [(t["subject"], t["status"], t["worktree"]) for t in far_tasks] == [("job 2", "in_progress", "job-2")]

    # The agent on host a finishes: its task completes here, and its slot takes the last task.
    cli.ok("session", "send", "job-2", "exit 0", "--host", "a")
    wait_for(lambda: _session(cli, "a", "job-2")["status"] == "exited", timeout=20)
    second = queue.step()
    assert second.completed == [ids[1]] and second.placed == {"a": [ids[3]]}, second.to_dict()
    local = {t["id"]: t for t in cli.json("task", "list")}
    assert local[ids[1]]["status"] == "completed" and local[ids[3]]["remote"]["host"] == "a"
    # The host's own board follows: its task is completed there too (it stayed in_progress).
    assert [t["status"] for t in cli.json("task", "list", "--host", "a") if t["subject"] == "job 2"] == ["completed"]
    assert queue.step().placed == {}  # every slot is taken: nothing more to place

    # A session stopped there frees its task here (it stayed in_progress, owned by host:b, forever).
    stopped_name = local[ids[2]]["remote"]["worktree"]
    cli.ok("session", "stop", stopped_name, "--host", "b")
    # The rest finish: `queue run` says each as it happens and sums up the whole run, each id with its worktree.
    for task_id in (ids[0], ids[3]):
        where = local[task_id]["remote"]
        cli.ok("session", "send", where["worktree"], "exit 0", "--host", where["host"])
    run = cli("queue", "run", "--hosts", "a,b", "--interval", "0.2", timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert f"stopped {stopped_name}@b (task {ids[2]}): its session there is gone: the task is pending again" \
        in lines, lines
    assert f"completed task {ids[0]} ({local[ids[0]]['remote']['worktree']}@b exited 0)" in lines, lines
    summary = lines[-1]
    assert f"task {ids[0]} ({local[ids[0]]['remote']['worktree']}@b)" in summary.split("completed: ")[1], summary
    assert f"stopped: task {ids[2]} ({stopped_name}@b)" in summary and "in flight: 0" in summary, summary
    freed = {t["id"]: t for t in cli.json("task", "list")}[ids[2]]
    assert freed["status"] == "pending" and freed["owner"] == "", freed


def test_host_queue_says_what_waits_on_a_task_it_does_not_place(far: str, repo: Path, cli: CLI) -> None:
    """`queue run --hosts` waited in silence on tasks blocked by a person's task: it says which waits on which."""
    cli.ok("task", "create", "by hand")
    cli.ok("task", "update", "1", "--owner", "alice", "--status", "in_progress")
    cli.ok("task", "create", "after it", "--agent", "shell", "--blocked-by", "1")
    run = cli("queue", "run", "--hosts", far, "--once")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[0] == "waiting: task 2 waits on task 1 (in progress, owned by alice)", run.stdout
    report = cli("queue", "run", "--hosts", far, "--once", "--json")
    assert json.loads(report.stdout)["waiting_on"] == {"2": {"task": 1, "why": "in progress, owned by alice"}}
    assert cli.json("task", "list", "--host", far) == []  # nothing placed


def test_stdin_reaches_the_remote_command(far: str) -> None:
    host = remote(far)
    result = host.run_command("tr a-z A-Z", input="typed here\n")  # type: ignore[attr-defined]
    assert (result.exit_code, result.stdout) == (0, "TYPED HERE\n")


def test_a_connection_that_ends_mid_command_is_unreachable_not_the_commands_exit(far: str, sshd: Sshd,
                                                                                tmp_path: Path) -> None:
    """The master connection dies while a command runs over it: ssh exits 255 and says why only at debug level.
    That is no answer from the host (the dashboard says it does not answer), not a command that failed there."""
    from concurrent.futures import ThreadPoolExecutor

    from daintree_tui.services.remote import HostUnreachable

    host = remote(far)
    started = tmp_path / "started"
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(host.run_command, f"touch {started}; sleep 60")  # type: ignore[attr-defined]
        assert wait_for(started.exists, timeout=30)
        sshd.kill()
        assert host.stop_master()  # type: ignore[attr-defined]
        with pytest.raises(HostUnreachable) as raised:
            running.result(timeout=30)
    assert "ssh exit 255" in raised.value.reason


def test_create_on_host_makes_task_worktree_and_session_there_or_leaves_its_task_owned(far: str) -> None:
    from daintree_tui.core.errors import InputError
    from daintree_tui.services.host_queue import CREATE_FAILED_OWNER, create_on_host

    host = remote(far)
    made = create_on_host(host, "Add search", "the box", "shell")  # type: ignore[arg-type]
    assert made.name == "add-search" and made.worktree["session"]["agent"] == "shell"
    again = create_on_host(host, "Add search", "", "shell", taken={"add-search"})  # type: ignore[arg-type]
    assert again.name == "add-search-2"
    with pytest.raises(InputError, match="base ref"):
        create_on_host(host, "Bad base", "", "shell", base="no-such-ref")  # type: ignore[arg-type]
    tasks = host.run_json(["task", "list"])  # type: ignore[attr-defined]
    assert [(t["subject"], t["worktree"], t["owner"]) for t in tasks] == [
        ("Add search", "add-search", ""), ("Add search", "add-search-2", ""), ("Bad base", "", CREATE_FAILED_OWNER)]


def test_text_that_starts_with_a_dash_is_text_on_a_host_too(far: str) -> None:
    from daintree_tui.services.host_queue import create_task_on_host

    host = remote(far)
    task = create_task_on_host(host, "-v is broken", "--help prints nothing", "shell")  # type: ignore[arg-type]
    shown = host.run_json(["task", "show", str(task["id"])])  # type: ignore[attr-defined]
    assert (shown["subject"], shown["description"], shown["agent"]) == ("-v is broken", "--help prints nothing",
                                                                        "shell")


def test_a_host_answering_json_nested_too_deep_is_one_error_not_the_end_of_polling(sshd: Sshd, tmp_path: Path,
                                                                                  cli: CLI) -> None:
    """A hostile host printed `[[[[...` for `worktree list --json`: RecursionError (not a ValueError) came out of
    the poll, ending the dashboard's host poller for every host and `queue run --hosts` with an internal error."""
    from daintree_tui.services.hosts_feed import HostsFeed
    from daintree_tui.services.remote import HostConfig, RemoteHost, save_host

    hostile = tmp_path / "hostile-daintree"
    hostile.write_text("#!/bin/sh\nexec python3 -c 'import sys; sys.stdout.write(\"[\" * 200000)'\n")
    hostile.chmod(0o755)
    save_host(HostConfig("evil", "dt-far", str(tmp_path), max_sessions=1, daintree=str(hostile)))
    feed = HostsFeed([RemoteHost(HostConfig("evil", "dt-far", str(tmp_path), max_sessions=1,
                                            daintree=str(hostile)))])
    state = feed.poll()["evil"]  # raised RecursionError
    assert state.reachable and "did not print JSON" in (state.error or ""), state
    proc = cli("queue", "run", "--once", "--hosts", "evil", timeout=60)
    assert "internal error" not in proc.stderr, proc.stderr


def test_host_check_never_writes_a_hosts_own_output_raw_to_the_terminal(sshd: Sshd, tmp_path: Path,
                                                                        cli: CLI) -> None:
    """`host check` quotes what the host's programs printed (its daintree's version, an error): a hostile host's
    `daintree --version` of `daintree 9 ESC]52;...` went to the user's terminal as it was (a clipboard write)."""
    from daintree_tui.services.remote import HostConfig, save_host

    hostile = tmp_path / "hostile-daintree"
    hostile.write_text("#!/bin/sh\nprintf 'daintree 9\\033]52;c;Y3VybCBldmlsfHNo\\007\\033[2J\\n'\n")
    hostile.chmod(0o755)
    save_host(HostConfig("evil", "dt-far", str(tmp_path), max_sessions=1, daintree=str(hostile)))
    proc = cli("host", "check", "evil", timeout=60)
    assert proc.returncode == 1 and "problem: host evil: daintree" in proc.stderr, proc.stderr
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr, proc.stderr
    assert "\\x1b]52;c;" in proc.stderr  # shown, escaped: the user sees what the host sent


def test_remote_attach_draws_utf8_where_the_host_has_no_locale(far: str, cli: CLI) -> None:
    """The host's ssh login has no LANG (sshd sets none here): `tmux -u` still draws an agent's ✻ ✔ ●, not `_`."""
    cli.json("worktree", "create", "glyphs", "--agent", "shell", "--host", far)
    cli.ok("session", "send", "glyphs", r"printf 'mark:\342\234\273\342\234\224\342\227\217:end\n'", "--host", far)
    info = _session(cli, far, "glyphs")
    host = remote(far)
    attach = host.attach_argv(str(info["session"]), str(info["socket"]), str(info["tmux_conf"]))  # type: ignore
    shown = run_in_pty(attach, until=b":end", env={"LANG": "", "LC_ALL": "", "LC_CTYPE": ""})
    assert "mark:✻✔●:end".encode() in shown, shown[-400:]


def test_host_key_verification_failed_says_how_to_accept_the_key(sshd: Sshd, far_repo: Path, tmp_path: Path,
                                                                  cli: CLI) -> None:
    """First contact with ssh's default (strict) host key checking and an empty known_hosts: one line, with how to
    accept the key."""
    from daintree_tui.services.remote import HostConfig, save_host

    strict = tmp_path / "strict_config"
    strict.write_text(sshd.client_config.read_text().replace("StrictHostKeyChecking accept-new",
                                                             "StrictHostKeyChecking yes")
                      .replace(str(sshd.base / "known_hosts"), str(tmp_path / "empty_known_hosts")))
    save_host(HostConfig("fresh", "dt-far", str(far_repo), daintree=DAINTREE, ssh_config=str(strict)))
    proc = cli("worktree", "list", "--host", "fresh")
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert "Host key verification failed" in line and "ssh-keyscan" in line and "accept-new" in line, line
    # The host's own ssh config file: `ssh dt-far` alone would read ~/.ssh/config (found in a trial).
    assert f"`ssh -F {strict} dt-far`" in line and f"accept-new` in {strict}" in line, line


def test_a_hung_host_is_one_line_within_seconds_not_a_hang(far: str, sshd: Sshd, cli: CLI) -> None:
    """sshd stopped (SIGSTOP: the connection stays open and silent): the poll and `worktree list --host` end with
    one line each within their bounds, over the master connection that was up and over a new one."""
    from daintree_tui.services.hosts_feed import POLL_TIMEOUT, HostsFeed

    cli.json("worktree", "create", "held", "--host", far)
    host = remote(far)
    feed = HostsFeed([host])  # type: ignore[list-item]
    assert feed.poll()["far"].status == "ok"
    frozen = sshd.freeze()
    try:
        began = time.monotonic()
        state = feed.poll()["far"]
        assert state.status == "unreachable" and [w["name"] for w in state.worktrees] == ["held"]
        assert time.monotonic() - began < POLL_TIMEOUT + 2
        began = time.monotonic()
        proc = cli("worktree", "list", "--host", far)
        took = time.monotonic() - began
        assert proc.returncode == 1 and "host far unreachable:" in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and took < 15, (took, proc.stderr)
    finally:
        sshd.thaw(frozen)
    assert wait_for(lambda: feed.poll()["far"].status == "ok", timeout=30)


def test_queue_run_over_a_hung_host_says_so_as_it_happens_and_when_it_is_back(
        far: str, sshd: Sshd, repo: Path, cli: CLI) -> None:
    """Found in a trial: `queue run --hosts far` with far's sshd stopped printed nothing for 40 s, then at Ctrl-C
    `error: host far: host far: exit -2` and no word that the host had hung."""
    import signal

    cli.json("worktree", "list", "--host", far)  # the master connection is up, as in a run that went on a while
    task = cli.json("task", "create", "job", "--agent", "shell")["id"]
    frozen = sshd.freeze()
    proc = subprocess.Popen([DAINTREE, "queue", "run", "--hosts", far, "--interval", "0.2"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    try:
        began = time.monotonic()
        first = proc.stdout.readline()
        assert first.startswith(f"unreachable: {far} (") and "nothing new goes there" in first, first
        assert time.monotonic() - began < 15
        sshd.thaw(frozen)
        frozen = []
        seen = [proc.stdout.readline() for _ in range(2)]  # the placement and the host's return, in either order
        assert f"{far} answers again\n" in seen and any(f"started task {task} in job@{far}" in s for s in seen), seen
    finally:
        sshd.thaw(frozen)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert f"host {far}: host {far}" not in out + err, out + err
    cli.ok("session", "stop", "job", "--host", far)
