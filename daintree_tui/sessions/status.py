"""Session status: `starting`, `running`, `waiting`, `exited`, derived from facts, never stored as truth.

Precedence: a dead pane is `exited` (with its exit code); an agent that signals its own state (Claude Code's
hooks calling `daintree session signal`) is believed until it prints again after a `waiting` signal; otherwise
the preset's prompt pattern on the last screen line, or output quiet for the debounce interval, means `waiting`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class SessionStatus(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    WAITING = "waiting"
    EXITED = "exited"


STARTING_GRACE = 3.0
SIGNAL_SLACK = 1.0  # output within this long after a `waiting` signal is the agent finishing its redraw


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


def last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.rstrip()
    return ""


def derive_status(obs: Observation, now: float, debounce: float, pattern: str | None) -> SessionStatus:
    if not obs.alive:
        return SessionStatus.EXITED
    if obs.signal_state and obs.signal_ts is not None:
        if obs.signal_state == SessionStatus.WAITING:
            if obs.last_output is None or obs.last_output <= obs.signal_ts + SIGNAL_SLACK:
                return SessionStatus.WAITING
            return SessionStatus.RUNNING
        if obs.signal_state == SessionStatus.RUNNING:
            return SessionStatus.RUNNING
    if pattern and obs.screen_tail is not None:
        try:
            if re.search(pattern, last_line(obs.screen_tail)):
                return SessionStatus.WAITING
        except re.error:
            pass
    if obs.last_output is None:
        return SessionStatus.STARTING if now - obs.started_at < STARTING_GRACE else SessionStatus.WAITING
    if now - obs.last_output >= debounce:
        return SessionStatus.WAITING
    return SessionStatus.RUNNING


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
