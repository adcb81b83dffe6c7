"""The first process of a tmux pane: read the session's command and environment from a private file, delete the
file, and exec the agent.

tmux can only pass a session's environment on its command line (`new-session -e KEY=VALUE`), where every user
of the machine can read it in `ps`. So the host writes `{"argv": [...], "env": {...}}` to a 0600 file in a 0700
folder and starts `python -I -m daintree_tui.sessions.launch FILE` instead; nothing secret is ever in an argv.
(`-I`: the worktree, the pane's cwd, is not on the import path, so it cannot shadow this module's imports.)

Usage: python -I -m daintree_tui.sessions.launch FILE
"""

from __future__ import annotations

import json
import os
import stat
import sys

# What tmux itself sets for the pane: these win over the saved environment.
PANE_VARS = ("TERM", "TMUX", "TMUX_PANE", "COLORTERM")


def load(path: str) -> tuple[list[str], dict[str, str]]:
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
    return argv, env


def main(args: list[str]) -> int:
    if len(args) != 1:
        sys.stderr.write("usage: python -I -m daintree_tui.sessions.launch FILE\n")
        return 2
    try:
        argv, env = load(args[0])
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"daintree: cannot start the session: {exc}\n")
        return 127
    for key in PANE_VARS:
        if key in os.environ:
            env[key] = os.environ[key]
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        sys.stderr.write(f"daintree: cannot run {argv[0]}: {exc.strerror}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
