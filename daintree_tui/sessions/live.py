"""Live sessions: every session of a project's tmux server with its status, kept current by events, never by
polling. The status itself is derived by `LiveStatus` (sessions/live_status.py) on a thread of its own.

`LiveSessions` is what a dashboard or a feed holds: the event source, the status tracker, and the session
records (agent, start time, hook signal) re-read only when a record file changed. `infos()` costs no tmux call.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daintree_tui.core.log import suppressed
from daintree_tui.core.store import read_json
from daintree_tui.sessions.control import PaneRecord, SessionEvents
from daintree_tui.sessions.host import SESSION_PREFIX
from daintree_tui.sessions.live_status import LiveStatus, StatusChange
from daintree_tui.sessions.manager import SessionManager
from daintree_tui.sessions.presets import all_presets
from daintree_tui.sessions.session_info import SessionInfo, limit_of, session_record_path, status_source_of
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.sessions.tmux import server_env

# LiveStatus and StatusChange live in sessions/live_status.py; the dashboard and the tests import them from here.
__all__ = ["LiveSessions", "LiveStatus", "Previews", "SessionRecords", "StatusChange"]


@dataclass
class _Record:
    mtime: float
    data: dict[str, Any] = field(default_factory=dict)


class SessionRecords:
    """The session record files (`.sessions/<worktree>.json`), re-read only when the directory changed."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._dir_mtime: float | None = None
        self._records: dict[str, _Record] = {}
        self._lock = threading.Lock()
        self._checked = 0.0

    def refresh(self, min_interval: float = 0.2) -> None:
        now = time.monotonic()
        if now - self._checked < min_interval:
            return
        self._checked = now
        try:
            mtime = os.stat(self.directory).st_mtime_ns
        except OSError:
            return
        if mtime == self._dir_mtime:
            return
        self._dir_mtime = mtime
        seen: dict[str, _Record] = {}
        with suppressed(OSError):
            for entry in os.scandir(self.directory):
                if not entry.name.endswith(".json"):
                    continue
                name = entry.name[:-5]
                stamp = entry.stat().st_mtime_ns
                cached = self._records.get(name)
                if cached is not None and cached.mtime == stamp:
                    seen[name] = cached
                    continue
                data, _ = read_json(Path(entry.path), "session record")
                seen[name] = _Record(stamp, data if isinstance(data, dict) else {})
        with self._lock:
            self._records = seen

    def get(self, worktree: str) -> dict[str, Any]:
        self.refresh()
        with self._lock:
            record = self._records.get(worktree)
            return record.data if record else {}

    def signal(self, worktree: str) -> tuple[str, float] | None:
        signal = self.get(worktree).get("signal")
        if isinstance(signal, dict) and isinstance(signal.get("state"), str) and \
                isinstance(signal.get("ts"), (int, float)):
            return str(signal["state"]), float(signal["ts"])
        return None


class Previews:
    """Screens of the sessions on screen, captured over the control connection at most once per `interval`
    each, only when the session may have printed since its last capture, and at most `per_call` of them per
    call, those waiting longest first.

    The budget is what keeps a hundred busy agents cheap: every new preview repaints its row, and with a
    screenful of agents each printing a line a second that was every row, every second (measured: the
    dashboard's largest cost at 40-100 busy agents). With four a call, four busy rows still change every second
    and a screenful of forty each every ten seconds (ten a call cost 1.5 points more of a core at 40 busy
    agents: 6.0 % against 4.4 %, bench.scale_live); status is not rationed (it comes from the event stream), and
    the session on display is the terminal's, live."""

    def __init__(self, source: SessionEvents, interval: float = 1.0, clock: Callable[[], float] = time.time,
                 per_call: int = 4) -> None:
        self.source = source
        self.interval = interval
        self.clock = clock
        self.per_call = per_call
        self._taken: dict[str, float] = {}  # session -> wall time of its last capture
        self._screens: dict[str, str] = {}

    def screens(self, sessions: Iterable[str], ansi: bool = False) -> dict[str, str]:
        now = self.clock()
        records = self.source.records()
        wanted = [s for s in sessions if s in records]
        # `activity` is a whole second: output in the second of the last capture may have come after it.
        stale = [name for name in wanted if name not in self._taken or (
            records[name].activity + 1.0 > self._taken[name] and now - self._taken[name] >= self.interval)]
        stale = sorted(stale, key=lambda name: self._taken.get(name, float("-inf")))[:self.per_call]
        if stale:
            fresh = self.source.capture(stale, ansi=ansi)
            for name in stale:
                if name in fresh:
                    self._screens[name] = fresh[name]
                    self._taken[name] = now
        for name in [n for n in self._taken if n not in records]:
            self._taken.pop(name, None)
            self._screens.pop(name, None)
        return {name: self._screens[name] for name in wanted if name in self._screens}


class LiveSessions:
    """Every session of a project's tmux server with its status, kept current by events, never by polling.

    Status changes go to `record` (the services' observer: the session record, a `session.<status>` event, the
    hook) and then to `on_change`, in order, on a thread of their own, so a slow write never delays status.

    Args:
        manager: the project's sessions (its host must have a server: `server_argv()`).
        prefix: run the control client elsewhere (`["ssh", "HOST"]`).
        record: stores a change (without it nothing is recorded: this layer only observes).
        on_change: told after a batch of changes was recorded (with the last of them; a UI polls then).
    """

    def __init__(self, manager: SessionManager, prefix: Sequence[str] = (),
                 record: Callable[[StatusChange], object] | None = None,
                 on_change: Callable[[StatusChange], None] | None = None,
                 reconcile_interval: float = 20.0) -> None:
        self.manager = manager
        project = manager.project
        base_argv = manager.host.server_argv()
        if base_argv is None:
            raise TypeError("live sessions need a tmux host")
        self.records = SessionRecords(session_record_path(project, "any").parent)
        self.presets = all_presets(project.config)
        self.events = SessionEvents(base_argv, prefix, env=server_env(), reconcile_interval=reconcile_interval)
        self.status = LiveStatus(self.events, project.config.waiting_debounce, pattern_for=self._pattern,
                                 signal_for=lambda s: self.records.signal(s[len(SESSION_PREFIX):]),
                                 started_at_for=self._started_at, hooks_for=self._hooked,
                                 record_mtime_for=lambda s: manager.usage.record_mtime(s[len(SESSION_PREFIX):]),
                                 drawn_for=self._drawn, stalled_after=project.config.stalled_after,
                                 on_change=self._changed)
        self.previews = Previews(self.events)
        self._record = record
        self._on_change = on_change
        self._local = not prefix
        self._foreign: dict[tuple[str, float], bool] = {}
        self._to_record: queue.SimpleQueue[StatusChange | None] = queue.SimpleQueue()
        self._recorder = threading.Thread(target=self._record_changes, name="session-recorder", daemon=True)

    def start(self) -> LiveSessions:
        self.events.start()
        self.status.start()
        self._recorder.start()
        return self

    def close(self) -> None:
        self.status.close()
        self.events.close()
        self._to_record.put(None)
        self._recorder.join(timeout=5)

    def _pattern(self, session: str) -> str | None:
        preset = self.presets.get(str(self.records.get(session[len(SESSION_PREFIX):]).get("agent", "")))
        return preset.waiting_pattern if preset is not None else None

    def _hooked(self, session: str) -> bool:
        return self.records.get(session[len(SESSION_PREFIX):]).get("status_source") == "hooks"

    def _drawn(self, session: str, created: float) -> bool | None:
        worktree = session[len(SESSION_PREFIX):]
        meta = self.records.get(worktree)
        started = meta.get("started_at")
        # The record is written just before its pane starts: one older than the pane is the previous run's (a copy
        # read before a restart), whose answer is not this run's.
        if not isinstance(started, (int, float)) or started < created - 5.0:
            return None
        return self.manager.drawn(worktree, meta, float(started))

    def _started_at(self, session: str) -> float | None:
        started = self.records.get(session[len(SESSION_PREFIX):]).get("started_at")
        return float(started) if isinstance(started, (int, float)) else None

    def _changed(self, change: StatusChange) -> None:
        self._to_record.put(change)

    def _record_changes(self) -> None:
        """Record changes in batches (all that are waiting), then tell `on_change` once per batch: forty
        sessions changing together make one burst of writes and one notice, not forty."""
        while True:
            batch = [self._to_record.get()]
            while True:
                try:
                    batch.append(self._to_record.get_nowait())
                except queue.Empty:
                    break
            for change in batch:
                if change is None:
                    return
                if self._record is not None and self.records.get(change.worktree):
                    with suppressed(Exception):  # a failed write must not stop recording the others
                        self._record(change)
            if self._on_change is not None:
                with suppressed(Exception):
                    self._on_change(batch[-1])  # type: ignore[arg-type]

    def infos(self) -> list[SessionInfo]:
        """Every session with its status, from what the events said (no tmux call, no polling)."""
        statuses = self.status.statuses()
        infos = []
        for name, record in self.events.records().items():
            worktree = record.worktree
            meta = self.records.get(worktree)
            if not meta and self._is_foreign(record):
                continue
            started = meta.get("started_at")
            infos.append(SessionInfo(
                name=worktree, session=name, agent=str(meta.get("agent", "?")),
                status=statuses.get(name, SessionStatus.STARTING),
                exit_code=record.exit_code, pid=record.pid,
                started_at=float(started) if isinstance(started, (int, float)) else record.created,
                log=str(self.manager.project.log_path(worktree)), persistent=True,
                recorded=str(meta.get("status") or "") if meta else None,
                status_source=status_source_of(meta), over_budget=meta.get("over_budget"),
                limit=limit_of(meta)))
        return sorted(infos, key=lambda i: i.started_at)

    def _is_foreign(self, record: PaneRecord) -> bool:
        """Another repository's session, on a server that DAINTREE_TMUX_SOCKET shares: a repository sees only its
        own (the dashboard listed, counted and announced the others). Asked of tmux once per session, and only
        for a session this repository has no record of; a remote host's server is that host's repository's."""
        if not self._local:
            return False
        key = (record.session, record.created)
        if key not in self._foreign:
            exists = getattr(self.manager.host, "exists", None)
            self._foreign[key] = exists is not None and not exists(record.worktree)
        return self._foreign[key]

    def screens(self, worktrees: Iterable[str], ansi: bool = False) -> dict[str, str]:
        """Previews of these worktrees' sessions (those on screen), rate-limited; keyed by worktree."""
        shots = self.previews.screens([f"{SESSION_PREFIX}{w}" for w in worktrees], ansi=ansi)
        return {name[len(SESSION_PREFIX):]: screen for name, screen in shots.items()}
