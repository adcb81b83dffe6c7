"""The first process of a tmux pane: read the session's command and environment from a private file, delete the
file, and exec the agent.

tmux can only pass a session's environment on its command line (`new-session -e KEY=VALUE`), where every user
of the machine can read it in `ps`. So the host writes `{"argv": [...], "env": {...}}` to a 0600 file in a 0700
folder and starts `python -I -m daintree_tui.sessions.launch FILE` instead; nothing secret is ever in an argv.
(`-I`: the worktree, the pane's cwd, is not on the import path, so it cannot shadow this module's imports.)

A sandboxed session's file also holds the sandbox's probe (`sandbox`): bubblewrap is tried once more, here, just
before the agent, because user namespaces can run out after the starting process saw the sandbox work (ENOSPC:
other jobs hold them all). Then an `auto` session runs its agent unconfined (the command and environment it would
have had without the sandbox), says so in one line, and its record and a `session.unsandboxed` event give the
reason; a session whose sandbox is required (`on`) does not start and says why. The probe runs before any of the
agent's code, outside its sandbox: nothing the agent prints or does can ask for the unconfined command.

Usage: python -I -m daintree_tui.sessions.launch FILE
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from typing import Any

# What tmux itself sets for the pane: these win over the saved environment.
PANE_VARS = ("TERM", "TMUX", "TMUX_PANE", "COLORTERM")


def load(path: str) -> tuple[list[str], dict[str, str], dict[str, Any] | None]:
    """Read and delete the launch file; refuse one that is not ours alone (another user could have planted it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077 or not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a private file of this user")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = json.loads(fh.read())
    finally:
        os.close(fd)
        os.unlink(path)
    argv, env = data.get("argv"), data.get("env")
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise ValueError("no command")
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise ValueError("bad environment")
    check = data.get("sandbox")
    if check is not None:
        probe, plain, plain_env = (check.get(k) for k in ("probe", "argv", "env")) if isinstance(check, dict) else \
            (None, None, None)
        if not (_strings(probe) and _strings(plain) and isinstance(plain_env, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in plain_env.items())):
            raise ValueError("bad sandbox check")
    return argv, env, check


def _strings(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(a, str) for a in value)


def checked(argv: list[str], env: dict[str, str], check: dict[str, Any] | None) -> tuple[list[str], dict[str, str]]:
    """The command to run: `argv` when its sandbox starts (or it has none), else the unconfined one of an `auto`
    session (after saying so). Raises SystemExit(1), having said why, when the sandbox is required."""
    if check is None:
        return argv, env
    # Imports here and in _record_unsandboxed, not at the top: this is the first process of every pane, and only a
    # sandboxed session's pane needs them (the project, after the session's environment is in place).
    from daintree_tui.core.sandbox_probe import probe_failure

    why = probe_failure(check["probe"])
    if why is None:
        return argv, env
    if check.get("required"):
        by = "sandbox = on" if check.get("mode") == "on" else "asked for by a sandboxed session"
        sys.stderr.write(f"daintree: the sandbox is required ({by}) but bubblewrap cannot start: {why}; the agent "
                         "was not started\n")
        raise SystemExit(1)
    sys.stderr.write(f"daintree: bubblewrap cannot start ({why}): running without the sandbox (sandbox = auto)\n")
    plain, plain_env = list(check["argv"]), dict(check["env"])
    record = check.get("record")
    if isinstance(record, dict):
        try:
            _record_unsandboxed(record, why, plain_env)
        except Exception as exc:  # the agent starts all the same: the notice above is on its screen and in its log
            sys.stderr.write(f"daintree: could not record that the session runs unsandboxed: {exc}\n")
    return plain, plain_env


def _record_unsandboxed(record: dict[str, Any], why: str, env: dict[str, str]) -> None:
    from pathlib import Path

    os.environ.update(env)  # the session's HOME and config folders: the project is found as its starter found it
    from daintree_tui.core.project import Project
    from daintree_tui.core.tasks import TaskService
    from daintree_tui.sessions.session_records import SessionRecords

    project = Project.discover(Path(str(record["root"])))
    SessionRecords(project, TaskService(project)).unsandboxed(str(record["worktree"]), float(record["started_at"]),
                                                             why)


def main(args: list[str]) -> int:
    if len(args) != 1:
        sys.stderr.write("usage: python -I -m daintree_tui.sessions.launch FILE\n")
        return 2
    try:
        argv, env, check = load(args[0])
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"daintree: cannot start the session: {exc}\n")
        return 127
    pane = {key: os.environ[key] for key in PANE_VARS if key in os.environ}
    try:
        argv, env = checked(argv, env, check)
    except SystemExit as refused:
        return int(refused.code or 1)
    env.update(pane)
    # Python ignores SIGPIPE and SIGXFSZ for itself, and an ignored signal stays ignored across exec: the agent
    # (and every shell it runs) then got EPIPE where a pipe's reader went, `yes | head` wrote "Broken pipe",
    # where the same agent outside daintree, or a limited one (subprocess resets them), did not.
    for python_own in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(python_own, signal.SIG_DFL)
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        sys.stderr.write(f"daintree: cannot run {argv[0]}: {exc.strerror}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
