"""A hostile host (issue 26, item 8): a real sshd on 127.0.0.1 (the `sshd` fixture) whose `daintree` is
a script answering whatever a test writes in its answers file: `exit_code: "0x"`, a task id that is no id, tens
of MiB of output, escape sequences. The real CLI, run as a child process, must end each with one line naming the
host and a non-zero exit, never a traceback or an internal error, and hold only a few MiB of what the host sent.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.sshd import Sshd, sshd_available

pytestmark = pytest.mark.skipif(not sshd_available(), reason="OpenSSH server or client not installed")

MiB = 1024 * 1024

# The host's `daintree`: `daintree --repo R ARGS --json` answers answers.json["<first two words of ARGS>"] (a
# string as it is, anything else as JSON), or a flood: {"flood": TEXT, "bytes": N} writes TEXT again and again up
# to N bytes, noting in written.txt its pid and how far it got (so a test sees where the reader stopped it).
HOSTILE = """#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
args = [a for a in sys.argv[1:] if a != "--json"]
if args[:1] == ["--repo"]:
    args = args[2:]
key = " ".join(args[:2])
with open(os.path.join(here, "calls.log"), "a") as log:
    log.write(key + "\\n")
answers = json.load(open(os.path.join(here, "answers.json")))
answer = answers.get(key)
if answer is None:
    sys.stderr.write("no answer for " + key + "\\n")
    sys.exit(1)
if isinstance(answer, dict) and "flood" in answer:
    chunk, total, written = answer["flood"].encode() * 4096, answer["bytes"], 0
    note = open(os.path.join(here, "written.txt"), "w")
    try:
        while written < total:
            sys.stdout.buffer.write(chunk)
            written += len(chunk)
            note.seek(0); note.write("%d %d" % (os.getpid(), written)); note.flush()
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        pass
    note.write(" ended"); note.close()
    sys.exit(answer.get("exit", 0))
sys.stdout.write(answer if isinstance(answer, str) else json.dumps(answer))
sys.exit(0)
"""


class Hostile:
    """Host `evil`: the sshd of the fixture, a repository of its own, the script above as its daintree."""

    def __init__(self, base: Path) -> None:
        from daintree_tui.services.remote import HostConfig, save_host

        self.base = base
        base.mkdir()
        self.repo = base / "repo"
        self.repo.mkdir()
        self.program = base / "daintree"
        self.program.write_text(HOSTILE.replace("{python}", sys.executable))
        self.program.chmod(0o755)
        self.answer({})
        save_host(HostConfig("evil", "dt-far", str(self.repo), max_sessions=2, daintree=str(self.program)))

    def answer(self, answers: dict[str, Any]) -> None:
        (self.base / "answers.json").write_text(json.dumps(answers))

    def written(self) -> tuple[int, bool]:
        """How many bytes the flood wrote, and whether it has ended (by itself, or killed: a follow's watchdog
        ends it with SIGTERM when our side closes)."""
        note = self.base / "written.txt"
        words = note.read_text().split() if note.exists() else []
        if len(words) < 2:
            return 0, False
        return int(words[1]), words[-1] == "ended" or not Path(f"/proc/{words[0]}").exists()


@pytest.fixture
def evil(sshd: Sshd, tmp_path: Path) -> Hostile:
    return Hostile(tmp_path / "evil")


def worktree_record(name: str, repo: Path, session: dict[str, Any] | None = None) -> dict[str, Any]:
    """A record as a good host's `worktree list --json` prints it."""
    return {"name": name, "path": str(repo / ".worktrees" / name), "branch": f"wt/{name}", "base_ref": "main",
            "base_commit": "0" * 40, "task_id": 7, "status": "active", "ports": [], "created_at": 1.0,
            "facts": {"exists": True, "dirty": 0, "ahead": 0, "behind": 0}, "session": session, "disk_bytes": 10}


def session_record(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "session": f"dt-{name}", "agent": "shell", "status": "running", "exit_code": None,
            "pid": 4242, "started_at": 1.0, "log": "", "persistent": True, "socket": "daintree-evil",
            "tmux_conf": None, **fields}


def run_cli(repo: Path, *args: str, timeout: float = 90) -> tuple[int, str, str, int]:
    """The real `daintree ARGS` as a child process: exit code, stdout, stderr and its peak RSS in KiB (of the CLI
    and ssh, from wait4: what the CLI held of a host's answer shows here)."""
    out, err = repo / ".cli-out", repo / ".cli-err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", *args], cwd=repo, stdout=stdout,
                                stderr=stderr, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"daintree {' '.join(args)} did not end within {timeout}s")
            time.sleep(0.05)  # polling a child we started: wait4 with WNOHANG has no timeout of its own
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, out.read_text(errors="replace"), err.read_text(errors="replace"), usage.ru_maxrss


def one_clean_line(stderr: str) -> str:
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def baseline_rss(evil: Hostile, repo: Path, answers: dict[str, Any], *args: str) -> int:
    """Peak RSS (KiB) of the same command when the host answers little."""
    evil.answer(answers)
    _, _, err, rss = run_cli(repo, *args)
    assert "Traceback" not in err, err
    return rss


# -- item 8 as written ------------------------------------------------------------------------------------------


def test_exit_code_0x_is_one_error_naming_the_host_not_an_internal_error(evil: Hostile, repo: Path,
                                                                         cli: Any) -> None:
    """A task placed on the host, whose session there then `exited` with `exit_code: "0x"`: the next pass of
    `queue run --hosts` ended with `internal error: ValueError: invalid literal for int()`."""
    task = cli.json("task", "create", "job one", "--agent", "shell")
    evil.answer({"worktree list": [],
                 "task create": {"id": 7, "subject": "job one", "status": "pending"},
                 "worktree create": worktree_record("job-one", evil.repo, session_record("job-one"))})
    code, out, err, _ = run_cli(repo, "queue", "run", "--hosts", "evil", "--once", "--json")
    assert code == 0, err
    assert json.loads(out)["placed"] == {"evil": [task["id"]]}

    exited = session_record("job-one", status="exited", exit_code="0x")
    evil.answer({"worktree list": [worktree_record("job-one", evil.repo, exited)]})
    code, out, err, _ = run_cli(repo, "queue", "run", "--hosts", "evil", "--once")
    assert code == 1, out + err
    assert "Traceback" not in out + err and "internal error" not in out + err, out + err
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert errors == ["error: host evil answered `worktree list --json`: worktree job-one.session.exit_code is "
                      "not a whole number from -255 to 255 (got a str '0x')"], out
    local = {t["id"]: t for t in cli.json("task", "list")}
    assert local[task["id"]]["status"] == "in_progress"  # neither completed nor failed on a word we cannot read

    # The same host answering well again: the task completes (the typed path is the one that works).
    evil.answer({"worktree list": [worktree_record("job-one", evil.repo,
                                                   session_record("job-one", status="exited", exit_code=0))],
                 "task update": {"id": 7, "subject": "job one", "status": "completed"}})  # its board follows
    code, out, err, _ = run_cli(repo, "queue", "run", "--hosts", "evil", "--once", "--json")
    assert code == 0 and json.loads(out)["completed"] == [task["id"]], out + err


@pytest.mark.parametrize("bad_id", ["7x", True, 1.5, 2**60, 0, None, [7], {"id": 7}])
def test_a_task_id_that_is_no_id_fails_the_placement_in_one_line(evil: Hostile, repo: Path, cli: Any,
                                                                 bad_id: Any) -> None:
    """`RemoteCreated.task_id` was `int(...)` of whatever the host said: the host's task id is typed before it is
    stored here (as `remote.task`) or passed back to the host (`worktree create --task ID`)."""
    task = cli.json("task", "create", "job two", "--agent", "shell")
    evil.answer({"worktree list": [], "task create": {"id": bad_id, "subject": "job two"}})
    code, out, err, _ = run_cli(repo, "queue", "run", "--hosts", "evil", "--once")
    assert code == 1, out + err
    assert "Traceback" not in out + err and "internal error" not in out + err, out + err
    # One line as it happens on stdout, one on stderr; each names the host once.
    failed = [line for line in out.splitlines() if line.startswith("failed task")]
    assert len(failed) == 1 and failed[0].startswith(
        f"failed task {task['id']}: host evil could not start: it answered `task create --json`: the task's id is "
        "not a whole number"), out
    errors = err.strip().splitlines()
    assert len(errors) == 1 and "host evil answered `task create --json`: the task's id is not a whole number" \
        in errors[0], err
    assert "worktree create" not in (evil.base / "calls.log").read_text()  # the bad id went nowhere
    local = {t["id"]: t for t in cli.json("task", "list")}
    assert local[task["id"]]["owner"] == "queue-failed:start" and "remote" not in local[task["id"]]


def test_64_mib_answer_is_refused_at_the_cap_with_bounded_memory(evil: Hostile, repo: Path, cli: Any) -> None:
    """600 MB of `worktree list --json` gave a 1.78 GB peak: the answer is read up to its cap (4 MiB), ssh is
    killed there, the host's writer stops (a broken pipe) long before it is done, and the CLI's peak RSS stays
    near that of a command that read nothing."""
    cli.json("task", "create", "job three", "--agent", "shell")
    base = baseline_rss(evil, repo, {"worktree list": "[]"}, "queue", "run", "--hosts", "evil", "--once")
    evil.answer({"worktree list": {"flood": '{"name": "x", "path": "/x"}, ', "bytes": 64 * MiB}})
    code, out, err, peak = run_cli(repo, "queue", "run", "--hosts", "evil", "--once")
    assert code == 1, out + err
    assert "Traceback" not in out + err and "internal error" not in out + err, out + err
    assert "error: host evil answered more than 4 MiB of output to `daintree worktree list --json`" in out, out
    assert peak - base < 32 * 1024, f"peak RSS {peak} KiB, {base} KiB without a host's answer"
    wait_for(lambda: evil.written()[1], timeout=30)
    assert evil.written()[0] < 32 * MiB, evil.written()  # stopped by the closed channel, not run to its end


def test_host_check_refuses_a_flood_and_a_clock_of_5000_digits(evil: Hostile, repo: Path) -> None:
    """`host check` reads five one-line probes: 64 MiB on one line is refused at 64 KiB; a `date +%s` of 5,000
    digits made int() raise (an internal error)."""
    base = baseline_rss(evil, repo, {"--version": "daintree 9"}, "host", "check", "evil")
    evil.answer({"--version": {"flood": "daintree 9 \x1b]52;c;eA==\x07", "bytes": 64 * MiB}})
    code, out, err, peak = run_cli(repo, "host", "check", "evil")
    assert code == 1, out + err
    line = one_clean_line(err)
    assert line.startswith("daintree: host evil answered more than 64 KiB of output to `host check`"), line
    assert peak - base < 32 * 1024, f"peak RSS {peak} KiB, {base} KiB without a host's answer"

    from daintree_tui.services.host_answers import epoch, probe_lines

    assert epoch("9" * 5000) is None and epoch("²") is None and epoch(" 1700000000\n") == 1700000000
    probes = probe_lines("time\t0\t1\ndaintree\t²\tx\ngit\t1000\tx\ntmux\t0\tt\x1b[2J" + "y" * 1000)
    assert set(probes) == {"time", "tmux"} and probes["tmux"][1].startswith("t\\x1b[2J")
    assert len(probes["tmux"][1]) == 200


def _read_pty(fd: int, until: Callable[[], bool], timeout: float = 60) -> bytes:
    seen = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 1 << 20)
            except OSError:  # EIO: the child closed its side
                break
            if not chunk:
                break
            seen += chunk
        elif until():
            break
    return bytes(seen)


def test_worktree_list_with_host_passes_a_32_mib_line_to_a_terminal_in_pieces_and_escaped(evil: Hostile,
                                                                                          repo: Path) -> None:
    """`--host` passes a host's output through; to a terminal each line goes through the replay filter, and a line
    was read whole first (32 MiB held two or three times over). Now in pieces of 64 KiB: memory stays bounded,
    nothing but colours reaches the terminal, and the host's exit code comes back."""
    base = baseline_rss(evil, repo, {"worktree list": "no worktrees"}, "worktree", "list", "--host", "evil")
    evil.answer({"worktree list": {"flood": "x\x1b]52;c;Y3VybCBldmls\x07\x1b[31mred\x1b[0m", "bytes": 32 * MiB,
                                   "exit": 3}})
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child: the real CLI on a terminal
        os.chdir(repo)
        os.execv(sys.executable, [sys.executable, "-m", "daintree_tui", "worktree", "list", "--host", "evil"])
    ended: list[tuple[int, int, Any]] = []

    def done() -> bool:
        if not ended:
            waited = os.wait4(pid, os.WNOHANG)
            if waited[0]:
                ended.append(waited)
        return bool(ended)

    shown = _read_pty(fd, done, timeout=120)
    os.close(fd)
    if not ended:
        ended.append(os.wait4(pid, 0))
    _, status, usage = ended[0]
    assert os.waitstatus_to_exitcode(status) == 3
    assert b"\x1b]52" not in shown and b"\x07" not in shown and b"Traceback" not in shown
    assert shown.count(b"red") > 100_000 and b"\x1b[31m" in shown  # colours kept, as `session log` keeps them
    assert usage.ru_maxrss - base < 32 * 1024, f"peak RSS {usage.ru_maxrss} KiB, {base} KiB without"


# -- the feed, the stream and the dashboard's rows ----------------------------------------------------------------


def test_the_feed_keeps_polling_a_host_that_answers_junk_and_recovers(evil: Hostile) -> None:
    from daintree_tui.services.hosts_feed import HostsFeed
    from daintree_tui.services.remote import RemoteHost, get_host

    feed = HostsFeed([RemoteHost(get_host("evil"))])
    evil.answer({"worktree list": [worktree_record("a", evil.repo, session_record("a", pid=True))]})
    state = feed.poll()["evil"]
    assert state.status == "error" and state.worktrees == ()
    assert state.error == ("host evil answered `worktree list --json`: worktree a.session.pid is not a whole "
                           "number from 1 to 2147483647 (got a bool)")
    good = worktree_record("a", evil.repo, session_record("a", usage={"tokens": {"total": 5}, "cost": 0.5,
                                                                      "junk": [[[[]]]]}))
    evil.answer({"worktree list": [{**good, "extra": {"nested": [1] * 100}}]})
    state = feed.poll()["evil"]
    assert state.status == "ok" and [w["name"] for w in state.worktrees] == ["a"]
    assert "extra" not in state.worktrees[0] and state.sessions[0]["usage"]["cost"] == 0.5
    assert "junk" not in state.sessions[0]["usage"]


def test_a_stream_line_past_its_cap_ends_the_stream_in_one_error(evil: Hostile) -> None:
    from daintree_tui.core.errors import OperationError
    from daintree_tui.services.remote import MAX_LINE_BYTES, RemoteHost, get_host

    evil.answer({"worktree events": {"flood": "e", "bytes": 64 * MiB}})
    host = RemoteHost(get_host("evil"))
    with pytest.raises(OperationError, match="host evil sent a line longer than 64 KiB"), \
            host.stream(["worktree", "events", "--follow", "--json"]) as lines:
        next(iter(lines))
    assert MAX_LINE_BYTES == 64 * 1024
    wait_for(lambda: evil.written()[1], timeout=30)
    assert evil.written()[0] < 32 * MiB


# -- the typed readers, value by value (pure: no host needed) ---------------------------------------------------


GOOD_SESSION = session_record("a", status="exited", exit_code=0)


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("exit_code", "0x", "exit_code is not a whole number from -255 to 255 (got a str '0x')"),
    ("exit_code", True, "exit_code is not a whole number from -255 to 255 (got a bool)"),
    ("exit_code", 10**30, "exit_code is not a whole number from -255 to 255 (got an int of 100 bits)"),
    ("started_at", float("nan"), "started_at is not a number from 0 to 1e+11 (got nan)"),
    ("started_at", float("inf"), "started_at is not a number from 0 to 1e+11 (got inf)"),
    ("status", "zombie", "status is not one of starting, running, waiting, stalled, exited (got a str 'zombie')"),
    ("session", "dt a; rm -rf ~", "session is not a tmux name"),
    ("socket", "-Lx", "socket is not a tmux name"),
    ("tmux_conf", "relative.conf", "tmux_conf is not an absolute path"),
    ("agent", ["shell"], "agent is not a string (got a list of 1)"),
    ("usage", {"cost": "x"}, "usage.cost is not a number"),
    ("usage", {"tokens": {"total": 2**63}}, "usage.tokens.total is not a whole number"),
    ("usage", {"cost": float("nan")}, "usage.cost is not a number from -1e+12 to 1e+12 (got nan)"),
    ("name", "../x", "session.name is not a worktree name"),
])
def test_each_bad_session_field_is_named(field: str, value: Any, expected: str) -> None:
    from daintree_tui.core.errors import OperationError
    from daintree_tui.services.host_answers import worktree_list

    record = worktree_record("a", Path("/srv/app"), {**GOOD_SESSION, field: value})
    with pytest.raises(OperationError) as caught:
        worktree_list("evil", [record])
    message = str(caught.value)
    assert message.startswith("host evil answered `worktree list --json`: worktree a.session") and expected in message
    assert "\n" not in message and len(message) < 300


@pytest.mark.parametrize(("change", "expected"), [
    ({"name": None}, "worktree 1.name is not a worktree name (got null)"),
    ({"path": "relative"}, "path is not an absolute path"),
    ({"path": "/x\x1b]52;c;eA==\x07"}, "path is not an absolute path without control characters"),
    ({"task_id": "7"}, "task_id is not a whole number from 1 to"),
    ({"branch": "-oops"}, "branch is not a git ref name"),
    ({"ports": [80, 0]}, "ports[1] is not a whole number from 1 to 65535"),
    ({"disk_bytes": 2**64}, "disk_bytes is not a whole number from 0 to"),
    ({"facts": {"exists": 1}}, "facts.exists is not true or false (got an int)"),
    ({"status": "gone"}, "status is not one of active, kept, removed"),
    ({"session": session_record("b")}, "worktree a.session.name is not the name of its worktree"),
])
def test_each_bad_worktree_field_is_named(change: dict[str, Any], expected: str) -> None:
    from daintree_tui.core.errors import OperationError
    from daintree_tui.services.host_answers import worktree_list

    with pytest.raises(OperationError, match=r"^host evil answered `worktree list --json`: ") as caught:
        worktree_list("evil", [{**worktree_record("a", Path("/srv/app")), **change}])
    assert expected in str(caught.value) and "\x1b" not in str(caught.value)


def test_listings_are_capped_in_count_and_text_is_escaped_and_cut() -> None:
    from daintree_tui.core.errors import OperationError
    from daintree_tui.services.host_answers import MAX_RECORDS, task, worktree_list

    with pytest.raises(OperationError, match=f"1001 items in the answer, more than the {MAX_RECORDS}"):
        worktree_list("evil", [worktree_record(f"w{i}", Path("/srv")) for i in range(MAX_RECORDS + 1)])
    with pytest.raises(OperationError, match="the answer is not a list"):
        worktree_list("evil", {"worktrees": []})
    shown = worktree_list("evil", [worktree_record("a", Path("/srv"), {
        **GOOD_SESSION, "agent": "sh\x1b]0;owned\x07ell", "usage": {"model": "m" * 10_000}})])[0]["session"]
    assert shown["agent"] == "sh\\x1b]0;owned\\x07ell"
    assert len(shown["usage"]["model"]) == 100 and shown["usage"]["model"].endswith("…")
    made = task("evil", {"id": 3, "subject": "\x9b2J" + "s" * 1000, "extra": [[[]]]}, "task create --json")
    assert made["subject"].startswith("\\x9b2J") and len(made["subject"]) == 500 and "extra" not in made



def test_a_hosts_agent_list_is_typed_and_capped() -> None:
    """`agents --json` of a host (what the new-task dialog offers for it): names that go back as `--agent NAME`
    must be names, flags flags, and the list is capped; other keys go no further."""
    from daintree_tui.core.errors import OperationError
    from daintree_tui.services.host_answers import MAX_AGENTS, agents

    assert agents("evil", [{"name": "claude", "installed": False, "default": True, "command": "rm -rf /"},
                           {"name": "shell"}]) == {"claude": {"installed": False, "default": True},
                                                   "shell": {"installed": True, "default": False}}
    with pytest.raises(OperationError, match=r"agent 1\.name is not a tmux name"):
        agents("evil", [{"name": "--dangerous"}])
    with pytest.raises(OperationError, match=r"agent 1\.name is not a tmux name"):
        agents("evil", [{"name": "sh\x1b]0;x\x07"}])
    with pytest.raises(OperationError, match=r"agent claude\.default is not true or false"):
        agents("evil", [{"name": "claude", "default": "yes"}])
    with pytest.raises(OperationError, match=f"more than the {MAX_AGENTS}"):
        agents("evil", [{"name": f"a{i}"} for i in range(MAX_AGENTS + 1)])


# -- the dashboard --------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("tmux_socket")
async def test_the_dashboard_shows_a_hosts_rows_typed_and_its_junk_as_that_hosts_error(
        evil: Hostile, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cost: "x"` in a session's usage reached the worktree table's `${cost:.2f}` (a ValueError while rendering);
    an agent's name with an OSC 52 reached the table. Now the rows show what was typed, and a bad answer greys the
    host's rows with its error in the terminal pane while polling goes on."""
    from rich.text import Text

    from daintree_tui.core.project import Project
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.hosts import HostsWatch
    from daintree_tui.tui.screens.main import MainScreen
    from daintree_tui.tui.widgets.terminal import TerminalView
    from daintree_tui.tui.widgets.worktree_table import WorktreeTable
    from tests.helpers.dashboard import select, until

    monkeypatch.setattr(HostsWatch, "interval", 0.5)
    running = session_record("a", status="exited", exit_code=3, usage={"cost": 1.5, "model": "m\x1b]52;c;eA==\x07"})
    evil.answer({"worktree list": [worktree_record("a", evil.repo, running)]})
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(220, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        table = screen.query_one(WorktreeTable)
        # The row comes with the host's worktrees, its session cell with the sessions' poll: on a busy machine,
        # one poll after the other.
        await until(pilot, lambda: "a@evil" in [str(k.value) for k in table.rows]
                    and str(table.row_cells("a@evil")["session"]) != "-")
        cells = {column: str(cell) for column, cell in table.row_cells("a@evil").items()}
        assert cells["session"] == "■ exited 3 $1.50" and cells["host"] == "evil"
        assert not any("\x1b" in text for text in cells.values())
        assert screen.sessions["a@evil"].usage["model"] == "m\\x1b]52;c;eA==\\x07"  # type: ignore[index]
        await select(pilot, screen, "a@evil")

        junk = session_record("a", status="exited", exit_code="0x", usage={"cost": "x"})
        evil.answer({"worktree list": [worktree_record("a", evil.repo, junk)]})
        watch = screen.hosts_watch
        await until(pilot, lambda: watch.states["evil"].status == "error")
        error = str(watch.states["evil"].error)
        assert error.startswith("host evil answered `worktree list --json`: worktree a.session.exit_code"), error
        passes = watch.passes
        await until(pilot, lambda: watch.passes > passes + 1)  # the poller lives on
        row = table.row_cells("a@evil")
        assert all(isinstance(c, Text) and any("grey42" in str(s.style) for s in c.spans)
                   for c in row.values() if str(c))
        await until(pilot, lambda: error in screen.query_one(TerminalView).placeholder)


@pytest.mark.usefixtures("tmux_socket")
async def test_a_host_listing_one_worktree_twice_never_ends_the_dashboard(
        evil: Hostile, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two records named `a` in one `worktree list --json`: both became row `a@evil`, and the table's second
    add_row of that key raised DuplicateKey, which ended the dashboard. A listing that names a worktree twice is
    that host's error, greyed as any junk answer is; the poller goes on."""
    from daintree_tui.core.project import Project
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.hosts import HostsWatch
    from daintree_tui.tui.screens.main import MainScreen
    from daintree_tui.tui.widgets.worktree_table import WorktreeTable
    from tests.helpers.dashboard import until

    monkeypatch.setattr(HostsWatch, "interval", 0.5)
    evil.answer({"worktree list": [worktree_record("a", evil.repo), worktree_record("b", evil.repo)]})
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(220, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        table = screen.query_one(WorktreeTable)
        await until(pilot, lambda: "b@evil" in [str(k.value) for k in table.rows])
        twice = [worktree_record("a", evil.repo), worktree_record("a", evil.repo, session_record("a"))]
        evil.answer({"worktree list": twice})
        watch = screen.hosts_watch
        await until(pilot, lambda: watch.states["evil"].status == "error")
        assert "a" in str(watch.states["evil"].error) and "twice" in str(watch.states["evil"].error)
        passes = watch.passes
        await until(pilot, lambda: watch.passes > passes + 1)
        assert app.is_running and [str(k.value) for k in table.rows].count("a@evil") == 1
