"""Session status from the control-mode event stream, derived on a thread of its own.

`LiveStatus` turns `SessionEvents` (activity, exits, sessions added or removed) into a status per session
with the rules of `status.derive_status`, and reports each change once. Hysteresis, so bursty output does not
flap: `running` -> `waiting` only after the output has been quiet for the whole debounce interval; a prompt
pattern is only checked on a screen captured after the output went quiet (any later output discards it); an
agent's own `waiting` signal holds until it prints again after the signal's slack; `exited` is final until a
new session takes the name. Screens are captured only for sessions whose preset has a prompt pattern, once
per quiet period, over the control connection (no fork).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from daintree_tui.core.log import suppressed
from daintree_tui.sessions.control import Activity, Exited, PaneRecord, SessionEvent, SessionEvents, SessionsChanged
from daintree_tui.sessions.host import SESSION_PREFIX
from daintree_tui.sessions.status import (
    SIGNAL_SLACK,
    STALLED_AFTER,
    Observation,
    SessionStatus,
    derive_status,
)

QUIET_BEFORE_CAPTURE = 1.2  # seconds without activity before a prompt pattern is checked (one report is ~1 s)
TICK = 0.2


@dataclass(frozen=True)
class StatusChange:
    session: str
    old: SessionStatus | None
    new: SessionStatus
    exit_code: int | None
    ts: float

    @property
    def worktree(self) -> str:
        return self.session[len(SESSION_PREFIX):]


@dataclass
class _Facts:
    created: float
    last_output: float | None
    dead: bool = False
    exit_code: int | None = None
    screen_tail: str | None = None
    captured_at: float = 0.0
    drawn: bool | None = None  # as `drawn_for` last said; True is final for the run
    drawn_checked: float = float("-inf")


class LiveStatus:
    """Status of every session of one server, kept current by a thread that reads `source.events`.

    Args:
        source: an event source started without its own `on_event` (events arrive on its queue).
        debounce: quiet seconds after which a session is `waiting` (config `sessions.waiting_debounce`).
        pattern_for: the waiting-prompt regex of a session's preset (by session name), or None.
        signal_for: the agent's own last signal (state, ts) for a session, or None.
        started_at_for: when the session was started (from its record), or None to use tmux's creation time.
        hooks_for: whether the session's agent reports through hooks wired for it (its record's status_source):
            its `waiting` then stays through redraws, as `session list` has it (status.py).
        record_mtime_for: when its usage records last grew (a Codex turn starting shows there first).
        drawn_for: whether a session's current run (by its pane's creation time) has drawn anything visible (None:
            not known); asked again at most every DRAWN_EVERY seconds until it has.
        stalled_after: seconds without a visible character since the start after which a session is `stalled`.
        on_change: called with every status change, once, on this object's thread.
    """

    def __init__(self, source: SessionEvents, debounce: float,
                 pattern_for: Callable[[str], str | None] = lambda _: None,
                 signal_for: Callable[[str], tuple[str, float] | None] = lambda _: None,
                 started_at_for: Callable[[str], float | None] = lambda _: None,
                 hooks_for: Callable[[str], bool] = lambda _: False,
                 record_mtime_for: Callable[[str], float | None] = lambda _: None,
                 drawn_for: Callable[[str, float], bool | None] = lambda _, __: None,
                 stalled_after: float = STALLED_AFTER,
                 on_change: Callable[[StatusChange], None] | None = None,
                 clock: Callable[[], float] = time.time, tick: float = TICK) -> None:
        self.source = source
        self.debounce = debounce
        self.pattern_for = pattern_for
        self.signal_for = signal_for
        self.started_at_for = started_at_for
        self.hooks_for = hooks_for
        self.record_mtime_for = record_mtime_for
        self.drawn_for = drawn_for
        self.stalled_after = stalled_after
        self._record_mtimes: dict[str, tuple[float, float | None]] = {}
        self.changes: queue.SimpleQueue[StatusChange] = queue.SimpleQueue()
        self._on_change = on_change or self.changes.put
        self.clock = clock
        self.tick = tick
        self._facts: dict[str, _Facts] = {}
        self._status: dict[str, SessionStatus] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.evaluations = 0

    def start(self) -> LiveStatus:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="session-status", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def statuses(self) -> dict[str, SessionStatus]:
        with self._lock:
            return dict(self._status)

    def screen_tail(self, session: str) -> str | None:
        with self._lock:
            facts = self._facts.get(session)
            return facts.screen_tail if facts else None

    # -- the thread --------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                event = self.source.events.get(timeout=self.tick)
            except queue.Empty:
                event = None
            while event is not None:
                self._apply(event)
                try:
                    event = self.source.events.get_nowait()
                except queue.Empty:
                    event = None
            with suppressed(Exception):  # a bad record or pattern must not stop status for all
                self._capture_quiet()
                self._evaluate()

    def _apply(self, event: SessionEvent) -> None:
        records = self.source.records()
        with self._lock:
            if isinstance(event, SessionsChanged):
                for name in event.removed:
                    self._facts.pop(name, None)
                for name in event.sessions:
                    record = records.get(name)
                    if record is not None and (name in event.added or name not in self._facts):
                        self._facts[name] = _initial_facts(record)
            elif isinstance(event, Activity):
                facts = self._facts.get(event.session)
                if facts is not None:
                    facts.last_output = max(facts.last_output or 0.0, event.ts)
                    facts.screen_tail = None  # what was on screen before this output says nothing now
            elif isinstance(event, Exited):
                facts = self._facts.get(event.session)
                if facts is not None:
                    facts.dead, facts.exit_code = True, event.exit_code

    def _capture_quiet(self) -> None:
        """Capture, in one batch over the control connection, the screens of quiet sessions whose prompt
        pattern has not been checked since their last output."""
        now = self.clock()
        with self._lock:
            wanted = [name for name, f in self._facts.items()
                      if not f.dead and f.last_output is not None and f.captured_at < f.last_output
                      and now - f.last_output >= QUIET_BEFORE_CAPTURE and self.pattern_for(name)]
        if not wanted:
            return
        screens = self.source.capture(wanted)
        with self._lock:
            for name in wanted:
                facts = self._facts.get(name)
                if facts is not None and name in screens and (facts.last_output or 0.0) <= now:
                    facts.screen_tail, facts.captured_at = screens[name], now

    def _evaluate(self) -> None:
        now = self.clock()
        changes: list[StatusChange] = []
        with self._lock:
            for name in [n for n in self._status if n not in self._facts]:
                del self._status[name]
            for name, facts in self._facts.items():
                old = self._status.get(name)
                if old == SessionStatus.EXITED and facts.dead:
                    continue
                signal = self.signal_for(name)
                # The later of the record's start and tmux's: a copy of the records read just before a restart
                # still holds the old run's start, and the new pane, without output yet, looked long waiting.
                started = max(self.started_at_for(name) or 0.0, facts.created)
                hooks = bool(signal) and self.hooks_for(name)
                obs = Observation(alive=not facts.dead, exit_code=facts.exit_code, started_at=started,
                                  last_output=facts.last_output,
                                  signal_state=signal[0] if signal else None, signal_ts=signal[1] if signal else None,
                                  screen_tail=facts.screen_tail, hooks=hooks,
                                  record_mtime=self._record_mtime(name, now, facts, signal) if hooks else None,
                                  drawn=None if facts.dead else self._drawn(now, facts, name))
                new = derive_status(obs, now, self.debounce, self.pattern_for(name), self.stalled_after)
                self.evaluations += 1
                if new != old:
                    self._status[name] = new
                    changes.append(StatusChange(name, old, new, facts.exit_code, now))
        for change in changes:
            self._on_change(change)


    def _drawn(self, now: float, facts: _Facts, name: str) -> bool | None:
        """Whether the session has drawn something visible, from `drawn_for` once per DRAWN_EVERY until it has."""
        if facts.drawn or now - facts.drawn_checked < DRAWN_EVERY:
            return facts.drawn
        facts.drawn, facts.drawn_checked = self.drawn_for(name, facts.created), now
        return facts.drawn

    def _record_mtime(self, name: str, now: float, facts: _Facts, signal: tuple[str, float] | None) -> float | None:
        """When a hooked session's usage records last grew, looked at only where it could change the status (output
        after a `waiting` signal: a redraw, or a turn its agent does not announce) and at most once a second."""
        if not signal or signal[0] != SessionStatus.WAITING or (facts.last_output or 0.0) <= signal[1] + SIGNAL_SLACK:
            return None
        seen = self._record_mtimes.get(name)
        if seen is None or now - seen[0] >= RECORDS_EVERY:
            seen = self._record_mtimes[name] = (now, self.record_mtime_for(name))
        return seen[1]


RECORDS_EVERY = 1.0  # seconds between looks at one session's usage records
DRAWN_EVERY = 0.5  # seconds between looks at the log of a session that has drawn nothing yet


def _initial_facts(record: PaneRecord) -> _Facts:
    # window_activity starts at the window's creation; in that first second only the cursor tells output.
    # The server is this machine's, so its clock is ours: a session quiet for an hour was quiet for an hour.
    # (output_bound would have dated it now, and every dashboard start showed idle agents running, recording a
    # running/waiting pair for each.) The end of the second tmux recorded, never later than now.
    last = min(record.activity + 1.0, time.time()) if record.printed else None
    return _Facts(created=record.created, last_output=last, dead=record.dead, exit_code=record.exit_code)
