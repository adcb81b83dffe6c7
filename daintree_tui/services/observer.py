"""The one owner of session transitions: records each as a `session.*` event and runs its hook.

Listing sessions (`daintree session list`, `worktree list`) only observes. Recording happens where something runs
on purpose and keeps running: the dashboard's poll, `daintree session watch`, `queue run`, and an agent's own
`session signal`. Several observers (two dashboards, a dashboard and a queue runner) record each transition once:
the sessions layer stores it with a compare-and-set under the project lock, and only the observer whose write
made the change logs the event and runs the hook.

Hooks (`on_waiting`, `on_session_exit`) may run for minutes, so they run on this observer's own worker thread,
one at a time, in the order their transitions were recorded; `close()` waits for them. A worktree's run of a hook
that waits to begin is the run of every later transition to that status too (the agent's own word flips its
status at will): each run begins after a real transition, and none waits behind another of its kind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from daintree_tui.core.errors import DaintreeError
from daintree_tui.core.hooks import run_hooks
from daintree_tui.core.index import Index, find
from daintree_tui.core.log import suppressed
from daintree_tui.core.project import Project
from daintree_tui.sessions.manager import SessionInfo, SessionManager
from daintree_tui.sessions.status import SessionStatus

if TYPE_CHECKING:
    from daintree_tui.services.usage import BudgetGuard, BudgetReport

HOOK_FOR = {SessionStatus.EXITED: "on_session_exit", SessionStatus.WAITING: "on_waiting"}


@dataclass(frozen=True)
class Transition:
    """A status change this observer recorded."""

    name: str
    status: SessionStatus
    exit_code: int | None
    reason: str | None = None


@dataclass(frozen=True)
class Observed:
    """One observation pass: every session, the transitions this pass recorded, and the budgets' state."""

    sessions: tuple[SessionInfo, ...]
    transitions: tuple[Transition, ...]
    budget: BudgetReport | None = None


class SessionObserver:
    """Observes the sessions of one project and records what changed."""

    def __init__(self, project: Project, sessions: SessionManager, budget: BudgetGuard | None = None,
                 after_turn: Callable[[str, SessionStatus], object] | None = None) -> None:
        """`after_turn(name, status)`: what follows the end of an agent's turn (`waiting`, `exited`) this observer
        recorded, on its worker thread before the turn's hook (the checkpoint of the worktree's files)."""
        self.project = project
        self.sessions = sessions
        self.budget = budget  # each pass reads the agents' new usage records and enforces the budgets
        self.after_turn = after_turn
        self._hooks: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self._guard = threading.Lock()
        # Worktree -> the status of its turn's end whose checkpoint is queued and not begun: one at most each. The
        # agent's own word (`session signal`, 20 a pass through its inbox) flipped running/waiting, and each flip
        # queued a tree read on the one worker thread the user's hooks and every other worktree wait on too.
        self._turns: dict[str, SessionStatus] = {}
        # (worktree, hook) -> the exit code its queued, not begun run passes on: one run at most waits for each, so
        # the flips above queued no more user commands than checkpoints.
        self._hook_runs: dict[tuple[str, str], int | None] = {}

    def poll(self, with_screens: bool = True) -> Observed:
        """Observe every session; record the transitions not yet recorded (by anyone)."""
        infos = self.sessions.observe(with_screens)
        recorded = []
        for info in infos:
            if info.unrecorded:
                transition = self.record(info.name, info.status, info.exit_code)
                if transition is not None:
                    recorded.append(transition)
        budget = self.budget.tick(infos) if self.budget is not None else None
        return Observed(tuple(infos), tuple(recorded), budget)

    def record(self, name: str, status: SessionStatus, exit_code: int | None,
               reason: str | None = None) -> Transition | None:
        """Record one transition (event, then hook, unless it was stopped on purpose); None when another
        observer recorded it first or nothing changed."""
        if not self.sessions.records.transition(name, status, exit_code, reason=reason):
            return None
        hook = HOOK_FOR.get(status)
        if hook is not None and self.after_turn is not None:
            with self._guard:
                queued = name in self._turns
                self._turns[name] = status  # the newest end of a turn is the one its checkpoint names
            if not queued:
                self._later(self._after_turn, name)
        if hook is not None and reason != "stopped":
            with self._guard:
                queued = (name, hook) in self._hook_runs
                self._hook_runs[(name, hook)] = exit_code  # the newest transition's
            if not queued:
                self._later(self._run_hook, name, hook)
        return Transition(name, status, exit_code, reason)

    def signal(self, name: str, state: str, exit_code: int | None = None,
               at: float | None = None) -> Transition | None:
        """An agent's own word on its state (`daintree session signal`): stored, then recorded as a transition.
        `at` is when the agent's hook fired; a signal older than the one stored is ignored."""
        status = self.sessions.signal(name, state, at=at)
        if status is None:
            return None
        if self._drawn_nothing(name):
            # Its status is `starting` until it draws (sessions/status.py), whatever it says: recording its word
            # now logged `waiting`, the next poll `starting`, and the first frame `waiting` again (two events and
            # two on_waiting hooks for one wait). Stored, the word counts from the poll that sees the first frame.
            return None
        return self.record(name, status, exit_code)

    def _drawn_nothing(self, name: str) -> bool:
        """The session's current run has drawn nothing visible yet (False when that is not known)."""
        meta = self.sessions.meta(name)
        started = meta.get("started_at")
        if not isinstance(started, int | float):
            return False
        return self.sessions.drawn(name, meta, float(started)) is False

    # -- hooks -----------------------------------------------------------------------------------------------

    def _later(self, job: Callable[..., None], *args: object) -> None:
        with self._guard:
            if self._hooks is None:
                self._hooks = ThreadPoolExecutor(max_workers=1, thread_name_prefix="daintree-hooks")
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(self._hooks.submit(job, *args))

    def _after_turn(self, name: str) -> None:
        """The end of a turn's own work; a failure is its own to report (an event), never the observer's. The
        files are read as they are now: the ends of turns queued meanwhile are this one."""
        assert self.after_turn is not None
        with self._guard:
            status = self._turns.pop(name)
        with suppressed(DaintreeError, OSError):
            self.after_turn(name, status)

    def _run_hook(self, name: str, hook: str) -> None:
        """Run `on_session_exit` / `on_waiting`; their failures are events (run_hooks logs them), never errors.
        The transitions recorded from here on queue a run of their own."""
        with self._guard:
            exit_code = self._hook_runs.pop((name, hook))
        entry = find(Index(self.project).load(), name)
        if entry is None or not entry.live or not Path(entry.path).is_dir():
            return
        with suppressed(DaintreeError):
            run_hooks(self.project, hook, entry,
                      extra_env={"DAINTREE_EXIT_CODE": "" if exit_code is None else str(exit_code)})

    def wait_for_hooks(self, timeout: float | None = None) -> bool:
        """Wait until every hook started so far has finished; False if `timeout` ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._guard:
            pending = list(self._pending)
        for future in pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                future.result(left)
            except TimeoutError:
                return False
        return True

    def close(self) -> None:
        """Let the hooks already started finish; start no more."""
        with self._guard:
            hooks, self._hooks = self._hooks, None
        if hooks is not None:
            hooks.shutdown(wait=True)
