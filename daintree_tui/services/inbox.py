"""The session inbox: how a sandboxed agent's own `daintree` calls reach the outside, and how they are applied.

Inside a sandbox the state (`.worktrees/`, `.tasks/`, refs other than the agent's own branch) is read-only. The
`daintree` CLI there writes its request as a JSON file into the inbox mounted at /run/daintree/inbox (the inside,
services/inbox_client.py, whose names are imported from here too). Outside,
`process_inboxes(project)` (called by the dashboard's poll, `daintree doctor` and `session list`/`approvals` run
outside) validates each request and applies it, writing a reply file next to it. The dashboard's poll calls
`process_inboxes(services)` too.

The identity of a request is WHICH inbox it arrived in (`.worktrees/.inbox/<worktree>/`, bound into that
worktree's sandbox only), never anything inside the request nor `DAINTREE_WORKTREE`. The inbox is written by the
agent, so everything in it is hostile data: regular files only (no symlink is followed), a size cap, a strict
schema, and replies written with O_EXCL|O_NOFOLLOW and renamed into place.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daintree_tui.core import git as g
from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.index import find
from daintree_tui.core.log import suppressed, warn
from daintree_tui.core.project import Project
from daintree_tui.core.sandbox import bring_in, on_behalf_of_sandboxed
from daintree_tui.core.store import remove_tree
from daintree_tui.services.inbox_client import inbox_owner, mounted_inbox, submit, wait_reply, withdraw
from daintree_tui.services.policy import role_of

if TYPE_CHECKING:  # the container applies the inbox (observe_tick): only the type is needed here
    from daintree_tui.services.container import Services

__all__ = ["ACTIONS", "KINDS", "Outcome", "inbox_owner", "mounted_inbox", "process_inboxes", "submit", "wait_reply",
           "withdraw"]

MAX_REQUEST_BYTES = 64 * 1024
MAX_REQUESTS_PER_PASS = 20  # per inbox: a flood from one agent cannot stall the dashboard's poll
MAX_ENTRIES_PER_PASS = 256  # names looked at per inbox and pass (requests, replies, junk alike)
REPLY_TTL = 3600.0
_REQUEST_RE = re.compile(r"^req-([0-9a-f]{32})\.json$")
KINDS = ("signal", "task_create", "action")
ACTIONS = ("commit", "merge", "remove", "pr")


@dataclass(frozen=True)
class Outcome:
    """What became of one request."""

    worktree: str
    request: str
    kind: str
    ok: bool
    result: dict[str, Any] | None = None
    error: str | None = None
    exit_code: int = 0  # of a refusal: 2 bad input, 1 refused or failed (as the CLI would exit)

    def to_dict(self) -> dict[str, Any]:
        return {"worktree": self.worktree, "request": self.request, "kind": self.kind, "ok": self.ok,
                "result": self.result, "error": self.error, "exit_code": self.exit_code}


@contextlib.contextmanager
def _processing_lock(project: Project) -> Iterator[bool]:
    """One processor at a time (the dashboard and a CLI may both poll); a busy lock means someone is at it."""
    root = project.state_dir / ".inbox"
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def process_inboxes(services: Services) -> list[Outcome]:
    """Apply every pending request of every session inbox; the entry point for the dashboard and the CLI.

    Cheap when there is nothing to do (one directory listing per inbox). Never raises for a bad request: it is
    answered with an error reply and logged as an event.
    """
    project = services.project
    root = project.state_dir / ".inbox"
    if not project.is_git or not root.is_dir() or root.is_symlink():
        return []
    outcomes: list[Outcome] = []
    with _processing_lock(project) as mine:
        if not mine:
            return []
        entries = [e for e in services.index.load() if e.live]
        live = {e.name for e in entries}
        if project.common_dir is not None:  # a few stats: an index that would hang the user's git gc goes
            g.drop_unreadable_admin_files(project.common_dir, (g.ADMIN_INDEX,))  # the rest: admin_dirs.guard
        for entry in entries:
            # What each sandbox's git wrote comes in as its requests do: checked, at every poll (a few stats when
            # nothing is new), so its commits are on its branch for the user's own git too.
            with suppressed(OperationError, OSError):
                bring_in(project, entry, quick=True)
        for owner_dir in sorted(root.iterdir()):
            if owner_dir.name.startswith(".") or owner_dir.is_symlink() or not owner_dir.is_dir():
                continue
            if owner_dir.name not in live:
                # Its worktree is gone: so are its requests. remove_tree follows none of the symlinks it finds.
                remove_tree(owner_dir)
                continue
            outcomes += _process_one(services, owner_dir.name, owner_dir)
    return outcomes


def _process_one(services: Services, owner: str, inbox: Path) -> list[Outcome]:
    project = services.project
    try:
        dir_fd = os.open(inbox, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return []
    outcomes = []
    try:
        # Read lazily and at most MAX_ENTRIES_PER_PASS names: an agent that fills its inbox with a million files
        # would otherwise make every poll of the dashboard list (and stat) them all.
        with os.scandir(dir_fd) as entries:
            names = [e.name for e in itertools.islice(entries, MAX_ENTRIES_PER_PASS)]
        now = time.time()
        handled = 0
        tracked = _tracked(project, inbox) if any(_REQUEST_RE.match(n) for n in names) else set()
        for name in names:
            if name.startswith("reply-"):
                _drop_stale_reply(dir_fd, name, now)
                continue
            match = _REQUEST_RE.match(name)
            if match is None or handled >= MAX_REQUESTS_PER_PASS:
                continue
            handled += 1
            request_id = match.group(1)
            request = (f"{name} is tracked by git: it came with the repository's history (a clone, a pull, a "
                       "merged branch), not from this session" if name in tracked else _read_request(dir_fd, name))
            outcome = _apply(services, owner, request_id, request)
            # Gone before its reply is written: a request is applied once. Answered first, a reply the disk had
            # no room for (the agent had filled it) raised here and left the request, which every later pass
            # applied again (a task created once per poll).
            with suppressed(OSError):
                os.unlink(name, dir_fd=dir_fd)
            _write_reply(dir_fd, request_id, outcome)
            project.events.append("inbox.applied" if outcome.ok else "inbox.refused", worktree={"name": owner},
                                  kind=outcome.kind, request=request_id, error=outcome.error)
            outcomes.append(outcome)
    finally:
        os.close(dir_fd)
    return outcomes


def _tracked(project: Project, inbox: Path) -> set[str]:
    """The names in `inbox` that git tracks in the primary. A request is the word of the session whose inbox it is
    in only when that session's sandbox wrote it: one that a checkout wrote there (committed upstream, or by an
    agent on its branch and merged into the primary's branch: `.worktrees/.inbox/lead/req-*.json`) would act
    with another session's role."""
    try:
        rel = inbox.relative_to(project.root)
    except ValueError:
        return set()  # the state dir lies outside the repository: no checkout writes there
    proc = g.git(project.root, "ls-files", "-z", "--", f":(literal){rel.as_posix()}", check=False)
    return {Path(path).name for path in proc.stdout.split("\0") if path}


def _drop_stale_reply(dir_fd: int, name: str, now: float) -> None:
    with suppressed(OSError):
        if now - os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mtime > REPLY_TTL:
            os.unlink(name, dir_fd=dir_fd)


def _read_request(dir_fd: int, name: str) -> dict[str, Any] | str:
    """The request's JSON object, or a one-line reason it cannot be one."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as exc:
        return "not a regular file" if exc.errno == errno.ELOOP else f"unreadable: {exc.strerror}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_size > MAX_REQUEST_BYTES:
            return f"larger than {MAX_REQUEST_BYTES} bytes"
        raw = os.read(fd, MAX_REQUEST_BYTES + 1)
    finally:
        os.close(fd)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # `[[[[...` 60 KB deep is a RecursionError, not a ValueError
        return "not valid JSON"
    return data if isinstance(data, dict) else "not a JSON object"


def _write_reply(dir_fd: int, request_id: str, outcome: Outcome) -> None:
    """Write next to the request without following anything the agent may have planted there."""
    tmp = f".reply-{request_id}-{os.urandom(4).hex()}"
    body = json.dumps(outcome.to_dict()).encode()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    except OSError:
        return
    try:
        while body:  # a nearly full disk takes part of a write: the rest, or no reply at all, never half of one
            body = body[os.write(fd, body):]
    except OSError as exc:
        with suppressed(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        warn(f"inbox: cannot answer request {request_id[:8]}: {exc.strerror or exc} (it was handled, once)")
        return
    finally:
        os.close(fd)
    with suppressed(OSError):
        os.rename(tmp, f"reply-{request_id}.json", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _str_field(payload: dict[str, Any], key: str, limit: int, required: bool = False) -> str:
    value = payload.get(key, "")
    if not isinstance(value, str) or len(value) > limit or (required and not value.strip()):
        raise InputError(f"{key} must be a {'non-empty ' if required else ''}string of at most {limit} characters")
    return value


def _bool_field(payload: dict[str, Any], key: str) -> bool:
    value = payload.get(key, False)
    if not isinstance(value, bool):
        raise InputError(f"{key} must be true or false")
    return value


def _apply(services: Services, owner: str, request_id: str, request: dict[str, Any] | str) -> Outcome:
    known = (*KINDS, *services.inbox_kinds)
    kind = request.get("kind") if isinstance(request, dict) else None
    kind = kind if isinstance(kind, str) and kind in known else "?"
    try:
        if isinstance(request, str):
            raise InputError(f"bad request: {request}")
        entry = find(services.index.load(), owner)
        if entry is None or not entry.live:
            raise InputError(f"no live worktree named {owner!r}: request dropped")
        payload = request.get("payload")
        if kind == "?" or not isinstance(payload, dict):
            raise InputError(f"bad request: kind must be one of {', '.join(known)} with a payload object")
        # Whatever the request starts runs sandboxed too (or is refused): the sender is confined.
        with on_behalf_of_sandboxed(owner):
            if kind in services.inbox_kinds:
                result = services.inbox_kinds[kind](services, owner, payload)
            elif kind == "signal":
                result = _signal(services, owner, payload)
            elif kind == "task_create":
                result = _task_create(services, owner, payload)
            else:
                result = _action(services, owner, payload)
        return Outcome(owner, request_id, kind, True, result)
    except DaintreeError as exc:
        return Outcome(owner, request_id, kind, False, error=str(exc), exit_code=exc.exit_code)


def _signal(services: Services, owner: str, payload: dict[str, Any]) -> dict[str, Any]:
    state = _str_field(payload, "state", 20, required=True)
    code = payload.get("code")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        raise InputError("code must be an integer")
    at = payload.get("at")
    if at is not None and (not isinstance(at, int | float) or isinstance(at, bool)):
        raise InputError("at must be a number (when the agent's hook fired)")
    services.observer.signal(owner, state, exit_code=code, at=None if at is None else float(at))
    return {"name": owner, "state": state}


def _task_create(services: Services, owner: str, payload: dict[str, Any]) -> dict[str, Any]:
    project = services.project
    subject = _str_field(payload, "subject", 500, required=True)
    description = _str_field(payload, "description", 20000)
    blocked = payload.get("blocked_by", [])
    if not isinstance(blocked, list) or not all(isinstance(b, int) and not isinstance(b, bool) and b > 0
                                                for b in blocked):
        raise InputError("blocked_by must be a list of task ids")
    extra: dict[str, object] = {"created_by": owner}
    role = payload.get("role")
    if role is not None:
        if not isinstance(role, str) or role not in project.config.roles:
            raise InputError(f"unknown role {role!r}")
        # A task's role becomes the role (capabilities, approval, sandbox mode) of whatever session works on it:
        # only a lead hands roles out, or a worker would mint itself a successor that merges unsandboxed.
        if not _is_lead(project, owner):
            project.events.append("policy.denied", worktree={"name": owner}, action="task_create", role=role,
                                  reason="only a lead role may give a task a role")
            raise OperationError(f"only a lead role may give a task a role ({owner} is not a lead)")
        extra["role"] = role
    return services.tasks.create(subject, description, blocked, extra=extra).to_dict()


def _is_lead(project: Project, worktree: str) -> bool:
    """Whether the worktree's role is a lead one (the MCP level rule: its `mcp` key, else a role named lead)."""
    role = role_of(project, worktree)
    if role is None:
        return not project.config.roles  # no roles configured: nothing to escalate to
    configured = project.config.roles.get(role)
    return (configured.mcp if configured is not None and configured.mcp else role) == "lead"


def _action(services: Services, owner: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A policed command (commit, merge, remove, pr) on the sender's OWN worktree, decided by its role.

    The role's rules apply as they do to a CLI call (`Operations.police`): denied, queued for a person (approval
    "human"), or run here, outside the sandbox, with options rebuilt from a strict schema (never the agent's argv).
    """
    project = services.project
    action = _str_field(payload, "action", 20, required=True)
    if action not in ACTIONS:
        raise InputError(f"unknown action {action!r} (expected one of: {', '.join(ACTIONS)})")
    target = _str_field(payload, "worktree", 100, required=True)
    if target != owner:
        project.events.append("policy.denied", worktree={"name": owner}, action=action, target=target,
                              reason="not its own worktree")
        raise OperationError(f"a session may only {action} its own worktree ({owner}), not {target!r}")
    rebuilt: list[tuple[list[str], Any]] = []

    def command() -> list[str]:  # once the role allows the action: a denial is logged whatever else is wrong
        if payload.get("force") or payload.get("into"):
            raise OperationError("--force and --into are not available from inside a sandbox")
        rebuilt.append(_rebuild(services, owner, action, payload))
        return rebuilt[0][0]

    queued = services.ops.police(owner, action, command)
    argv, run = rebuilt[0]
    if queued is not None:
        return {**queued.to_dict(), "argv": argv}
    return {"queued": False, "argv": argv, "result": run()}


def _rebuild(services: Services, owner: str, action: str, payload: dict[str, Any]) -> tuple[list[str], Any]:
    """The validated command as argv (for an approval record) and as a call to run it here."""
    from daintree_tui.core.review import STRATEGIES

    ops = services.ops
    if action == "commit":
        message = _str_field(payload, "message", 20000, required=True)
        all_changes = _bool_field(payload, "all")
        # `--message=TEXT`, one word: a message starting with a dash is text when the approved request is replayed.
        argv = ["worktree", "commit", owner, f"--message={message}", *(["--all"] if all_changes else [])]
        return argv, lambda: ops.landing.commit(owner, message, all_changes=all_changes)
    if action == "merge":
        strategy = _str_field(payload, "strategy", 10) or "ff"
        if strategy not in STRATEGIES:
            raise InputError(f"invalid strategy {strategy!r}")
        remove, complete = _bool_field(payload, "remove"), _bool_field(payload, "complete_task")
        argv = ["worktree", "merge", owner, "--strategy", strategy, *(["--remove"] if remove else []),
                *(["--complete-task"] if complete else [])]
        return argv, lambda: ops.landing.merge(owner, strategy=strategy, remove=remove,
                                               complete_task=complete).to_dict()
    if action == "remove":
        complete, delete = _bool_field(payload, "complete_task"), _bool_field(payload, "delete_branch")
        argv = ["worktree", "remove", owner, *(["--complete-task"] if complete else []),
                *(["--delete-branch"] if delete else [])]
        return argv, lambda: ops.remove(owner, complete_task=complete, delete_branch=delete).to_dict()
    draft = _bool_field(payload, "draft")
    return ["worktree", "pr", owner, *(["--draft"] if draft else [])], lambda: ops.landing.pr(owner, draft=draft)
