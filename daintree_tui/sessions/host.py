"""The session host interface (tmux, or the in-process PTY fallback) and the names of sessions.

Which host a project gets is chosen in sessions/host_choice.py, the one module that imports the hosts.
"""

from __future__ import annotations

import builtins
import os
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

SESSION_PREFIX = "dt-"

# tmux rewrites `.` and `:` in session names to `_`, so `a.b` and `a_b` would meet in one session. One reversible
# rule maps a worktree name to a session name: `_` -> `__`, `.` -> `_d`, `:` -> `_c` (every other character
# stays). It is a bijection: each `_` in the result starts a two-character escape.
_ESCAPES = {"_": "__", ".": "_d", ":": "_c"}
_UNESCAPES = {v[1]: k for k, v in _ESCAPES.items()}


def session_name(worktree: str) -> str:
    """The tmux session name of a worktree: `dt-` plus the name with `_`, `.`, `:` escaped (see _ESCAPES)."""
    return SESSION_PREFIX + "".join(_ESCAPES.get(c, c) for c in worktree)


def worktree_of_session(session: str) -> str | None:
    """The inverse of `session_name`; None for a name it cannot have made."""
    if not session.startswith(SESSION_PREFIX):
        return None
    out, chars = [], iter(session[len(SESSION_PREFIX):])
    for c in chars:
        if c in ".:":
            return None
        if c == "_":
            nxt = next(chars, "")
            if nxt not in _UNESCAPES:
                return None
            c = _UNESCAPES[nxt]
        out.append(c)
    return "".join(out)


def pane_exit(dead: str, status: str, signal_number: str) -> tuple[bool, int | None, bool]:
    """tmux's `pane_dead`, `pane_dead_status` and `pane_dead_signal` as (dead, exit code, unreaped).

    tmux marks a pane dead when its output ends, which can come a moment before the process is reaped: until the
    exit status is known the session still counts as running, and `unreaped` says tmux owes it a SIGCHLD.
    """
    exit_code: int | None = None
    if status.lstrip("-").isdigit():
        exit_code = int(status)
    elif signal_number.isdigit():
        exit_code = 128 + int(signal_number)
    is_dead = dead == "1" and exit_code is not None
    return is_dead, exit_code if is_dead else None, dead == "1" and exit_code is None


@dataclass(frozen=True)
class PaneState:
    """What the host knows about one session's pane."""

    worktree: str
    session: str
    dead: bool
    exit_code: int | None
    pid: int | None
    created: float


@dataclass(frozen=True)
class LocalScreen:
    """A session that runs inside this process (the plain-PTY host's), shown from its own screen: there is no
    server to attach a terminal client to."""

    emulator: Any  # sessions.emulator.TerminalEmulator: pyte, imported by the host that has one
    lock: threading.Lock  # guards the emulator against the host's reader thread
    subscribe: Callable[[Callable[[bytes], None]], Callable[[], None]]  # hear its output; returns the unsubscribe
    write: Callable[[bytes], None]  # keys to its agent
    resize: Callable[[int, int], None]  # (cols, rows)


class SessionHost(Protocol):
    """Runs agent sessions. `persistent` says whether they outlive this process.

    What the interfaces need of a host is here too (`attach`, `server_argv`, `server_gone`, `close`), so none of
    them asks which kind of host it has.
    """

    persistent: bool

    def start(self, worktree: str, argv: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path,
              size: tuple[int, int] = (200, 50),
              start_check: Mapping[str, object] | None = None) -> PaneState: ...

    def list(self) -> list[PaneState]: ...

    def exists(self, worktree: str) -> bool: ...

    def send_text(self, worktree: str, text: str, *, enter: bool = False, paste: bool = False) -> None: ...

    def send_keys(self, worktree: str, keys: Sequence[str]) -> None: ...

    def capture(self, worktree: str, *, ansi: bool = False, history: int = 0) -> str: ...

    def stop(self, worktree: str) -> bool: ...

    def refuse_foreign(self, worktree: str) -> None:
        """Raise OperationError when the session name is taken by another repository (a shared server)."""
        ...

    def attach(self, worktree: str) -> builtins.list[str] | LocalScreen | None:
        """How a terminal shows the session: the command of a client that attaches to it (tmux), its own screen
        when it runs in this process (the PTY host), or None when there is no such session to show."""
        ...

    def server_argv(self) -> builtins.list[str] | None:
        """How to run tmux for the server the sessions live on (its control-mode client follows them by events);
        None when they live in this process and are polled instead."""
        ...

    def server_gone(self) -> bool:
        """Whether the server the sessions lived on is gone (killed or crashed, taking them with it); never for a
        host whose sessions live in this process."""
        ...

    def close(self) -> None:
        """This process ends: stop what cannot outlive it (the PTY host's sessions; a tmux server's keep running)."""
        ...


def tmux_available() -> bool:
    """tmux is on PATH and not switched off (DAINTREE_NO_TMUX=1 forces the PTY fallback)."""
    return os.environ.get("DAINTREE_NO_TMUX", "") in ("", "0") and shutil.which("tmux") is not None

