"""Notifications with no dashboard open (issue 31): the watcher a session start brings up, one notice per
transition to a real webhook receiver on 127.0.0.1, and the user's config as the only source of channels."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI, commit_file, make_repo, wait_for

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@contextlib.contextmanager
def counted_watcher(project: Any) -> Iterator[Any]:
    """The repository's watcher run in a thread of this test, ticking every 50 ms, counting its ticks (each
    tick's notices) and its own passes over the sessions; stopped, and its thread ended, when the block ends."""
    from daintree_tui.services import Services
    from daintree_tui.services.watcher import Watcher

    class Counted(Watcher):
        passes = ticks = 0

        def _observe(self) -> Any:
            self.passes += 1
            return super()._observe()

        def _notify(self, *args: Any) -> int:
            self.ticks += 1
            return super()._notify(*args)

    watcher = Counted(Services(project), tick=0.05, log=lambda line: None)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield watcher
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


class Receiver:
    """A webhook receiver on 127.0.0.1: every POSTed JSON body, in the order it came."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.received: list[float] = []  # when each post came (wall clock, as the events' `ts`)
        self.raw: list[tuple[dict[str, str], bytes]] = []  # every request, failed ones too
        self.fail_first = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.raw.append((dict(self.headers), body))
                    if receiver.fail_first > 0 and self.path == "/hook":  # a webhook that is down for a moment
                        receiver.fail_first -= 1
                        self.send_response(503)
                        self.end_headers()
                        return
                    if self.headers.get("Content-Type") == "application/json":
                        receiver.posts.append(json.loads(body))
                        receiver.received.append(time.time())
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kinds(self) -> list[tuple[str, str | None]]:
        with self.lock:
            return [(p["kind"], p["worktree"]) for p in self.posts]


@pytest.fixture(autouse=True)
def auto_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a person has it: automatic checkpoints on (the suite turns their default off, tests/conftest.py), so the
    watcher starts with a session whether or not a channel is set."""
    monkeypatch.delenv("DAINTREE_TEST_AUTO_CHECKPOINTS_DEFAULT")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


def user_config(text: str) -> Path:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def watcher_running(repo: Path) -> int | None:
    """The running watcher's pid, once it has written it: it takes its lock first, and -1 (locked, no pid yet)
    is not the pid `notify status` reports a moment later."""
    from daintree_tui.core.project import Project
    from daintree_tui.services.watcher import watcher_pid

    pid = watcher_pid(Project.discover(repo))
    return pid if pid is not None and pid > 0 else None


AGENTS = """
[sessions]
waiting_debounce = 1
[agents.asker]
command = "sh -c 'printf \\"proceed? \\"; read answer; exit 0'"
prompt_mode = "none"
[agents.crasher]
command = "sh -c 'echo boom; exit 3'"
prompt_mode = "none"
"""


@needs_tmux
def test_webhook_gets_one_waiting_one_done_one_failed_with_no_dashboard(
        repo: Path, tmux_socket: str, receiver: Receiver) -> None:
    user_config(f'[notify]\nwebhook = "{receiver.url}"\n' + AGENTS)
    cli = CLI(repo, subprocess=True)
    cli.ok("task", "create", "Ask first")
    cli.ok("worktree", "create", "ask", "--task", "1", "--agent", "asker")
    pid = wait_for(lambda: watcher_running(repo), timeout=15)
    # Another observer recording the same transitions (what a dashboard's poll does) adds no notice.
    watch = subprocess.Popen([sys.executable, "-m", "daintree_tui", "session", "watch", "--interval", "0.3"],
                             cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        cli.ok("worktree", "create", "crash", "--agent", "crasher")
        assert watcher_running(repo) == pid  # one watcher however many sessions start
        started = time.monotonic()
        wait_for(lambda: {("waiting", "ask"), ("failed", "crash")} <= set(receiver.kinds()), timeout=30)
        cli.ok("session", "send", "ask", "yes")
        wait_for(lambda: ("done", "ask") in receiver.kinds(), timeout=20)
        took = time.monotonic() - started
    finally:
        watch.terminate()
        watch.wait(timeout=10)
    # The last session stopped ends the watcher; nothing more arrives.
    cli.ok("session", "stop", "ask")
    cli.ok("session", "stop", "crash")
    wait_for(lambda: watcher_running(repo) is None, timeout=20)
    assert sorted(receiver.kinds()) == [("done", "ask"), ("failed", "crash"), ("waiting", "ask")], receiver.posts
    by_kind = {p["kind"]: p for p in receiver.posts}
    assert set(by_kind["waiting"]) == {"kind", "worktree", "task", "agent", "status", "text", "ts", "host"}
    assert by_kind["waiting"]["task"] == {"id": 1, "subject": "Ask first"}
    assert by_kind["waiting"]["agent"] == "asker" and by_kind["waiting"]["status"] == "waiting"
    assert by_kind["failed"]["text"].startswith("crash: crasher exited (3)")
    assert took < 30
    # Each within 5 s of its transition's record (the recording is itself within a tick of the change).
    assert max(got - p["ts"] for got, p in zip(receiver.received, receiver.posts, strict=True)) < 5


@needs_tmux
def test_a_repository_config_cannot_add_a_channel(repo: Path, tmux_socket: str, receiver: Receiver) -> None:
    """`[notify]` in the repository's .daintree.toml is ignored (with a warning): no post. The watcher runs all the
    same, for the checkpoints, and says so."""
    user_config(AGENTS)
    (repo / ".daintree.toml").write_text(f'[notify]\nwebhook = "{receiver.url}"\n')
    cli = CLI(repo, subprocess=True)
    proc = cli.ok("worktree", "create", "crash", "--agent", "crasher")
    assert "[notify]" in proc.stderr and "ignored" in proc.stderr
    pid = wait_for(lambda: watcher_running(repo), timeout=15)
    status = json.loads(cli.ok("notify", "status", "--json").stdout)
    assert status["channels"] == [] and status["running"] is True and status["pid"] == pid
    assert "no channel, so no notices" in cli.ok("notify", "status").stdout
    wait_for(lambda: "exited" in cli.ok("session", "list").stdout, timeout=15)
    cli.ok("session", "stop", "crash")
    wait_for(lambda: watcher_running(repo) is None, timeout=20)
    assert receiver.posts == []


@needs_tmux
def test_no_watcher_without_a_channel_once_checkpoints_are_off(repo: Path, tmux_socket: str) -> None:
    user_config("[checkpoints]\nauto = false\n" + AGENTS)
    cli = CLI(repo)
    cli.ok("worktree", "create", "crash", "--agent", "crasher")
    wait_for(lambda: "exited" in cli.ok("session", "list").stdout, timeout=15)
    assert watcher_running(repo) is None and not (repo / ".worktrees" / ".logs" / "notify.log").exists()


@needs_tmux
def test_one_watcher_per_repository_and_stop(repo: Path, tmux_socket: str, receiver: Receiver) -> None:
    user_config(f'[notify]\nwebhook = "{receiver.url}"\nkinds = ["failed"]\n' + AGENTS)
    cli = CLI(repo, subprocess=True)
    cli.ok("worktree", "create", "ask", "--agent", "asker")
    pid = wait_for(lambda: watcher_running(repo), timeout=15)
    second = cli("notify", "watch")  # finds the lock taken and leaves at once
    assert second.returncode == 0 and "already runs" in second.stdout
    assert json.loads(cli.ok("notify", "status", "--json").stdout)["pid"] == pid
    stopped = json.loads(cli.ok("notify", "stop", "--json").stdout)
    assert stopped == {"stopped": True, "pid": pid} and watcher_running(repo) is None
    assert "`daintree notify watch &` starts one now" in cli.ok("notify", "status").stdout  # how, with ask live
    assert "sent test by webhook" in cli.ok("notify", "test").stdout  # whatever `kinds` says
    assert receiver.kinds() == [("test", None)]


def test_notices_from_events() -> None:
    from daintree_tui.services.notify import OncePerRun, notice_for

    task = {"id": 4, "subject": "Fix login", "status": "in_progress"}
    waiting = notice_for({"event": "session.waiting", "ts": 1.0, "worktree": {"name": "a"}, "agent": "claude",
                          "task": task}, host="box")
    assert waiting is not None and waiting.kind == "waiting" and waiting.host == "box"
    assert waiting.text == "a: claude is waiting for you (task 4: Fix login)"
    assert notice_for({"event": "session.exited", "worktree": {"name": "a"}, "exit_code": None,
                       "reason": "stopped"}) is None
    lost = notice_for({"event": "session.exited", "worktree": {"name": "a"}, "exit_code": 129, "reason": "lost"})
    assert lost is not None and lost.kind == "failed" and "lost" in lost.text
    oom = notice_for({"event": "session.exited", "worktree": {"name": "a"}, "exit_code": 137, "limit": "oom-killed"})
    assert oom is not None and oom.kind == "failed" and oom.text == "a: exited (137): oom-killed (its memory limit)"
    train = notice_for({"event": "train.conflict", "worktree": {"name": "b"}, "files": ["x.py"]})
    assert train is not None
    assert (train.kind, train.status, train.text) == ("train", "conflict", "train: b conflict: x.py")
    over = notice_for({"event": "session.over_budget", "worktree": {"name": "a"}, "budget": {"scope": "per_task"}})
    assert over is not None and over.kind == "over_budget" and "per task" in over.text
    hostile = notice_for({"event": "session.waiting", "worktree": {"name": "a\x1b]52;c;x\x07"}, "agent": "x"})
    assert hostile is not None and "\x1b" not in hostile.text
    # An agent that completes its task and then exits 0 is done once; a new run may be done again.
    once = OncePerRun()
    records = [{"event": "task.completed", "worktree": {"name": "a"}, "task": task},
               {"event": "session.exited", "worktree": {"name": "a"}, "exit_code": 0},
               {"event": "session.started", "worktree": {"name": "a"}},
               {"event": "session.exited", "worktree": {"name": "a"}, "exit_code": 0}]
    assert [once.accept(r, notice_for(r)) for r in records] == [True, False, False, True]


def test_quiet_hours_kinds_and_command_channel(tmp_path: Path) -> None:
    from daintree_tui.core.project import Project
    from daintree_tui.core.user_config import NotifyConfig
    from daintree_tui.services.notify import Notifier, notice_for

    project = Project.discover(make_repo(tmp_path / "r"))
    out = tmp_path / "got.json"
    script = f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read() + '\\n')"
    config = NotifyConfig(command=(sys.executable, "-c", script), kinds=frozenset({"waiting"}),
                          quiet_hours=("22:00", "07:00"))
    notice = notice_for({"event": "session.waiting", "worktree": {"name": "a"}, "agent": "x"})
    failed = notice_for({"event": "session.exited", "worktree": {"name": "a"}, "exit_code": 1})
    assert notice is not None and failed is not None
    quiet = Notifier(project, config, now_hhmm=lambda: "23:30")
    assert not quiet.send(notice)
    loud = Notifier(project, config, now_hhmm=lambda: "12:00")
    assert not loud.send(failed) and loud.send(notice)
    loud.close()
    assert [json.loads(line)["kind"] for line in out.read_text().splitlines()] == ["waiting"]


def test_terminal_notice_is_claimed_by_one_dashboard(tmp_path: Path) -> None:
    from daintree_tui.core.project import Project
    from daintree_tui.services.notify import claim_terminal_notices, notice_for, osc_notification, post_terminal_notice

    project = Project.discover(make_repo(tmp_path / "r"))
    notice = notice_for({"event": "session.waiting", "worktree": {"name": "a"}, "agent": "x", "ts": time.time()})
    assert notice is not None
    post_terminal_notice(project, notice)
    first, second = claim_terminal_notices(project), claim_terminal_notices(project)
    assert [n["worktree"] for n in first] == ["a"] and second == []
    assert osc_notification(first[0], term_program="") == "\x1b]777;notify;daintree: a;a: x is waiting for you\x1b\\"
    assert osc_notification(first[0], term_program="iTerm.app").startswith("\x1b]9;")


def test_notify_config_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from daintree_tui.core.errors import ConfigError
    from daintree_tui.core.user_config import load_notify_config

    user_config('[notify]\nwebhook = "file:///etc/passwd"\n')
    with pytest.raises(ConfigError, match=r"notify\.webhook"):
        load_notify_config()
    user_config('[notify]\nkinds = ["waiting", "bogus"]\n')
    with pytest.raises(ConfigError, match=r"notify\.kinds"):
        load_notify_config()
    user_config('[notify]\ndesktop = true\nntfy = "https://ntfy.sh/x"\nquiet_hours = ["22:00", "07:00"]\n')
    config = load_notify_config()
    assert config.channels == ["desktop", "ntfy"] and config.quiet_hours == ("22:00", "07:00")


@needs_tmux
def test_no_notice_for_the_session_being_typed_into(repo: Path, tmux_socket: str, receiver: Receiver) -> None:
    """A person at the session (a tmux client that had a key just now) needs no notice about it; others still
    get theirs, and so does a session a client only shows (attached, no key since: the dashboard attaches one to
    the session you select, and that attach counted as a key, so a session started from the dashboard, or just
    looked at, gave no first `waiting`: "not sent: you are typing into it")."""
    import pty

    user_config(f'[notify]\nwebhook = "{receiver.url}"\n' + AGENTS + """
[agents.typed]
command = "sh -c 'read first; printf \\"proceed? \\"; read answer'"
prompt_mode = "none"
[agents.shown]
command = "sh -c 'echo loading; while [ ! -e go ]; do sleep 0.2; done; printf \\"proceed? \\"; read answer'"
prompt_mode = "none"
waiting_pattern = '[?] $'
""")
    cli = CLI(repo, subprocess=True)
    cli.ok("worktree", "create", "typed", "--agent", "typed")
    cli.ok("worktree", "create", "shown", "--agent", "shown")
    wait_for(lambda: watcher_running(repo), timeout=15)
    clients: list[tuple[int, int]] = []

    def attach(session: str) -> int:
        pid, fd = pty.fork()
        if pid == 0:  # the person's terminal: a plain tmux client on the session
            os.execvp("tmux", ["tmux", "-L", tmux_socket, "attach-session", "-t", f"={session}"])
        clients.append((pid, fd))
        wait_for(lambda: session in subprocess.run(["tmux", "-L", tmux_socket, "list-clients", "-F",
                                                    "#{client_session}"], capture_output=True, text=True).stdout,
                 timeout=15)
        return fd

    try:
        typed = attach("dt-typed")
        attach("dt-shown")
        # tmux keeps whole seconds: a key in the second of the attach reads as none. Type in a later one.
        created = subprocess.run(["tmux", "-L", tmux_socket, "list-clients", "-F", "#{client_created}"],
                                 capture_output=True, text=True).stdout.split()
        wait_for(lambda: time.time() >= max(int(c) for c in created) + 1, timeout=5)
        os.write(typed, b"go\r")  # typed by the person: the agent then asks and waits
        (repo / ".worktrees" / "shown" / "go").touch()  # the shown one asks, with nobody typing there
        cli.ok("worktree", "create", "crash", "--agent", "crasher")
        log = repo / ".worktrees" / ".logs" / "notify.log"
        wait_for(lambda: log.exists() and "waiting of typed not sent: you are typing into it" in log.read_text(),
                 timeout=30)
        wait_for(lambda: ("failed", "crash") in receiver.kinds(), timeout=20)
        wait_for(lambda: ("waiting", "shown") in receiver.kinds(), timeout=20)
        assert ("waiting", "typed") not in receiver.kinds()
    finally:
        for pid, fd in clients:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(fd)
        cli("notify", "stop")  # ours: it would tell the receiver, gone by then, of the sessions the teardown ends


@needs_tmux
def test_a_quiet_agent_is_not_waiting_and_one_wait_is_one_notice(repo: Path, tmux_socket: str,
                                                                 receiver: Receiver) -> None:
    """An agent with a prompt pattern, silent for 5 s (a build), is `running` until its prompt shows: it had been
    marked waiting (a "needs you" notice) after the debounce. One without a pattern that prints, pauses, then draws
    its prompt is waiting twice a moment apart: that is one notice.

    The debounce here is 2.5 s, not the 1 s of the other tests: the watcher looks once a second, and the slow
    agent is `running` between its prompt and the debounce only; in 1 s a look delayed on a busy machine missed it
    (one waiting recorded, not two)."""
    user_config(f'[notify]\nwebhook = "{receiver.url}"\n' + AGENTS.replace("waiting_debounce = 1\n",
                                                                       "waiting_debounce = 2.5\n") + """
[agents.builder]
command = "sh -c 'echo building; sleep 5; printf \\"done> \\"; read answer; exit 0'"
prompt_mode = "none"
waiting_pattern = '> $'
[agents.slow]
command = "sh -c 'echo loading; sleep 5; printf \\"ready? \\"; read answer; exit 0'"
prompt_mode = "none"
""")
    cli = CLI(repo, subprocess=True)
    cli.ok("worktree", "create", "build", "--agent", "builder")
    cli.ok("worktree", "create", "slow", "--agent", "slow")
    wait_for(lambda: watcher_running(repo), timeout=15)
    from tests.conftest import events

    def recorded(name: str, event: str) -> int:
        return sum(1 for e in events(repo) if e["event"] == event and e["worktree"]["name"] == name)

    wait_for(lambda: recorded("slow", "session.waiting") >= 2, timeout=30)  # the pause, then the prompt
    wait_for(lambda: "done>" in cli("session", "capture", "build").stdout, timeout=30)
    wait_for(lambda: recorded("build", "session.waiting") >= 1, timeout=30)
    for name in ("build", "slow"):
        cli.ok("session", "send", name, "yes")
    wait_for(lambda: {("done", "build"), ("done", "slow")} <= set(receiver.kinds()), timeout=30)
    # Waiting once, and only once its prompt showed: after its 5 s of silence, never in them.
    built = {e["event"]: e["ts"] for e in events(repo) if e["worktree"]["name"] == "build"}
    assert recorded("build", "session.waiting") == 1
    assert built["session.waiting"] - built["session.started"] >= 5.0, built
    assert sorted(k for k in receiver.kinds() if k[0] == "waiting") == [("waiting", "build"), ("waiting", "slow")]
    cli("notify", "stop")


def test_webhook_retried_with_back_off_and_ntfy_as_ntfy_expects(tmp_path: Path, receiver: Receiver) -> None:
    from daintree_tui.core.project import Project
    from daintree_tui.core.user_config import NotifyConfig
    from daintree_tui.services.notify import Notifier, notice_for

    project = Project.discover(make_repo(tmp_path / "r"))
    receiver.fail_first = 1
    notifier = Notifier(project, NotifyConfig(webhook=receiver.url, ntfy=receiver.url.replace("/hook", "/topic")),
                        log=lambda _: None)
    notice = notice_for({"event": "session.waiting", "worktree": {"name": "a"}, "agent": "claude", "ts": 1.0})
    assert notice is not None and notifier.send(notice)  # returns at once: delivery is the channels' threads'
    notifier.close()
    assert [p["kind"] for p in receiver.posts] == ["waiting"]  # the 503 was tried again, and sent once
    assert sum(1 for headers, _ in receiver.raw if headers.get("Content-Type") == "application/json") == 2
    ntfy = [(headers, body) for headers, body in receiver.raw if headers.get("Title")]
    assert len(ntfy) == 1 and ntfy[0][1] == b"a: claude is waiting for you"
    assert ntfy[0][0]["Title"] == "daintree: a needs you" and ntfy[0][0]["Priority"] == "high"


@needs_tmux
def test_a_train_result_with_no_session_running_is_sent(repo: Path, tmux_socket: str, receiver: Receiver) -> None:
    """What a merge train does when it lands work whose agents have all ended: it records its results, then asks
    for the watcher from before them; the watcher sends them and ends."""
    from daintree_tui.core.project import Project
    from daintree_tui.services import Services

    user_config(f'[notify]\nwebhook = "{receiver.url}"\n')
    services = Services(Project.discover(repo))
    before = services.project.events.complete_end()
    services.project.events.append("train.merged", worktree={"name": "a"}, commit="abc123")
    services.project.events.append("train.conflict", worktree={"name": "b"}, files=["app.py"])
    assert services.ensure_watcher(since=before) is not None
    wait_for(lambda: len(receiver.posts) == 2, timeout=20)
    wait_for(lambda: watcher_running(repo) is None, timeout=20)
    assert [(p["kind"], p["worktree"], p["status"]) for p in receiver.posts] == [
        ("train", "a", "merged"), ("train", "b", "conflict")]
    assert receiver.posts[1]["text"] == "train: b conflict: app.py"


@needs_tmux
async def test_the_watcher_stands_back_while_a_dashboard_records_and_its_notices_still_go(
        repo: Path, tmux_socket: str, receiver: Receiver) -> None:
    """The watcher's own pass (a `list-panes` fork, each session's record, inbox and agent git) repeated what an
    open dashboard's live client records anyway: as much CPU as the dashboard at 40 busy agents. While a
    dashboard records by events, the watcher looks at the sessions once in STAND_BACK_TICKS ticks, and its
    notices, read from the event log at every tick, still go out once."""
    from daintree_tui.core.project import Project
    from daintree_tui.services import Services
    from daintree_tui.services.watcher import STAND_BACK_TICKS, live_observer_present
    from daintree_tui.tui.app import make_app
    from tests.helpers.dashboard import main_screen, until

    user_config(f'[notify]\nwebhook = "{receiver.url}"\n' + AGENTS + "[agents.idle]\ncommand = \"sleep 600\"\n"
                "prompt_mode = \"none\"\n")
    project = Project.discover(repo)

    # First, so that it holds the repository's lock and the sessions' starts start no watcher process.
    with counted_watcher(project) as watcher:
        wait_for(lambda: watcher_running(repo))
        services = Services(project)
        services.worktrees.create("idle")
        services.sessions.start("idle", "idle")
        wait_for(lambda: watcher.ticks >= 10)
        assert watcher.passes >= watcher.ticks - 1  # no dashboard: a pass every tick
        app = make_app(Project.discover(repo))
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: main_screen(app).started and live_observer_present(project))
            passes, ticks = watcher.passes, watcher.ticks
            services.worktrees.create("ask")
            services.sessions.start("ask", "asker")
            await until(pilot, lambda: ("waiting", "ask") in receiver.kinds(), timeout=30)
            await until(pilot, lambda: watcher.ticks >= ticks + 4 * STAND_BACK_TICKS)
            assert watcher.passes - passes <= (watcher.ticks - ticks) // STAND_BACK_TICKS + 1
        assert not live_observer_present(project)  # the dashboard gone, the watcher's passes are its own again
        passes, ticks = watcher.passes, watcher.ticks
        wait_for(lambda: watcher.ticks >= ticks + 10)
        assert watcher.passes - passes >= watcher.ticks - ticks - 1
        assert receiver.kinds() == [("waiting", "ask")]


def test_a_fifo_where_the_watchers_locks_go_stops_neither_the_watcher_nor_a_session_start(repo: Path) -> None:
    """Whatever is found under `.worktrees/` is data (a copied repository may bring a FIFO along): the looks at the
    live-observer lock (each watcher tick) and at the watcher's lock (each session start) opened it read-only,
    and opening a FIFO so waits for a writer, forever: the watcher stopped at its second tick, no notice after."""
    from daintree_tui.core.project import Project
    from daintree_tui.services.watcher import LIVE_OBSERVER_LOCK, LOCK_NAME, watcher_pid

    user_config('[notify]\nwebhook = "http://127.0.0.1:9/"\n')
    project = Project.discover(repo)
    project.locks_dir.mkdir(parents=True, mode=0o700)
    os.mkfifo(project.locks_dir / LIVE_OBSERVER_LOCK)

    with counted_watcher(project) as watcher:
        wait_for(lambda: watcher.ticks >= 3, timeout=10)

    (project.locks_dir / LOCK_NAME).unlink()  # the watcher's, left when it ended
    os.mkfifo(project.locks_dir / LOCK_NAME)
    looked: list[int | None] = []
    look = threading.Thread(target=lambda: looked.append(watcher_pid(project)), daemon=True)
    look.start()
    look.join(timeout=10)
    assert looked == [None]


@needs_tmux
def test_a_committed_file_where_the_locks_go_leaves_the_dashboards_live_client_running(
        repo: Path, tmux_socket: str) -> None:
    """A clone whose commits hold a file `.worktrees/.locks`: the lock folder is refused, and saying that a
    dashboard records (`hold_live_observer`) said so by raising out of the live client's start (the client
    already started, the dashboard's first poll failed); it gives up instead (None), as for any lock it cannot
    have: the watcher then makes all its passes."""
    from daintree_tui.core.project import Project
    from daintree_tui.services import Services
    from daintree_tui.services.watcher import hold_live_observer, live_observer_present
    from daintree_tui.tui.backend import Backend

    commit_file(repo, ".worktrees/.locks", "not a folder\n", "a file where the locks go")
    project = Project.discover(repo)
    assert hold_live_observer(project) is None
    backend = Backend(Services(project))
    assert backend.host is not None
    argv = backend.host.server_argv()
    assert argv is not None
    subprocess.run([*argv, "new-session", "-d", "-s", "dt-idle", "sleep 600"], check=True)
    try:
        assert backend.start_live()
        assert backend.live is not None
        assert not live_observer_present(project)
    finally:
        backend.stop_live()
    assert (repo / ".worktrees" / ".locks").read_text() == "not a folder\n"


def test_a_lock_file_with_another_name_in_a_worktree_makes_no_dashboard_of_its_holder(repo: Path) -> None:
    """A copied tree can bring the live-observer lock as a hard link to a file of a worktree, which that
    worktree's agent can open and hold shared: the watcher then stood back with no dashboard open, its own look
    at the sessions once in five ticks. A lock file with another name is no dashboard's, and none holds it."""
    import fcntl

    from daintree_tui.core.project import Project
    from daintree_tui.services import Services
    from daintree_tui.services.watcher import LIVE_OBSERVER_LOCK, hold_live_observer, live_observer_present

    project = Project.discover(repo)
    entry = Services(project).worktrees.create("agent")
    planted = Path(entry.path) / "notes.txt"
    planted.write_text("")
    project.locks_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
    os.link(planted, project.locks_dir / LIVE_OBSERVER_LOCK)
    with planted.open("rb") as held:  # what the agent does, inside its sandbox
        fcntl.flock(held.fileno(), fcntl.LOCK_SH)
        assert not live_observer_present(project)
        assert hold_live_observer(project) is None
    (project.locks_dir / LIVE_OBSERVER_LOCK).unlink()
    fd = hold_live_observer(project)  # the file made afresh is a lock again
    assert fd is not None
    try:
        assert live_observer_present(project)
    finally:
        os.close(fd)
    assert not live_observer_present(project)


@needs_tmux
def test_a_broken_user_config_is_logged_once_plainly(repo: Path, tmux_socket: str, receiver: Receiver) -> None:
    """Found in a trial: a typo in the user's config, which stops every notice, was logged as "config: config:
    /…/config.toml is not valid TOML …" (the error already says where it comes from)."""
    path = user_config(f'[notify]\nwebhook = "{receiver.url}"\n' + AGENTS)
    cli = CLI(repo, subprocess=True)
    cli.ok("worktree", "create", "ask", "--agent", "asker")
    wait_for(lambda: watcher_running(repo), timeout=15)
    try:
        path.write_text(path.read_text() + "[notify\n")
        log = repo / ".worktrees" / ".logs" / "notify.log"
        line = wait_for(lambda: next((x for x in log.read_text().splitlines() if "no notices until" in x), None),
                        timeout=15)
        assert f"config: {path} is not valid TOML" in line and "config: config:" not in line, line
    finally:
        cli("notify", "stop")
