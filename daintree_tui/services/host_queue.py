"""The queue across hosts: ready tasks of this repository go to remote hosts by free slots.

A placed task becomes, on its host, a task with the same subject, description and agent, a worktree bound to it
and a session running the agent, all through that host's own CLI. Here the task stays `in_progress`, owned by
`host:<name>`, with `remote = {host, task, worktree}` among its fields; it completes here when its session there
exits 0 (and is marked `queue-failed:<code>` otherwise), as the local queue does.

Claims are writes under this repository's lock, so two runners never place one task twice.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Sequence
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
from daintree_tui.services.queue import is_ready
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
    errors: list[str] = field(default_factory=list)
    free: dict[str, int] = field(default_factory=dict)
    unreachable: list[str] = field(default_factory=list)
    host_errors: dict[str, str] = field(default_factory=dict)  # host -> why its answer was refused this pass
    waiting_tasks: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"placed": self.placed, "completed": self.completed, "failed": self.failed, "errors": self.errors,
                "free": self.free, "unreachable": self.unreachable, "host_errors": self.host_errors,
                "waiting_tasks": self.waiting_tasks}


class HostQueue:
    """One pass at a time: reap what finished on the hosts, then fill their free slots with ready tasks."""

    def __init__(self, project: Project, hosts: Sequence[RemoteHost], feed: HostsFeed | None = None) -> None:
        if not hosts:
            raise InputError("no hosts to place tasks on")
        self.project = project
        self.tasks = TaskService(project)
        self.hosts = {h.name: h for h in hosts}
        self.feed = feed if feed is not None else HostsFeed(list(hosts))

    def step(self) -> HostStepReport:
        report = HostStepReport()
        states = self.feed.poll()
        report.unreachable = [name for name, s in states.items() if s.status == "unreachable"]
        # A host that answered what we cannot use (junk, too much): nothing is placed or reaped there this pass.
        report.host_errors = {name: str(s.error) for name, s in states.items() if s.status == "error"}
        self._reap(states, report)
        report.free = free_slots(states)
        claimed = self.claim(sum(report.free.values()))
        for task, host_name in place(claimed, report.free):
            try:
                self._start(task, self.hosts[host_name], states[host_name])
            except DaintreeError as exc:
                report.errors.append(f"task {task.id} on {host_name}: {exc}")
                self._set_owner(task.id, "queue-failed:start")
                continue
            report.placed.setdefault(host_name, []).append(task.id)
        report.waiting_tasks = sum(1 for t in self.tasks.list() if t.status == TaskStatus.PENDING
                                   and t.extra.get("agent") and not t.owner)
        return report

    def run(self, once: bool = False, interval: float = 5.0) -> HostStepReport:
        """Step until nothing is left to place and nothing placed still runs (or once); the last pass's report."""
        while True:
            report = self.step()
            if once or (report.waiting_tasks == 0 and not self.in_flight()):
                return report
            time.sleep(interval)

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

    def _start(self, task: Task, host: RemoteHost, state: HostState) -> None:
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

    def _set_owner(self, task_id: int, owner: str) -> None:
        with self.project.lock.hold():
            current = self.tasks.get(task_id)
            current.owner = owner
            self.tasks.save(current)

    def _reap(self, states: dict[str, HostState], report: HostStepReport) -> None:
        """Tasks placed on a host whose session there exited: complete (0) or mark failed."""
        with self.project.lock.hold():
            for task in self.tasks.list():
                remote = task.extra.get("remote")
                if task.status != TaskStatus.IN_PROGRESS or not task.owner.startswith(HOST_OWNER) \
                        or not isinstance(remote, dict):
                    continue
                state = states.get(str(remote.get("host")))
                if state is None or state.status != "ok":
                    continue  # unreachable: its agent keeps running there; we look again later
                session = next((s for s in state.sessions if s.get("name") == remote.get("worktree")), None)
                if session is None or session.get("status") != "exited" or session.get("exit_code") is None:
                    continue
                code = session["exit_code"]  # typed by host_answers.session: an int from -255 to 255
                if code == 0:
                    task.status = TaskStatus.COMPLETED
                    self.tasks.save(task)
                    self.project.events.append("task.completed", task=task.brief(),
                                               worktree={"name": remote.get("worktree"), "host": state.name})
                    report.completed.append(task.id)
                else:
                    task.owner = f"queue-failed:{code}"
                    self.tasks.save(task)
                    self.project.events.append("task.updated", task=task.brief(), error=f"session exited {code} on "
                                               f"host {state.name}")
                    report.failed.append(task.id)


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
