"""The records of the three planes, as they are stored on disk (docs/design.md section 1)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from daintree_tui.core import validate as v


class JsonRecord(Mapping[str, Any]):
    """A typed record that also reads, key by key, as its JSON form (`to_dict`): code written against the stored
    dicts keeps working while new code uses the attributes. Print `to_dict()`, never the record itself."""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())


class TaskStatus(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class WorktreeStatus(StrEnum):
    ACTIVE = "active"
    KEPT = "kept"
    REMOVED = "removed"


LIVE = (WorktreeStatus.ACTIVE, WorktreeStatus.KEPT)

_TASK_FIELDS = ("id", "subject", "description", "status", "owner", "worktree", "blockedBy", "created_at",
                "updated_at")


@dataclass
class Task:
    """`.tasks/task_<id>.json`. Unknown fields in the file are kept in `extra` and written back."""

    id: int
    subject: str
    description: str = ""
    status: TaskStatus = TaskStatus.PENDING
    owner: str = ""
    worktree: str = ""
    blockedBy: list[int] = field(default_factory=list)
    created_at: float = 0.0
    updated_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: object) -> Task:
        """Build from a stored record, checking every field's type; raises ValueError (RecordError) on a
        malformed one (`[1,2]`, `"id": 1e999`, a string where an int goes), which callers skip with a warning."""
        data = v.record(data, "task")
        status = v.field(data, "status", "str", default="pending")
        if status not in TaskStatus.__members__.values():
            raise v.RecordError(f"unknown status {status!r}")
        worktree = v.field(data, "worktree", "str?", default="")
        if worktree and v.name_problem(worktree, new=False):
            raise v.RecordError(f"bad worktree name {worktree!r}")
        return cls(
            id=v.field(data, "id", "id", required=True),
            subject=v.escape_controls(v.field(data, "subject", "str", default="")),
            description=v.escape_controls(v.field(data, "description", "str?", default="")),
            status=TaskStatus(status), owner=v.escape_controls(v.field(data, "owner", "str?", default="")),
            worktree=worktree,
            blockedBy=list(v.field(data, "blockedBy", "ints?", default=[])),
            created_at=float(v.field(data, "created_at", "number?", default=0.0)),
            updated_at=float(v.field(data, "updated_at", "number?", default=0.0)),
            extra={k: v for k, v in data.items() if k not in _TASK_FIELDS},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "subject": self.subject, "description": self.description, "status": str(self.status),
            "owner": self.owner, "worktree": self.worktree, "blockedBy": list(self.blockedBy),
            "created_at": self.created_at, "updated_at": self.updated_at, **self.extra,
        }

    @property
    def where(self) -> str:
        """Where its work is: its worktree here, else `NAME@HOST` of the worktree a host queue placed it in (its
        `remote` field, kept by `queue run --hosts`), else "". Read from the task file: shown only when both
        names are names (a file from a clone may hold anything)."""
        if self.worktree:
            return self.worktree
        remote = self.extra.get("remote")
        if not isinstance(remote, dict):
            return ""
        name, host = remote.get("worktree"), remote.get("host")
        if not isinstance(name, str) or not isinstance(host, str) or v.name_problem(name, new=False) \
                or v.name_problem(host, new=False):
            return ""
        return f"{name}@{host}"

    def listed(self) -> dict[str, Any]:
        """What `task list|show --json` print: the record and `where` (the local `worktree` binding stays a
        name of this repository's; a host's worktree is `remote.worktree` and shows in `where` as `NAME@HOST`)."""
        return {**self.to_dict(), "where": self.where}

    def brief(self) -> dict[str, Any]:
        """The part of a task an event carries."""
        return {"id": self.id, "subject": self.subject, "status": str(self.status)}


_ENTRY_FIELDS = ("name", "path", "branch", "base_ref", "base_commit", "task_id", "status", "ports", "created_at",
                 "kept_at", "removed_at")


@dataclass
class WorktreeEntry:
    """One entry of `.worktrees/index.json`."""

    name: str
    path: str
    branch: str
    base_ref: str
    base_commit: str
    task_id: int | None = None
    status: WorktreeStatus = WorktreeStatus.ACTIVE
    ports: list[int] = field(default_factory=list)
    created_at: float = 0.0
    kept_at: float | None = None
    removed_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return self.status in LIVE

    @classmethod
    def from_dict(cls, data: object) -> WorktreeEntry:
        """Build from a stored index entry, checking every field's type; raises ValueError (RecordError) on a
        malformed one. The entry is data: its `path` is checked against git before anything acts on it."""
        data = v.record(data, "index entry")
        name = v.field(data, "name", "str", required=True)
        problem = v.name_problem(name, new=False)
        if problem:
            raise v.RecordError(f"bad name {name!r}")
        path = v.field(data, "path", "str", required=True)
        if not path.startswith("/") or "\0" in path:
            raise v.RecordError(f"path {path!r} is not absolute")
        status = v.field(data, "status", "str", default="active")
        if status not in WorktreeStatus.__members__.values():
            raise v.RecordError(f"unknown status {status!r}")
        branch, base_ref = v.field(data, "branch", "str", default=""), v.field(data, "base_ref", "str", default="")
        base_commit = v.field(data, "base_commit", "str", default="")
        if branch.startswith("-") or base_ref.startswith("-") or not v.COMMIT_RE.fullmatch(base_commit):
            raise v.RecordError("branch, base_ref or base_commit is not a ref or commit id")
        kept_at = v.field(data, "kept_at", "number?")
        removed_at = v.field(data, "removed_at", "number?")
        return cls(
            name=name, path=path, branch=branch, base_ref=base_ref, base_commit=base_commit,
            task_id=v.field(data, "task_id", "id?"), status=WorktreeStatus(status),
            ports=list(v.field(data, "ports", "ports?", default=[])),
            created_at=float(v.field(data, "created_at", "number?", default=0.0)),
            kept_at=None if kept_at is None else float(kept_at),
            removed_at=None if removed_at is None else float(removed_at),
            extra={k: v for k, v in data.items() if k not in _ENTRY_FIELDS},
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "path": self.path, "branch": self.branch, "base_ref": self.base_ref,
            "base_commit": self.base_commit, "task_id": self.task_id, "status": str(self.status),
            "ports": list(self.ports), "created_at": self.created_at,
        }
        if self.kept_at is not None:
            out["kept_at"] = self.kept_at
        if self.removed_at is not None:
            out["removed_at"] = self.removed_at
        out.update(self.extra)
        return out

    def brief(self) -> dict[str, Any]:
        """The part of an entry an event carries."""
        return {"name": self.name, "path": self.path, "branch": self.branch, "status": str(self.status),
                "ports": list(self.ports)}
