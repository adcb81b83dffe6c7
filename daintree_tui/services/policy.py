"""Roles and approvals for what an agent may do by itself.

A command run from inside an agent's session (its environment carries `DAINTREE_WORKTREE`) is checked against
the role of that worktree (the task's `role`, else its agent preset's, else `default_role`). Without any
`[roles.*]` in config there is no policy: everything is allowed.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from daintree_tui.core import state_files, validate
from daintree_tui.core.config import ROLE_ACTIONS
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.log import warn
from daintree_tui.core.models import JsonRecord
from daintree_tui.core.project import Project
from daintree_tui.core.roles import worktree_role
from daintree_tui.core.spawn import python_module
from daintree_tui.core.store import read_json, write_json


@dataclass(frozen=True)
class Decision:
    allowed: bool
    approval: str  # one of config.APPROVALS
    role: str | None
    reason: str


def in_session() -> str | None:
    """The worktree whose session this process runs in, if any."""
    return os.environ.get("DAINTREE_WORKTREE") or None


def role_of(project: Project, worktree: str) -> str | None:
    """The role a worktree acts under: the same rule that picks its sandbox (one rule, kept in core)."""
    return worktree_role(project, worktree)


def decide(project: Project, worktree: str, action: str) -> Decision:
    cfg = project.config
    if not cfg.roles:
        return Decision(True, "none", None, "no roles configured")
    role = role_of(project, worktree)
    if role is None or role not in cfg.roles:
        return Decision(True, "none", role, "no role applies")
    rules = cfg.roles[role]
    if action not in rules.allow:
        return Decision(False, "none", role, f"role {role!r} does not allow {action}")
    return Decision(True, rules.approval, role, f"role {role!r} allows {action}")


def matrix(project: Project) -> list[dict[str, Any]]:
    cfg = project.config
    return [{"role": name, "default": name == cfg.default_role, "approval": rules.approval,
             **{action: action in rules.allow for action in ROLE_ACTIONS}} for name, rules in cfg.roles.items()]


@dataclass(frozen=True, eq=False)
class ApprovalRequest(JsonRecord):
    """A command an agent asked to run, waiting for (or resolved by) a person: one entry of approvals.json."""

    id: int
    worktree: str
    action: str
    argv: tuple[str, ...]
    role: str | None
    status: str  # pending, approved or rejected
    created_at: float
    resolved_at: float | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApprovalRequest:
        return cls(id=int(data["id"]), worktree=str(data["worktree"]), action=str(data["action"]),
                   argv=tuple(str(a) for a in data.get("argv", [])), role=data.get("role"),
                   status=str(data.get("status", "pending")), created_at=float(data.get("created_at", 0.0)),
                   resolved_at=data.get("resolved_at"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "worktree": self.worktree, "action": self.action,
                               "argv": list(self.argv), "role": self.role, "status": self.status,
                               "created_at": self.created_at}
        if self.resolved_at is not None:
            out["resolved_at"] = self.resolved_at
        return out


@dataclass(frozen=True)
class ApprovedRun:
    """An approved request and how its command went."""

    request: ApprovalRequest
    exit_code: int
    stdout: str
    stderr: str


class Approvals:
    """Requests queued for a person: `.worktrees/approvals.json`."""

    def __init__(self, project: Project) -> None:
        self.project = project

    @property
    def path(self) -> Path:
        return self.project.state_dir / "approvals.json"

    def _load(self) -> list[ApprovalRequest]:
        if state_files.from_history(self.project, self.path):
            # It came through git (a clone, a pull, a merged branch): nobody asked for what it lists, and approving
            # one runs it (`worktree remove b1 --force` took b1's uncommitted work).
            warn(f"ignored approval requests {self.path}: git tracks it or checked it out, so it came with the "
                 "repository's history, not from an agent's session (delete it and `git rm --cached` it)")
            return []
        data, _ = read_json(self.path, "approval requests")
        raw = data.get("requests", []) if isinstance(data, dict) else []
        valid = validate.valid_records(raw if isinstance(raw, list) else [], validate.approval_problem,
                                       f"approval request in {self.path}")
        return [ApprovalRequest.from_dict(r) for r in valid]

    def _save(self, records: list[ApprovalRequest]) -> None:
        write_json(self.path, {"requests": [r.to_dict() for r in records]})

    def records(self, status: str | None = None) -> list[ApprovalRequest]:
        return [r for r in self._load() if status is None or r.status == status]

    def request(self, worktree: str, action: str, argv: list[str], role: str | None) -> ApprovalRequest:
        with self.project.lock.hold():
            records = self._load()
            record = ApprovalRequest(id=max((r.id for r in records), default=0) + 1, worktree=worktree,
                                     action=action, argv=tuple(argv), role=role, status="pending",
                                     created_at=time.time())
            self._save([*records, record])
        self.project.events.append("policy.requested", worktree={"name": worktree}, action=action,
                                   request=record.id)
        return record

    def resolve(self, request_id: int, approve: bool) -> ApprovalRequest:
        if in_session():
            raise OperationError("approvals are for a person: run this outside an agent's session")
        with self.project.lock.hold():
            records = self._load()
            record = next((r for r in records if r.id == request_id), None)
            if record is None:
                raise InputError(f"no approval request with id {request_id}")
            if record.status != "pending":
                raise InputError(f"request {request_id} is already {record.status}")
            record = replace(record, status="approved" if approve else "rejected", resolved_at=time.time())
            self._save([record if r.id == request_id else r for r in records])
        self.project.events.append("policy.approved" if approve else "policy.rejected",
                                   worktree={"name": record.worktree}, action=record.action,
                                   request=request_id)
        return record

    def run(self, record: ApprovalRequest, extra_args: tuple[str, ...] = ()) -> ApprovedRun:
        """Run an approved request's command as a person would, in a child `daintree` (the CLI and the dashboard
        both come here): outside any session, so the policy gate does not stop it again, and with its output
        captured, so it never draws over a screen."""
        if record.status != "approved":
            raise OperationError(f"request {record.id} is {record.status}, not approved")
        env = {k: v for k, v in os.environ.items() if k != "DAINTREE_WORKTREE"}
        argv = [*python_module("daintree_tui"), *record.argv, "--repo", str(self.project.root), *extra_args]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        return ApprovedRun(record, proc.returncode, proc.stdout, proc.stderr)

    def approve_and_run(self, request_id: int, extra_args: tuple[str, ...] = ()) -> ApprovedRun:
        return self.run(self.resolve(request_id, approve=True), extra_args)
