"""Operations: each thing a person (or a lead agent) asks daintree to do, put together once.

The CLI, the dashboard, the queue, the bake-off, the MCP tools and a sandboxed session's inbox call these, and
none of them composes a worktree, a session, a merge or a remove out of the building blocks below, nor runs the
checks that go with one (tests/test_layers.py holds them to it). So every interface refuses the same things:
an agent whose command the repository's untrusted `.daintree.toml` sets (docs/design.md 2a), an agent that is not
installed, a first prompt for an agent that takes none, a session name another repository holds on a shared tmux
server, a forced remove asked for from inside a sandbox. Each operation checks all it can before its first step,
so a refused operation leaves no task, worktree, branch or session behind, and returns a result its caller
shapes into its own words (`--json`, a notification, an MCP tool's answer).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daintree_tui.core import git as g
from daintree_tui.core import trust
from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.log import suppressed, warn
from daintree_tui.core.models import Task, TaskStatus, WorktreeEntry
from daintree_tui.core.worktrees import base_ref_error, slugify, validate_name

if TYPE_CHECKING:
    from daintree_tui.core.checkpoints import Checkpoint, Restored
    from daintree_tui.core.deps import DepsReport
    from daintree_tui.core.radar import RadarReport
    from daintree_tui.core.review import MergeResult
    from daintree_tui.core.review_record import Comment
    from daintree_tui.core.worktrees import RemoveResult
    from daintree_tui.services.bakeoff import Bakeoff
    from daintree_tui.services.container import Services
    from daintree_tui.services.hygiene import GcReport
    from daintree_tui.services.train import TrainProgress, TrainResult
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
class CheckpointDiff:
    """`checkpoint diff`: from one checkpoint (`"base"`: the worktree's base) to another (or `"worktree"`: its
    files now), the paths that differ and the patch."""

    worktree: str
    start: str
    end: str
    files: tuple[str, ...]
    patch: str

    def to_dict(self) -> dict[str, Any]:
        return {"worktree": self.worktree, "from": self.start, "to": self.end, "files": list(self.files),
                "patch": self.patch}


@dataclass(frozen=True)
class Queued:
    """A command a session's role sends to a person: approval request `request` will run `daintree ARGV`."""

    request: int
    argv: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"queued": True, "request": self.request}


class Operations:
    """The user operations of one project's services (`Services.ops`)."""

    def __init__(self, services: Services) -> None:
        self.services = services

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
        self._check_agent(preset, prompt)
        self._check_host(worktrees)
        return preset

    def _check_agent(self, preset: Preset, prompt: str | None = None) -> None:
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

    def _check_host(self, names: Sequence[str]) -> None:
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

    # -- review ------------------------------------------------------------------------------------------------

    def commit(self, name: str, message: str, *, all_changes: bool = False) -> dict[str, Any]:
        return self.services.review.commit(name, message, all_changes=all_changes)

    def merge(self, name: str, *, strategy: str = "ff", into: str | None = None, remove: bool = False,
              complete_task: bool = False, verify: bool = True) -> MergeResult:
        """Merge worktree `name`'s branch into `into` (default: its base branch, else the primary's) through a
        temporary worktree, the target moved only to the tested result. `verify=False` skips the pre_merge
        checks (a person's choice, refused inside a session). Returns the target, the strategy, the commit the
        target now points at and whether the worktree was removed; raises OperationError when it cannot merge
        (diverged for ff, a conflict, a failing check, uncommitted work), with nothing changed."""
        self.require_approved(name, verify=verify)
        # Asked again of the very commit merged, once the merge brought in what the agent committed meanwhile.
        return self.services.review.merge(name, strategy=strategy, into=into, remove=remove,
                                          complete_task=complete_task, verify=verify,
                                          gate=lambda tip: self.require_approved(name, verify=verify, head=tip))

    def pr(self, name: str, *, draft: bool = False) -> dict[str, Any]:
        result = self.services.review.pr(name, draft=draft)
        with suppressed(DaintreeError):
            self.services.reviews.remember_pr(name, str(result.get("url") or ""))  # its checks show from now on
        return result

    # -- the approval gate and the review loop -------------------------------------------------------------------

    def approval_of(self, name: str) -> tuple[str | None, str]:
        """The role worktree `name` acts under (its task's, else its agent's, else `default_role`) and what that
        role's `approval` asks ("none" without roles)."""
        from daintree_tui.services.policy import role_of

        cfg = self.services.project.config
        if not cfg.roles:
            return None, "none"
        role = role_of(self.services.project, name)
        rules = cfg.roles.get(role) if role is not None else None
        return role, rules.approval if rules is not None else "none"

    def approval_missing(self, name: str, *, verify: bool = True, head: str | None = None) -> list[str]:
        """What the worktree's role asks of a merge of its current head that is not there: a person's approval
        of that head (`review`), the pre_merge checks not skipped and its pull request's CI not failing
        (`checks`). Asked by `worktree merge`, the merge train and the dashboard's merge alike; of `head`, the
        commit a merge will take, when it has one in hand (else the branch's, its agent's commits brought in)."""
        _, approval = self.approval_of(name)
        if approval in ("none", "human"):
            return []
        loop = self.services.reviews
        return loop.missing(loop.entry(name), approval, verify=verify, head=head)

    def require_approved(self, name: str, *, verify: bool = True, head: str | None = None) -> None:
        """Raises OperationError (one line naming what is missing) unless `approval_missing` is empty."""
        missing = self.approval_missing(name, verify=verify, head=head)
        if missing:
            role, approval = self.approval_of(name)
            raise OperationError(f"{name} is not approved for a merge (role {role!r}: approval = {approval!r}): "
                                 + "; ".join(missing))

    def ci_checks(self, name: str, *, quick: bool = False) -> dict[str, Any] | None:
        """The CI checks of the pull request `worktree pr` opened for worktree `name` (`gh pr checks`); None
        without one, without gh, or without an answer: nothing shows, nothing fails. `quick` (MCP): answered
        within seconds, the last checks read (with their `age`) when gh is slower (`ReviewLoop.checks`)."""
        loop = self.services.reviews
        try:
            report = loop.checks(loop.load(loop.entry(name)), quick=quick)
        except DaintreeError as exc:
            warn(f"checks of {name}: {exc}")
            return None
        return report.to_dict() if report is not None else None

    def review_get(self, name: str, *, quick: bool = False) -> dict[str, Any]:
        """The review of worktree `name` (`review NAME --json`, MCP `review_get` with `quick`: its CI checks
        within seconds, see `ci_checks`): read only."""
        return self.services.reviews.view(name, quick=quick)

    def review_comment(self, name: str, comments: list[tuple[str, int, str]]) -> list[Comment]:
        """Comments (path, new-side line, text) on worktree `name`'s diff: all checked, then all kept."""
        return self.services.reviews.comment(name, comments)

    def review_send(self, name: str) -> dict[str, Any]:
        """Every unsent comment to the agent as one paste into its live session (or its agent started with it)."""
        return self.services.reviews.send(name)

    def review_send_ci(self, name: str) -> dict[str, Any]:
        return self.services.reviews.send_ci(name)

    def review_verdict(self, name: str, kind: str, message: str = "") -> dict[str, Any]:
        """Approve (`approve`) or request changes on (`request-changes`) the worktree's current head; refused
        from inside a session."""
        self.services.reviews.verdict(name, kind, message)
        return self.review_get(name)

    def conflicts(self, name: str | None = None) -> RadarReport:
        """The radar's predicted conflicts of every live worktree's work (`name`: an unknown one is InputError);
        each worktree read in its sandbox, nothing of it changed."""
        if name is not None:
            self.services.worktrees.get(name, live=True)
        return self.services.radar.scan()

    def conflicts_by_name(self, live: Sequence[Any], facts: Mapping[str, Any]) -> dict[str, list[str]]:
        """name -> the worktrees and branches its work is predicted to conflict with, for `worktree list --json`
        and MCP's `worktree_list` alike (a worktree the facts found clean is read from its branch alone)."""
        report = self.services.radar.scan(list(live), dirty={n: f.dirty for n, f in facts.items() if f.exists})
        for name, why in report.unreadable.items():
            warn(f"radar: {name}: {why}")
        return {e.name: report.others(e.name) for e in live}

    def train(self, names: Sequence[str] | None = None, *, into: str | None = None, strategy: str = "squash",
              test: str | None = None, remove: bool = False, complete_task: bool = False,
              on_progress: Callable[[TrainProgress], None] | None = None) -> list[TrainResult]:
        """Land worktrees one after another, each built and checked in a temporary worktree, the target moved
        only to a tested commit (services/train.py); a person's operation, refused inside a session."""
        return self.services.train.run(names, into=into, strategy=strategy, test=test, remove=remove,
                                       complete_task=complete_task, on_progress=on_progress)

    # -- checkpoints -------------------------------------------------------------------------------------------

    def checkpoint_list(self, name: str, every: bool = False) -> list[Checkpoint]:
        """Worktree `name`'s newest checkpoints (checkpoints.LIST_NEWEST; `every`: all of them), oldest first, ids
        as in the whole chain (core/checkpoints.py); a removed worktree has none."""
        from daintree_tui.core import checkpoints

        services = self.services
        services.project.require_git()
        entry = services.worktrees.get(name)
        newest = None if every else checkpoints.LIST_NEWEST
        return checkpoints.chain(services.project, entry.name, newest) if entry.live else []

    def _checkpointable(self, name: str, what: str) -> WorktreeEntry:
        """A live worktree whose files can be read, asked for by a person: the checkpoints are no agent's to
        write (their ref is read-only in every sandbox, and a lead restoring a worker's files would discard its
        work), so `create` and `restore` are refused from inside a session."""
        from daintree_tui.core.ownership import inside_session

        project = self.services.project
        project.require_git()
        entry = self.services.worktrees.get(name, live=True)
        if inside_session(project):
            raise OperationError(f"daintree checkpoint {what} is refused from inside a session: a person outside "
                                 "it takes and restores checkpoints")
        if not Path(entry.path).is_dir():
            raise OperationError(f"worktree {name} has no folder at {entry.path} (`daintree doctor --fix`)")
        return entry

    def _checkpoint_made(self, entry: WorktreeEntry, made: Checkpoint) -> None:
        services = self.services
        services.project.events.append("checkpoint.created", worktree=entry.brief(), checkpoint=made.id,
                                       commit=made.commit, reason=made.reason, files=made.files,
                                       task=services.tasks.brief_of(entry.task_id))

    def checkpoint_create(self, name: str) -> tuple[Checkpoint | None, Checkpoint | None]:
        """A checkpoint of worktree `name`'s files now, by hand: the new one (None when nothing changed since the
        last) and the newest after (None: there is none, the files are as at the worktree's base)."""
        from daintree_tui.core import checkpoints

        entry = self._checkpointable(name, "create")
        made, newest = checkpoints.take(self.services.project, entry, "manual")
        if made is not None:
            self._checkpoint_made(entry, made)
        return made, newest

    def checkpoint_turn(self, name: str, status: str) -> Checkpoint | None:
        """The checkpoint at the end of an agent's turn (its session went `waiting` or `exited`: the observer
        that recorded it calls this), named after the turn's first prompt where one is known; None when the
        worktree's files are as at its last checkpoint, or it is gone."""
        from daintree_tui.core import checkpoints
        from daintree_tui.core.index import find

        services = self.services
        project = services.project
        entry = find(services.index.load(), name)
        if entry is None or not entry.live or not Path(entry.path).is_dir():
            return None
        newest = checkpoints.last(project, name)
        prompt = services.sessions.turn_prompt(name, newest.ts if newest else 0.0)
        made, _ = checkpoints.take(project, entry, status if status in checkpoints.REASONS else "manual", prompt)
        if made is not None:
            self._checkpoint_made(entry, made)
        return made

    def checkpoint_diff(self, name: str, first: str, second: str | None = None, *,
                        step: bool = False, limit: int | None = None) -> CheckpointDiff:
        """The diff from checkpoint `first` to `second` (default: the worktree's files now); with `step`, what
        checkpoint `first` changed (from the one before it; the first one: from the worktree's base). The patch
        is cut at `limit` bytes (default: checkpoints.DIFF_LIMIT) and says so."""
        from daintree_tui.core import checkpoints
        from daintree_tui.core.work_tree import read_work_tree

        services = self.services
        project = services.project
        project.require_git()
        entry = services.worktrees.get(name, live=True)
        old = checkpoints.resolve(project, name, first)
        if step:
            if second is not None:
                raise InputError("--step shows what one checkpoint changed: give one id")
            before = checkpoints.before(project, old)
            old_tree = before.tree if before else checkpoints.base_tree(project, entry)
            label_from = str(before.id) if before else "base"
            new_tree, label_to = old.tree, str(old.id)
        elif second is not None:
            new = checkpoints.resolve(project, name, second)
            old_tree, label_from, new_tree, label_to = old.tree, str(old.id), new.tree, str(new.id)
        else:
            if not Path(entry.path).is_dir():
                raise OperationError(f"worktree {name} has no folder at {entry.path}")
            old_tree, label_from = old.tree, str(old.id)
            new_tree, _ = read_work_tree(project, entry)
            label_to = "worktree"
        files = checkpoints.changed_paths(project, old_tree, new_tree)
        patch = checkpoints.diff(project, old_tree, new_tree, limit=limit or checkpoints.DIFF_LIMIT) if files else ""
        return CheckpointDiff(name, label_from, label_to, tuple(files), patch)

    def checkpoint_restore(self, name: str, ident: str) -> Restored:
        """Make worktree `name`'s files checkpoint `ident`'s exactly (untracked files of later steps removed,
        ignored files never touched), HEAD, branch and index left as they are. What the files were is
        checkpointed first: restoring that undoes the restore."""
        from daintree_tui.core import checkpoints
        from daintree_tui.core.work_tree import read_work_tree

        services = self.services
        project = services.project
        entry = self._checkpointable(name, "restore")
        target = checkpoints.resolve(project, name, ident)
        tree, head = read_work_tree(project, entry)
        made, before = checkpoints.take(project, entry, "restore", tree=tree, head=head)
        if made is not None:
            self._checkpoint_made(entry, made)
        if before is None:  # no checkpoint at all, though the target is one: it was removed meanwhile
            raise OperationError(f"worktree {name}'s checkpoints went away meanwhile: nothing was restored")
        files, exact = checkpoints.restore(project, entry, target, tree)
        result = checkpoints.Restored(name, target, before, tuple(files), exact)
        project.events.append("checkpoint.restored", worktree=entry.brief(), checkpoint=target.id,
                              commit=target.commit, before=before.id, files=len(files), exact=exact,
                              task=services.tasks.brief_of(entry.task_id))
        return result

    # -- bake-offs ---------------------------------------------------------------------------------------------

    def bakeoff_create(self, task_id: int, agents: list[str], *, score: str | None = None, base: str | None = None,
                       start_sessions: bool = True) -> Bakeoff:
        """One worktree per agent from the same base commit, each running its agent with the task as its prompt.
        Every agent is checked before any candidate exists; a failed create removes the candidates it made."""
        from daintree_tui.services.bakeoff import Bakeoff

        services = self.services
        project = services.project
        project.require_git()
        if not agents:
            raise InputError("a bake-off needs at least one agent (--agents A,B,C)")
        task = services.tasks.get(task_id)
        if task.status == TaskStatus.COMPLETED:
            raise InputError(f"task {task_id} is completed: reopen it first (daintree task update {task_id} "
                             "--status pending)")
        if score:
            trust.remember_command(project, score)
        presets = [services.sessions.preset(a) for a in agents]
        for preset in presets:
            if start_sessions:  # an untrusted agent is refused before any candidate exists
                self._check_agent(preset)
            else:
                preset.check_program()
        base_ref = base or project.config.base
        base_commit = g.rev_parse_commit(project.root, base_ref)
        if base_commit is None:
            raise base_ref_error(project.root, base_ref)
        slug = slugify(task.subject, limit=30)
        names: list[str] = []
        for preset in presets:
            names.append(services.worktrees.free_name(f"{slug}-{preset.name}", also_taken=set(names)))
        if start_sessions:
            self._check_host(names)  # before any worktree: no session host, or a name another repo holds
        bakeoffs = services.bakeoffs
        bakeoff_id = bakeoffs.reserve(task_id)
        created: list[str] = []
        try:
            for name in names:
                services.worktrees.create(name, base=base_commit)
                created.append(name)
                bakeoffs.tag(name, bakeoff_id)
        except Exception:
            for name in created:
                services.worktrees.remove(name, force=True, delete_branch=True)
            bakeoffs.forget(bakeoff_id)
            raise
        record = Bakeoff(bakeoff_id, task_id, "running", agents=tuple(p.name for p in presets),
                         candidates=tuple(names), base_ref=base_ref, base_commit=base_commit, score_command=score,
                         created_at=time.time())
        bakeoffs.update(record)
        with project.lock.hold():
            current = services.tasks.get(task_id)
            current.extra.update({"candidates": names, "bakeoff": bakeoff_id})
            if current.status == TaskStatus.PENDING:
                current.status = TaskStatus.IN_PROGRESS
            services.tasks.save(current)
        if start_sessions:
            for name, preset in zip(names, presets, strict=True):
                prompt = preset.render_prompt(subject=task.subject, description=task.description, worktree=name)
                services.sessions.start(name, preset.name, prompt=prompt)
        project.events.append("bakeoff.created", task=task.brief(), bakeoff=bakeoff_id, candidates=names)
        return record

    def bakeoff_pick(self, bakeoff_id: str, name: str, *, strategy: str = "ff", delete_branches: bool = False,
                     caller: str | None = None) -> dict[str, Any]:
        """Merge the winner through the merge flow, remove the others (never one with uncommitted work),
        complete the task. `caller` is the session asking (its worktree; None: a person): its role must allow
        `merge` (and `remove`, when there are others), and a pick needing a person's approval is refused with the
        command for that person (no approval request can hold a pick)."""
        from daintree_tui.core.merge import STRATEGIES

        if strategy not in STRATEGIES:
            raise InputError(f"invalid strategy {strategy!r} (expected one of: {', '.join(STRATEGIES)})")
        services = self.services
        bakeoffs = services.bakeoffs
        record = bakeoffs.get(bakeoff_id)
        if name not in record.candidates:
            raise InputError(f"{name!r} is not a candidate of bake-off {bakeoff_id} "
                             f"({', '.join(record.candidates)})")
        command = ["bakeoff", "pick", bakeoff_id, name, "--strategy", strategy,
                   *(["--delete-branches"] if delete_branches else [])]
        for action in ("merge", "remove") if len(record.candidates) > 1 else ("merge",):
            self.police(caller, action, command, queue=False)
        merged = self.merge(name, strategy=strategy, remove=True)
        removed, kept = [], []
        for other in record.candidates:
            if other == name:
                continue
            try:
                entry = services.worktrees.get(other)
            except InputError:
                continue
            if not entry.live:
                continue
            if services.worktrees.dirty_files(entry):
                kept.append(other)
                continue
            self.remove(other, delete_branch=delete_branches, force=delete_branches)
            removed.append(other)
        task = services.tasks.update(record.task_id, status=TaskStatus.COMPLETED)
        record = replace(record, status="picked", picked=name,
                         later={**record.later, "picked_at": time.time(), "removed": removed, "kept": kept})
        bakeoffs.update(record)
        services.project.events.append("bakeoff.picked", task=task.brief(), bakeoff=bakeoff_id, winner=name,
                                       removed=removed, kept=kept)
        return {"bakeoff": bakeoff_id, "winner": name, "merge": merged.to_dict(), "removed": removed, "kept": kept}
