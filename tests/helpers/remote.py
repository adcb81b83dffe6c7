"""Remote hosts: this venv's daintree as the far side's, and a command run on a PTY as the terminal widget runs
it."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

DAINTREE = str(Path(sys.executable).parent / "daintree")


def run_in_pty(argv: list[str], until: bytes, timeout: float = 20, env: dict[str, str] | None = None) -> bytes:
    """Run `argv` on a PTY (as the terminal widget does) until `until` shows up; returns what it printed."""
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.environ["TERM"] = "xterm-256color"
        for key, value in (env or {}).items():
            if value:
                os.environ[key] = value
            else:
                os.environ.pop(key, None)
        os.execvp(argv[0], argv)
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        while until not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                with contextlib.suppress(OSError):
                    seen += os.read(fd, 65536)
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(fd)
    return seen
