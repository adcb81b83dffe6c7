"""A full disk or a fork storm made inside a sandbox corrupts no state file outside (issue 26, item 9).

The sandbox has no disk or process limit yet (the containment issue builds them): an agent can fill the
filesystem its worktree shares with `.worktrees/index.json`, `.tasks/` and the event log, or start processes
until forks fail. What happens then to the outside's state operations is tested here with real things: a real
16 MiB tmpfs holding a real repository, filled from inside the real sandbox (`daintree worktree run`), the real CLI,
a real pids cgroup. Every operation must succeed or fail with one clear line and a non-zero exit, and after each
one every state file must parse, nothing that was there may be lost, and the event log may hold no line the reader
does not skip. Root only (mounting a tmpfs, a cgroup), as CI runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.event_log import EventLog
from daintree_tui.core.sandbox import BwrapSandbox
from tests.conftest import CLI, make_repo, wait_for

_OK, _WHY = BwrapSandbox().available()
pytestmark = [
    pytest.mark.skipif(not _OK, reason=f"bubblewrap cannot run here: {_WHY}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small filesystem and a pids cgroup needs root"),
]

PAGE = 4096
# What these tests ask `doctor` is their repository's state. It also reports the machine's empty cgroups that killed
# commands left (any project's, DAINTREE_SWEEP_AGE_S old): the tests running beside this one, or before it, leave
# such a group now and then, and "all consistent" then failed here for a group of someone else's.
OWN_STATE_ONLY = {"DAINTREE_SWEEP_AGE_S": "1e9"}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs at tmp_path/disk, unmounted at teardown (lazily if a straggler still has it open)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _state_problems(repo: Path) -> list[str]:
    """What is wrong with the state on disk: a JSON file that does not parse (index, its .bak, a task, a task's
    .bak, a session record), an index or task of the wrong shape, an event line the reader does not skip as a
    whole (two records glued on one line: a torn one that the next append did not start afresh after)."""
    problems: list[str] = []
    state, tasks = repo / ".worktrees", repo / ".tasks"
    files = [state / "index.json", state / "index.json.bak", *sorted(tasks.glob("task_*.json*")),
             *sorted((state / ".sessions").glob("*.json*"))]
    for path in files:
        if not path.exists():
            continue
        try:
            data = json.loads(path.read_bytes())
        except ValueError as exc:
            problems.append(f"{path.name}: {exc}")
            continue
        if path.name.startswith("index.json") and not isinstance(data.get("worktrees"), list):
            problems.append(f"{path.name}: no worktrees list")
        if path.name.startswith("task_") and not isinstance(data.get("id"), int):
            problems.append(f"{path.name}: no id")
    log = state / "events.jsonl"
    if log.exists():
        for number, line in enumerate(log.read_bytes().split(b"\n"), 1):
            if line.count(b'"event":') > 1:
                problems.append(f"events.jsonl line {number}: records glued together: {line[:120]!r}")
    return problems


def _snapshot(repo: Path) -> dict[str, Any]:
    """The state a later operation may add to or change through the CLI, never lose: task ids, worktree names,
    and how many event records the reader returns."""
    tasks = {int(p.stem.split("_")[1]) for p in (repo / ".tasks").glob("task_*.json")}
    index = json.loads((repo / ".worktrees" / "index.json").read_bytes())
    records, _ = EventLog(repo / ".worktrees" / "events.jsonl").read()
    return {"tasks": tasks, "worktrees": {e["name"] for e in index["worktrees"]}, "events": len(records)}


def _assert_clean(proc: subprocess.CompletedProcess[str], what: str) -> None:
    """Succeeded, or failed with one clear `daintree: ...` line (warnings before it are allowed; not an internal
    error: that is a bug of ours) and exit 1."""
    if proc.returncode == 0:
        return
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1, f"{what}: rc={proc.returncode} {proc.stderr}"
    assert lines and lines[-1].startswith("daintree: ") and "Traceback" not in proc.stderr, f"{what}: {proc.stderr}"
    assert "internal error" not in proc.stderr, f"{what}: {proc.stderr}"


def _fill_from_inside(cli: CLI, name: str, keep_pages: int = 0) -> None:
    """The agent fills the disk: a 1 GiB fallocate (refused whole here), then dd until ENOSPC; `keep_pages`
    of it are given back afterwards, so the outside finds that much room (the interesting sizes are the few
    pages a state write needs: a task file fits, its .bak does not)."""
    script = ("fallocate -l 1G big 2>/dev/null; rm -f big; "
              f"dd if=/dev/zero of=keep bs={PAGE} count={keep_pages} 2>/dev/null; "
              f"dd if=/dev/zero of=fill-$$ bs={PAGE} 2>/dev/null; rm -f keep; true")
    proc = cli("worktree", "run", name, "--", "sh", "-c", script, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_a_disk_filled_from_inside_corrupts_no_state_outside(small_disk: Path) -> None:
    """Reproduces item 9's disk half: an agent fills the disk its worktree shares with the state (on main,
    `fallocate -l 1G` and dd succeed inside: there is no quota), then the user's state operations run with 0, 1,
    2, ... pages left. Found: with room for a task file but not its .bak, `task create` said "cannot write" of a
    task it had made (and a create's rollback would have kept an index it thought unwritten); a create whose
    `git worktree add` ran out of room left its branch behind (git deletes a ref by rewriting packed-refs), so
    the name could never be created again. Now each operation succeeds or fails with one line, every state file
    parses, nothing is lost, and once the agent's files are gone everything works again and `doctor` agrees."""
    repo = make_repo(small_disk / "repo")
    cli = CLI(repo)
    cli.ok("task", "create", "agent's task")
    cli.ok("task", "create", "spare")
    cli.ok("worktree", "create", "f1", "--task", "1")
    for pages in (0, 1, 2, 3, 4, 6, 8, 12, 16):
        _fill_from_inside(cli, "f1", pages)
        assert _free(small_disk) <= (pages + 1) * PAGE
        for args in (("task", "create", f"made with {pages} pages free"),
                     ("task", "update", "1", "--description", f"{pages} pages"),
                     ("worktree", "create", f"w{pages}", "--task", "2"),
                     ("worktree", "keep", f"w{pages}"),
                     ("worktree", "remove", f"w{pages}", "--force")):
            before = _snapshot(repo)
            proc = cli(*args)
            if args[:2] == ("worktree", "keep") and "no worktree named" in proc.stderr:
                continue  # its create failed for want of room: nothing to keep
            if args[:2] == ("worktree", "remove") and proc.returncode == 2:
                continue  # the same
            _assert_clean(proc, f"{args} with {pages} pages free")
            assert _state_problems(repo) == [], (args, pages)
            after = _snapshot(repo)
            assert before["tasks"] <= after["tasks"] and after["events"] >= before["events"], (args, pages)
            if args[:2] != ("worktree", "remove"):
                assert before["worktrees"] <= after["worktrees"], (args, pages)
            if proc.returncode == 0 and args[:2] == ("task", "create"):
                assert len(after["tasks"]) == len(before["tasks"]) + 1
            if proc.returncode != 0:  # a failure said so truthfully: it changed nothing
                assert (after["tasks"], after["worktrees"]) == (before["tasks"], before["worktrees"]), (args, pages)
        for fill in (repo / ".worktrees" / "f1").glob("fill-*"):
            fill.unlink()  # the user clears the agent's files
    cli.ok("worktree", "create", "after")
    live = {e["name"] for e in json.loads((repo / ".worktrees" / "index.json").read_bytes())["worktrees"]
            if e["status"] != "removed"}
    for pages in (0, 1, 2, 3, 4, 6, 8, 12, 16):
        if f"w{pages}" not in live:
            cli.ok("worktree", "create", f"w{pages}")  # nothing of a failed create (its branch) is in the way
    cli.ok("task", "create", "after")
    doctor = cli("doctor", env=OWN_STATE_ONLY)
    assert doctor.returncode == 0 and "all consistent" in doctor.stdout, doctor.stdout + doctor.stderr
    assert _state_problems(repo) == []


def test_an_event_appended_to_a_full_disk_is_whole_or_skipped(small_disk: Path) -> None:
    """A full disk takes part of an append (the rest of the file's last page) and refuses the rest: on main the
    short count went unnoticed and the record was silently half there. Now the loss is reported, the torn part
    is a line the reader skips, and the next append after room comes back starts on a fresh line, whole."""
    log = EventLog(small_disk / "state" / "events.jsonl")
    log.append("before", worktree={"name": "a"})
    with contextlib.suppress(OSError), open(small_disk / "fill", "wb") as out:
        while True:
            out.write(b"\0" * (64 * 1024))
            out.flush()
    warnings: list[str] = []
    import logging

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warnings.append(record.getMessage())

    handler = Catch()
    logging.getLogger("daintree").addHandler(handler)
    try:
        for number in range(200):  # until the last page is full and one record is cut
            log.append("during", worktree={"name": "a", "n": number, "pad": "x" * 100})
            if warnings:
                break
    finally:
        logging.getLogger("daintree").removeHandler(handler)
    assert warnings and "lost" in warnings[0], warnings
    (small_disk / "fill").unlink()
    log.append("after", worktree={"name": "a"})
    records, skipped = log.read()
    assert skipped <= 1
    assert records[0]["event"] == "before" and records[-1]["event"] == "after"
    assert _state_problems(small_disk) == []
    raw = log.path.read_bytes()
    assert raw.endswith(b"\n") and raw.splitlines()[-1].startswith(b'{"event":"after"')


def test_a_request_on_a_full_disk_is_applied_once(small_disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent leaves room for its own request and for what applying it writes, but not for the reply
    (`daintree task create` inside, with 3 pages left). On main the reply's ENOSPC ended `doctor` with an
    internal error and left the request in the inbox, and every later pass applied it again: one task per poll
    once there was room. Now the request goes before its reply is written: one task, whatever the disk does."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    repo = make_repo(small_disk / "repo")
    cli = CLI(repo)
    cli.ok("worktree", "create", "i1")
    _fill_from_inside(cli, "i1", keep_pages=3)
    inside = cli("worktree", "run", "i1", "--", "daintree", "task", "create", "from inside", timeout=60)
    assert inside.returncode == 0 and "sent as request" in inside.stdout, inside.stdout + inside.stderr
    for _ in range(3):
        _assert_clean(cli("doctor", env=OWN_STATE_ONLY), "doctor on a full disk")
        assert _state_problems(repo) == []
    for fill in (repo / ".worktrees" / "i1").glob("fill-*"):
        fill.unlink()
    for _ in range(2):
        _assert_clean(cli("doctor", env=OWN_STATE_ONLY), "doctor with room again")
    subjects = [json.loads(p.read_bytes())["subject"] for p in (repo / ".tasks").glob("task_*.json")]
    assert subjects.count("from inside") <= 1, subjects
    assert not list((repo / ".worktrees" / ".inbox" / "i1").glob("req-*")), "the request is still pending"
    assert _state_problems(repo) == []


def test_a_session_started_on_a_full_disk_fails_with_one_line(small_disk: Path, tmux_socket: str) -> None:
    """Starting a session writes its usage file, its record, tmux's config and a launch file holding the agent's
    command and environment. On main, with 3 to 6 pages left, the start ended in an internal error (OSError from
    the config or the launch file) and left half a launch file (half the session's environment) in
    `.worktrees/.run`; and a running session could not be stopped once the disk was full (`session stop`
    records the stop first, and refused when that write failed: the agent went on). Now each start succeeds or
    fails with one line, the record is the previous one (none), nothing half written is left, and a stop on a
    full disk stops the session."""
    repo = make_repo(small_disk / "repo")
    cli = CLI(repo)
    cli.ok("worktree", "create", "i1")
    started = 0
    for pages in (0, 1, 2, 3, 4, 5, 6, 8, 12):
        _fill_from_inside(cli, "i1", pages)
        proc = cli("session", "start", "i1", "--agent", "demo")
        _assert_clean(proc, f"session start with {pages} pages free")
        assert _state_problems(repo) == [], pages
        assert not list((repo / ".worktrees" / ".run").glob("launch-*")) or proc.returncode == 0, pages
        if proc.returncode == 0:
            started += 1
            _fill_from_inside(cli, "i1", 0)  # the agent fills the rest: the user stops it
            cli.ok("session", "stop", "i1")
            assert not any(s["name"] == "i1" and s["status"] != "exited" for s in cli.json("session", "list"))
        else:
            assert not (repo / ".worktrees" / ".sessions" / "i1.json").exists(), pages
        for fill in (repo / ".worktrees" / "i1").glob("fill-*"):
            fill.unlink()
    assert started  # with room enough, it starts


# The agent takes the state lock (or says why it could not) and keeps it.
HOLD_LOCK = """
import fcntl, os, sys, time
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    got = "locked"
except OSError as exc:
    got = exc.strerror
open("holding", "w").write(got)
time.sleep(50)
"""


def _holding(repo: Path, name: str, path: Path) -> subprocess.Popen[str]:
    """A sandboxed process of worktree `name` that flocks `path` (or finds it cannot) and keeps it 50 s."""
    hold = subprocess.Popen(
        [sys.executable, "-m", "daintree_tui", "worktree", "run", name, "--timeout", "60", "--", sys.executable,
         "-c", HOLD_LOCK, str(path)],
        cwd=repo, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    marker = repo / ".worktrees" / name / "holding"
    wait_for(lambda: marker.exists() or hold.poll() is not None, timeout=60)
    assert hold.poll() is None, hold.communicate()
    return hold


def test_the_state_lock_cannot_be_held_from_inside(repo: Path) -> None:
    """Not a disk or a process, but the same starvation: `.worktrees/.lock` is readable inside, and flock needs
    no more. On main an agent that held it made every state operation outside wait 60 s and fail ("another
    daintree process holds ..."). Inside it is now /dev/null (on a nodev mount: it does not even open), so
    whatever the agent locks is nothing we take."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "l1")
    hold = _holding(repo, "l1", repo / ".worktrees" / ".lock")
    try:
        started = time.monotonic()
        cli.ok("task", "create", "while the agent holds its lock")
        assert time.monotonic() - started < 20
    finally:
        _end(hold)


def test_the_users_trust_lock_cannot_be_held_from_inside(repo: Path, tmp_path: Path, sandbox_env: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The trust record's lock is in the user's data dir, which a sandbox sees read-only: an agent that flocked it
    made every `daintree trust` (of any repository) wait its 60 s and fail. Inside it is /dev/null too."""
    from daintree_tui.core.trust_record import trust_lock

    monkeypatch.setenv("XDG_DATA_HOME", str(sandbox_env / ".local" / "share"))  # where a user's is: seen inside
    cli = CLI(repo)
    cli.ok("worktree", "create", "t1")
    trust_lock().path.parent.mkdir(parents=True, exist_ok=True)
    trust_lock().path.touch()  # a user who trusted a repository before
    hold = _holding(repo, "t1", trust_lock().path)
    try:
        assert (repo / ".worktrees" / "t1" / "holding").read_text() != "locked"
        other = make_repo(tmp_path / "other")
        (other / ".daintree.toml").write_text('[hooks]\npost_create = ["true"]\n')
        started = time.monotonic()
        CLI(other).ok("trust")
        assert time.monotonic() - started < 20
    finally:
        _end(hold)


def test_a_sessions_usage_lock_cannot_be_held_from_inside(repo: Path, tmux_socket: str) -> None:
    """The usage lock beside a session's usage file (`.worktrees/.sessions/NAME/usage.lock`) was taken with no
    timeout, under the state lock, by every session start: an agent that held it hung `session start` (and with
    it every state operation) for as long as it liked. The lock now lives in `.worktrees/.locks/`, which no
    sandbox sees: the agent finds nothing there to hold, and a start takes seconds."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "u1")
    cli.ok("session", "start", "u1", "--agent", "demo")
    cli.ok("session", "stop", "u1")
    locks = [repo / ".worktrees" / ".sessions" / "u1" / "usage.lock", repo / ".worktrees" / ".locks" / "usage-u1.lock"]
    holders = [_holding(repo, "u1", lock) for lock in locks]  # where it was, where it is
    try:
        # A process of its own: on main this start waited for the agent's lock until the timeout.
        proc = CLI(repo, subprocess=True)("session", "start", "u1", "--agent", "demo", timeout=30)
        assert proc.returncode == 0, proc.stderr
        cli.ok("session", "stop", "u1")
    finally:
        for hold in holders:
            _end(hold)


def test_the_event_logs_rotation_lock_cannot_be_held_from_inside(repo: Path) -> None:
    """The event log's rotation took a blocking flock on the log, which the agent can read: an agent that held
    it hung the first append past the size limit, inside the state lock, for ever. Now the rotation waits a
    second for it, the record goes to the full log, and a later append rotates."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "e1")
    log_path = repo / ".worktrees" / "events.jsonl"
    hold = _holding(repo, "e1", log_path)
    try:
        assert (repo / ".worktrees" / "e1" / "holding").read_text() == "locked"
        append = ("import sys; from pathlib import Path; from daintree_tui.core.event_log import EventLog; "
                  "EventLog(Path(sys.argv[1]), max_bytes=1).append('past.the.limit', worktree={'name': 'e1'})")
        # A process of its own: on main this append waited for the agent's lock until the timeout.
        proc = subprocess.run([sys.executable, "-c", append, str(log_path)], capture_output=True, text=True,
                              timeout=20)
        assert proc.returncode == 0, proc.stderr
    finally:
        _end(hold)
    records, skipped = EventLog(log_path).read()
    assert records[-1]["event"] == "past.the.limit" and skipped == 0


# Started inside: `count` sleeps (spawned, so that the storm itself needs no memory of its own), then the number
# started in `storm-started`, then it waits. A spawn the kernel refuses (a pids limit reached) ends the loop.
STORM = """
import os, sys, time
started = 0
for _ in range(int(sys.argv[1])):
    try:
        os.posix_spawn(sys.argv[2], ["sleep", "300"], {})
    except OSError:
        break
    started += 1
with open("storm-started", "w") as out:
    out.write(str(started))
time.sleep(300)
"""


def _storm(repo: Path, name: str, count: int, timeout: int, preexec: Any = None) -> subprocess.Popen[str]:
    """`daintree worktree run NAME --timeout T` of a storm of `count` sleeps that waits on them."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    return subprocess.Popen(
        [sys.executable, "-m", "daintree_tui", "worktree", "run", name, "--timeout", str(timeout), "--",
         sys.executable, "-c", STORM, str(count), sleep], cwd=repo, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec, start_new_session=True)


def _end(storm: subprocess.Popen[str]) -> None:
    """Stop the storm's `worktree run` (its timeout would anyway): the sandbox's pid namespace goes with it."""
    if storm.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(storm.pid, signal.SIGTERM)
    storm.communicate(timeout=60)


def _processes_in(worktree: Path) -> list[int]:
    """Processes whose working directory is inside `worktree` (the storm's, as the host sees them)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(f"/proc/{entry}/cwd")).is_relative_to(worktree):
                    found.append(int(entry))
    return found


def _state_operations(cli: CLI, tag: str) -> list[subprocess.CompletedProcess[str]]:
    return [cli("task", "create", f"during {tag}"), cli("task", "update", "1", "--description", tag),
            cli("worktree", "create", f"o-{tag}", "--task", "2"), cli("worktree", "keep", f"o-{tag}")]


def test_a_fork_storm_inside_leaves_the_outside_working(repo: Path) -> None:
    """Reproduces item 9's process half as written: 1,500 processes inside one sandbox (root is exempt from
    RLIMIT_NPROC, so nothing stops them). While they run, the user's state operations all work; when the run ends
    (here stopped, at worst by its --timeout) the sandbox's pid namespace takes every one of them along."""
    cli = CLI(repo)
    cli.ok("task", "create", "agent's task")
    cli.ok("task", "create", "spare")
    cli.ok("worktree", "create", "s1", "--task", "1")
    worktree = repo / ".worktrees" / "s1"
    storm = _storm(repo, "s1", 1500, timeout=120)
    try:
        started = worktree / "storm-started"
        wait_for(lambda: started.exists() and started.read_text().strip(), timeout=90, interval=0.2)
        assert int(started.read_text()) >= 1500
        for proc in _state_operations(cli, "storm"):
            assert proc.returncode == 0, proc.stderr
        assert _state_problems(repo) == []
    finally:
        _end(storm)
    wait_for(lambda: not _processes_in(worktree), timeout=30, interval=0.2)
    assert cli("doctor", env=OWN_STATE_ONLY).returncode == 0


@pytest.fixture
def pids_cgroup() -> Iterator[Path]:
    """A pids cgroup (v1) of 200 processes, removed at teardown: what a fork storm leaves the outside, without
    exhausting the machine's own pid space."""
    base = Path("/sys/fs/cgroup/pids")
    group = base / f"daintree-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "pids.max").write_text("200\n")
    except OSError as exc:
        pytest.skip(f"no pids cgroup here: {exc}")
    try:
        yield group
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        wait_for(lambda: not (group / "cgroup.procs").read_text().split(), timeout=30, interval=0.1)
        group.rmdir()


def test_state_operations_that_cannot_fork_fail_cleanly(repo: Path, pids_cgroup: Path) -> None:
    """A storm that reaches the limit: the agent's sleeps fill a pids cgroup that the user's CLI shares, so the
    user's `git` (and hooks, and sandboxes) cannot fork, or only one or a few at a time (the limit is raised by
    0 to 4 processes above what the storm holds, so that a command's first git starts and a later one, or the
    second of two at once, does not). On main a command that could not fork died with a traceback (the git its
    start asks ahead). Each operation now succeeds or fails with one line and corrupts nothing (a create rolls
    back without leaving a branch, a worktree or an index entry); once the storm ends they all work."""
    cli = CLI(repo)
    cli.ok("task", "create", "agent's task")
    for room in range(5):
        cli.ok("task", "create", f"spare {room}")  # task 2 + room: one for each room's create
    cli.ok("worktree", "create", "s1", "--task", "1")
    procs = pids_cgroup / "cgroup.procs"

    def join() -> None:
        procs.write_text(str(os.getpid()))

    storm = _storm(repo, "s1", 1500, timeout=240, preexec=join)
    failures: list[str] = []
    try:
        started = repo / ".worktrees" / "s1" / "storm-started"
        wait_for(lambda: started.exists() and started.read_text().strip(), timeout=90, interval=0.2)
        held = int((pids_cgroup / "pids.current").read_text())
        assert held >= 195
        for room in (0, 1, 2, 3, 4):
            (pids_cgroup / "pids.max").write_text(f"{held + 1 + room}\n")  # the CLI itself, and `room` more
            for args in (("task", "create", f"starved {room}"),
                         ("worktree", "create", f"starved{room}", "--task", str(2 + room)),
                         ("worktree", "keep", f"starved{room}"),
                         ("task", "update", "1", "--description", f"starved {room}")):
                before = _snapshot(repo)
                proc = subprocess.run([sys.executable, "-m", "daintree_tui", *args], cwd=repo, capture_output=True,
                                      text=True, stdin=subprocess.DEVNULL, timeout=120, preexec_fn=join)
                if args[:2] == ("worktree", "keep") and "no worktree named" in proc.stderr:
                    continue  # its create could not fork: nothing to keep
                _assert_clean(proc, f"{args} with room for {room}")
                assert _state_problems(repo) == [], (args, room)
                after = _snapshot(repo)
                assert before["tasks"] <= after["tasks"] and before["worktrees"] <= after["worktrees"], (args, room)
                if proc.returncode != 0:
                    failures.append(proc.stderr.strip().splitlines()[-1])
                    assert (after["tasks"], after["worktrees"]) == (before["tasks"], before["worktrees"]), (args, room)
    finally:
        _end(storm)
    assert failures  # the limit was felt
    wait_for(lambda: int((pids_cgroup / "pids.current").read_text()) == 0, timeout=30, interval=0.1)
    live = {e["name"] for e in json.loads((repo / ".worktrees" / "index.json").read_bytes())["worktrees"]}
    for room in (0, 1, 2, 3, 4):
        if f"starved{room}" not in live:
            assert not (repo / ".worktrees" / f"starved{room}").exists()
            cli.ok("worktree", "create", f"starved{room}")  # nothing of the failed create is in the way
    doctor = cli("doctor", env=OWN_STATE_ONLY)
    assert doctor.returncode == 0 and "all consistent" in doctor.stdout, doctor.stdout + doctor.stderr
