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
