"""Live state of remote hosts, and placing work on them by free slots.

`HostsFeed` polls each host's `worktree list --json` (one round trip over its master connection, one run of the
host's daintree; each worktree's session comes with it), keeps the last state it read with its time, and marks a
host `unreachable` when ssh fails, until it answers again. It never calls the UI: a dashboard passes `on_change`
and turns it into a message.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from daintree_tui.core.errors import DaintreeError
from daintree_tui.core.log import suppressed
from daintree_tui.services.host_answers import worktree_list
from daintree_tui.services.remote import HostUnreachable, RemoteHost

T = TypeVar("T")

POLL_TIMEOUT = 8.0
"""Seconds one poll of a host may take: a host that hangs (its sshd stopped) is `unreachable` after one poll of
that long, not after the 30 s an unbounded ssh took; the connection's keepalive (remote.KEEPALIVE_*) ends its
master connection soon after, so later polls fail at once until it answers again."""


@dataclass(frozen=True)
class HostState:
    """What a host last told us. `updated_at` is when that was; `reachable` is whether the last poll got through."""

    name: str
    max_sessions: int
    reachable: bool = False
    worktrees: tuple[dict[str, Any], ...] = ()
    sessions: tuple[dict[str, Any], ...] = ()
    updated_at: float | None = None
    checked_at: float | None = None
    error: str | None = None

    @property
    def status(self) -> str:
        if self.checked_at is None:
            return "unknown"
        if not self.reachable:
            return "unreachable"
        return "error" if self.error else "ok"

    @property
    def running(self) -> int:
        return sum(1 for s in self.sessions if s.get("status") != "exited")

    @property
    def free_slots(self) -> int:
        """Sessions that may still start there (0 while unreachable: nothing is placed on a host we cannot see)."""
        if self.status != "ok":
            return 0
        return max(0, self.max_sessions - self.running)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "reachable": self.reachable, "error": self.error,
                "updated_at": self.updated_at, "checked_at": self.checked_at, "max_sessions": self.max_sessions,
                "running": self.running, "free_slots": self.free_slots, "worktrees": list(self.worktrees),
                "sessions": list(self.sessions)}


def read_host(host: RemoteHost, timeout: float = POLL_TIMEOUT) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A host's worktrees and sessions, in one round trip and one run of its daintree: `worktree list --json`
    carries each worktree's git facts, disk use and session. The answer is read within a byte cap and `timeout`
    and typed (host_answers.worktree_list): the lists hold only checked values. Raises HostUnreachable or
    OperationError."""
    worktrees = worktree_list(host.name, host.run_json(["worktree", "list"], timeout=timeout))
    sessions = [w["session"] for w in worktrees if w["session"] is not None]
    return worktrees, sessions


def read_agents(host: RemoteHost, timeout: float = POLL_TIMEOUT) -> dict[str, dict[str, bool]]:
    """The agent presets of the host's own config (its `agents --json`): name -> installed there, default there.
    What the new-task dialog offers for that host. Raises HostUnreachable or OperationError."""
    from daintree_tui.services.host_answers import agents

    return agents(host.name, host.run_json(["agents"], timeout=timeout))


@dataclass
class HostsFeed:
    """Polls every host, each in its own thread, the next poll scheduled when the last one ended.

    Args:
        hosts: the hosts to watch.
        interval: seconds between the end of one poll and the start of the next.
        on_change: called (from a poller thread) with a host's new state whenever it differs from the last.
    """

    hosts: Sequence[RemoteHost]
    interval: float = 2.0
    on_change: Callable[[HostState], None] | None = None
    timeout: float = POLL_TIMEOUT
    _states: dict[str, HostState] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        for host in self.hosts:
            self._states[host.name] = HostState(host.name, host.config.max_sessions)

    @property
    def states(self) -> dict[str, HostState]:
        with self._lock:
            return dict(self._states)

    def poll_host(self, host: RemoteHost) -> HostState:
        """Poll one host now; its state afterwards (the last known lists are kept when it fails)."""
        now = time.time()
        with self._lock:
            last = self._states[host.name]
        try:
            worktrees, sessions = read_host(host, self.timeout)
        except HostUnreachable as exc:
            state = replace(last, reachable=False, checked_at=now, error=exc.reason)
        except DaintreeError as exc:
            state = replace(last, reachable=True, checked_at=now, error=str(exc))
        else:
            state = replace(last, reachable=True, worktrees=tuple(worktrees), sessions=tuple(sessions),
                            updated_at=now, checked_at=now, error=None)
        with self._lock:
            changed = _differs(self._states[host.name], state)
            self._states[host.name] = state
        if changed and self.on_change is not None:
            self.on_change(state)
        return state

    def poll(self) -> dict[str, HostState]:
        """Poll every host once, in parallel (a host that hangs does not hold the others)."""
        if self.hosts:
            with ThreadPoolExecutor(max_workers=min(8, len(self.hosts)), thread_name_prefix="hosts-feed") as pool:
                list(pool.map(self.poll_host, self.hosts))
        return self.states

    def start(self) -> None:
        """Poll in the background until `stop()`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="hosts-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 5)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            with suppressed(Exception):  # a poller thread must outlive one bad poll
                self.poll()
            self._stop.wait(self.interval)


def _differs(old: HostState, new: HostState) -> bool:
    return (old.reachable, old.error, old.worktrees, old.sessions) != (new.reachable, new.error, new.worktrees,
                                                                       new.sessions)


# -- placement ------------------------------------------------------------------------------------------------------


def place(items: Sequence[T], free: Mapping[str, int]) -> list[tuple[T, str]]:
    """Give each item the host with the most free slots at that moment (ties: the order of `free`).

    Items beyond the total free capacity are left out: they wait for the next pass.
    """
    slots = {name: max(0, count) for name, count in free.items()}
    order = {name: i for i, name in enumerate(slots)}
    placed: list[tuple[T, str]] = []
    for item in items:
        best = max(slots, key=lambda name: (slots[name], -order[name]), default=None)
        if best is None or slots[best] <= 0:
            break
        placed.append((item, best))
        slots[best] -= 1
    return placed


def free_slots(states: Mapping[str, HostState]) -> dict[str, int]:
    """Free session slots per host, in the order given (unreachable hosts have none)."""
    return {name: state.free_slots for name, state in states.items()}
