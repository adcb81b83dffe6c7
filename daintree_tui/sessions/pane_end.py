"""What a stopped pane leaves running: the processes of its terminal session, ended.

Killing a tmux session hangs up its terminal, and the kernel gives that hang-up to the session's leader (the pane's
first process) and its foreground group. An agent that outlives it (gemini's two node processes, unsandboxed, went
on for good in the worktree after `session stop`, parent 1) is still in the pane's terminal session: everything
started in a pane is, unless it chose to leave (`setsid`, a daemon). So after the kill, whatever of ours is still in
that session gets SIGTERM, and what has not ended after a grace SIGKILL. A sandboxed agent ends with its sandbox
anyway (bubblewrap's `--die-with-parent`).
"""

from __future__ import annotations

import os
import signal
import time

from daintree_tui.core.log import suppressed

HANGUP_GRACE = 0.5  # seconds for the hang-up alone to end them (an agent saving its state on SIGHUP)
TERM_GRACE = 2.0  # then after SIGTERM, before SIGKILL


def leading_session(pid: int) -> int | None:
    """`pid`, if it is a live process of this user that leads its own terminal session (a live pane's first
    process does), else None. Asked before the kill: a dead pane's pid may be another process's by now, and
    its session someone else's (a login shell's)."""
    return pid if _session_of(str(pid), os.getuid()) == pid else None


def _session_of(pid: str, uid: int) -> int | None:
    """The terminal session of live process `pid` if it is this user's (`uid`), from /proc; None when it is not,
    has ended or is a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rpartition(b")")[2].split()  # after the command's name: state, ppid, pgrp, session
        if len(fields) < 4 or fields[0] == b"Z" or os.stat(f"/proc/{pid}").st_uid != uid:
            return None
        return int(fields[3])
    except (OSError, ValueError):
        return None  # gone meanwhile


def left_by(pid: int) -> int | None:
    """The session of a dead pane whose first process `pid` is gone, if processes of it still run (`sleep 9 &`
    before the agent exited): `pid`, else None. A session's number is not handed out again while anything is in
    it; were it reused after all of them ended, its new leader would hold the number, and then it is not ours."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return pid if session_processes(pid) else None
    except PermissionError:
        return None
    return None  # a process with that number runs: a new one, or the pane's own still exiting


def session_processes(sid: int) -> list[int]:
    """This user's live processes in terminal session `sid` (that of the pane's first process), this one aside."""
    if sid <= 1:
        return []
    uid, me = os.getuid(), str(os.getpid())
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []  # no /proc (not Linux): the hang-up is all there is
    return [int(name) for name in entries if name.isdigit() and name != me and _session_of(name, uid) == sid]


def end_session(sid: int, hangup_grace: float = HANGUP_GRACE, term_grace: float = TERM_GRACE) -> list[int]:
    """End what is left in terminal session `sid` after its pane was killed; the pids that had to be signalled."""
    left = _wait_gone(sid, hangup_grace)
    if not left:
        return []
    _signal(left, signal.SIGTERM)
    stubborn = _wait_gone(sid, term_grace)
    _signal(stubborn, signal.SIGKILL)
    return left


def _wait_gone(sid: int, grace: float) -> list[int]:
    deadline = time.monotonic() + grace
    while True:
        left = session_processes(sid)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with suppressed(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
