"""TmuxHost: agent sessions on a private tmux server, one per repository, that outlive the dashboard.

The server runs with a config file of its own (`-f`), so the user's `~/.tmux.conf` never applies. Sessions
are always addressed with `-t=NAME` (plain `-t` matches prefixes: `dt-a` would match `dt-ab`).
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from daintree_tui.core.errors import OperationError
from daintree_tui.core.fs_safe import open_private_append, private_dir, read_state_file
from daintree_tui.core.log import suppressed
from daintree_tui.core.project import Project
from daintree_tui.core.store import atomic_write_text
from daintree_tui.sessions.host import PaneState, pane_exit, session_name, worktree_of_session
from daintree_tui.sessions.keys import paste_text
from daintree_tui.sessions.pane_end import end_session, leading_session, left_by

TMUX_CONF = """\
# Written by daintree: this private server never reads ~/.tmux.conf.
set -g status off
set -g prefix None
set -g prefix2 None
set -sg escape-time 0
set -g default-terminal "tmux-256color"
set -sa terminal-overrides ",*:Tc"
set -sa terminal-features ",*:RGB"
# The panes take 24-bit colour (the overrides above): agents that look for COLORTERM use it, and gemini stops
# warning "True color not detected" in every session.
set-environment -g COLORTERM truecolor
set -g mouse on
set -g history-limit 50000
set -g remain-on-exit on
set -g window-size latest
set -g aggressive-resize on
set -g allow-rename off
set -g set-titles off
set -g focus-events on
set -s exit-empty off
"""

# Which repository a session belongs to, on the session itself: one server can hold several repositories'
# sessions when DAINTREE_TMUX_SOCKET names the same socket for all of them (tests, benches).
OWNER_OPTION = "@daintree_root"
_LIST_FORMAT = "\t".join(["#{session_name}", "#{pane_dead}", "#{pane_dead_status}", "#{pane_pid}",
                          "#{session_created}", "#{pane_dead_signal}", "#{pid}", "#{" + OWNER_OPTION + "}"])


def socket_name(project: Project) -> str:
    """`daintree-<short hash of the repo path>`; DAINTREE_TMUX_SOCKET overrides it (tests use a unique one).

    With the override several repositories can share one server: each session carries its repository
    (OWNER_OPTION) and a repository sees, stops and replaces only its own; a worktree name another repository
    runs there cannot start a session (tmux names are per server)."""
    override = os.environ.get("DAINTREE_TMUX_SOCKET")
    if override:
        return override
    return "daintree-" + hashlib.sha1(str(project.root).encode()).hexdigest()[:10]


# A tmux server keeps the environment of the client that started it and gives it to every pane. Start it
# with only what tmux itself needs, and give each session its full environment through a private launch file
# (never `new-session -e`, which shows it in `ps`), so a variable we remove (CLAUDECODE) cannot come back
# through the server and no secret reaches a command line.
_SERVER_ENV_KEYS = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TMUX_TMPDIR")
_NOT_PASSED = ("TMUX", "TMUX_PANE")


def _passed(env: Mapping[str, str]) -> dict[str, str]:
    """What of `env` a pane gets: not tmux's own variables (tmux sets them for the pane)."""
    return {k: v for k, v in env.items() if "=" not in k and k not in _NOT_PASSED}


def server_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in _SERVER_ENV_KEYS}


def tmux_arg(arg: str) -> str:
    """An argument tmux takes literally: tmux reads a trailing `;` as the end of a command (so `send-keys 'x;'`
    would drop it); a trailing `\\;` stands for a literal `;`."""
    return arg[:-1] + "\\;" if arg.endswith(";") else arg


def socket_path(name: str) -> Path:
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return Path(base) / f"tmux-{os.getuid()}" / name


START_LOCK_SECONDS = 30  # a server start takes well under a second


class TmuxHost:
    """Sessions `dt-<worktree>` on the repo's private tmux server."""

    persistent = True

    def __init__(self, project: Project) -> None:
        self.project = project
        self.socket = socket_name(project)
        # In a dot-file: no worktree name can be `.tmux.conf`, so no worktree directory can take its place.
        self.conf = project.state_dir / ".tmux.conf"

    # -- plumbing --------------------------------------------------------------------------------------------

    def base_argv(self) -> list[str]:
        return ["tmux", "-L", self.socket, "-f", str(self.conf)]

    def attach_argv(self, worktree: str) -> list[str]:
        """The command an embedded terminal runs to show a session."""
        return [*self.base_argv(), "attach-session", "-t", f"={session_name(worktree)}"]

    def attach(self, worktree: str) -> list[str]:
        return self.attach_argv(worktree)

    def server_argv(self) -> list[str]:
        return self.base_argv()

    def server_gone(self) -> bool:
        return not self.serves_sessions()

    def close(self) -> None:
        """Nothing to stop: the sessions live on the server, which outlives this process."""

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            proc = subprocess.run([*self.base_argv(), *args], capture_output=True, text=True, env=server_env(),
                                  stdin=subprocess.DEVNULL, timeout=30)
        except FileNotFoundError:
            raise OperationError("tmux is not installed") from None
        except subprocess.TimeoutExpired:
            raise OperationError(f"tmux {args[0]} did not answer within 30s") from None
        if check and proc.returncode != 0:
            raise OperationError(f"tmux {args[0]} failed: {proc.stderr.strip() or proc.returncode}")
        return proc

    def _write_conf(self) -> None:
        """Our config, replaced whole when it is anything else. `.worktrees/` may come with a clone: a committed
        `.tmux.conf -> ~/.bashrc` was written through (the user's file overwritten by the first session start)."""
        self.conf.parent.mkdir(parents=True, exist_ok=True)
        try:
            current = read_state_file(self.conf).decode("utf-8", "replace")
        except OSError:
            current = None  # missing, a link, a device: never read through, replaced
        if current != TMUX_CONF:
            try:
                atomic_write_text(self.conf, TMUX_CONF)
            except OSError as exc:  # a full disk (an agent filled it): one line, not an internal error
                raise OperationError(f"cannot write {self.conf}: {exc.strerror or exc}") from None

    def server_running(self) -> bool:
        proc = self.tmux("list-sessions", "-F", "#{session_name}", check=False)
        if proc.returncode == 0:
            return True
        with self._starting():
            self._clean_stale_socket(proc.stderr)
        return False

    def serves_sessions(self) -> bool:
        """Whether a server answers with at least one session. A killed server can still answer for a moment
        after its sessions are gone, with none (it exits when its last session does)."""
        proc = self.tmux("list-sessions", "-F", "#{session_name}", check=False)
        return proc.returncode == 0 and bool(proc.stdout.strip())

    @contextlib.contextmanager
    def _starting(self) -> Iterator[None]:
        """Held while the server is started or its stale socket removed, by every process using this socket.

        A new server's socket exists a moment before it listens: a second process starting its first session
        then (two queue runners, the dashboard and the CLI) took it for a dead server's, removed it and started
        another server, and the first process's session went to a server nobody could reach any more.

        The lock is the socket directory itself (flock on a directory works on Linux): no lock file to leave
        behind per repository, or for anyone to replace with a link; starts of other servers wait a moment."""
        path = socket_path(self.socket)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise OperationError(f"cannot open the tmux socket directory {path.parent}: {exc.strerror or exc}") \
                from None
        try:
            st = os.fstat(fd)
            if st.st_uid != os.getuid() or st.st_mode & 0o077:
                # What tmux itself refuses: another user could hold our lock or swap the socket.
                raise OperationError(f"unsafe tmux socket directory {path.parent} (not ours alone)")
            deadline = time.monotonic() + START_LOCK_SECONDS
            while True:  # never wait forever on a lock a stuck (or hostile) process holds
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise OperationError(f"another process has held the tmux start lock on {path.parent} for "
                                             f"{START_LOCK_SECONDS}s: is a tmux server start stuck?") from None
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)

    def _clean_stale_socket(self, stderr: str) -> None:
        """A killed server leaves its socket behind: remove it so the next start is clean."""
        path = socket_path(self.socket)
        if path.exists() and ("refused" in stderr or "error connecting" in stderr or "no server" in stderr):
            # tmux's message may predate a server another process started since (a dashboard polling while the
            # CLI starts a session): remove the socket only when nothing listens on it now.
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(path))
            except ConnectionRefusedError:
                with suppressed(OSError):
                    path.unlink()
            except OSError:
                pass
            finally:
                probe.close()

    # -- the interface ---------------------------------------------------------------------------------------

    def start(self, worktree: str, argv: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path,
              size: tuple[int, int] = (200, 50), start_check: Mapping[str, object] | None = None) -> PaneState:
        """Create `dt-<worktree>` running `argv` as the pane's first process, logged from its first byte.
        `start_check`: the sandbox's probe and the unconfined command, which the launcher runs instead when the
        sandbox cannot start (SessionSandbox.start_check).

        One tmux call: new-session (with every environment variable passed explicitly: a tmux server keeps
        the environment of the client that started it) and pipe-pane.
        """
        self._write_conf()
        if not self.server_running():
            with self._starting():
                # Another process may have started it while we waited for the lock.
                if self.tmux("list-sessions", "-F", "#{session_name}", check=False).returncode != 0:
                    # Start the server with a clean command line: a tmux server keeps the argv of the client
                    # that forked it, and the new-session call below carries the session's environment.
                    self._clean_stale_socket("refused")
                    self.tmux("start-server")
        self.refuse_foreign(worktree)
        name = session_name(worktree)
        # The log holds everything the agent printed: the user's only, from its first byte.
        open_private_append(log).close()
        launch = self._launch_file(argv, _passed(env), start_check)
        cols, rows = size
        args = ["new-session", "-d", "-s", name, "-c", tmux_arg(str(cwd)), "-x", str(cols), "-y", str(rows),
                "--", sys.executable, "-I", "-m", "daintree_tui.sessions.launch", launch,
                ";", "set-option", "-t", f"={name}:", OWNER_OPTION, tmux_arg(self._root),
                ";", "pipe-pane", "-o", "-t", f"={name}:", tmux_arg(f"cat >> {shlex.quote(str(log))}")]
        proc = self.tmux(*args, check=False)
        if proc.returncode != 0:
            with suppressed(OSError):
                os.unlink(launch)
            raise OperationError(f"could not start session {name}: {proc.stderr.strip() or 'tmux failed'}")
        state = self.state(worktree)
        if state is None:
            raise OperationError(f"session {name} did not come up")
        return state

    def _launch_file(self, argv: Sequence[str], env: Mapping[str, str],
                     start_check: Mapping[str, object] | None = None) -> str:
        """Write the session's command and environment to a 0600 file in a 0700 folder; the pane's first
        process (sessions/launch.py) reads it, deletes it and execs the agent."""
        folder = private_dir(self.project.state_dir / ".run")
        fd, path = tempfile.mkstemp(prefix="launch-", suffix=".json", dir=folder)
        data: dict[str, object] = {"argv": list(argv), "env": dict(env)}
        if start_check is not None:
            unconfined = start_check.get("env")
            data["sandbox"] = {**start_check, "env": _passed(unconfined) if isinstance(unconfined, Mapping) else {}}
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
        except OSError as exc:
            # A full disk: the part written (the session's environment, half of it) goes, and the start fails
            # with one line; the caller gives the session's previous record back.
            with suppressed(OSError):
                os.unlink(path)
            raise OperationError(f"cannot write the session's launch file in {folder}: {exc.strerror or exc}") \
                from None
        return path

    def list(self) -> list[PaneState]:
        """Every daintree session on this server, in one tmux call (two when tmux owes a child its reaping)."""
        states, unreaped, server_pid = self._list_once()
        if unreaped and server_pid:
            # Seen with tmux 3.3a: when two panes' processes exit together, one SIGCHLD is lost and the second
            # stays a zombie with no exit status. Another SIGCHLD makes tmux reap it and record the status.
            with suppressed(OSError):
                os.kill(server_pid, signal.SIGCHLD)
            time.sleep(0.02)
            states, _, _ = self._list_once()
        return states

    def _list_once(self) -> tuple[builtins.list[PaneState], bool, int | None]:
        proc = self.tmux("list-panes", "-a", "-F", _LIST_FORMAT, check=False)
        if proc.returncode != 0:
            self._clean_stale_socket(proc.stderr)
            return [], False, None
        states: dict[str, PaneState] = {}
        unreaped = False
        server_pid: int | None = None
        for line in proc.stdout.splitlines():
            parts = line.split("\t")
            worktree = worktree_of_session(parts[0]) if len(parts) == 8 else None
            if worktree is None:
                continue
            name, dead, status, pid, created, signal_number, server, owner = parts
            if owner and owner != self._root:
                continue  # another repository's, on a server DAINTREE_TMUX_SOCKET shares
            server_pid = int(server) if server.isdigit() else server_pid
            if name in states:
                continue  # first pane only: a session is one agent
            is_dead, exit_code, owed = pane_exit(dead, status, signal_number)
            unreaped = unreaped or owed
            states[name] = PaneState(
                worktree=worktree, session=name, dead=is_dead,
                exit_code=exit_code,
                pid=int(pid) if pid.isdigit() else None, created=float(created or time.time()),
            )
        return list(states.values()), unreaped, server_pid

    def state(self, worktree: str) -> PaneState | None:
        for state in self.list():
            if state.worktree == worktree:
                return state
        return None

    def exists(self, worktree: str) -> bool:
        """This repository's session of `worktree` is on the server (one without an owner counts as ours)."""
        return self._owner(session_name(worktree)) in ("", self._root)

    def refuse_foreign(self, worktree: str) -> None:
        """Raise when another repository runs a session of that name on this (shared) server."""
        name = session_name(worktree)
        owner = self._owner(name)
        if owner and owner != self._root:
            raise OperationError(f"tmux server {self.socket} (DAINTREE_TMUX_SOCKET) already runs {name} for {owner}: "
                                 "a session name is one per server; unset DAINTREE_TMUX_SOCKET or pick another name")

    @property
    def _root(self) -> str:
        return str(self.project.root)

    def _owner(self, name: str) -> str | None:
        """The repository session `name` belongs to ("" when it carries none); None when there is no such
        session."""
        # has-session first: display-message answers 0 (and prints nothing) for a session that does not exist.
        proc = self.tmux("has-session", "-t", f"={name}", ";",
                         "display-message", "-p", "-t", f"={name}:", "#{" + OWNER_OPTION + "}", check=False)
        return proc.stdout.strip() if proc.returncode == 0 else None

    def send_text(self, worktree: str, text: str, *, enter: bool = False, paste: bool = False) -> None:
        """Type text into the pane (literally), or paste it as one bracketed paste when the pane asks for it."""
        target = f"={session_name(worktree)}:"
        if paste:  # tmux passes an ESC[201~ inside the buffer on as it is: the text may hold none
            proc = subprocess.run([*self.base_argv(), "load-buffer", "-b", "daintree-paste", "-"],
                                  input=paste_text(text),
                                  text=True, capture_output=True)
            if proc.returncode != 0:
                raise OperationError(f"tmux load-buffer failed: {proc.stderr.strip()}")
            self.tmux("paste-buffer", "-p", "-d", "-b", "daintree-paste", "-t", target)
        elif text:
            self.tmux("send-keys", "-t", target, "-l", "--", tmux_arg(text))
        if enter:
            self.tmux("send-keys", "-t", target, "Enter")

    def send_keys(self, worktree: str, keys: Sequence[str]) -> None:
        """Send tmux key names (`Enter`, `C-c`, `Up`) to the pane."""
        self.tmux("send-keys", "-t", f"={session_name(worktree)}:", *[tmux_arg(k) for k in keys])

    def capture(self, worktree: str, *, ansi: bool = False, history: int = 0) -> str:
        args = ["capture-pane", "-p", "-t", f"={session_name(worktree)}:"]
        if ansi:
            args.append("-e")
        if history:
            args += ["-S", str(-history)]
        return self.tmux(*args).stdout

    def capture_all(self, worktrees: Sequence[str], ansi: bool = True) -> dict[str, str]:
        """Capture several panes in one tmux call (previews of sessions not on screen)."""
        if not worktrees:
            return {}
        marker = "\x1e daintree-capture "
        args: list[str] = []
        for name in worktrees:
            args += ["display-message", "-p", "-t", f"={session_name(name)}:", f"{marker}{name}", ";",
                     "capture-pane", "-p", *(["-e"] if ansi else []), "-t", f"={session_name(name)}:", ";"]
        proc = self.tmux(*args[:-1], check=False)
        out: dict[str, str] = {}
        current: str | None = None
        lines: list[str] = []
        for line in proc.stdout.split("\n"):
            if line.startswith(marker):
                if current is not None:
                    out[current] = "\n".join(lines)
                current, lines = line[len(marker):], []
            else:
                lines.append(line)
        if current is not None:
            out[current] = "\n".join(lines)
        return out

    def stop(self, worktree: str) -> bool:
        """Kill the session; kill the server too when it was the last one."""
        if not self.exists(worktree):
            return False
        dead, _, pid = self.tmux("display-message", "-p", "-t", f"={session_name(worktree)}:",
                                 "#{pane_dead} #{pane_pid}", check=False).stdout.strip().partition(" ")
        leader = None if not pid.isdigit() else leading_session(int(pid)) if dead == "0" else left_by(int(pid))
        self.tmux("kill-session", "-t", f"={session_name(worktree)}", check=False)
        if not self.tmux("list-sessions", check=False).stdout.strip():
            self.kill_server()
        if leader is not None:
            end_session(leader)  # what outlived the hang-up (pane_end)
        return True

    def kill_server(self) -> None:
        self.tmux("kill-server", check=False)
        self._clean_stale_socket("refused")
