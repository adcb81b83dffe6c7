"""The repository's watcher: one small process per repository that supervises its sessions while no dashboard
does: it records their transitions (so each end of an agent's turn is checkpointed, and its hooks run) and sends
each notice once.

- **Starts with the first session**: every session start (CLI, dashboard, queue, bake-off, inbox) calls
  `ensure_watcher`, which starts `daintree notify watch` in a session of its own (it outlives the command and the
  dashboard) when none runs for this repository and it has something to do: the user's `[checkpoints] auto` is on
  (the default) or their `[notify]` has a channel. The dashboard's start and `doctor` call it too, for sessions
  started before then.
- **One owner**: the watcher holds an exclusive flock on `.worktrees/.locks/notify-watcher.lock` (a folder no
  sandbox sees) as long as it runs; a second one finds it taken and exits at once.
- **What it does each second**: what `daintree session watch` does (apply the sessions' inbox requests, record
  their transitions, take the checkpoint at each end of a turn, run the `on_waiting` / `on_session_exit` hooks:
  the observer's compare-and-set makes each transition one event, whoever else records it), always; then, when
  the config has a channel, reads the event log from where it was and turns each event into at most one notice
  (services/notify.py), skipping sessions someone is typing into. A config with no channel (or a bad one) sends
  nothing and stops nothing: a channel added later is used from the next look on.
- **Stands back while a dashboard records by events**: a dashboard's live client records each session's
  transition as tmux reports it, and its poll applies the inboxes, so the watcher's own pass (a `list-panes`
  fork and each session's record, inbox and agent git) only did it again, as much CPU as the dashboard itself
  at 40 busy agents. While one holds the live-observer lock (shared, one per dashboard), the watcher makes its
  full pass every STAND_BACK_TICKS ticks only (sessions lost with their server, a dashboard that stopped
  polling); it reads the event log for notices at every tick as before.
- **Ends with the last session**: when the tmux server has had none of this repository's sessions, and the event
  log nothing new, for a few seconds (sessions that vanished with the server are recorded as lost first, which
  notifies `failed`), or on SIGTERM (`daintree notify stop`). A command that records an outcome while no session
  runs (a merge train) calls `ensure_watcher(since=...)`.
"""

from __future__ import annotations

import fcntl
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from daintree_tui.core.errors import ConfigError, DaintreeError, OperationError
from daintree_tui.core.fs_safe import open_private_append, private_dir
from daintree_tui.core.log import suppressed
from daintree_tui.core.project import Project
from daintree_tui.core.spawn import python_module
from daintree_tui.core.user_config import NotifyConfig, auto_checkpoints_or_on, load_notify_config, user_config_stamp
from daintree_tui.services.notify import SESSION_KINDS, Notifier, OncePerRun, notice_for
from daintree_tui.sessions.clients import typed_into
from daintree_tui.sessions.status import SessionStatus

if TYPE_CHECKING:
    from daintree_tui.services.container import Services
    from daintree_tui.sessions.manager import SessionInfo

TICK = 1.0
# Seconds with no session and no new event before the watcher ends: a restart of the only session stops the server
# for a moment, and a merge train that removes the last worktree goes on writing its results after.
EMPTY_GRACE = 5.0
LOCK_NAME = "notify-watcher.lock"
LIVE_OBSERVER_LOCK = "live-observers.lock"  # held shared by each dashboard that records sessions by events
STAND_BACK_TICKS = 5  # while one does: the watcher's own full pass once in this many ticks
LOCK_PATIENCE = 1.0  # seconds a new watcher tries for the lock: another process's look (`watcher_pid`) takes it briefly
# What of the environment of whoever started the first session the watcher must not keep: the session's own
# variables (a session's command may start another) and tmux's.
_DROPPED_ENV = ("TMUX", "TMUX_PANE", "CLAUDECODE", "DAINTREE_WORKTREE", "DAINTREE_WORKTREE_PATH", "DAINTREE_BRANCH",
                "DAINTREE_TASK_ID", "DAINTREE_AGENT", "DAINTREE_ROOT", "PORT")


def lock_path(project: Project) -> Path:
    return project.locks_dir / LOCK_NAME


def log_path(project: Project) -> Path:
    return project.logs_dir / "notify.log"


def _open_lock(project: Project) -> int:
    private_dir(project.locks_dir)
    return os.open(lock_path(project), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


# A look at a lock file: read-only, never through a link, and never waiting (a FIFO found where a lock goes, in
# a copied repository, made a read-only open wait for a writer forever: the watcher's loop, each session start).
_LOOK_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _lock_of_ours(fd: int) -> bool:
    """Whether an open lock file is one we made: a regular file of this user's with no other name. A name more
    (a hard link that a copied tree brings, to a file in a worktree) lets whoever can open that one hold or
    probe the same lock, though the lock folder is hidden from every sandbox."""
    info = os.fstat(fd)
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_uid == os.getuid()


def hold_live_observer(project: Project) -> int | None:
    """Say that this process records the repository's sessions by events (a dashboard's live client) for as
    long as the returned descriptor stays open (None: the lock could not be had; the watcher then goes on
    as if no dashboard ran). Many may hold it at once."""
    with suppressed(OSError, OperationError):  # a lock folder refused (a link or a file found there): None
        private_dir(project.locks_dir)
        fd = os.open(project.locks_dir / LIVE_OBSERVER_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        if not _lock_of_ours(fd):
            os.close(fd)
            return None
        for _ in range(50):  # a watcher's look holds it alone for a moment
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                time.sleep(0.01)
        os.close(fd)
    return None


def live_observer_present(project: Project) -> bool:
    """Whether a dashboard now records this repository's sessions by events (holds the lock shared)."""
    try:
        fd = os.open(project.locks_dir / LIVE_OBSERVER_LOCK, _LOOK_FLAGS)
    except OSError:
        return False
    try:
        return _lock_of_ours(fd) and not _try_lock(fd)  # free: ours, let go when fd closes
    finally:
        os.close(fd)


def watcher_pid(project: Project) -> int | None:
    """The pid of the watcher running for this repository, or None when none holds the lock."""
    try:
        fd = os.open(lock_path(project), _LOOK_FLAGS)
    except OSError:
        return None
    try:
        if _try_lock(fd):
            return None  # free: nobody watches (ours is released when fd closes)
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else -1
    finally:
        os.close(fd)


def _is_watcher(pid: int) -> bool:
    """Whether `pid` is a `daintree notify watch` (the lock file's word is checked before a signal is sent)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return sys.platform != "linux"  # no /proc to ask: the lock's holder is all there is
    return b"notify" in cmdline and b"watch" in cmdline


def stop_watcher(project: Project, timeout: float = 10.0) -> int | None:
    """SIGTERM the repository's watcher and wait for it to let go of its lock; its pid, or None if none ran."""
    pid = watcher_pid(project)
    if pid is None or pid <= 0 or not _is_watcher(pid):
        return None
    with suppressed(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while watcher_pid(project) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    return pid


def ensure_watcher(project: Project, config: NotifyConfig | None = None, since: int | None = None) -> int | None:
    """Start the repository's watcher unless one runs, it has nothing to do (no channel to send to and automatic
    checkpoints off), or this process runs inside a session (an agent's environment chose its config; the
    person's own start will do). The pid started, or None. `since`: the event log offset to notify from (default:
    its end now); a command that records an outcome with no session running (a merge train) passes the offset
    from before it."""
    if os.environ.get("DAINTREE_WORKTREE") or not project.is_git:
        return None
    try:
        config = config if config is not None else load_notify_config()
    except ConfigError as exc:
        from daintree_tui.core.log import warn

        warn(f"notifications are off: {exc}")
        config = NotifyConfig()
    if not config.channels and not auto_checkpoints_or_on():
        return None
    if watcher_pid(project) is not None:
        return None
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    if since is None:
        since = project.events.complete_end()  # from the start of this session: its first transition is not missed
    with open_private_append(log_path(project)) as log:
        proc = subprocess.Popen([*python_module("daintree_tui"), "notify", "watch", "--repo",
                                 str(project.root), "--since", str(since)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=str(project.root),
                                start_new_session=True, close_fds=True)
    return proc.pid


class Watcher:
    """The loop of `daintree notify watch` over one project's services.

    Args:
        services: the project's services (the observer records; the event log is read).
        since: the event log offset to read from (default: its end now).
        log: where delivery failures and sends are written (the watcher's log file when started in the background).
    """

    def __init__(self, services: Services, since: int | None = None,
                 log: Callable[[str], None] | None = None, tick: float = TICK) -> None:
        self.services = services
        self.project = services.project
        self.since = since
        self.tick = tick
        self.log = log or (lambda line: print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True))
        self.notices = 0
        self._config_read: tuple[tuple[int, int] | None, NotifyConfig] | None = None

    def run(self, stop: threading.Event) -> bool:
        """Watch until the last session ends or `stop` is set; False when another watcher already runs for this
        repository."""
        fd = _open_lock(self.project)
        try:
            deadline = time.monotonic() + LOCK_PATIENCE
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.05)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            self._loop(stop, fd)
            return True
        finally:
            os.close(fd)

    def _config(self) -> NotifyConfig:
        """The user's `[notify]`, read again only when the file changed (each look would repeat its warnings); a
        bad one is logged and sends nothing."""
        stamp = user_config_stamp()
        if self._config_read is not None and self._config_read[0] == stamp:
            return self._config_read[1]
        try:
            config = load_notify_config()
        except ConfigError as exc:
            self.log(f"{exc}: no notices until it is fixed")  # the error says `config:` already
            config = NotifyConfig()
        self._config_read = (stamp, config)
        return config

    def _loop(self, stop: threading.Event, fd: int) -> None:
        config = self._config()
        events = self.project.events
        size = events.complete_end()
        offset = self.since if self.since is not None and 0 <= self.since <= size else size
        notifier = Notifier(self.project, config, log=self.log)
        once = OncePerRun()
        seen_runs: dict[str, float | None] = {}  # live sessions of the last look: those lost with the server
        empty_since: float | None = None
        tick = 0
        self.log(f"watching {self.project.root} (pid {os.getpid()}): {self._sends(config)}")
        try:
            while not stop.is_set():
                passed = tick % STAND_BACK_TICKS == 0 or not live_observer_present(self.project)
                tick += 1
                infos = self._observe() if passed else None
                if infos is not None:
                    if not infos and seen_runs:
                        self._record_lost(seen_runs)
                    seen_runs = {i.name: i.started_at for i in infos if i.status != SessionStatus.EXITED}
                read = offset
                offset = self._notify(notifier, once, offset)
                now = time.monotonic()
                if not passed:
                    pass  # no look at the sessions this tick: nothing learnt of whether any remain
                elif infos or offset != read:
                    empty_since = None
                elif empty_since is None:
                    empty_since = now
                elif now - empty_since >= EMPTY_GRACE:
                    # Let go of the lock, then look once more: a session started just now saw the lock taken
                    # and started no watcher, so this one stays (unless another took the lock meanwhile).
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    if not self._any_session() or not _try_lock(fd):
                        break
                    empty_since = None
                fresh = self._config()
                if fresh != config:
                    self.log(f"config changed: {self._sends(fresh)}")
                    notifier.close(timeout=0)  # what it has queued still goes out, on its own threads
                    config, notifier = fresh, Notifier(self.project, fresh, log=self.log)
                stop.wait(self.tick)
            self._notify(notifier, once, offset)  # what the last look recorded
        finally:
            notifier.close()
            self.log("stopped")

    @staticmethod
    def _sends(config: NotifyConfig) -> str:
        return (", ".join(config.channels) if config.channels
                else "no [notify] channel: recording transitions (checkpoints, hooks), sending nothing")

    def _observe(self) -> list[SessionInfo] | None:
        try:
            return list(self.services.observe_tick().sessions)
        except DaintreeError as exc:
            self.log(f"observe: {exc}")
            return None

    def _any_session(self) -> bool:
        with suppressed(DaintreeError):
            return bool(self.services.sessions.observe(with_screens=False))
        return True

    def _record_lost(self, runs: dict[str, float | None]) -> None:
        """Sessions that vanished with their tmux server (not stopped on purpose): recorded as exited with the
        hangup the server's death gave them, reason `lost` (which notifies `failed`)."""
        from daintree_tui.services.container import HANGUP_EXIT

        with suppressed(DaintreeError):
            for name in self.services.lost_sessions(runs):
                self.services.observer.record(name, SessionStatus.EXITED, HANGUP_EXIT, reason="lost")

    def _notify(self, notifier: Notifier, once: OncePerRun, offset: int) -> int:
        if not notifier.config.channels:
            return self.project.events.complete_end()  # nothing to send: what came meanwhile is not sent later
        records, offset = self.project.events.read_since(offset)
        typing: set[str] | None = None
        for record in records:
            notice = notice_for(record)
            if not once.accept(record, notice) or notice is None:
                continue
            if notice.kind in SESSION_KINDS and notice.worktree:
                if typing is None:
                    typing = typed_into(self.services.host)
                if notice.worktree in typing:
                    self.log(f"{notice.kind} of {notice.worktree} not sent: you are typing into it")
                    continue
            if notifier.send(notice):
                self.notices += 1
        return offset
