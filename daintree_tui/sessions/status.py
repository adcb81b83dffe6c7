"""Session status: `starting`, `running`, `waiting`, `exited`, derived from facts, never stored as truth.

Precedence: a dead pane is `exited` (with its exit code). A session that has drawn nothing visible since it
started (`drawn` is False: its log holds controls only, or nothing) is `starting`, and `stalled` once that has
lasted `stalled_after` seconds: an agent hung on start, or drawing a blank screen, is not waiting for anyone, whatever
its quiet output or its hooks say (opencode, its database read-only, drew a blank screen and showed `waiting`). A
session whose agent reports its own state through
hooks (`hooks`: wired per session, see sessions/agents/) is believed once it has reported: `waiting` stays until
the agent says `running` or its usage records grow again (a new turn; Codex reports only turn ends), so typing,
redraws and bursts of output never flip it; `running` stays while output flows and falls back to `waiting` after
`HOOK_QUIET` seconds of silence (an interrupted turn fires no end hook). Another agent's signal is believed until
it prints again after a `waiting` signal. Otherwise the preset's prompt pattern on the last screen line means
`waiting`; only an agent without a pattern is `waiting` when its output has been quiet for the debounce interval
(with one, quiet output is `running`: a build, a slow start).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class SessionStatus(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    WAITING = "waiting"
    STALLED = "stalled"  # alive, and nothing visible drawn since it started, for `stalled_after` seconds
    EXITED = "exited"


STARTING_GRACE = 3.0
SIGNAL_SLACK = 1.0  # output within this long after a `waiting` signal is the agent finishing its redraw
HOOK_QUIET = 30.0  # a hooked agent at work redraws its spinner every second: this much silence means it stopped
STALLED_AFTER = 30.0  # seconds without a visible character since the start (config `sessions.stalled_after`)


@dataclass(frozen=True)
class Observation:
    """The facts status is derived from, gathered by the manager."""

    alive: bool
    exit_code: int | None
    started_at: float
    last_output: float | None  # mtime of the session log, None before any output
    signal_state: str | None = None
    signal_ts: float | None = None
    screen_tail: str | None = None
    hooks: bool = False  # the agent's own hooks are wired: its signals are the truth
    record_mtime: float | None = None  # when its usage records last grew
    drawn: bool | None = None  # it printed something visible since it started; None: not known (believed drawn)


def last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.rstrip()
    return ""


def derive_status(obs: Observation, now: float, debounce: float, pattern: str | None,
                  stalled_after: float = STALLED_AFTER) -> SessionStatus:
    if not obs.alive:
        return SessionStatus.EXITED
    if obs.drawn is False:
        return SessionStatus.STARTING if now - obs.started_at < stalled_after else SessionStatus.STALLED
    if obs.hooks and obs.signal_state in (SessionStatus.WAITING, SessionStatus.RUNNING) and obs.signal_ts is not None:
        return _from_hooks(obs, now)
    if obs.signal_state and obs.signal_ts is not None:
        if obs.signal_state == SessionStatus.WAITING:
            if obs.last_output is None or obs.last_output <= obs.signal_ts + SIGNAL_SLACK:
                return SessionStatus.WAITING
            return SessionStatus.RUNNING
        if obs.signal_state == SessionStatus.RUNNING:
            return SessionStatus.RUNNING
    if pattern and obs.screen_tail is not None:
        line = last_line(obs.screen_tail)
        try:
            # A screen keeps no trailing blanks (tmux's capture drops them), so a prompt's "> " reads ">": a
            # pattern ending in its space (`'> $'`, as the docs and aider's preset have it) matches it too.
            if re.search(pattern, line) or re.search(pattern, line + " "):
                return SessionStatus.WAITING
        except re.error:
            pass
    if pattern:
        # Its prompt is what says it waits: output quiet for the debounce alone is a long build or a slow start,
        # not a question (aider silent for 2 s in a build notified "needs you").
        if obs.last_output is None:
            return SessionStatus.STARTING if now - obs.started_at < stalled_after else SessionStatus.STALLED
        return SessionStatus.RUNNING
    if obs.last_output is None:
        return SessionStatus.STARTING if now - obs.started_at < STARTING_GRACE else SessionStatus.WAITING
    if now - obs.last_output >= debounce:
        return SessionStatus.WAITING
    return SessionStatus.RUNNING


def _from_hooks(obs: Observation, now: float) -> SessionStatus:
    assert obs.signal_ts is not None
    new_turn = obs.record_mtime is not None and obs.record_mtime > obs.signal_ts + SIGNAL_SLACK
    if obs.signal_state == SessionStatus.WAITING and not new_turn:
        return SessionStatus.WAITING
    activity = max(obs.signal_ts, obs.last_output or 0.0, obs.record_mtime or 0.0)
    return SessionStatus.WAITING if now - activity >= HOOK_QUIET else SessionStatus.RUNNING


class StatusHysteresis:
    """Status as a person should see it: a change between `running` and `waiting` counts once it has held for
    `hold` seconds, so bursty output (an agent redrawing, a user typing) does not flap it. The first sight of a
    session and `exited` count at once."""

    def __init__(self, hold: float = 1.5) -> None:
        self.hold = hold
        self._shown: dict[str, SessionStatus] = {}
        self._candidate: dict[str, tuple[SessionStatus, float]] = {}

    def settle(self, name: str, status: SessionStatus, now: float) -> SessionStatus:
        """The status to show for `name`, given the one derived now."""
        shown = self._shown.get(name)
        if shown is None or status == SessionStatus.EXITED or shown in (SessionStatus.STARTING,
                                                                        SessionStatus.EXITED):
            self._shown[name] = status
            self._candidate.pop(name, None)
            return status
        if status == shown:
            self._candidate.pop(name, None)
            return shown
        candidate, since = self._candidate.setdefault(name, (status, now))
        if candidate != status:
            self._candidate[name] = (status, now)
            return shown
        if now - since >= self.hold:
            self._shown[name] = status
            self._candidate.pop(name, None)
            return status
        return shown

    def forget(self, names: set[str]) -> None:
        """Drop what is known of sessions that are gone."""
        for name in names:
            self._shown.pop(name, None)
            self._candidate.pop(name, None)
