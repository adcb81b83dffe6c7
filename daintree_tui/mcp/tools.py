"""The tools an MCP server offers, and `DaintreeTools`, the one object every call goes through.

`DaintreeTools.call(name, arguments)` checks the arguments against the tool's schema with the CLI's own
messages, checks what the caller's access allows, runs the operation on the project's services and returns the
same JSON data the CLI prints with `--json` for the same operation. Bad input and refused operations raise
`DaintreeError` exactly as in the CLI; the server turns them into tool errors. Nothing here imports the MCP SDK,
so the same object can serve another transport (for example a sandboxed session's inbox) unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.project import Project
from daintree_tui.mcp.access import Access

if TYPE_CHECKING:
    from daintree_tui.services import Services

RUN_TIMEOUT = 300.0  # the CLI's `worktree run` default
RESOURCE_EVENTS = 200  # events the event-log resource shows (the log is read from its tail)

_STRING = {"type": "string"}
_FLAG = {"type": "boolean", "default": False}
_TASK_ID = {"type": "integer", "minimum": 1, "description": "a task id"}


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, what it does, its arguments (JSON schema properties) and who may call it."""

    name: str
    description: str
    required: dict[str, dict[str, Any]] = field(default_factory=dict)
    optional: dict[str, dict[str, Any]] = field(default_factory=dict)
    worker: bool = False  # offered to a worker too (scoped to its own task, worktree and session)

    @property
    def input_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": {**self.required, **self.optional},
                "required": list(self.required), "additionalProperties": False}


def _arg(kind: dict[str, Any], description: str) -> dict[str, Any]:
    return {**kind, "description": description}


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("task_create", "Create a task on the board (status pending). Returns the task.",
             {"subject": _arg(_STRING, "one line: what to do")},
             {"description": _arg(_STRING, "details, acceptance criteria")}),
    ToolSpec("task_list", "List every task with its status, owner and worktree."),
    ToolSpec("task_get", "One task by id.", {"task_id": _TASK_ID}, worker=True),
    ToolSpec("task_update", "Change a task's status (pending, in_progress, completed) and/or owner.",
             {"task_id": _TASK_ID},
             {"status": _arg({"type": "string", "enum": ["pending", "in_progress", "completed"]}, "new status"),
              "owner": _arg(_STRING, "who works on it")}, worker=True),
    ToolSpec("worktree_create", "Create a git worktree on branch wt/NAME, optionally bound to a task (which becomes "
             "in_progress). Returns the index entry (path, branch, ports) and what it copied and linked.",
             {"name": _arg(_STRING, "letters, digits, '.', '_' or '-'; becomes branch wt/NAME")},
             {"task_id": _TASK_ID, "base_ref": _arg(_STRING, "branch, tag or commit to start from (default HEAD)")}),
    ToolSpec("worktree_list", "List active and kept worktrees with live git facts, session and disk use."),
    ToolSpec("worktree_status", "One worktree in detail: git facts, dirty files, session.",
             {"name": _arg(_STRING, "worktree name")}, worker=True),
    ToolSpec("review_get", "A worktree's review: state of its current head (open, changes-requested, approved), "
             "the comments on its diff (path, line, text, sent, outdated), verdicts, its PR's CI checks, and what "
             "a merge still misses. Read only: approving is a person's.",
             {"name": _arg(_STRING, "worktree name")}, worker=True),
    ToolSpec("worktree_run", f"Run a shell command (sh -c) in a worktree with its environment (PORT, TMPDIR, ...); "
             f"returns exit_code, stdout and stderr. Times out after {RUN_TIMEOUT:g}s (exit code 124).",
             {"name": _arg(_STRING, "worktree name"), "command": _arg(_STRING, "shell command line")}),
    ToolSpec("worktree_keep", "Mark an active worktree kept (dir, branch, ports and session stay).",
             {"name": _arg(_STRING, "worktree name")}),
    ToolSpec("worktree_remove", "Remove a worktree. Refuses uncommitted work unless force; its task goes back to "
             "pending, or to completed with complete_task.",
             {"name": _arg(_STRING, "worktree name")},
             {"force": _arg(_FLAG, "discard uncommitted work"),
              "complete_task": _arg(_FLAG, "mark its task completed")}),
    ToolSpec("worktree_events", "The lifecycle event log, oldest first.", {},
             {"limit": _arg({"type": "integer", "minimum": 0}, "only the last N events")}, worker=True),
    ToolSpec("session_start", "Start an agent in a worktree's terminal session; its task becomes the first prompt.",
             {"name": _arg(_STRING, "worktree name")},
             {"agent": _arg(_STRING, "agent preset (default: the one the worktree's last session ran, else the "
                                      "configured default agent)"),
              "prompt": _arg(_STRING, "first prompt instead of the task's subject and description")}),
    ToolSpec("session_send", "Paste text into a session's agent and press Enter (agents only, never a shell).",
             {"name": _arg(_STRING, "worktree name"), "text": _arg(_STRING, "what to tell the agent")}),
    ToolSpec("session_status", "Sessions with their status (starting, running, waiting, exited); one with name.",
             {}, {"name": _arg(_STRING, "worktree name")}, worker=True),
    ToolSpec("session_capture", "The text on a session's screen.",
             {"name": _arg(_STRING, "worktree name")},
             {"history": _arg({"type": "integer", "minimum": 0, "default": 0}, "lines of scrollback to include")}),
    ToolSpec("checkpoint_list", "A worktree's newest 200 checkpoints (its files after each turn of its agent), "
             "oldest first: id (1 = the first of all), ts, commit, files changed, reason, the turn's first prompt "
             "line where known.",
             {"name": _arg(_STRING, "worktree name")}, {"all": _arg(_FLAG, "every checkpoint, not only the newest")},
             worker=True),
    ToolSpec("bakeoff_create", "Bake-off: one worktree and session per agent on the same task and base.",
             {"task_id": _TASK_ID, "agents": _arg({"type": "array", "items": _STRING, "minItems": 1},
                                                  "agent presets, one candidate each")},
             {"score": _arg(_STRING, "score command (prints SCORE: N)"),
              "base_ref": _arg(_STRING, "branch, tag or commit to start from")}),
    ToolSpec("bakeoff_score", "Run the score command in every candidate of a bake-off and rank them.",
             {"bakeoff_id": _arg(_STRING, "the bake-off's id")},
             {"score": _arg(_STRING, "score command (default: the bake-off's)"),
              "minimize": _arg(_FLAG, "lower SCORE is better"),
              "timeout": _arg({"type": "number", "exclusiveMinimum": 0}, "seconds per candidate (default 600)")}),
    ToolSpec("bakeoff_pick", "Pick a bake-off's winner: merge it (the merge flow and its checks), remove the other "
             "candidates (never one with uncommitted work), complete the task. Name the winner, or best for the "
             "best of the last scoring. Inside a session its role must allow merge and remove.",
             {"bakeoff_id": _arg(_STRING, "the bake-off's id")},
             {"name": _arg(_STRING, "the winning candidate's worktree"),
              "best": _arg(_FLAG, "the best of the last scoring instead of name"),
              "strategy": _arg({"type": "string", "enum": ["ff", "squash", "rebase"], "default": "ff"},
                               "how the winner is merged"),
              "delete_branches": _arg(_FLAG, "delete the others' branches too (discards their uncommitted work)")}),
)
TOOL_NAMES = tuple(spec.name for spec in TOOLS)
_SPECS = {spec.name: spec for spec in TOOLS}


def parse_task_id(value: object) -> int:
    """A task id as the CLI parses it, with the CLI's message."""
    text = str(value)
    try:
        number = int(text)
    except ValueError:
        raise InputError(f"invalid task id {text!r}: expected a positive integer") from None
    if number <= 0 or isinstance(value, bool):
        raise InputError(f"invalid task id {text!r}: expected a positive integer")
    return number


def _check(spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments, checked against the tool's schema; JSON null counts as absent."""
    given = {k: v for k, v in arguments.items() if v is not None}
    unknown = sorted(set(given) - set(spec.required) - set(spec.optional))
    if unknown:
        takes = ", ".join([*spec.required, *spec.optional]) or "no arguments"
        raise InputError(f"{spec.name}: unknown argument {unknown[0]!r} (takes: {takes})")
    missing = [k for k in spec.required if k not in given]
    if missing:
        raise InputError(f"{spec.name}: the following arguments are required: {', '.join(missing)}")
    checked: dict[str, Any] = {}
    for key, value in given.items():
        kind = {**spec.required, **spec.optional}[key]
        if kind is _TASK_ID or key == "task_id":
            checked[key] = parse_task_id(value)
        elif kind["type"] == "string" and not isinstance(value, str):
            raise InputError(f"{spec.name}: {key} must be a string")
        elif kind["type"] == "boolean" and not isinstance(value, bool):
            raise InputError(f"{spec.name}: {key} must be true or false")
        elif kind["type"] == "integer" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InputError(f"{spec.name}: {key} must be a whole number, zero or more")
        elif kind["type"] == "number" and (isinstance(value, bool) or not isinstance(value, int | float)
                                           or value <= 0):
            raise InputError(f"{spec.name}: {key} must be a positive number")
        elif kind["type"] == "array" and not (isinstance(value, list) and value
                                              and all(isinstance(v, str) and v.strip() for v in value)):
            raise InputError(f"{spec.name}: {key} must be a non-empty list of names")
        else:
            checked[key] = value
    return checked


INSTRUCTIONS = (
    "daintree: a task board (.tasks/) and git worktrees (.worktrees/), one per task, each with its own branch, "
    "ports and agent session. A lead plans tasks, creates a worktree per task, starts an agent in it, watches "
    "sessions and events, and removes worktrees when their work is merged. Results are JSON."
)


def to_json(data: Any) -> str:
    """The JSON text the CLI prints with --json."""
    return json.dumps(data, indent=2, default=str)


class ToolBackend(Protocol):
    """What the server puts on the wire. `DaintreeTools` runs the calls in this process; a sandboxed agent's server
    (which cannot write the project's state) gets `mcp.inbox.InboxTools`, whose `call` posts `(name, arguments)`
    to its session's inbox and returns the answer of the `DaintreeTools` the outside built for that inbox's
    owner."""

    def specs(self) -> list[ToolSpec]: ...

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> Any: ...

    def resources(self) -> dict[str, tuple[str, str, Callable[[], Any]]]: ...


class DaintreeTools:
    """Every MCP tool as a method over one project's services, scoped by the caller's access."""

    def __init__(self, services: Services, access: Access) -> None:
        self.services = services
        self.access = access

    @property
    def project(self) -> Project:
        return self.services.project

    # -- the one entry point ---------------------------------------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        """The tools this caller sees."""
        return [s for s in TOOLS if self.access.is_lead or s.worker]

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        """Run tool `name` with JSON `arguments`; returns JSON data, raises `DaintreeError` like the CLI."""
        spec = _SPECS.get(name)
        if spec is None or spec not in self.specs():
            raise InputError(f"unknown tool {name!r} for role {self.access.role or self.access.level}")
        handler: Callable[..., Any] = getattr(self, name)
        return handler(**_check(spec, arguments or {}))

    # -- worker scope ----------------------------------------------------------------------------------------

    def _own_task(self, task_id: int) -> None:
        if not self.access.is_lead and task_id != self.access.task_id:
            own = f"its task is {self.access.task_id}" if self.access.task_id else "it has no task"
            raise OperationError(f"task {task_id} is not this session's task ({own})")

    def _own_worktree(self, name: str) -> None:
        if not self.access.is_lead and name != self.access.worktree:
            raise OperationError(f"worktree {name!r} is not this session's worktree ({self.access.worktree})")

    def _concerns_me(self, record: dict[str, Any]) -> bool:
        worktree = (record.get("worktree") or {}).get("name")
        task = (record.get("task") or {}).get("id")
        return worktree == self.access.worktree or (task is not None and task == self.access.task_id)

    # -- tasks -----------------------------------------------------------------------------------------------

    def task_create(self, subject: str, description: str = "") -> dict[str, Any]:
        return self.services.tasks.create(subject, description).listed()

    def task_list(self) -> list[dict[str, Any]]:
        tasks = self.services.tasks.list()
        return [t.listed() for t in tasks if self.access.is_lead or t.id == self.access.task_id]

    def task_get(self, task_id: int) -> dict[str, Any]:
        self._own_task(task_id)
        return self.services.tasks.get(task_id).listed()

    def task_update(self, task_id: int, status: str | None = None, owner: str | None = None) -> dict[str, Any]:
        from daintree_tui.core.tasks import parse_status

        parsed = parse_status(status) if status is not None else None
        if parsed is None and owner is None:
            raise InputError("nothing to update: give status or owner")
        self._own_task(task_id)
        return self.services.tasks.update(task_id, status=parsed, owner=owner).listed()

    # -- worktrees -------------------------------------------------------------------------------------------

    def worktree_create(self, name: str, task_id: int | None = None, base_ref: str | None = None) -> dict[str, Any]:
        return self.services.ops.create(name, task_id=task_id, base=base_ref).to_dict()  # `worktree create --json`

    def _session_states(self) -> dict[str, dict[str, Any]]:
        try:
            return {s.name: s.to_dict() for s in self.services.sessions.list()}
        except DaintreeError:
            return {}

    def worktree_list(self) -> list[dict[str, Any]]:
        self.project.require_git()
        worktrees = self.services.worktrees
        entries = worktrees.entries()
        facts = worktrees.facts_for(entries)
        sessions = self._session_states()
        disk = self.services.disk.measure(entries)
        conflicts = self.services.ops.landing.conflicts_by_name([e for e in entries if e.live], facts)
        return [{**e.to_dict(), **({"facts": facts[e.name].to_dict()} if e.name in facts else {}),
                 "session": sessions.get(e.name), "disk_bytes": disk.get(e.name),
                 "conflicts": conflicts.get(e.name, [])} for e in entries]

    def worktree_status(self, name: str) -> dict[str, Any]:
        self.project.require_git()
        self._own_worktree(name)
        worktrees = self.services.worktrees
        entry = worktrees.get(name)
        dirty = worktrees.dirty_files(entry) if entry.live else []
        from daintree_tui.core.sandbox.containment import denied_of  # as `worktree status` shows them

        return {**entry.to_dict(), "facts": worktrees.facts(entry).to_dict(), "dirty_files": dirty,
                "session": self._session_states().get(entry.name),
                "denied_hosts": denied_of(self.services.project.events, entry.name),
                "checks": self.services.ops.review.ci_checks(entry.name, quick=True) if entry.live else None}

    def review_get(self, name: str) -> dict[str, Any]:
        self._own_worktree(name)  # a worker reads the review of its own worktree: the comments are for it
        return self.services.ops.review.get(name, quick=True)  # an agent's turn waits on it: gh bounded

    def worktree_run(self, name: str, command: str) -> dict[str, Any]:
        if not command.strip():
            raise InputError("worktree_run: command is empty")
        return self.services.worktrees.run(name, ["sh", "-c", command], timeout=RUN_TIMEOUT).to_dict()

    def worktree_keep(self, name: str) -> dict[str, Any]:
        return self.services.ops.keep(name).to_dict()

    def worktree_remove(self, name: str, force: bool = False, complete_task: bool = False) -> dict[str, Any]:
        ops = self.services.ops
        ops.check_remove(name, force=force)  # before the policy: a forced remove is never even queued from a sandbox
        # From inside a session, `remove` answers to the session's role as its CLI call would: refused, queued for a
        # person (the CLI's `queued` document), or checked by the pre_merge hooks first.
        argv = ["worktree", "remove", name, *(["--force"] if force else []),
                *(["--complete-task"] if complete_task else [])]
        queued = ops.police(self.access.worktree, "remove", argv)
        if queued is not None:
            return queued.to_dict()
        return ops.remove(name, force=force, complete_task=complete_task).to_dict()

    def worktree_events(self, limit: int | None = None) -> list[dict[str, Any]]:
        records, _ = self.project.events.read(None if not self.access.is_lead else limit)
        if not self.access.is_lead:
            records = [r for r in records if self._concerns_me(r)]
            records = records[-limit:] if limit else ([] if limit == 0 else records)
        return records

    # -- sessions --------------------------------------------------------------------------------------------

    def session_start(self, name: str, agent: str | None = None, prompt: str | None = None) -> dict[str, Any]:
        return self.services.ops.start_session(name, agent, prompt=prompt).to_dict()

    def session_send(self, name: str, text: str) -> dict[str, Any]:
        from daintree_tui.core.sandbox import sandboxed_caller

        manager = self.services.sessions
        meta = manager.meta(name)
        # Text from an agent is data: it goes to agents as one bracketed paste, never typed into a shell.
        if meta.get("agent") == "shell":
            raise OperationError(f"session_send types into agents only: the session of {name} runs a shell")
        caller = sandboxed_caller()
        sandbox = meta.get("sandbox")
        if caller is not None and not (isinstance(sandbox, dict) and sandbox.get("active") is True):
            # Telling an unconfined agent what to do is running it: as a sandboxed lead may not start one.
            raise OperationError(f"refused: {caller} runs in a sandbox and may not instruct the agent of {name}, "
                                 "which runs without one")
        manager.send(name, text, enter=True, paste=True)
        return {"name": name, "sent": len(text)}

    def session_status(self, name: str | None = None) -> Any:
        if not self.access.is_lead:
            name = name or self.access.worktree
            self._own_worktree(str(name))
        infos = [i.to_dict() for i in self.services.sessions.list()]
        if name is None:
            return infos
        found = next((i for i in infos if i["name"] == name), None)
        if found is None:
            raise InputError(f"no session for worktree {name!r} (start one with `daintree session start {name}`)")
        return found

    def session_capture(self, name: str, history: int = 0) -> dict[str, Any]:
        return {"name": name, "screen": self.services.sessions.capture(name, history=history)}

    # -- checkpoints -----------------------------------------------------------------------------------------

    def checkpoint_list(self, name: str, all: bool = False) -> list[dict[str, Any]]:  # the tool's own word
        self._own_worktree(name)
        return [c.to_dict() for c in self.services.ops.checkpoints.list(name, every=all)]  # `checkpoint list --json`

    # -- bake-offs -------------------------------------------------------------------------------------------

    def bakeoff_create(self, task_id: int, agents: list[str], score: str | None = None,
                       base_ref: str | None = None) -> dict[str, Any]:
        names = [a.strip() for a in agents]
        return self.services.ops.bakeoff.create(task_id, names, score=score, base=base_ref).to_dict()

    def bakeoff_score(self, bakeoff_id: str, score: str | None = None, minimize: bool = False,
                      timeout: float | None = None) -> list[dict[str, Any]]:
        scores = self.services.bakeoffs.score(bakeoff_id, command=score, minimize=minimize, timeout=timeout or 600.0)
        return [s.to_dict() for s in scores]

    def bakeoff_pick(self, bakeoff_id: str, name: str | None = None, best: bool = False, strategy: str = "ff",
                     delete_branches: bool = False) -> dict[str, Any]:
        """`bakeoff pick ID NAME|--best --json`, refused as that command is: a session's role must allow the merge
        (and the removes); deleting branches forces the removes, which no sandboxed caller may."""
        if (name is None) == (not best):
            raise InputError("bakeoff_pick: name the winner, or pick the best of the last scoring with best (one of "
                             "the two)")
        winner = self.services.bakeoffs.best(bakeoff_id) if best else str(name)
        return self.services.ops.bakeoff.pick(bakeoff_id, winner, strategy=strategy,
                                              delete_branches=delete_branches, caller=self.access.worktree)

    # -- resources -------------------------------------------------------------------------------------------

    def resources(self) -> dict[str, tuple[str, str, Callable[[], Any]]]:
        """uri -> (name, description, reader) of what this caller may read."""
        return {
            "daintree://tasks": ("tasks", "The task board (every task this caller may see), as JSON.", self.task_list),
            "daintree://events": ("events", f"The last {RESOURCE_EVENTS} lifecycle events, as JSON.",
                                  lambda: self.worktree_events(RESOURCE_EVENTS)),
        }
