"""The checks every operation runs, and the operations on worktrees and their sessions: create (with a task and
a session, in one go), start and stop a session, remove, keep, reclaim disk, free the tasks a queue left
stranded. `Operations` is `Services.ops`, the one entry point; it holds the other jobs' parts (the package's
docstring lists them).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from daintree_tui.core import trust
from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.models import Task, TaskStatus, WorktreeEntry
from daintree_tui.core.worktrees import slugify, validate_name
from daintree_tui.services.operations.bakeoff import BakeoffOps
from daintree_tui.services.operations.checkpoints import CheckpointOps
from daintree_tui.services.operations.landing import LandingOps
from daintree_tui.services.operations.review import ReviewOps

if TYPE_CHECKING:
    from daintree_tui.core.deps import DepsReport
    from daintree_tui.core.worktrees import RemoveResult
    from daintree_tui.services.container import Services
    from daintree_tui.services.hygiene import GcReport
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.sessions.presets import Preset


QUEUE_PREFIXES = ("queue:", "host-queue:")
"""Owners a queue runner writes (`queue:<pid>` once it started the task, `host-queue:<pid>` while it places it)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Created:
    """What a create made: the worktree and what it got from the primary (files copied, dirs linked), and the
    session and the task when the operation started or made them."""

    entry: WorktreeEntry
    provided: DepsReport
    session: SessionInfo | None = None
    task: Task | None = None

    def to_dict(self) -> dict[str, Any]:
        """What `worktree create --json` prints: the index entry, what was copied and linked, and the session."""
        data = {**self.entry.to_dict(), **self.provided.to_dict()}
        if self.session is not None:
            data["session"] = self.session.to_dict()
        return data


@dataclass(frozen=True)
class Queued:
    """A command a session's role sends to a person: approval request `request` will run `daintree ARGV`."""

    request: int
    argv: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"queued": True, "request": self.request}


class Operations:
    """The user operations of one project's services (`Services.ops`): the checks and the worktree and session
    operations here, the other jobs in its parts."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.landing = LandingOps(self)
        self.review = ReviewOps(self)
        self.checkpoints = CheckpointOps(self)
        self.bakeoff = BakeoffOps(self)

    # -- the checks --------------------------------------------------------------------------------------------

    def startable(self, agent: str | None, *, prompt: str | None = None, worktrees: Sequence[str] = ()) -> Preset:
        """The agent a session would start (`agent`, else the default agent), checked as every start is before
        anything is made: a known preset, its program installed, a first prompt it can take, its command trusted,
        a session host, and each of `worktrees` a session name no other repository holds on a shared server.

        Raises:
            InputError: an unknown agent, one not installed, a prompt it takes none of.
            OperationError: an untrusted agent command (naming `daintree trust`), no tmux, a foreign session.
        """
        preset = self.services.sessions.preset(agent)
        self.check_agent(preset, prompt)
        self.check_host(worktrees)
        return preset

    def check_agent(self, preset: Preset, prompt: str | None = None) -> None:
        """`preset`'s program installed, `prompt` one it takes, its command trusted (a bake-off checks each of its
        agents so, before any candidate exists)."""
        from daintree_tui.sessions.presets import refuse_prompt_for

        preset.check_program()
        refuse_prompt_for(preset, prompt)
        # The agent's command may come from the repository's .daintree.toml: it runs only once trusted. Said here,
        # before a create that would start it: the sessions layer says it too, but only once the worktree exists.
        trust.require_agent_trusted(self.services.project.config, preset.name)

    def police(self, caller: str | None, action: str, argv: list[str] | Callable[[], list[str]], *,
               queue: bool = True) -> Queued | None:
        """What the role of the session `caller` (its worktree; None: a person's own call) allows for `action`
        (commit, merge, pr, remove), asked before the operation by each face a session reaches it through: its CLI
        calls, its MCP tools, its inbox. Returns None to go ahead, or the approval request `argv` (the command as
        `daintree ARGV`, or what makes it: called once the role allowed the action, so a denial is said and
        logged first) was queued as when a person must approve. With `queue=False` (a command no approval request
        can hold: only `worktree ACTION NAME ...` is replayed) a person's approval is a refusal naming the command.

        Raises:
            OperationError: the role may not (`policy.denied`), it needs a person's approval and `queue` is False,
                or its checks (pre_merge hooks) failed.
            InputError: a command to queue with a `--` in it (replayed, only `worktree ACTION NAME ...` is kept).
        """
        services = self.services
        project = services.project
        if caller is None or not project.is_git:
            if callable(argv):
                argv()
            return None
        from daintree_tui.services.policy import decide

        decision = decide(project, caller, action)
        if not decision.allowed:
            project.events.append("policy.denied", worktree={"name": caller}, action=action, role=decision.role)
            raise OperationError(f"policy: {decision.reason} (ask a person to run it)")
        argv = argv() if callable(argv) else argv
        if decision.approval == "human" and not queue:
            project.events.append("policy.denied", worktree={"name": caller}, action=action, role=decision.role,
                                  error="needs a person's approval")
            raise OperationError(f"policy: role {decision.role!r} needs a person's approval to {action} (ask a "
                                 f"person to run `daintree {' '.join(argv)}`)")
        if decision.approval == "human":
            if "--" in argv:
                # A request is replayed as `daintree ARGV --repo ROOT`, and only `worktree ACTION NAME ...` is kept
                # (validate.approval_problem): one with `--` was queued, then skipped as malformed, never approved.
                raise InputError("a request for approval takes no `--`: write the worktree name right after the "
                                 "action")
            record = services.approvals.request(caller, action, argv, decision.role)
            return Queued(record.id, argv)
        if decision.approval in ("checks", "checks+review"):
            from daintree_tui.core.hooks import run_hooks
            from daintree_tui.core.index import find

            entry = find(services.index.load(), caller)
            if entry is not None:
                try:
                    run_hooks(project, "pre_merge", entry)
                except DaintreeError as exc:
                    project.events.append("policy.denied", worktree={"name": caller}, action=action,
                                          role=decision.role, error=str(exc))
                    raise OperationError(f"policy: checks failed: {exc}") from None
        return None

    def check_host(self, names: Sequence[str]) -> None:
        """A session host, and each of `names` a session name no other repository holds on a shared server."""
        host = self.services.sessions.host  # raises the clear "tmux is not installed" error
        for name in names:
            host.refuse_foreign(name)

    # -- worktrees and their sessions --------------------------------------------------------------------------

    def create(self, name: str, *, task_id: int | None = None, base: str | None = None, agent: str | None = None,
               prompt: str | None = None, size: tuple[int, int] | None = None) -> Created:
        """Worktree `name` (bound to task `task_id`, from `base`) and, with `agent`, a session of that agent in it.

        Everything is validated first (docs/design.md 3: a rejected input emits nothing): the name, the agent, the host.
        A session that fails to start after the worktree was made leaves the worktree (it may hold copied files)
        and says how to retry.
        """
        validate_name(name)
        if prompt is not None and not agent:
            raise InputError("--prompt is the first prompt of the session --agent starts: give --agent PRESET too")
        preset = self.startable(agent, prompt=prompt, worktrees=[name]) if agent else None
        entry, provided = self.services.worktrees.create_reporting(name, task_id=task_id, base=base)
        if preset is None:
            return Created(entry, provided)
        try:
            session = self.services.sessions.start(entry.name, preset.name, prompt=prompt, size=size)
        except DaintreeError as exc:
            raise type(exc)(f"created worktree {entry.name}, but its session did not start: {exc} "
                            f"(retry: daintree session start {entry.name} --agent {preset.name})") from None
        return Created(entry, provided, session)

    def quick_create(self, subject: str, description: str = "", *, agent: str | None = None,
                     base: str | None = None, size: tuple[int, int] | None = None) -> Created:
        """A task, a worktree named from its subject's slug and a session of `agent` (else the default agent) on
        it, in one go (the dashboard's `n`). Without a session host (no tmux, no PTY fallback), no session."""
        services = self.services
        name = self.free_name(subject)
        if services.host is not None:
            preset = self.startable(agent, worktrees=[name])
        else:
            preset = services.sessions.preset(agent)
            preset.check_program()
        task = services.tasks.create(subject, description)
        entry, provided = services.worktrees.create_reporting(name, task_id=task.id, base=base or None)
        session = services.sessions.start(entry.name, preset.name, size=size) if services.host is not None else None
        return Created(entry, provided, session, task)

    def start_for_task(self, task_id: int, *, agent: str | None = None, name: str | None = None,
                       size: tuple[int, int] | None = None) -> Created:
        """A worktree for task `task_id` (`name`, else one from its subject) with a session of `agent` (else the
        default agent) given the task as its first prompt: the dashboard's enter on a task, the queue's start."""
        services = self.services
        task = services.tasks.get(task_id)
        name = name or self.free_name(task.subject)
        preset = self.startable(agent, worktrees=[name])
        entry, provided = services.worktrees.create_reporting(name, task_id=task.id)
        session = services.sessions.start(entry.name, preset.name, size=size)
        return Created(entry, provided, session, task)

    def free_name(self, subject: str, limit: int = 40) -> str:
        """A worktree name for `subject` that no live worktree and no branch uses yet."""
        return self.services.worktrees.free_name(slugify(subject, limit=limit))

    def start_session(self, name: str, agent: str | None = None, *, prompt: str | None = None,
                      size: tuple[int, int] | None = None, resume: bool = False, restart: bool = False,
                      use_task_prompt: bool = True) -> SessionInfo:
        """Start `agent` in worktree `name` (without `agent`: the agent its last session ran, else the default
        agent: `session stop W` then `session start W` on a worktree made with `--agent codex` had started the
        default agent). `restart` replaces a running session; everything that can refuse is checked before it is
        stopped, so a refused restart leaves the running agent alone. `resume` continues the agent's last
        conversation."""
        services = self.services
        services.project.require_git()
        services.sessions.require_known(name)  # a typo is named as such, before anything about the agent
        if agent is None:
            record = services.sessions.record(name)
            agent = record.agent if record is not None else None
        preset = self.startable(agent, prompt=None if resume else prompt, worktrees=[name])
        if restart:
            sized = {} if size is None else {"size": size}
            return services.sessions.restart(name, preset.name, prompt=prompt, resume=resume, **sized)
        return services.sessions.start(name, preset.name, prompt=prompt, size=size, resume=resume,
                                       use_task_prompt=use_task_prompt)

    def stop_session(self, name: str) -> bool:
        """Stop worktree `name`'s agent. Its task, when a queue had it in progress, is freed: pending, unowned,
        still bound to the worktree (enter starts it again; no queue starts it a second time). It stayed
        `in_progress` owned by `queue:<pid>`, and nothing would ever reap it."""
        stopped = self.services.sessions.stop(name)
        if stopped:
            self._free(lambda task: task.worktree == name and task.status == TaskStatus.IN_PROGRESS
                       and task.owner.startswith(QUEUE_PREFIXES), f"its session in {name} was stopped")
        return stopped

    def stranded_tasks(self, *, fix: bool) -> list[str]:
        """Tasks a queue owns that no queue will finish (what `doctor` finds, and with `fix` frees: pending,
        unowned, their worktree binding kept): owned by a queue whose process is gone (`queue:<pid>`, a claim
        `host-queue:<pid>`), or in progress with their worktree's session stopped."""
        services = self.services
        listed: set[str] | None = None  # the sessions there are, running or exited (a stopped one is none of them)
        if services.host is not None:
            try:
                listed = {i.name for i in services.sessions.list(with_screens=False)}
            except DaintreeError:
                listed = None
        found: dict[int, str] = {}
        for task in services.tasks.list():
            if task.status == TaskStatus.COMPLETED or not task.owner.startswith(QUEUE_PREFIXES):
                continue
            pid = task.owner.rsplit(":", 1)[1]
            if pid.isdigit() and not _alive(int(pid)):
                found[task.id] = f"task {task.id} is owned by {task.owner}, a queue that no longer runs"
            elif task.status == TaskStatus.IN_PROGRESS and task.worktree and listed is not None \
                    and task.worktree not in listed and services.sessions.record(task.worktree) is not None:
                # Only a session that started: a live queue binds its task, then runs post_create hooks (minutes)
                # before the session; freed meanwhile, the task was no longer the queue's when its agent exited.
                found[task.id] = f"task {task.id} is in progress in {task.worktree}, whose session was stopped"
        if fix and found:
            self._free(lambda task: task.id in found, "stranded (daintree doctor --fix)")
        return [f"{text}: {'back to pending' if fix else 'doctor --fix returns it to pending'}"
                for _, text in sorted(found.items())]

    def _free(self, which: Callable[[Task], bool], reason: str) -> list[int]:
        services = self.services
        freed: list[Task] = []
        with services.project.lock.hold():
            for task in services.tasks.list():
                if which(task):
                    task.status, task.owner = TaskStatus.PENDING, ""
                    services.tasks.save(task)
                    freed.append(task)
        for task in freed:
            services.project.events.append("task.updated", task=task.brief(), owner="", reason=reason)
        return [t.id for t in freed]

    def keep(self, name: str) -> WorktreeEntry:
        return self.services.worktrees.keep(name)

    def remove(self, name: str, *, force: bool = False, complete_task: bool = False, delete_branch: bool = False,
               discard: list[str] | None = None) -> RemoveResult:
        """Remove worktree `name` (docs/design.md 3). `force` discards uncommitted work (only the files of `discard`
        when given: what the dashboard's dialog listed); it is a person's choice, never a sandboxed caller's."""
        self.check_remove(name, force=force)
        return self.services.worktrees.remove(name, force=force, complete_task=complete_task,
                                              delete_branch=delete_branch, discard=discard)

    def check_remove(self, name: str, *, force: bool) -> None:
        """Refuse a forced remove asked for by a sandboxed session (through its inbox): discarding work is a
        person's choice, and a sandboxed lead may not make it for the worktrees of other agents."""
        from daintree_tui.core.sandbox import sandboxed_caller

        if force and sandboxed_caller() is not None:
            raise OperationError(f"force is not available from inside a sandbox (a person may run `daintree "
                                 f"worktree remove {name} --force`)")

    def gc(self, *, older_than_days: float = 14.0, dry_run: bool = False) -> GcReport:
        """Reclaim disk: git's stale records, logs and temp dirs of removed worktrees, and kept worktrees that are
        clean, merged and older than the limit (each removed with its branch). A dirty worktree is never touched."""
        from daintree_tui.services.hygiene import collect

        return collect(self.services.worktrees, lambda name: self.remove(name, delete_branch=True),
                       older_than_days=older_than_days, dry_run=dry_run)
