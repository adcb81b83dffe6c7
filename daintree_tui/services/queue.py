"""The task queue: ready tasks (pending, unblocked, with an agent, no owner) are claimed atomically under the lock
and started in their own worktree while fewer than `max_sessions` sessions run.

A session the queue started that exits 0 completes its task (its worktree is kept for review) and so unblocks the
tasks waiting on it; one that exits non-zero leaves its task in progress, owned by `queue-failed:<code>`, for a
person to look at. Two runners, or a runner and the dashboard, never start one task twice: a claim is a write of
the task's owner under the lock, and only an unowned task can be claimed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from daintree_tui.core import validate
from daintree_tui.core.errors import DaintreeError
from daintree_tui.core.log import suppressed
from daintree_tui.core.models import Task, TaskStatus
from daintree_tui.services.observer import SessionObserver
from daintree_tui.services.operations import Operations
from daintree_tui.sessions.manager import SessionInfo
from daintree_tui.sessions.presets import all_presets

QUEUE_OWNER = "queue"
FAILED_OWNER = f"{QUEUE_OWNER}-failed:"
"""The owner of a task whose agent failed (`queue-failed:<exit code>`, `:start`, `:timeout`): a person looks."""


@dataclass
class StepReport:
    started: list[str] = field(default_factory=list)
    started_tasks: list[int] = field(default_factory=list)  # the task ids of `started`, in its order
    completed: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    running: int = 0
    waiting_tasks: int = 0
    # Ready tasks that git tracks (a clone's, a pull's): never started by the queue, and not waited for either,
    # or `queue run` would wait for them forever.
    skipped_tracked: list[int] = field(default_factory=list)
    blocked: str | None = None  # why nothing new starts (a budget is exceeded)
    # Waiting tasks that cannot start by themselves: task id -> the failed task it waits on (through its blockers).
    stuck: dict[int, int] = field(default_factory=dict)
    worktrees: dict[int, str] = field(default_factory=dict)  # task id -> its worktree, for each task above
    # Waiting tasks held up by a task that is not failed and that this queue neither starts nor finishes: task id
    # -> (that task, what it is). The run goes on waiting (a person may finish it), and says so.
    waiting_on: dict[int, tuple[int, str]] = field(default_factory=dict)

    def add(self, later: StepReport) -> None:
        """Fold a later pass into this one: what happened adds up, what is now (running, waiting, blocked,
        skipped) is the later pass's. `queue run` said `started: -` after starting two tasks in earlier passes."""
        self.started += later.started
        self.started_tasks += later.started_tasks
        self.worktrees.update(later.worktrees)
        self.completed += later.completed
        self.failed += later.failed
        self.stopped += later.stopped
        self.errors += later.errors
        self.running = later.running
        self.waiting_tasks = later.waiting_tasks
        self.skipped_tracked = later.skipped_tracked
        self.blocked = later.blocked
        self.stuck = later.stuck
        self.waiting_on = later.waiting_on

    def to_dict(self) -> dict[str, Any]:
        return {"started": self.started, "started_tasks": self.started_tasks,
                "worktrees": {str(k): v for k, v in self.worktrees.items()}, "completed": self.completed,
                "failed": self.failed,
                "stopped": self.stopped, "errors": self.errors, "running": self.running,
                "waiting_tasks": self.waiting_tasks, "skipped_tracked": self.skipped_tracked,
                "blocked": self.blocked, "stuck": {str(k): v for k, v in self.stuck.items()},
                "waiting_on": waiting_on_dict(self.waiting_on)}


def waiting_on_dict(waiting_on: dict[int, tuple[int, str]]) -> dict[str, dict[str, Any]]:
    """`waiting_on` in --json: {"3": {"task": 2, "why": "in progress, owned by alice"}}."""
    return {str(k): {"task": task, "why": why} for k, (task, why) in sorted(waiting_on.items())}


@dataclass(frozen=True)
class QueueEvent:
    """One thing a pass did, told as it happens (a pass that starts two agents can take a minute)."""

    kind: str  # started | completed | failed | stopped
    task_id: int
    worktree: str
    detail: str = ""

    def line(self) -> str:
        """The line `queue run` prints for it."""
        if self.kind == "started":
            return f"started task {self.task_id} in {self.worktree} ({self.detail})"
        if self.kind == "completed":
            return f"completed task {self.task_id} ({self.worktree} exited 0{', ' if self.detail else ''}{self.detail})"
        if self.kind == "failed":
            return f"failed task {self.task_id}: {self.worktree} {self.detail}"
        return f"stopped {self.worktree} (task {self.task_id}): {self.detail}"


def is_waiting(task: Task) -> bool:
    """Pending, with an agent, unowned and bound to no worktree here or on a host: the queue's to start once its
    blockers complete (a task freed after its session was stopped keeps its worktree, and is a person's)."""
    return (task.status == TaskStatus.PENDING and not task.owner and not task.worktree
            and bool(task.extra.get("agent")) and not task.extra.get("remote"))


def is_ready(task: Task, by_id: dict[int, Task]) -> bool:
    if not is_waiting(task):
        return False
    return all(dep in by_id and by_id[dep].status == TaskStatus.COMPLETED for dep in task.blockedBy)


def is_failed(task: Task) -> bool:
    return task.status != TaskStatus.COMPLETED and task.owner.startswith(FAILED_OWNER)


def stuck_behind_failures(tasks: list[Task]) -> dict[int, int]:
    """Waiting tasks that no queue will ever start by itself: each with the failed task it waits on (directly or
    through its blockers). `queue run` waited on them forever, silently."""
    by_id = {t.id: t for t in tasks}
    memo: dict[int, int | None] = {}

    def failed_blocker(task_id: int, seen: frozenset[int]) -> int | None:
        if task_id in memo:
            return memo[task_id]
        task = by_id.get(task_id)
        found: int | None = None
        if task is not None and task.id not in seen:
            for dep in task.blockedBy:
                blocker = by_id.get(dep)
                if blocker is None or blocker.status == TaskStatus.COMPLETED:
                    continue
                found = dep if is_failed(blocker) else failed_blocker(dep, seen | {task.id})
                if found is not None:
                    break
        memo[task_id] = found
        return found

    stuck = {t.id: failed_blocker(t.id, frozenset()) for t in tasks if is_waiting(t)}
    return {task: blocker for task, blocker in stuck.items() if blocker is not None}


def held_by(task: Task) -> str:
    """What a blocker is, when it is neither completed, nor failed, nor this queue's to start or finish."""
    where = task.where
    if task.status == TaskStatus.IN_PROGRESS:
        return f"in progress{f' in {where}' if where else ''}, owned by {task.owner or 'nobody'}"
    if task.owner:
        return f"pending, owned by {task.owner}"
    if where:
        return f"pending, bound to {where}: started there, not by a queue"
    return "pending, with no agent: the queue starts only tasks given one (task create --agent)"


def waiting_on_others(tasks: list[Task], ours: Callable[[Task], bool]) -> dict[int, tuple[int, str]]:
    """Waiting tasks held up by a task that is not failed (`stuck_behind_failures` has those) and that no pass of
    this queue starts or finishes (owned by a person, in progress elsewhere, with no agent, missing): each with
    that task, directly or through its blockers, and what it is (`held_by`). `ours`: a task this queue has
    claimed, started or placed. `queue run` waited on them silently."""
    by_id = {t.id: t for t in tasks}
    memo: dict[int, tuple[int, str] | None] = {}

    def holder(task_id: int, seen: frozenset[int]) -> tuple[int, str] | None:
        if task_id in memo:
            return memo[task_id]
        found: tuple[int, str] | None = None
        task = by_id[task_id]
        for dep in task.blockedBy:
            blocker = by_id.get(dep)
            if blocker is None:
                found = (dep, "no such task")
            elif blocker.status == TaskStatus.COMPLETED or is_failed(blocker) or ours(blocker) \
                    or blocker.id in seen:
                continue
            elif is_waiting(blocker):
                found = holder(dep, seen | {task_id})  # the queue starts it once what it waits on is done
            else:
                found = (dep, held_by(blocker))
            if found is not None:
                break
        memo[task_id] = found
        return found

    held = {t.id: holder(t.id, frozenset()) for t in tasks if is_waiting(t)}
    return {task: why for task, why in held.items() if why is not None}


class QueueRunner:
    """One pass at a time: reap what finished, stop what overran, start what is ready."""

    def __init__(self, ops: Operations, observer: SessionObserver) -> None:
        self.ops = ops  # how a ready task starts: the same operation, and checks, as the dashboard's enter on it
        self.project = ops.services.project
        self.tasks = ops.services.tasks
        self.sessions = ops.services.sessions
        self.observer = observer
        self._blocked_reason: str | None = None
        self._on_event: Callable[[QueueEvent], None] | None = None
        self._untold: list[QueueEvent] = []

    def _tell(self, event: QueueEvent) -> None:
        """Told once the lock is let go (`_flush`): a reader that is slow to read must not hold up the lock."""
        self._untold.append(event)

    def _flush(self) -> None:
        told, self._untold = self._untold, []
        if self._on_event is not None:
            for event in told:
                self._on_event(event)

    def claim(self, limit: int) -> list[Task]:
        """Claim up to `limit` ready tasks, atomically."""
        if limit <= 0:
            return []
        owner = f"{QUEUE_OWNER}:{os.getpid()}"
        with self.project.lock.hold():
            tasks = self.tasks.list()
            by_id = {t.id: t for t in tasks}
            ready = [t for t in tasks if is_ready(t, by_id)]
            tracked = self.tasks.tracked_ids() if ready else set()
            claimed: list[Task] = []
            for task in ready:
                if len(claimed) >= limit:
                    break
                if task.id not in tracked:
                    task.owner = owner
                    self.tasks.save(task)
                    claimed.append(task)
            for task in claimed:
                self.project.events.append("task.updated", task=task.brief(), owner=owner, reason="claimed")
        return claimed

    def step(self, on_event: Callable[[QueueEvent], None] | None = None) -> StepReport:
        """One pass; `on_event` hears of each start, completion, failure and stop as it happens."""
        self._on_event = on_event
        try:
            return self._step()
        finally:
            self._flush()
            self._on_event = None

    def _step(self) -> StepReport:
        report = StepReport()
        observed = self.observer.poll()  # a runner that keeps running records what it sees (and enforces budgets)
        infos = list(observed.sessions)
        self._enforce_time_limits(infos, report)
        self._reap(infos, report)
        self._flush()
        running = [i for i in infos if str(i.status) != "exited"]
        report.running = len(running)
        capacity = self.project.config.max_sessions - len(running)
        report.blocked = observed.budget.reason if observed.budget is not None else None
        if report.blocked:
            capacity = 0  # nothing new starts until the user raises the limit
        if report.blocked != self._blocked_reason:
            self.project.events.append("queue.blocked" if report.blocked else "queue.unblocked", reason=report.blocked)
            self._blocked_reason = report.blocked
        for task in self.claim(capacity):
            try:
                self._start(task, report)
            except DaintreeError as exc:
                report.errors.append(f"task {task.id}: {exc}")
                with self.project.lock.hold():
                    current = self.tasks.get(task.id)
                    current.owner = f"{FAILED_OWNER}start"
                    self.tasks.save(current)
                self.project.events.append("task.updated", task=current.brief(), error=f"could not start: {exc}")
        tasks = self.tasks.list()
        waiting = [t.id for t in tasks if is_waiting(t)]
        tracked = self.tasks.tracked_ids() if waiting else set()
        report.skipped_tracked = sorted(i for i in waiting if i in tracked)
        report.waiting_tasks = len(waiting) - len(report.skipped_tracked)
        report.stuck = {k: v for k, v in stuck_behind_failures(tasks).items() if k not in tracked}
        owner = f"{QUEUE_OWNER}:{os.getpid()}"
        report.waiting_on = {k: v for k, v in waiting_on_others(tasks, lambda t: t.owner == owner).items()
                             if k not in tracked}
        report.running += len(report.started)  # what runs after this pass (`--once` said 0 beside three started)
        return report

    def _start(self, task: Task, report: StepReport) -> None:
        # An agent that cannot start (unknown, not installed, untrusted) is said before its worktree exists.
        created = self.ops.start_for_task(task.id, agent=str(task.extra["agent"]))
        assert created.session is not None
        name = created.entry.name
        report.started.append(name)
        report.started_tasks.append(task.id)
        report.worktrees[task.id] = name
        self._tell(QueueEvent("started", task.id, name, f"agent {created.session.agent}"))
        self._flush()

    def _reap(self, infos: list[SessionInfo], report: StepReport) -> None:
        """Queue-owned tasks whose session exited: complete them (exit 0) or mark them failed."""
        exited = {i.name: i for i in infos if str(i.status) == "exited"}
        if not exited:
            return
        with self.project.lock.hold():
            for task in self.tasks.list():
                info = exited.get(task.worktree)
                ours = task.owner.startswith(f"{QUEUE_OWNER}:") and task.status == TaskStatus.IN_PROGRESS
                if info is None or not ours or info.exit_code is None:
                    continue  # not ours, or tmux has not reported the exit code yet
                if info.exit_code == 0:
                    task.status = TaskStatus.COMPLETED
                    task.owner = QUEUE_OWNER
                    self.tasks.save(task)
                    self.project.events.append("task.completed", task=task.brief(), worktree={"name": task.worktree})
                    report.completed.append(task.id)
                    report.worktrees[task.id] = task.worktree
                    self._tell(QueueEvent("completed", task.id, task.worktree, "kept for review"))
                    with suppressed(DaintreeError):
                        self.ops.keep(task.worktree)
                else:
                    task.owner = f"{FAILED_OWNER}{info.exit_code}"
                    self.tasks.save(task)
                    self.project.events.append("task.updated", task=task.brief(), worktree={"name": task.worktree},
                                               error=f"session exited {info.exit_code}")
                    report.failed.append(task.id)
                    report.worktrees[task.id] = task.worktree
                    self._tell(QueueEvent("failed", task.id, task.worktree, f"exited {info.exit_code}"))

    def _enforce_time_limits(self, infos: list[SessionInfo], report: StepReport) -> None:
        presets = all_presets(self.project.config)
        now = time.time()
        for info in infos:
            preset = presets.get(info.agent)
            if preset is None or preset.max_minutes is None or str(info.status) == "exited":
                continue
            if now - info.started_at > preset.max_minutes * 60:
                self.sessions.stop(info.name)
                self.project.events.append("session.timeout", worktree={"name": info.name}, agent=info.agent,
                                           max_minutes=preset.max_minutes)
                report.stopped.append(info.name)
                with self.project.lock.hold():
                    for task in self.tasks.list():
                        if task.worktree == info.name and task.owner.startswith(f"{QUEUE_OWNER}:"):
                            task.owner = f"{FAILED_OWNER}timeout"
                            self.tasks.save(task)
                            self._tell(QueueEvent("stopped", task.id, info.name,
                                                  f"ran past max_minutes = {preset.max_minutes:g}"))

    def run(self, once: bool = False, interval: float = 2.0,
            on_step: Callable[[StepReport], None] | None = None,
            stop: threading.Event | None = None,
            on_event: Callable[[QueueEvent], None] | None = None) -> StepReport:
        """Step until nothing is left to start or running (or once, or until `stop` is set: between two passes,
        never inside one). Returns the whole run's report: every pass's starts, completions, failures, stops and
        errors, with the last pass's counts of what runs and waits. `on_step` sees every pass (the CLI prints each
        pass's errors as they happen), `on_event` every start, completion, failure and stop."""
        interval = validate.finite_number(interval, "--interval", minimum=0.05, maximum=3600)
        stop = stop or threading.Event()
        total = StepReport()
        while True:
            report = self.step(on_event)
            total.add(report)
            if on_step is not None:
                on_step(report)
            # Nothing runs and nothing more can start: every task still waiting waits on a failed one (said by
            # the caller from `stuck`), or a budget is exceeded.
            if once or (report.running == 0 and not report.started
                        and (report.waiting_tasks <= len(report.stuck) or report.blocked)):
                return total
            if stop.wait(interval):
                return total
