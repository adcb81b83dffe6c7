"""The queue across hosts: ready tasks of this repository go to remote hosts by free slots.

A placed task becomes, on its host, a task with the same subject, description and agent, a worktree bound to it
and a session running the agent, all through that host's own CLI. Here the task stays `in_progress`, owned by
`host:<name>`, with `remote = {host, task, worktree}` among its fields; it completes here when its session there
exits 0 (and is marked `queue-failed:<code>` otherwise), as the local queue does.

Claims are writes under this repository's lock, so two runners never place one task twice.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.log import suppressed
from daintree_tui.core.models import Task, TaskStatus
from daintree_tui.core.project import Project
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.validate import name_problem
from daintree_tui.core.worktrees import slugify
from daintree_tui.services import host_answers as answers
from daintree_tui.services.host_answers import MAX_ID
from daintree_tui.services.hosts_feed import HostsFeed, HostState, free_slots, place
from daintree_tui.services.queue import (
    FAILED_OWNER,
    QueueEvent,
    is_ready,
    is_waiting,
    stuck_behind_failures,
    waiting_on_dict,
    waiting_on_others,
)
from daintree_tui.services.remote import RemoteHost

HOST_OWNER = "host:"
CLAIM_OWNER = "host-queue:"
CREATE_FAILED_OWNER = "create-failed"
NAME_ATTEMPTS = 5


@dataclass
class HostStepReport:
    placed: dict[str, list[int]] = field(default_factory=dict)  # host -> local task ids started there
    completed: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    stopped: list[int] = field(default_factory=list)  # their session there was stopped: the task is freed
    errors: list[str] = field(default_factory=list)
    free: dict[str, int] = field(default_factory=dict)
    unreachable: list[str] = field(default_factory=list)
    host_errors: dict[str, str] = field(default_factory=dict)  # host -> why its answer was refused this pass
    waiting_tasks: int = 0
    in_flight: int = 0  # placed and not finished there yet, after this pass
    worktrees: dict[int, str] = field(default_factory=dict)  # task id -> `worktree@host` it was placed as
    stuck: dict[int, int] = field(default_factory=dict)  # waiting task -> the failed task it waits on
    # waiting task -> (the task it waits on that is not failed and no pass of ours finishes, what that is)
    waiting_on: dict[int, tuple[int, str]] = field(default_factory=dict)

    def add(self, later: HostStepReport) -> None:
        """Fold a later pass into this one: what happened adds up; what is now (free, waiting...) is the later's."""
        for host, ids in later.placed.items():
            self.placed.setdefault(host, []).extend(ids)
        self.completed += later.completed
        self.failed += later.failed
        self.stopped += later.stopped
        self.errors += later.errors
        self.worktrees.update(later.worktrees)
        self.free, self.unreachable, self.host_errors = later.free, later.unreachable, later.host_errors
        self.waiting_tasks, self.in_flight, self.stuck = later.waiting_tasks, later.in_flight, later.stuck
        self.waiting_on = later.waiting_on

    def to_dict(self) -> dict[str, Any]:
        return {"placed": self.placed, "completed": self.completed, "failed": self.failed, "stopped": self.stopped,
                "errors": self.errors, "free": self.free, "unreachable": self.unreachable,
                "host_errors": self.host_errors, "waiting_tasks": self.waiting_tasks, "in_flight": self.in_flight,
                "worktrees": {str(k): v for k, v in self.worktrees.items()},
                "stuck": {str(k): v for k, v in self.stuck.items()}, "waiting_on": waiting_on_dict(self.waiting_on)}


class HostQueue:
    """One pass at a time: reap what finished on the hosts, then fill their free slots with ready tasks."""

    def __init__(self, project: Project, hosts: Sequence[RemoteHost], feed: HostsFeed | None = None) -> None:
        if not hosts:
            raise InputError("no hosts to place tasks on")
        self.project = project
        self.tasks = TaskService(project)
        self.hosts = {h.name: h for h in hosts}
        self.feed = feed if feed is not None else HostsFeed(list(hosts))

    def step(self, on_event: Callable[[QueueEvent], None] | None = None) -> HostStepReport:
        """One pass; `on_event` hears of each placement, completion, failure and stop as it happens."""
        tell = on_event or (lambda event: None)
        report = HostStepReport()
        states = self.feed.poll()
        report.unreachable = [name for name, s in states.items() if s.status == "unreachable"]
        # A host that answered what we cannot use (junk, too much): nothing is placed or reaped there this pass.
        report.host_errors = {name: str(s.error) for name, s in states.items() if s.status == "error"}
        self._reap(states, report, tell)
        report.free = free_slots(states)
        claimed = self.claim(sum(report.free.values()))
        for task, host_name in place(claimed, report.free):
            try:
                created = self._start(task, self.hosts[host_name], states[host_name])
            except DaintreeError as exc:
                report.errors.append(f"task {task.id} on {host_name}: {exc}")
                self._set_owner(task.id, f"{FAILED_OWNER}start")
                said = str(exc).removeprefix(f"host {host_name} ")  # "host evil could not start: it answered..."
                tell(QueueEvent("failed", task.id, f"host {host_name}",
                                f"could not start: {'it ' if said != str(exc) else ''}{said}"))
                continue
            report.placed.setdefault(host_name, []).append(task.id)
            report.worktrees[task.id] = f"{created.name}@{host_name}"
            tell(QueueEvent("started", task.id, f"{created.name}@{host_name}", f"agent {task.extra['agent']}"))
        tasks = self.tasks.list()
        report.waiting_tasks = sum(1 for t in tasks if is_waiting(t))
        report.stuck = stuck_behind_failures(tasks)
        ours = {f"{CLAIM_OWNER}{os.getpid()}", *(f"{HOST_OWNER}{name}" for name in self.hosts)}
        report.waiting_on = waiting_on_others(tasks, lambda t: t.owner in ours)
        report.in_flight = len(self.in_flight())
        return report

    def run(self, once: bool = False, interval: float = 5.0, *, stop: threading.Event | None = None,
            on_event: Callable[[QueueEvent], None] | None = None,
            on_step: Callable[[HostStepReport], None] | None = None) -> HostStepReport:
        """Step until nothing is left to place and nothing placed still runs (or once, or until `stop` is set:
        between two passes); what is left waiting only on failed tasks ends it too. Returns the whole run's
        report: every pass's placements, completions and failures, with the last pass's counts."""
        stop = stop or threading.Event()
        total = HostStepReport()
        while True:
            report = self.step(on_event)
            total.add(report)
            if on_step is not None:
                on_step(report)
            if once or (report.in_flight == 0 and report.waiting_tasks <= len(report.stuck)):
                return total
            if stop.wait(interval):
                return total

    def in_flight(self) -> list[Task]:
        """Tasks of ours placed on a host and not finished there yet."""
        return [t for t in self.tasks.list() if t.status == TaskStatus.IN_PROGRESS
                and t.owner.startswith(HOST_OWNER) and isinstance(t.extra.get("remote"), dict)]

    def claim(self, limit: int) -> list[Task]:
        """Up to `limit` ready tasks, claimed under the lock."""
        if limit <= 0:
            return []
        owner = f"{CLAIM_OWNER}{os.getpid()}"
        with self.project.lock.hold():
            tasks = self.tasks.list()
            by_id = {t.id: t for t in tasks}
            ready = [t for t in tasks if is_ready(t, by_id)]
            tracked = self.tasks.tracked_ids() if ready else set()  # see TaskService.tracked_ids
            claimed = [t for t in ready if t.id not in tracked][:limit]
            for task in claimed:
                task.owner = owner
                self.tasks.save(task)
        return claimed

    def _start(self, task: Task, host: RemoteHost, state: HostState) -> RemoteCreated:
        agent = str(task.extra["agent"])
        created = create_on_host(host, task.subject, task.description, agent,
                                 taken={str(w.get("name")) for w in state.worktrees})
        with self.project.lock.hold():
            current = self.tasks.get(task.id)
            current.status = TaskStatus.IN_PROGRESS
            current.owner = f"{HOST_OWNER}{host.name}"
            current.extra["remote"] = {"host": host.name, "task": created.task_id, "worktree": created.name}
            self.tasks.save(current)
        self.project.events.append("task.updated", task=current.brief(), owner=current.owner,
                                   reason=f"placed on host {host.name} as {created.name}")
        return created

    def _set_owner(self, task_id: int, owner: str) -> None:
        with self.project.lock.hold():
            current = self.tasks.get(task_id)
            current.owner = owner
            self.tasks.save(current)

    def _reap(self, states: dict[str, HostState], report: HostStepReport,
              tell: Callable[[QueueEvent], None]) -> None:
        """Tasks placed on a host whose session there exited: complete (0) or mark failed; one whose session is
        gone there (stopped) is freed: pending, unowned, its worktree there named in `remote`. The host's own
        task follows (completed, or owned `queue-failed:<code>`), after the lock is let go."""
        follow: list[tuple[RemoteHost, list[str]]] = []
        told: list[QueueEvent] = []
        with self.project.lock.hold():
            for task in self.tasks.list():
                remote = task.extra.get("remote")
                if task.status != TaskStatus.IN_PROGRESS or not task.owner.startswith(HOST_OWNER) \
                        or not isinstance(remote, dict):
                    continue
                state = states.get(str(remote.get("host")))
                if state is None or state.status != "ok":
                    continue  # unreachable: its agent keeps running there; we look again later
                where = f"{remote.get('worktree')}@{state.name}"
                host = self.hosts.get(state.name)
                session = next((s for s in state.sessions if s.get("name") == remote.get("worktree")), None)
                if session is None:
                    task.status, task.owner = TaskStatus.PENDING, ""
                    self.tasks.save(task)
                    self.project.events.append("task.updated", task=task.brief(), reason=f"its session on host "
                                               f"{state.name} is gone (stopped): freed")
                    report.stopped.append(task.id)
                    report.worktrees[task.id] = where
                    told.append(QueueEvent("stopped", task.id, where, "its session there is gone: the task is "
                                           "pending again"))
                    continue
                if session.get("status") != "exited" or session.get("exit_code") is None:
                    continue
                code = session["exit_code"]  # typed by host_answers.session: an int from -255 to 255
                remote_id = str(remote.get("task"))
                if code == 0:
                    task.status = TaskStatus.COMPLETED
                    self.tasks.save(task)
                    self.project.events.append("task.completed", task=task.brief(),
                                               worktree={"name": remote.get("worktree"), "host": state.name})
                    report.completed.append(task.id)
                    told.append(QueueEvent("completed", task.id, where))
                    update = ["task", "update", remote_id, "--status", "completed"]
                else:
                    task.owner = f"{FAILED_OWNER}{code}"
                    self.tasks.save(task)
                    self.project.events.append("task.updated", task=task.brief(), error=f"session exited {code} on "
                                               f"host {state.name}")
                    report.failed.append(task.id)
                    told.append(QueueEvent("failed", task.id, where, f"exited {code}"))
                    update = ["task", "update", remote_id, "--owner", f"{FAILED_OWNER}{code}"]
                report.worktrees[task.id] = where
                if host is not None and remote_id.isdigit():
                    follow.append((host, update))
        for event in told:
            tell(event)
        for host, update in follow:
            try:
                host.run_json(update)
            except DaintreeError as exc:  # the local task is done either way; the host's board lags, said
                report.errors.append(f"host {host.name}: its task board did not follow: {exc}")


# -- one piece of work on a host ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteCreated:
    """What `create_on_host` made there: the host's task and worktree, typed (host_answers.task and
    host_answers.created_worktree) before they were kept here."""

    host: str
    task: dict[str, Any]
    worktree: dict[str, Any]

    def __post_init__(self) -> None:
        # Built from typed answers only; checked again because a bad id here would be stored in a local task.
        task_id, name = self.task.get("id"), self.worktree.get("name")
        if not isinstance(task_id, int) or isinstance(task_id, bool) or not 1 <= task_id <= MAX_ID \
                or not isinstance(name, str) or name_problem(name, new=False):
            raise OperationError(f"host {self.host}: the task and worktree made there are not a task id and a "
                                 "worktree name")

    @property
    def name(self) -> str:
        return str(self.worktree["name"])

    @property
    def task_id(self) -> int:
        return int(self.task["id"])


def create_task_on_host(host: RemoteHost, subject: str, description: str, agent: str) -> dict[str, Any]:
    """A task made by the host's own CLI. Values go as `--option=value` and the subject after `--`, so text that
    starts with a dash is text there too, never an option. Its answer is typed (host_answers.task): a shape we did
    not ask for is an error the queue handles, never a TypeError that ends the dashboard's host poller with the
    claim left behind."""
    return answers.task(host.name, host.run_json(["task", "create", f"--description={description}",
                                                  f"--agent={agent}", "--", subject]), "task create --json")


def create_on_host(host: RemoteHost, subject: str, description: str, agent: str, *, base: str | None = None,
                   taken: Collection[str] = ()) -> RemoteCreated:
    """A task, a worktree named from its subject bound to it, and a session running `agent`, all made by the
    host's own CLI (what the host queue places and what the dashboard's quick-create does on a host).

    Args:
        taken: worktree names the host already has (from its last poll): not even tried.
    """
    remote_task = create_task_on_host(host, subject, description, agent)
    try:
        worktree = _create_worktree(host, str(remote_task["id"]), slugify(subject, limit=40), agent, base, taken)
    except DaintreeError:
        # The task stays there, owned, so that no queue on the host starts it; the error says what went wrong.
        with suppressed(DaintreeError):
            host.run_json(["task", "update", str(remote_task["id"]), "--owner", CREATE_FAILED_OWNER])
        raise
    return RemoteCreated(host.name, remote_task, worktree)


def _create_worktree(host: RemoteHost, task_id: str, base_name: str, agent: str, base: str | None,
                     taken: Collection[str]) -> dict[str, Any]:
    names = [base_name if n == 1 else f"{base_name}-{n}" for n in range(1, NAME_ATTEMPTS + 1)]
    error: DaintreeError | None = None
    for name in (n for n in names if n not in taken):
        args = ["worktree", "create", name, "--task", task_id, "--agent", agent]
        try:
            made = host.run_json([*args, "--base", base] if base else args)
        except InputError as exc:
            if "exists" not in str(exc):
                raise  # a bad base ref or agent: no other name would help
            error = exc  # the name, its branch or its folder is taken there: the next one
            continue
        # Only the worktree we asked for: its name is shown, keyed and attached here.
        return answers.created_worktree(host.name, made, name)
    raise error or InputError(f"no free worktree name for {base_name!r} on host {host.name}")
