"""The tmux control-mode event source: the parser on control-mode output recorded from tmux 3.3a (fixtures),
and the client, the event source and live status on real tmux servers."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from daintree_tui.sessions.control import (
    PANES_FORMAT,
    TAIL_BYTES,
    Activity,
    ControlClient,
    ControlParser,
    Exit,
    Exited,
    Notification,
    Output,
    Reply,
    SessionEvents,
    SessionsChanged,
    SubscriptionChanged,
    escaped_tail,
    parse_panes,
    quote,
    unescape,
)
from daintree_tui.sessions.live import LiveStatus, StatusChange
from daintree_tui.sessions.status import SIGNAL_SLACK, STARTING_GRACE, SessionStatus
from tests.conftest import wait_for
from tests.helpers.control import drain

FIXTURES = Path(__file__).parent / "fixtures" / "control"


def parse_file(name: str) -> list[object]:
    parser = ControlParser()
    messages = []
    for line in (FIXTURES / name).read_bytes().split(b"\n"):
        message = parser.feed(line)
        if message is not None:
            messages.append(message)
    return messages


# -- the parser, on recorded output ---------------------------------------------------------------------------


def test_lifecycle_recording_parses_into_replies_output_and_notifications() -> None:
    messages = parse_file("session_lifecycle.txt")
    attach, changed, subscribed, output, sub = messages[:5]
    assert isinstance(attach, Reply) and not attach.own and attach.ok
    assert changed == Notification("session-changed", ("$0", "dt-a"))
    assert isinstance(subscribed, Reply) and subscribed.own and subscribed.ok and subscribed.lines == ()
    # Backslash arrives as \134, control bytes as octal, UTF-8 raw.
    assert output == Output("%0", len(rb"hello \134 w" + "é".encode() + rb"rld\015\012\033[31mred\033[0m\015\012"),
                            "hello \\ wérld\r\n\x1b[31mred\x1b[0m\r\n".encode())
    assert sub == SubscriptionChanged("act", "dt-a=0;")
    replies = [m for m in messages if isinstance(m, Reply) and m.own]
    listing = next(r for r in replies if r.lines == ("dt-a",))
    assert listing.ok
    failed = [r for r in replies if not r.ok]
    assert len(failed) == 1 and "unknown command" in failed[0].lines[0]
    names = [m.name for m in messages if isinstance(m, Notification)]
    assert names.count("sessions-changed") == 3
    assert {"unlinked-window-add", "unlinked-window-close", "window-add"} <= set(names)
    assert SubscriptionChanged("act", "dt-a=0;dt-b=1;") in messages
    assert messages[-1] == Exit("")


def test_a_framed_reply_takes_its_lines_whatever_they_read_and_then_its_guard() -> None:
    parser = ControlParser()
    parser.expect_lines(2)
    assert parser.feed(b"%begin 9 4 0") is None  # not our command's: the frame waits for ours
    assert parser.feed(b"%end 9 4 0") == Reply(4, True, False, ())
    assert parser.feed(b"%begin 9 5 1") is None
    assert parser.feed(b"%end 9 5 1") is None  # a screen's line, though it reads like the guard
    assert parser.feed(b"%begin 9 6 1") is None
    assert parser.feed(b"%end 9 5 1") == Reply(5, True, True, ("%end 9 5 1", "%begin 9 6 1"))
    parser.expect_lines(1)
    parser.feed(b"%begin 9 7 1")
    parser.feed(b"a line")
    with pytest.raises(ValueError, match="out of step"):
        parser.feed(b"another")


def test_flood_keeps_only_a_small_unescaped_tail() -> None:
    raw = (FIXTURES / "flood.txt").read_bytes()
    outputs = [m for m in parse_file("flood.txt") if isinstance(m, Output)]
    assert len(outputs) >= 2
    assert all(len(o.tail) <= TAIL_BYTES for o in outputs)
    assert sum(o.size for o in outputs) == sum(len(line.split(b" ", 2)[2]) for line in raw.split(b"\n")
                                               if line.startswith(b"%output "))
    assert outputs[-1].tail.endswith(b"1999 2000 \\end\x1b[0m\r\n")
    assert b"\\134" not in outputs[-1].tail


def test_extended_output_and_pause_from_pause_after() -> None:
    outputs = [m for m in parse_file("extended_output.txt") if isinstance(m, Output)]
    assert [o.tail for o in outputs] == [b"line0\r\n", b"line1\r\n", b"line2\r\n"]
    assert all(o.pane == "%0" for o in outputs)
    assert Notification("pause", ("%0",)) in parse_file("pause.txt")


def test_panes_subscription_value_lists_daintree_sessions_with_exit_codes() -> None:
    messages = parse_file("panes_subscription.txt")
    listing = next(m for m in messages if isinstance(m, Reply) and m.own and m.lines)
    sub = next(m for m in messages if isinstance(m, SubscriptionChanged))
    assert sub.name == "daintree-panes" and sub.value == listing.lines[0]
    server_pid, records, unreaped = parse_panes(sub.value)
    assert server_pid == 9027 and not unreaped
    assert set(records) == {"dt-gone", "dt-run"}  # `other` is not ours
    assert records["dt-gone"].dead and records["dt-gone"].exit_code == 7
    assert not records["dt-run"].dead and records["dt-run"].exit_code is None
    assert records["dt-run"].pane == "%1" and records["dt-run"].worktree == "run"
    assert records["dt-run"].size == "80x24"  # a resize is told from output by it
    assert records["dt-run"].created == 1796078334.0
    # "hi" was printed in the session's first second: only the cursor shows it.
    assert records["dt-run"].activity == records["dt-run"].created and records["dt-run"].printed


def test_unreaped_dead_pane_counts_as_running() -> None:
    _, records, unreaped = parse_panes("42:dt-a:%0:100:1:::1700000000:1700000001:0:3:0:80:24:")
    assert unreaped and not records["dt-a"].dead
    _, records, _ = parse_panes("42:dt-a:%0:100:1::9:1700000000:1700000001:0:3:0:80:24:")
    assert records["dt-a"].dead and records["dt-a"].exit_code == 137


def test_tail_never_splits_an_escape() -> None:
    data = b"x" * 10 + rb"\033[0m\134"
    for limit in range(1, len(data) + 1):
        tail = escaped_tail(data, limit)
        assert b"\\" not in tail.replace(b"\\", b"", 1) or tail.endswith(b"\\")
        assert unescape(data).endswith(tail)


def test_a_block_ends_only_at_its_own_guard() -> None:
    parser = ControlParser()
    lines = [b"%begin 1 5 1", b"%end 1 4 1", b"%output %1 not a notification", b"%end 1 5 1"]
    results = [parser.feed(line) for line in lines]
    assert results[:3] == [None, None, None]
    assert results[3] == Reply(5, True, True, ("%end 1 4 1", "%output %1 not a notification"))


def test_quote_survives_the_tmux_parser(tmux_socket: str) -> None:
    subprocess.run(["tmux", "-L", tmux_socket, "-f", "/dev/null", "new-session", "-d", "-s", "q", "cat"], check=True)
    text = "it's #{session_name}; done"
    proc = subprocess.run(["tmux", "-L", tmux_socket, "display-message", "-p", text], capture_output=True,
                          text=True)
    via_parser = subprocess.run(["tmux", "-L", tmux_socket, "-C", "attach", "-r", "-t", "=q"],
                                input=f"display-message -p {quote(text)}\n", capture_output=True, text=True)
    assert proc.stdout.strip() == "it's q; done"
    assert "it's q; done" in via_parser.stdout.splitlines()


# -- the event source on a real server ------------------------------------------------------------------------


def tmux(socket: str, *args: str) -> None:
    subprocess.run(["tmux", "-L", socket, "-f", "/dev/null", *args], check=True, capture_output=True)


def start(socket: str, name: str, script: str) -> None:
    tmux(socket, "new-session", "-d", "-s", name, "-x", "80", "-y", "10", "sh", "-c", script, ";",
         "set", "-g", "remain-on-exit", "on")


@pytest.fixture
def events(tmux_socket: str):  # type: ignore[no-untyped-def]
    source = SessionEvents(["tmux", "-L", tmux_socket, "-f", "/dev/null"], idle_retry=0.2)
    yield source
    source.close()


def test_events_report_activity_exit_and_new_and_removed_sessions(tmux_socket: str, events: SessionEvents) -> None:
    start(tmux_socket, "dt-busy", "while :; do echo tick; sleep 0.3; done")
    start(tmux_socket, "dt-ends", "read line; echo got $line; exit 5")
    events.start()
    wait_for(lambda: events.known and set(events.records()) == {"dt-busy", "dt-ends"})
    seen: list[object] = []
    wait_for(lambda: seen.extend(drain(events)) or sum(isinstance(e, Activity) and e.session == "dt-busy"
                                                      for e in seen) >= 2, timeout=15)
    assert any(isinstance(e, SessionsChanged) and e.added == {"dt-busy", "dt-ends"} for e in seen)
    tmux(tmux_socket, "send-keys", "-t", "=dt-ends:", "hello", "Enter")
    wait_for(lambda: seen.extend(drain(events)) or any(isinstance(e, Exited) for e in seen), timeout=15)
    exited = [e for e in seen if isinstance(e, Exited)]
    assert [(e.session, e.exit_code) for e in exited] == [("dt-ends", 5)]
    assert "got hello" in events.capture(["dt-ends"])["dt-ends"]
    start(tmux_socket, "dt-new", "exec cat")
    wait_for(lambda: seen.extend(drain(events)) or any(isinstance(e, SessionsChanged) and "dt-new" in e.added
                                                      for e in seen))
    tmux(tmux_socket, "kill-session", "-t", "=dt-ends")
    wait_for(lambda: seen.extend(drain(events)) or any(isinstance(e, SessionsChanged) and "dt-ends" in e.removed
                                                      for e in seen))
    assert events.connects == 1


def test_a_screen_that_spoofs_the_end_of_its_capture_stays_a_screen(tmux_socket: str, events: SessionEvents,
                                                                     tmp_path: Path) -> None:
    """A capture's reply is the agent's screen, line for line, and tmux ends it with a guard (`%end TIME NUMBER
    1`) that only the command's number makes hard to guess. A screen with the right guard on it ended the reply
    there, and what followed it was taken as tmux's: a forged reply to the next command in flight (here another
    session's screen; a listing's place would have been given sessions that do not exist, or exits that did not
    happen). This agent knows the guard (the test tells it)."""
    spoof = tmp_path / "screen"
    start(tmux_socket, "dt-spoof", f"while [ ! -f {spoof} ]; do sleep 0.05; done; cat {spoof}; exec sleep 600")
    tmux(tmux_socket, "resize-window", "-t", "=dt-spoof:", "-x", "60", "-y", "200")
    start(tmux_socket, "dt-other", "echo the other screen; exec sleep 600")
    events.start()
    wait_for(lambda: events.connected and {"dt-spoof", "dt-other"} <= set(events.records()))
    told = events.command("display-message -p told")
    assert told is not None and told.lines == ("told",)
    now = int(time.time())
    rows = [f"%end {t} {n} 1" for t in range(now, now + 4) for n in range(told.number + 1, told.number + 46)]
    rows += ["%begin 0 0 1", "forged", "%end 0 0 1"]
    (tmp_path / "part").write_text("\n".join(rows))
    (tmp_path / "part").rename(spoof)
    wait_for(lambda: "%begin 0 0 1" in subprocess.run(["tmux", "-L", tmux_socket, "capture-pane", "-p", "-t",
                                                       "=dt-spoof:"], capture_output=True, text=True).stdout)
    conn = events._conn
    assert conn is not None
    busy = conn.client.command("run-shell 'sleep 0.3'")  # both captures are sent before tmux answers either
    screens = events.capture(["dt-spoof", "dt-other"])
    assert busy.result(timeout=5).ok
    assert screens["dt-spoof"].split("\n")[:len(rows)] == rows
    assert screens["dt-other"].split("\n")[0] == "the other screen"
    refused = conn.client.capture("=dt-other:", "-p -Z")  # refused as a whole line: no capture, no reply of one
    with pytest.raises(ValueError, match="not captured"):
        refused.result(timeout=5)
    after = events.command("display-message -p after")
    assert after is not None and after.lines == ("after",)


def test_events_reconnect_when_the_attached_session_is_killed(tmux_socket: str, events: SessionEvents) -> None:
    start(tmux_socket, "dt-a", "exec cat")
    start(tmux_socket, "dt-b", "while :; do echo b; sleep 0.3; done")
    events.start()
    wait_for(lambda: events.connected and set(events.records()) == {"dt-a", "dt-b"})
    tmux(tmux_socket, "kill-session", "-t", "=dt-a")  # the client is attached to the oldest: dt-a
    wait_for(lambda: set(events.records()) == {"dt-b"} and events.connected and events.connects == 2)
    drain(events)
    wait_for(lambda: any(isinstance(e, Activity) and e.session == "dt-b" for e in drain(events)), timeout=15)
    tmux(tmux_socket, "kill-server")
    wait_for(lambda: events.records() == {} and not events.connected)
    start(tmux_socket, "dt-c", "exec cat")
    events.poke()
    wait_for(lambda: set(events.records()) == {"dt-c"} and events.connected)


def test_events_over_an_argv_prefix(tmux_socket: str) -> None:
    """The prefix path (how `ssh HOST` is used): the tmux argv goes as one quoted command line."""
    start(tmux_socket, "dt-x", "while :; do echo x; sleep 0.3; done")
    source = SessionEvents(["tmux", "-L", tmux_socket, "-f", "/dev/null"], prefix=["sh", "-c"]).start()
    try:
        wait_for(lambda: any(isinstance(e, Activity) for e in drain(source)), timeout=15)
        assert set(source.records()) == {"dt-x"}
    finally:
        source.close()


def test_a_flood_costs_the_listener_one_line_a_second(tmux_socket: str, events: SessionEvents) -> None:
    """`no-output` + the subscription: 5 MB printed by a session reaches us as a few short reports."""
    start(tmux_socket, "dt-flood", "sleep 0.5; yes flood | head -c 5000000; exec cat")
    received: list[object] = []
    source = SessionEvents(["tmux", "-L", tmux_socket, "-f", "/dev/null"], on_event=received.append).start()
    try:
        wait_for(lambda: any(isinstance(e, Activity) for e in received), timeout=15)
        reply = source.command(f"display-message -p {quote(PANES_FORMAT)}")
        assert reply is not None and "dt-flood" in reply.lines[0]
        assert len(received) < 20
    finally:
        source.close()


def read_calls(thread_id: int) -> int:
    """How many read system calls one thread of this process has made (Linux's per-thread I/O counters)."""
    for line in Path(f"/proc/self/task/{thread_id}/io").read_text().splitlines():
        if line.startswith("syscr:"):
            return int(line.split()[1])
    raise AssertionError("no syscr in the thread's io counters")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's per-thread counters")
def test_the_reader_takes_the_stream_a_pipeful_at_a_time(tmux_socket: str) -> None:
    """Captures of the rows on screen (and the subscription line) reach the reader in a few reads each: line
    iteration over the unbuffered pipe read one byte per system call, ~7000 a second at 40 busy sessions."""
    start(tmux_socket, "dt-full", "i=0; while [ $i -lt 10 ]; do printf '%070d\\n' $i; i=$((i+1)); done; exec cat")
    client = ControlClient(["tmux", "-L", tmux_socket, "-f", "/dev/null", "-C", "attach-session", "-r", "-f",
                            "no-output,ignore-size", "-t", "=dt-full"], lambda _: None).start()
    try:
        def screen() -> tuple[str, ...]:
            reply = client.command("capture-pane -p -t =dt-full:").result(timeout=5)
            return reply.lines if reply.ok else ()

        wait_for(lambda: any(line.endswith("9") for line in screen()), timeout=15)
        reader = client._reader.native_id
        assert reader is not None
        before = read_calls(reader)
        received = sum(len(line) + 1 for _ in range(20) for line in screen())
        reads = read_calls(reader) - before
        assert received > 10_000
        assert reads < received / 20, f"{reads} reads for {received} bytes"
    finally:
        client.close()


# -- live status: every change of a dozen busy sessions, in order, within about a second --------------------

PHASE_SCRIPT = """
mark() {{ printf '%s %s\\n' "$1" "$(date +%s.%N)" >> {marks}; }}
sleep 0.5
mark running; i=0; while [ $i -lt 8 ]; do echo "work $i"; i=$((i+1)); sleep 0.25; done; mark quiet
sleep 4
mark running2; i=0; while [ $i -lt 8 ]; do echo "more $i"; i=$((i+1)); sleep 0.25; done
mark exit; exit 3
"""


def test_live_status_sees_every_change_of_twelve_busy_sessions(tmux_socket: str, tmp_path: Path) -> None:
    count = 12
    debounce = 1.5
    changes: list[tuple[float, StatusChange]] = []
    source = SessionEvents(["tmux", "-L", tmux_socket, "-f", "/dev/null"])
    live = LiveStatus(source, debounce, on_change=lambda c: changes.append((time.time(), c)))
    start(tmux_socket, "dt-anchor", "exec cat")
    source.start()
    live.start()
    try:
        wait_for(lambda: live.statuses().get("dt-anchor") is not None)
        for i in range(count):
            script = PHASE_SCRIPT.format(marks=tmp_path / f"s{i}.marks")
            start(tmux_socket, f"dt-s{i:02d}", script)
        names = {f"dt-s{i:02d}" for i in range(count)}
        wait_for(lambda: sum(c.new == SessionStatus.EXITED for _, c in changes) == count, timeout=40)
    finally:
        live.close()
        source.close()
    for i in range(count):
        name = f"dt-s{i:02d}"
        mine = [(t, c) for t, c in changes if c.session == name]
        sequence = [c.new for _, c in mine]
        if sequence[0] == SessionStatus.STARTING:
            sequence = sequence[1:]
            mine = mine[1:]
        assert sequence == [SessionStatus.RUNNING, SessionStatus.WAITING, SessionStatus.RUNNING,
                            SessionStatus.EXITED], (name, sequence)
        marks = dict(line.split() for line in (tmp_path / f"s{i}.marks").read_text().splitlines())
        seen = [t for t, _ in mine]
        # tmux reports subscriptions once a second, the tracker ticks every 0.2 s: allow that plus load.
        slack = 1.0 + 0.2 + 0.8
        assert seen[0] - float(marks["running"]) < slack, name
        assert seen[1] - float(marks["quiet"]) < debounce + slack, name
        assert seen[1] - float(marks["quiet"]) >= debounce - 0.4, name  # never before the output went quiet
        assert seen[2] - float(marks["running2"]) < slack, name
        assert seen[3] - float(marks["exit"]) < slack, name
        assert mine[3][1].exit_code == 3
    assert names <= {c.session for _, c in changes}


# -- LiveSessions over a real project: records and events, once each; the agent's own hook signal -------------


def test_live_sessions_record_each_change_once_and_believe_the_hook(repo: Path, tmux_socket: str) -> None:
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService
    from daintree_tui.sessions.live import LiveSessions
    from daintree_tui.sessions.manager import SessionManager
    from tests.conftest import events as read_events

    (repo / ".daintree.toml").write_text(
        "[sessions]\nwaiting_debounce = 30\n"
        "[agents.hooked]\ncommand = \"sh -c 'echo hi; exec cat'\"\n"
        "[notifications]\nbell = false\ndesktop = false\n")
    from daintree_tui.core.hooks import trust

    trust(Project.discover(repo))  # the agent command comes from the repository's own config
    project = Project.discover(repo)
    WorktreeService(project).create("one")
    manager = SessionManager(project)
    seen: list[StatusChange] = []
    live = LiveSessions(manager, record=lambda c: manager.records.transition(c.worktree, c.new, c.exit_code),
                        on_change=seen.append).start()
    try:
        manager.start("one", "hooked", size=(80, 10))
        live.events.poke()
        wait_for(lambda: [i.status for i in live.infos()] == [SessionStatus.RUNNING], timeout=15)
        manager.signal("one", "waiting")  # what Claude Code's Stop hook does
        wait_for(lambda: [i.status for i in live.infos()] == [SessionStatus.WAITING], timeout=5)
        # Output within SIGNAL_SLACK of the signal is the agent finishing its redraw: type after it.
        signalled = float(manager.meta("one")["signal"]["ts"])
        wait_for(lambda: time.time() > signalled + SIGNAL_SLACK + 0.1)
        manager.send("one", "go on")  # the agent prints again: running
        wait_for(lambda: [i.status for i in live.infos()] == [SessionStatus.RUNNING], timeout=10)
        manager.keys("one", ["C-d"])  # cat ends: exited 0
        wait_for(lambda: [(i.status, i.exit_code) for i in live.infos()] == [(SessionStatus.EXITED, 0)], timeout=10)
        wait_for(lambda: any(c.new == SessionStatus.EXITED for c in seen))
    finally:
        live.close()
    kinds = [e["event"] for e in read_events(repo)]
    session_events = [k for k in kinds if str(k).startswith("session.") and k != "session.started"]
    assert session_events == ["session.running", "session.waiting", "session.running", "session.exited"]
    assert manager.meta("one")["status"] == "exited"


def test_a_session_quiet_before_the_observer_started_is_waiting_at_first_sight(repo: Path, tmux_socket: str) -> None:
    # Every dashboard start used to date an idle session's last output "now": it showed running for seconds and
    # recorded a running/waiting pair per session.
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService
    from daintree_tui.sessions.live import LiveSessions
    from daintree_tui.sessions.manager import SessionManager

    (repo / ".daintree.toml").write_text(
        "[sessions]\nwaiting_debounce = 0.5\n[agents.idle]\ncommand = \"sh -c 'echo ready; exec cat'\"\n")
    from daintree_tui.core.hooks import trust

    trust(Project.discover(repo))
    project = Project.discover(repo)
    WorktreeService(project).create("one")
    manager = SessionManager(project)
    manager.start("one", "idle", size=(80, 10))
    log = project.log_path("one")
    wait_for(lambda: log.exists() and "ready" in log.read_text())
    quiet_since = time.time()
    wait_for(lambda: time.time() > quiet_since + 2.5)  # tmux dates activity to the second
    seen: list[StatusChange] = []
    live = LiveSessions(manager, record=lambda c: None, on_change=seen.append).start()
    try:
        live.events.poke()
        wait_for(lambda: seen)
        wait_for(lambda: time.time() > quiet_since + 4)  # long enough for a wrong "running" to settle back
    finally:
        live.close()
    assert [(c.old, c.new) for c in seen] == [(None, SessionStatus.WAITING)]


# -- the same through the dashboard: every change of busy sessions reaches the worktree table ----------------

DASHBOARD_PHASES = """mark() {{ printf '%s %s\\n' "$1" "$(date +%s.%N)" >> {marks}/"$(basename "$PWD")"; }}
sleep 0.5
mark running; i=0; while [ $i -lt 12 ]; do echo "work $i"; i=$((i+1)); sleep 0.25; done; mark quiet
sleep 6
mark running2; i=0; while [ $i -lt 16 ]; do echo "more $i"; i=$((i+1)); sleep 0.25; done
mark exit; exit 3
"""


async def test_dashboard_shows_every_status_change_of_eight_busy_sessions(repo: Path, tmux_socket: str,
                                                                          tmp_path: Path) -> None:
    """Issue 17: the dashboard shows every status change of busy sessions, in order, none missed, each within
    a second of what the status rules allow (tmux reports once a second; `waiting` needs the debounce of quiet;
    the screen holds a running/waiting change for `hold` seconds so bursts do not flap it)."""
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService
    from daintree_tui.sessions.manager import SessionManager
    from daintree_tui.sessions.status import SessionStatus
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.widgets.worktree_table import WorktreeTable
    from tests.conftest import trusted_config
    from tests.helpers.dashboard import main_screen, until

    count, debounce = 8, 1.0
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "phases.sh").write_text(DASHBOARD_PHASES.format(marks=marks))
    trusted_config(repo, f"[sessions]\nwaiting_debounce = {debounce}\n"
                         f"[agents.phases]\ncommand = \"sh {tmp_path / 'phases.sh'}\"\nsandbox = \"off\"\n"
                         "[notifications]\nbell = false\ndesktop = false\n")
    project = Project.discover(repo)
    names = [f"busy-{i}" for i in range(count)]
    for name in names:
        WorktreeService(project).create(name)
    shown: dict[str, list[tuple[float, str]]] = {name: [] for name in names}

    def record(sessions: dict[str, object]) -> None:
        """What the worktree table is given to draw, at every change (render_rows runs right after)."""
        now = time.time()
        for name, info in sessions.items():
            status = str(getattr(info, "status", ""))
            if name in shown and (not shown[name] or shown[name][-1][1] != status):
                shown[name].append((now, status))

    app = make_app(project)
    async with app.run_test(size=(200, 50)) as pilot:
        screen = main_screen(app)
        table = screen.query_one(WorktreeTable)
        await until(pilot, lambda: table.row_count == count)
        screen.watch(table, "sessions", record, init=False)
        manager = SessionManager(project)
        for name in names:
            manager.start(name, "phases", size=(100, 30))
        await until(pilot, lambda: all(s and s[-1][1] == "exited" for s in shown.values()), timeout=60)
        await until(pilot, lambda: all("exited 3" in table.cell_text(n, "session") for n in names))
    hold = screen.hysteresis.hold
    slack = 1.0 + 1.5  # a second, as the issue asks, plus time for a loaded machine (tests run in parallel)
    # The script's quiet pause (6 s) outlasts the latest `waiting` allowed below by a second: a late one fails on
    # its time, not by coming after the second run of output.
    assert debounce + hold + slack + 1.0 <= 6
    for name in names:
        sequence = [status for _, status in shown[name] if status != str(SessionStatus.STARTING)]
        assert sequence == ["running", "waiting", "running", "exited"], (name, shown[name])
        times = [t for t, status in shown[name] if status != str(SessionStatus.STARTING)]
        mark = {k: float(v) for k, v in (line.split() for line in (marks / name).read_text().splitlines())}
        assert times[0] - mark["running"] < slack, (name, "running", shown[name], mark)
        waited = times[1] - mark["quiet"]
        assert debounce - 0.4 <= waited < debounce + hold + slack, (name, "waiting", shown[name], mark)
        assert times[2] - mark["running2"] < hold + slack, (name, "running again", shown[name], mark)
        assert times[3] - mark["exit"] < slack, (name, "exited", shown[name], mark)


def test_a_session_restarted_beside_others_starts_and_is_not_waiting(repo: Path, tmux_socket: str) -> None:
    """Seen in the dashboard: a session restarted while others ran went `waiting` (a toast, an on_waiting hook) a
    moment after `session.started`, then `running`. The observer's copy of the records still held the old run's
    start time, so the new pane, without output yet, was long past its starting grace."""
    from daintree_tui.core.hooks import trust
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService
    from daintree_tui.sessions.live import LiveSessions
    from daintree_tui.sessions.manager import SessionManager

    (repo / ".daintree.toml").write_text(
        # It keeps printing once started: a single line is `running` only until the debounce, and a loaded
        # machine's observer can look first after that (CI: `starting`, then `waiting`, never `running`).
        "[agents.late]\ncommand = \"sh -c 'sleep 2; while :; do echo hi; sleep 0.5; done'\"\n"
        "[agents.idle]\ncommand = \"sh -c 'echo hi; exec cat'\"\n"
        "[notifications]\nbell = false\ndesktop = false\n")
    trust(Project.discover(repo))
    project = Project.discover(repo)
    for name in ("one", "other"):
        WorktreeService(project).create(name)
    manager = SessionManager(project)
    seen: list[StatusChange] = []
    # `record` is told every change; `on_change` only the last of a batch (CI: "one" running and "other" waiting
    # in one batch, and "one"'s running was never seen).
    live = LiveSessions(manager, record=seen.append).start()
    try:
        manager.start("other", "idle", size=(80, 10))
        first = manager.start("one", "late", size=(80, 10)).started_at
        live.events.poke()
        wait_for(lambda: time.time() > first + 4)  # the first run is past its starting grace
        wait_for(lambda: any(c.worktree == "one" and c.new == SessionStatus.RUNNING for c in seen), timeout=30)
        del seen[:]
        second = manager.restart("one", "late", size=(80, 10)).started_at
        live.events.poke()
        wait_for(lambda: any(c.worktree == "one" and c.new == SessionStatus.RUNNING for c in seen), timeout=30)
    finally:
        live.close()
    changes = [c for c in seen if c.worktree == "one"]
    # What counts is the new run, from its `starting` on (a new run seen without it, as in the bug, is checked
    # whole).
    starts = [i for i, c in enumerate(changes) if c.new == SessionStatus.STARTING]
    new_run = changes[starts[0]:] if starts else changes
    # The bug: `waiting` at once, within the new run's starting grace. A loaded machine can keep `sleep 2`
    # silent past the grace (make test here: `waiting` 3 s in, `running` 0.5 s later), and then it is waiting.
    early = [c for c in new_run if c.new == SessionStatus.WAITING and c.ts < second + STARTING_GRACE]
    assert not early, seen
