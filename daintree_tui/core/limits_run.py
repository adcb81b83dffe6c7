"""The outermost process of a limited command: run it in its cgroup, and when it has ended, say why a limit
stopped it and remove the group.

`python -m daintree_tui.core.limits_run --backend B --group NAME [--folder F]... [--reason-file P] [--events E
--worktree W --kind K] -- PREFIX... COMMAND...`: PREFIX is `limits.prefix_for` (the command joins the group
itself). This process stays outside the group, so it outlives a fork bomb or an OOM kill there; its exit status is
the command's (128 + signal when a signal ended it, 137 for the OOM killer's SIGKILL). It writes the reason
(`oom-killed`, `pids limit`) to the reason file, where the session manager reads it when it records the exit, and
logs `sandbox.limit`. A `kill -9` of this process leaves the group: `limits.sweep` (doctor --fix, the next
limited start) removes it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from daintree_tui.core import limits
from daintree_tui.core.log import suppressed

_REMOVE_WAIT_S = 2.0  # for the last processes of an ended group to go (the kernel reaps an OOM kill's victims)


def _backend(name: str) -> limits.Backend:
    for backend in limits.backends():
        if backend.name == name:
            return backend
    raise SystemExit(f"daintree: unknown cgroup backend {name!r}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daintree-limits", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--folder", action="append", default=[])
    parser.add_argument("--reason-file")
    parser.add_argument("--events")
    parser.add_argument("--worktree", default="")
    parser.add_argument("--kind", default="")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a command to run after --")
    backend = _backend(args.backend)
    group = limits.Group(args.group, backend.name, tuple(Path(f) for f in args.folder))
    # A terminal's Ctrl-C reaches the command itself (one process group): this process waits it out. Every signal
    # here is caught, never ignored: an ignored signal stays ignored across exec, and the command (the agent, its
    # sandbox) then never heard Ctrl-C. A hang-up or TERM before the command is there to take it is held.
    early: list[int] = []
    signal.signal(signal.SIGINT, lambda _sig, _frame: None)
    for held in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(held, lambda sig, _frame: early.append(sig))
    if early:  # asked to end before it began: it does not begin
        limits.remove(backend, group)
        return 128 + early[0]
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        limits.remove(backend, group)
        print(f"daintree: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    # Passed on: a TERM from `kill`, and the hang-up, which the kernel gives the session leader alone. As a pane's
    # first process this is that leader: `session stop` (tmux closing the pane) hung up only this process, which
    # waited it out, and the agent went on for good outside any session, with its group.
    for passed_on in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(passed_on, lambda sig, _frame: child.send_signal(sig))
    for sig in dict.fromkeys(early):
        child.send_signal(sig)
    code = child.wait()
    reason = limits.remove(backend, group, wait_s=_REMOVE_WAIT_S)
    # A group whose memory reached its limit and was reclaimed, or whose fork failed once and was retried, did
    # not stop the command: a reason is shown only for a command that failed.
    if reason is not None and code != 0:
        if args.reason_file:
            with suppressed(OSError):
                fd = os.open(args.reason_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w") as handle:
                    json.dump({"group": group.name, "reason": reason, "exit_code": code}, handle)
        if args.events:
            from daintree_tui.core.event_log import EventLog

            with suppressed(Exception):  # the reason is in the reason file; the event is a courtesy
                EventLog(Path(args.events)).append("sandbox.limit", worktree={"name": args.worktree},
                                                   kind=args.kind, reason=reason, group=group.name,
                                                   exit_code=128 - code if code < 0 else code)
        said = "memory limit (oom-killed)" if reason == "oom-killed" else reason
        print(f"daintree: {args.kind or 'command'} stopped by its {said}", file=sys.stderr)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
