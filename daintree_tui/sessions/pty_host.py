"""PtyHost: the fallback when tmux is absent. Sessions run under PTYs owned by this process, so they end when
it ends (the dashboard says so). Same interface as TmuxHost, plus a byte feed for the embedded terminal."""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import signal
import struct
import termios
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.log import suppressed
from daintree_tui.core.project import Project
from daintree_tui.sessions.emulator import TerminalEmulator
from daintree_tui.sessions.host import LocalScreen, PaneState, session_name
from daintree_tui.sessions.keys import encode_paste

_TMUX_KEYS = {"Enter": b"\r", "Tab": b"\t", "Escape": b"\x1b", "BSpace": b"\x7f", "Space": b" ",
              "Up": b"\x1b[A", "Down": b"\x1b[B", "Right": b"\x1b[C", "Left": b"\x1b[D",
              "Home": b"\x1b[H", "End": b"\x1b[F", "PageUp": b"\x1b[5~", "PageDown": b"\x1b[6~"}


def tmux_key_bytes(key: str) -> bytes:
    """tmux key names (`Enter`, `C-c`, `M-x`, `Up`) as bytes; anything else is sent literally."""
    if key in _TMUX_KEYS:
        return _TMUX_KEYS[key]
    if key.startswith("C-") and len(key) == 3:
        return bytes([ord(key[2].lower()) & 0x1F])
    if key.startswith("M-") and len(key) == 3:
        return b"\x1b" + key[2].encode()
    return key.encode()


def set_winsize(fd: int, cols: int, rows: int) -> None:
    with suppressed(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


@dataclass
class _PtySession:
    worktree: str
    pid: int
    fd: int
    log: Path
    created: float
    emulator: TerminalEmulator
    exit_code: int | None = None
    dead: bool = False
    listeners: list[Callable[[bytes], None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class PtyHost:
    """Sessions under PTYs of this process; a reader thread logs output and feeds listeners."""

    persistent = False

    def __init__(self, project: Project) -> None:
        self.project = project
        self._sessions: dict[str, _PtySession] = {}

    def start(self, worktree: str, argv: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path,
              size: tuple[int, int] = (200, 50),
              start_check: Mapping[str, object] | None = None) -> PaneState:
        # `start_check` (the sandbox's probe before the agent) is the tmux launcher's: here the agent is forked
        # from the dashboard, whose own probe chose its sandbox a moment ago.
        if worktree in self._sessions and not self._sessions[worktree].dead:
            raise InputError(f"session {session_name(worktree)} is already running")
        log.parent.mkdir(parents=True, exist_ok=True)
        env = dict(env)
        env.setdefault("TERM", "xterm-256color")
        pid, fd = pty.fork()
        if pid == 0:  # child: become the agent
            try:
                os.chdir(cwd)
                os.execvpe(argv[0], list(argv), env)
            except BaseException:
                os._exit(127)
        cols, rows = size
        set_winsize(fd, cols, rows)
        session = _PtySession(worktree, pid, fd, log, time.time(), TerminalEmulator(cols, rows))
        self._sessions[worktree] = session
        threading.Thread(target=self._pump, args=(session,), name=f"pty-{worktree}", daemon=True).start()
        return self._state(session)

    def _pump(self, session: _PtySession) -> None:
        with session.log.open("ab") as log:
            while True:
                try:
                    data = os.read(session.fd, 65536)
                except OSError as exc:
                    if exc.errno == errno.EINTR:
                        continue
                    break
                if not data:
                    break
                log.write(data)
                log.flush()
                with session.lock:
                    session.emulator.feed(data)
                    listeners = list(session.listeners)
                for listener in listeners:
                    with suppressed(Exception):
                        listener(data)
        _, status = os.waitpid(session.pid, 0)
        session.exit_code = os.waitstatus_to_exitcode(status)
        session.dead = True
        with suppressed(OSError):
            os.close(session.fd)

    def _state(self, session: _PtySession) -> PaneState:
        return PaneState(session.worktree, session_name(session.worktree), session.dead, session.exit_code,
                         session.pid, session.created)

    def _get(self, worktree: str) -> _PtySession:
        session = self._sessions.get(worktree)
        if session is None:
            raise InputError(f"no session for worktree {worktree!r}")
        return session

    def list(self) -> list[PaneState]:
        return [self._state(s) for s in self._sessions.values()]

    def exists(self, worktree: str) -> bool:
        return worktree in self._sessions

    def write(self, worktree: str, data: bytes) -> None:
        session = self._get(worktree)
        if session.dead:
            raise OperationError(f"session {session_name(worktree)} has exited")
        os.write(session.fd, data)

    def send_text(self, worktree: str, text: str, *, enter: bool = False, paste: bool = False) -> None:
        session = self._get(worktree)
        data = encode_paste(text, session.emulator.bracketed_paste) if paste else text.encode()
        self.write(worktree, data + (b"\r" if enter else b""))

    def send_keys(self, worktree: str, keys: Sequence[str]) -> None:
        self.write(worktree, b"".join(tmux_key_bytes(k) for k in keys))

    def capture(self, worktree: str, *, ansi: bool = False, history: int = 0) -> str:
        session = self._get(worktree)
        with session.lock:
            return session.emulator.text()

    def resize(self, worktree: str, cols: int, rows: int) -> None:
        session = self._get(worktree)
        set_winsize(session.fd, cols, rows)
        with session.lock:
            session.emulator.resize(cols, rows)

    def view(self, worktree: str) -> tuple[TerminalEmulator, threading.Lock] | None:
        """The screen a session's output is parsed into, and the lock that guards it (for the dashboard)."""
        session = self._sessions.get(worktree)
        return None if session is None else (session.emulator, session.lock)

    def subscribe(self, worktree: str, listener: Callable[[bytes], None]) -> None:
        session = self._get(worktree)
        with session.lock:
            session.listeners.append(listener)

    def unsubscribe(self, worktree: str, listener: Callable[[bytes], None]) -> None:
        session = self._sessions.get(worktree)
        if session is not None:
            with session.lock, suppressed(ValueError):
                session.listeners.remove(listener)

    def stop(self, worktree: str) -> bool:
        session = self._sessions.pop(worktree, None)
        if session is None:
            return False
        if not session.dead:
            with suppressed(ProcessLookupError):
                os.killpg(os.getpgid(session.pid), signal.SIGHUP)
            deadline = time.monotonic() + 2
            while not session.dead and time.monotonic() < deadline:
                time.sleep(0.02)
            if not session.dead:
                with suppressed(ProcessLookupError):
                    os.kill(session.pid, signal.SIGKILL)
        return True

    def refuse_foreign(self, worktree: str) -> None:
        """Nothing to refuse: this host's sessions are this process's own."""

    def stop_all(self) -> None:
        for name in list(self._sessions):
            self.stop(name)

    def attach(self, worktree: str) -> LocalScreen | None:
        view = self.view(worktree)
        if view is None:
            return None
        emulator, lock = view

        def subscribe(listener: Callable[[bytes], None]) -> Callable[[], None]:
            self.subscribe(worktree, listener)
            return lambda: self.unsubscribe(worktree, listener)

        return LocalScreen(emulator, lock, subscribe, lambda data: self.write(worktree, data),
                           lambda cols, rows: self.resize(worktree, cols, rows))

    def server_argv(self) -> None:
        return None  # no server: the sessions are this process's own, polled without a fork

    def server_gone(self) -> bool:
        return False

    def close(self) -> None:
        self.stop_all()
