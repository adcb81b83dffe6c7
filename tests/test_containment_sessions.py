"""Containment through the real CLI: limits on real sessions (tmux) and `worktree run`, the network allow-list
against real servers on 127.0.0.1 outside the sandbox, the repository-lowering rule, and the groups a kill -9
leaves behind."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core import limits
from daintree_tui.core.project import Project
from daintree_tui.core.sandbox import BwrapSandbox
from daintree_tui.sessions.manager import SessionManager
from tests.conftest import CLI, events, git, trusted_config, wait_for

_OK, _WHY = BwrapSandbox().available()
_BACKEND, _NO_BACKEND = limits.choose_backend()
pytestmark = pytest.mark.skipif(not _OK, reason=f"bubblewrap cannot run here: {_WHY}")
needs_cgroups = pytest.mark.skipif(_BACKEND is None and not os.environ.get("CI"),
                                   reason=f"no cgroup backend here: {_NO_BACKEND}")



def _user_config(text: str) -> None:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def default_signals_mask() -> int:
    """The signals an agent must start with at their default action, as a SigIgn mask: Ctrl-C, the pane's
    hang-up, a pipe's reader gone, a file size limit (Python ignores the last two for itself)."""
    return sum(1 << (sig - 1) for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ))


def _capture(cli: CLI, name: str) -> str:
    return cli("session", "capture", name).stdout


def _listed(cli: CLI) -> dict[str, Any]:
    return {s["name"]: s for s in cli.json("session", "list")}


@needs_cgroups
def test_run_is_limited_and_its_group_removed(repo: Path, sandbox_env: Path) -> None:
    _user_config('[sandbox]\nmemory = "64M"\npids = 64\ncpu = 0.5\n')
    cli = CLI(repo)
    cli.ok("worktree", "create", "r1")
    # Inside, the sandbox's own cgroup namespace shows its group as /: the limit is seen by hitting it.
    proc = cli("worktree", "run", "r1", "--", "sh", "-c",
               "for i in $(seq 100); do sleep 5 & done 2>/dev/null; echo started; wait; exit 3")
    assert proc.returncode != 0, proc.stderr
    assert "pids limit" in proc.stderr  # said by the limits runner, outside
    limited = [e for e in events(repo) if e["event"] == "sandbox.limit"]
    assert limited and limited[-1]["reason"] == "pids limit" and limited[-1]["worktree"]["name"] == "r1"
    assert "run stopped: pids limit" in cli("worktree", "events").stdout  # the log says why, not the event alone
    assert not [g for g in _BACKEND.groups() if g.name.startswith("r1.run.")]  # type: ignore[union-attr]


HOG = "python3 -c 'b = bytearray(600 << 20); import time; time.sleep(60)'"
# The session's own shell forks once, before the bomb exists, then execs: no fork of its own is left to fail at the
# limit. (`bomb;` ran the pipeline in the shell itself, which forks each side of it: under load the first side's
# descendants filled the group before the second fork, "Cannot fork" ended the shell, and the session with it.)
BOMB = "sh -c 'bomb() { bomb | bomb & }; bomb & exec sleep 600'"


@needs_cgroups
def test_fork_bomb_and_memory_hog_stop_only_their_own_sessions(repo: Path, sandbox_env: Path) -> None:
    _user_config(f"""
[sandbox]
pids = 128
[agents.hog]
command = "{HOG}"
prompt_mode = "none"
[agents.hog.sandbox]
memory = "96M"
[agents.bomb]
command = "{BOMB}"
prompt_mode = "none"
[agents.bomb.sandbox]
cpu = 0.3
""")
    cli = CLI(repo)
    for name in ("bomb", "hog", "calm"):
        cli.ok("worktree", "create", name)
    calm = cli.json("session", "start", "calm", "--agent", "shell")
    assert calm["sandbox"]["group"].startswith("calm.session.")
    bomb = cli.json("session", "start", "bomb", "--agent", "bomb")
    group = bomb["sandbox"]["group"]
    wait_for(lambda: limits.reason_of(group) == "pids limit", timeout=30)
    wait_for(lambda: _capture(cli, "calm").strip() != "", timeout=15)
    cli.ok("session", "send", "calm", "echo alive-$((6*7))")
    sent = time.monotonic()
    wait_for(lambda: "alive-42" in _capture(cli, "calm"), timeout=5, interval=0.02)
    assert time.monotonic() - sent < 2.0  # the machine is shared and loaded: a second, with room

    hog = cli.json("session", "start", "hog", "--agent", "hog")
    assert hog["sandbox"]["limits"]["memory"] == "96M"
    listed = wait_for(lambda: (s := _listed(cli)).get("hog", {}).get("status") == "exited" and s, timeout=60)
    assert listed["hog"]["exit_code"] == 137 and listed["hog"]["limit"] == "oom-killed", listed["hog"]
    assert "oom-killed" in cli("session", "list").stdout
    # The dashboard's Status column (10 cells) keeps the reason; the title above the terminal has it whole.
    from daintree_tui.tui.widgets.worktree_table import COLUMNS, session_cell

    info = next(i for i in SessionManager(Project.discover(repo)).list() if i.name == "hog")
    width = next(c.width for c in COLUMNS if c.key == "session")
    assert session_cell(info, short=True).plain == "■ oom 137" and len("■ oom 137") <= width
    assert session_cell(info).plain.startswith("■ exited 137 oom-killed")
    assert listed["calm"]["status"] != "exited" and listed["bomb"]["status"] != "exited"
    limited = [e for e in events(repo) if e["event"] == "sandbox.limit"]
    assert any(e["worktree"]["name"] == "hog" and e["reason"] == "oom-killed" for e in limited)
    cli.ok("session", "stop", "bomb")
    cli.ok("session", "stop", "calm")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _server(folder: Path) -> Iterator[int]:
    handler = lambda *a, **kw: _Quiet(*a, directory=str(folder), **kw)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


FETCH = r"""
import os, socket, sys, urllib.request
def get(url):
    try:
        return urllib.request.urlopen(url, timeout=20).read().decode().strip()
    except Exception as exc:
        return f"failed {getattr(exc, 'code', exc)}"
print("allowed", get(sys.argv[1] + "/hello.txt"))
print("other", get(sys.argv[2] + "/hello.txt"))
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("127.0.0.1", int(sys.argv[1].rsplit(":", 1)[1])))
    print("direct connected")
except OSError as exc:
    print("direct failed", exc.errno)
print("proxy", os.environ.get("HTTPS_PROXY"), os.environ.get("NO_PROXY"))
"""


def test_allow_list_admits_only_its_hosts(repo: Path, sandbox_env: Path, tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "hello.txt").write_text("hello\n")
    git(repo, "clone", "-q", "--bare", str(repo), str(served / "origin.git"))
    git(served / "origin.git", "update-server-info")  # git's "dumb" HTTP: files over plain HTTP
    with _server(served) as allowed, _server(served) as other:
        _user_config(f'[sandbox]\nnetwork = ["127.0.0.1:{allowed}"]\n')
        cli = CLI(repo)
        cli.ok("worktree", "create", "n1")
        script = repo / ".worktrees" / "n1" / "fetch.py"
        script.write_text(FETCH)
        proc = cli("worktree", "run", "n1", "--", "python3", "fetch.py", f"http://127.0.0.1:{allowed}",
                   f"http://127.0.0.1:{other}", env={"NO_PROXY": "127.0.0.1"})
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert "allowed hello" in out
        assert "other failed 403" in out
        assert "direct failed" in out
        assert "proxy http://127.0.0.1:3128 None" in out
        denied = [e for e in events(repo) if e["event"] == "sandbox.denied"]
        assert denied and denied[-1]["worktree"]["name"] == "n1" and denied[-1]["port"] == other
        detail = cli("worktree", "status", "n1")
        assert f"127.0.0.1:{other}" in detail.stdout and "network_extra" in detail.stdout
        # The events log (CLI and dashboard) names the refused host, not only "sandbox.denied n1".
        from daintree_tui.tui.widgets.events_log import format_event
        assert f"refused 127.0.0.1:{other}" in cli("worktree", "events").stdout
        assert f"refused 127.0.0.1:{other}" in format_event(denied[-1]).plain

        fetched = cli("worktree", "run", "n1", "--", "git", "fetch", "-q",
                      f"http://127.0.0.1:{allowed}/origin.git", "main")
        assert fetched.returncode == 0, fetched.stderr
        refused = cli("worktree", "run", "n1", "--", "git", "fetch", "-q",
                      f"http://127.0.0.1:{other}/origin.git", "main")
        assert refused.returncode != 0


BUSY = "import os, time\nt = time.time()\nwhile time.time() - t < 3: pass\nc = os.times()\nprint(c.user + c.system)\n"


@needs_cgroups
def test_cpu_half_a_core_holds_a_busy_loop(repo: Path, sandbox_env: Path) -> None:
    _user_config("[sandbox]\ncpu = 0.5\n")
    cli = CLI(repo)
    cli.ok("worktree", "create", "c1")
    proc = cli("worktree", "run", "c1", "--", "python3", "-c", BUSY)
    assert proc.returncode == 0, proc.stderr
    # 3 s of wall time at half a core: at most 1.5 s of CPU (one 100 ms period of slack). The machine is loaded,
    # so only the upper bound is asserted.
    assert float(proc.stdout.split()[-1]) <= 1.6, proc.stdout


def test_repository_may_only_lower_limits_until_trusted(repo: Path, sandbox_env: Path) -> None:
    from daintree_tui.core.config import load
    from daintree_tui.core.sandbox.containment import effective

    _user_config('[sandbox]\nmemory = "1G"\npids = 256\nnetwork = ["api.example.com"]\n')
    (repo / ".daintree.toml").write_text('[sandbox]\nmemory = "8G"\npids = 64\nnetwork = true\n'
                                         '[roles.worker.sandbox]\ncpu = 1.0\n')
    cli = CLI(repo)
    cli.ok("worktree", "create", "t1")
    started = cli("session", "start", "t1", "--agent", "shell", "--json")
    assert started.returncode == 0, started.stderr
    assert "sandbox.memory in .daintree.toml ignored" in started.stderr
    assert "sandbox.network in .daintree.toml ignored" in started.stderr
    record = json.loads(started.stdout)["sandbox"]
    assert record["limits"] == {"memory": "1G", "pids": 64, "cpu": None}  # the lower pids stands
    assert record["network"] == "only api.example.com"
    cli.ok("session", "stop", "t1")
    worker = effective(load(repo), role="worker")
    assert worker.limits.cpu == 1.0  # a limit the user had not set: the repository's lowers it
    trusted_config(repo, (repo / ".daintree.toml").read_text())
    cfg = load(repo)
    assert effective(cfg).limits == limits.Limits(8 << 30, 64, None) and effective(cfg).allow is None


@needs_cgroups
def test_kill_9_leaves_a_group_that_doctor_fix_removes(repo: Path, sandbox_env: Path) -> None:
    _user_config("[sandbox]\npids = 64\n")
    cli = CLI(repo)
    # Groups and processes are the machine's, seen by every test running beside this one: a name of its own.
    name = f"k9-{os.getpid()}"
    cli.ok("worktree", "create", name)
    running = subprocess.Popen([sys.executable, "-m", "daintree_tui", "worktree", "run", name, "--", "sleep", "60"],
                               cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def runner() -> int | None:
            for entry in Path("/proc").iterdir():
                with contextlib.suppress(OSError):
                    argv = (entry / "cmdline").read_bytes().split(b"\0")
                    if b"daintree_tui.core.limits_run" in argv and name.encode() in argv:
                        return int(entry.name)
            return None

        pid = wait_for(runner, timeout=30)
        group = wait_for(lambda: [g for g in _BACKEND.groups()  # type: ignore[union-attr]
                                  if g.name.startswith(f"{name}.run.")], timeout=30)[0]

        def sleeping() -> bool:  # bwrap asks to die with its parent early: once the command runs, it has
            for line in (group.folders[0] / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{line}/cmdline").read_bytes().startswith(b"sleep\0"):
                        return True
            return False

        # Killed before bwrap had asked (a CI run did), its sandbox outlives the runner by the sleep's 60 s.
        wait_for(sleeping, timeout=30)
        os.kill(pid, signal.SIGKILL)
        running.wait(timeout=60)
    finally:
        running.kill()
    wait_for(lambda: not (group.folders[0] / "cgroup.procs").read_text().strip(), timeout=30)
    assert group.folders[0].exists()  # left behind: nobody removed it
    # doctor --fix removes any empty group of the machine as old as this: 0 s took the group of a test beside this
    # one in the moment before its command joined it.
    young = {"DAINTREE_SWEEP_AGE_S": "2"}
    wait_for(lambda: time.time() - group.folders[0].stat().st_mtime > 2.5, timeout=30)
    found = cli("doctor", env=young)
    assert "empty cgroup(s) left" in found.stdout + found.stderr and group.name in found.stdout + found.stderr
    cli("doctor", "--fix", env=young)
    assert not any(folder.exists() for folder in group.folders)


# An agent that shows which signals its process ignores, then waits as an agent does.
SHOWS_SIGNALS = "[agents.shows]\ncommand = \"sh -c 'grep SigIgn /proc/self/status; exec sleep 600'\"\n" \
                "prompt_mode = \"none\"\n"


def _start_showing_signals(cli: CLI, name: str) -> tuple[dict[str, Any], int]:
    """A worktree `name` with the `shows` agent started in it: its session's sandbox record, and its SigIgn."""
    cli.ok("worktree", "create", name)
    sandbox = cli.json("session", "start", name, "--agent", "shows")["sandbox"]
    shown = wait_for(lambda: re.search(r"SigIgn:\s*([0-9a-f]+)", _capture(cli, name)), timeout=30)
    return sandbox, int(shown.group(1), 16)


@needs_cgroups
def test_a_limited_agent_hears_its_pane_and_stop_ends_it(repo: Path, sandbox_env: Path) -> None:
    # Before, the limits runner's own SIG_IGN of SIGINT and SIGHUP was inherited (Ctrl-C never reached a limited
    # agent), and the runner, the pane's session leader and so the only process the pane's hang-up reaches,
    # waited the hang-up out: after `session stop` the agent went on for good outside any session (a fork-bomb
    # test's `sleep 600` outlived its server).
    _user_config("[sandbox]\npids = 64\n" + SHOWS_SIGNALS)
    cli = CLI(repo)
    sandbox, ignored = _start_showing_signals(cli, "w")
    assert not ignored & default_signals_mask(), hex(ignored)
    folder = next(g for g in _BACKEND.groups() if g.name == sandbox["group"]).folders[0]  # type: ignore[union-attr]
    wait_for(lambda: (folder / "cgroup.procs").read_text().strip(), timeout=15)
    cli.ok("session", "stop", "w")
    wait_for(lambda: not folder.exists() or not (folder / "cgroup.procs").read_text().strip(), timeout=15)


@pytest.mark.parametrize("network", [pytest.param("", id="sandbox"),
                                     pytest.param('[sandbox]\nnetwork = ["127.0.0.1:9"]\n', id="allow-list")])
def test_an_agent_without_limits_starts_with_its_signals_at_their_defaults(repo: Path, sandbox_env: Path,
                                                                           network: str) -> None:
    # The pane's launcher is Python, which ignores SIGPIPE and SIGXFSZ; its exec passed that on to every agent, so
    # `yes | head` in an agent's shell wrote "Broken pipe" where the same shell outside daintree did not. With an
    # allow-list, the bridge inside the sandbox (Python too) did the same.
    _user_config(network + SHOWS_SIGNALS)
    cli = CLI(repo)
    sandbox, ignored = _start_showing_signals(cli, "u")
    assert sandbox["active"] and not ignored & default_signals_mask(), hex(ignored)
    cli.ok("session", "stop", "u")


HANDLES_CTRL_C = ("[agents.handles]\ncommand = \"sh -c 'trap \\\"echo interrupted\\\" INT; echo ready; "
                  "while :; do sleep 1; done'\"\nprompt_mode = \"none\"\n")


@pytest.mark.parametrize("contained", [
    pytest.param("", id="sandbox"),
    pytest.param('[sandbox]\npids = 64\nnetwork = ["127.0.0.1:9"]\n', marks=needs_cgroups, id="limits-allow-list")])
def test_ctrl_c_in_a_sandboxed_pane_reaches_the_agent_and_not_its_sandbox(repo: Path, sandbox_env: Path,
                                                                         contained: str) -> None:
    # Before, bubblewrap's own process, in the pane's foreground process group beside the agent, died of the
    # Ctrl-C and took the sandbox with it (--die-with-parent): an agent that handles Ctrl-C (aider stopping its
    # reply) lost its session, where outside the sandbox it goes on.
    _user_config(contained + HANDLES_CTRL_C)
    cli = CLI(repo)
    cli.ok("worktree", "create", "c")
    assert cli.json("session", "start", "c", "--agent", "handles")["sandbox"]["active"]
    wait_for(lambda: "ready" in _capture(cli, "c"), timeout=30)
    for times in (1, 2):
        cli.ok("session", "send", "c", "\x03", "--no-enter")  # typed: the pane's terminal makes it SIGINT
        wait_for(lambda: _capture(cli, "c").count("interrupted") >= times, timeout=30)  # noqa: B023
    assert _listed(cli)["c"]["status"] != "exited", _capture(cli, "c")
    cli.ok("session", "stop", "c")


@needs_cgroups
def test_sandbox_check_tries_each_limit_and_the_network_rule(repo: Path, sandbox_env: Path) -> None:
    _user_config('[sandbox]\nmemory = "256M"\npids = 100\ncpu = 1.5\nnetwork = "agent"\n'
                 'network_extra = ["127.0.0.1:9"]\n')
    cli = CLI(repo)
    cli.ok("worktree", "create", "s1")
    proc = cli("sandbox", "check", "s1", "--agent", "shell")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    for line in ("ok   limit memory 256M", "ok   limit pids 100", "ok   limit cpu 1.5 cores",
                 "ok   network rule: only 127.0.0.1:9", "ok   network: allowed 127.0.0.1:9",
                 "ok   network: refused denied.daintree.invalid", "ok   network: direct connection impossible"):
        assert line in out, out
    assert "denied" not in cli("worktree", "status", "s1").stdout  # the check's own probe is not the agent's


@needs_cgroups
def test_python_an_agent_writes_in_its_worktree_never_runs_in_the_helpers_outside(repo: Path, sandbox_env: Path,
                                                                                 tmp_path: Path) -> None:
    # The allow-list's proxy and the limits runner are `python -m` outside the sandbox, started in the worktree,
    # whose folder `-m` put first on the import path: an agent's `daintree_tui/__init__.py` (or any module of the
    # standard library's name) ran as the user at the next start, `worktree run` or `sandbox check`.
    _user_config('[sandbox]\npids = 64\nnetwork = ["127.0.0.1:9"]\n' + SHOWS_SIGNALS)
    cli = CLI(repo)
    cli.ok("worktree", "create", "p")
    wt = repo / ".worktrees" / "p"
    marker = tmp_path / "imported-outside"
    for module in ("daintree_tui/__init__.py", "ipaddress.py", "argparse.py", "asyncio.py"):
        (wt / module).parent.mkdir(exist_ok=True)
        (wt / module).write_text(f"open({str(marker)!r}, 'a').write({module!r} + '\\n')\n")
    daintree = str(Path(sys.executable).parent / "daintree")  # as a user runs it: `-m` here would import the plant

    def inside(*args: str) -> None:
        proc = subprocess.run([daintree, *args], cwd=wt, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (args, proc.stderr)

    inside("worktree", "run", "p", "--", "true")
    inside("sandbox", "check", "p", "--agent", "shows")
    inside("session", "start", "p", "--agent", "shows")
    wait_for(lambda: "SigIgn" in _capture(cli, "p"), timeout=30)
    cli.ok("session", "stop", "p")
    assert not marker.exists(), marker.read_text()
