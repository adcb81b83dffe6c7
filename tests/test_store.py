"""Store: atomic JSON with .bak recovery, and an event log that survives torn lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from daintree_tui.core.event_log import EventLog
from daintree_tui.core.store import read_json, write_json


def test_write_json_keeps_backup_and_recovers(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_json(path, {"a": 1})
    assert json.loads(path.with_name("state.json.bak").read_text()) == {"a": 1}
    path.write_text('{"a": ')  # torn by something outside our control
    data, problem = read_json(path, "state")
    assert data == {"a": 1}
    assert problem is not None and "recovered" in problem


def test_read_json_without_backup_reports(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("not json")
    data, problem = read_json(path, "state")
    assert data is None and problem is not None and "no usable backup" in problem
    assert read_json(tmp_path / "absent.json", "x") == (None, None)


def test_event_log_reads_past_torn_line_and_writer_starts_fresh_line(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.append("task.created", task={"id": 1})
    with log.path.open("a") as fh:
        fh.write('{"event": "worktree.create.bef')  # a writer killed mid-line
    log.append("task.updated", task={"id": 1})
    records, skipped = log.read()
    assert [r["event"] for r in records] == ["task.created", "task.updated"]
    assert skipped == 1
    assert log.path.read_text().endswith("\n")
    last, _ = log.read(limit=1)
    assert [r["event"] for r in last] == ["task.updated"]


def test_event_record_shape(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    rec = log.append("worktree.keep", worktree={"name": "x"})
    assert set(rec) >= {"event", "ts", "task", "worktree"}
    assert isinstance(rec["ts"], float)


def test_read_up_to_the_follow_point_then_follow_misses_and_repeats_nothing(tmp_path: Path) -> None:
    """`worktree events --follow` reads, then follows: what is appended between the two is printed once."""
    from daintree_tui.core.follow import follow_lines

    log = EventLog(tmp_path / "events.jsonl")
    log.append("one")
    with log.path.open("ab") as fh:
        fh.write(b'{"event": "half-writ')  # a record still being written when the reader looked
    end = log.complete_end()
    with log.path.open("ab") as fh:
        fh.write(b'ten", "ts": 1}\n')
    log.append("two")  # after the reader looked, before it follows
    assert [r["event"] for r in log.read(end=end)[0]] == ["one"]
    assert [r["event"] for r in log.read(5, end=end)[0]] == ["one"]
    followed = follow_lines(log.path, offset=end)
    assert [json.loads(next(followed))["event"] for _ in range(2)] == ["half-written", "two"]


LEAK_PROBE = r"""
import fcntl, os, signal, sys
from pathlib import Path
from daintree_tui.core.errors import OperationError
from daintree_tui.core.store import StateLock

real_flock = fcntl.flock
fired = []

def flock_then_ctrl_c(fd, operation):
    result = real_flock(fd, operation)
    if operation & fcntl.LOCK_EX and not fired:
        fired.append(1)
        os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C, the instant the lock is taken
    return result

fcntl.flock = flock_then_ctrl_c
lock = StateLock(Path(sys.argv[1]), timeout=2)
try:
    with lock.hold():
        pass
except KeyboardInterrupt:
    pass
fcntl.flock = real_flock
other = StateLock(Path(sys.argv[1]), timeout=2)  # another thread's or command's turn
try:
    with other.hold():
        print("free")
except OperationError:
    print("leaked")
"""


def test_a_ctrl_c_as_the_lock_is_taken_never_leaves_it_taken(tmp_path: Path) -> None:
    """A KeyboardInterrupt raised between `flock` and the `try` that releases it left the lock held by this
    process: exiting then waited on a hook thread that waited up to 60 s for that lock (`session watch` hung)."""
    proc = subprocess.run([sys.executable, "-c", LEAK_PROBE, str(tmp_path / ".lock")], capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.strip() == "free", proc.stdout + proc.stderr
