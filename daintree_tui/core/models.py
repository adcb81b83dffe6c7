"""The records of the three planes, as they are stored on disk (DESIGN.md section 1)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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
    def from_dict(cls, data: dict[str, Any]) -> Task:
        """Build from a stored record; raises ValueError/TypeError/KeyError on a malformed one."""
        status = TaskStatus(data.get("status", "pending"))
        blocked = data.get("blockedBy") or []
        if not isinstance(blocked, list):
            raise ValueError("blockedBy must be a list")
        return cls(
            id=int(data["id"]), subject=str(data.get("subject", "")), description=str(data.get("description") or ""),
            status=status, owner=str(data.get("owner") or ""), worktree=str(data.get("worktree") or ""),
            blockedBy=[int(b) for b in blocked], created_at=float(data.get("created_at") or 0.0),
            updated_at=float(data.get("updated_at") or 0.0),
            extra={k: v for k, v in data.items() if k not in _TASK_FIELDS},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "subject": self.subject, "description": self.description, "status": str(self.status),
            "owner": self.owner, "worktree": self.worktree, "blockedBy": list(self.blockedBy),
            "created_at": self.created_at, "updated_at": self.updated_at, **self.extra,
        }

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
    def from_dict(cls, data: dict[str, Any]) -> WorktreeEntry:
        task_id = data.get("task_id")
        return cls(
            name=str(data["name"]), path=str(data["path"]), branch=str(data.get("branch", "")),
            base_ref=str(data.get("base_ref", "")), base_commit=str(data.get("base_commit", "")),
            task_id=None if task_id is None else int(task_id), status=WorktreeStatus(data.get("status", "active")),
            ports=[int(p) for p in data.get("ports") or []], created_at=float(data.get("created_at") or 0.0),
            kept_at=data.get("kept_at"), removed_at=data.get("removed_at"),
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
