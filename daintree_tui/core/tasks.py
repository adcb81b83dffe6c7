"""Tasks, the control plane: `.tasks/task_<id>.json`, `pending -> in_progress -> completed`."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from daintree_tui.core import git as g
from daintree_tui.core.errors import InputError
from daintree_tui.core.log import warn
from daintree_tui.core.models import Task, TaskStatus
from daintree_tui.core.project import Project
from daintree_tui.core.store import read_json, write_json
from daintree_tui.core.validate import escape_controls

TASK_FILE = re.compile(r"^task_([0-9]+)\.json$")
_IGNORED_SUFFIXES = (".bak", ".tmp", ".lock")


def parse_status(value: str) -> TaskStatus:
    try:
        return TaskStatus(value)
    except ValueError:
        allowed = ", ".join(s.value for s in TaskStatus)
        raise InputError(f"invalid status {value!r} (expected one of: {allowed})") from None


class TaskService:
    """Create, read and change tasks. Every read-modify-write holds the project lock."""

    def __init__(self, project: Project) -> None:
        self.project = project

    @property
    def dir(self) -> Path:
        return self.project.tasks_dir

    def path(self, task_id: int) -> Path:
        return self.dir / f"task_{task_id}.json"

    # -- reading -------------------------------------------------------------------------------------------

    def ids_on_disk(self) -> list[int]:
        ids = set()
        if self.dir.is_dir():
            for entry in self.dir.iterdir():
                name = entry.name[:-4] if entry.name.endswith(".bak") else entry.name
                match = TASK_FILE.match(name)
                if match:
                    ids.add(int(match.group(1)))
        return sorted(ids)

    def _load(self, task_id: int, *, heal: bool = False) -> Task | None:
        path = self.path(task_id)
        data, problem = read_json(path, "task file")
        if problem:
            warn(problem)
        if data is None:
            return None
        try:
            task = Task.from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:
            warn(f"skipping {path}: not a task ({exc})")
            return None
        if task.id != task_id:
            warn(f"skipping {path}: its id is {task.id}")
            return None
        if problem and heal:
            write_json(path, task.to_dict())
        return task

    def list(self, status: TaskStatus | None = None) -> list[Task]:
        """Every readable task, by id; junk files in `.tasks/` are skipped with a warning."""
        if self.dir.is_dir():
            for entry in self.dir.iterdir():
                if entry.name.startswith(".") or entry.name.endswith(_IGNORED_SUFFIXES):
                    continue
                if not TASK_FILE.match(entry.name):
                    warn(f"skipping {entry}: not a task file")
        tasks = [t for t in (self._load(i) for i in self.ids_on_disk()) if t is not None]
        return [t for t in tasks if status is None or t.status == status]

    def get(self, task_id: int) -> Task:
        task = self._load(task_id) if task_id > 0 else None
        if task is None:
            raise InputError(f"no task with id {task_id}")
        return task

    def find(self, task_id: int) -> Task | None:
        return self._load(task_id)

    def brief_of(self, task_id: int | None) -> dict[str, Any] | None:
        """What an event about a worktree bound to `task_id` says of its task (None when unbound or unreadable):
        every event names the task its worktree works on, so the planes stay linked by ids (docs/design.md 1)."""
        task = self._load(task_id) if task_id is not None else None
        return task.brief() if task is not None else None

    def role(self, task: Task) -> str | None:
        """The role the task gives whoever works on it (the user's `task create --role`, a lead's request).

        A task file that git tracks came with the repository (a clone, a pull): its `role` would choose one of the
        user's roles, a lead's unsandboxed one say, for an agent working on that repository's text. It counts for
        nothing, with a warning.
        """
        role = task.extra.get("role")
        if not isinstance(role, str):
            return None
        path = self.path(task.id)
        if path.is_relative_to(self.project.root) and self.project.is_git:
            rel = path.relative_to(self.project.root).as_posix()
            if g.git(self.project.root, "ls-files", "-z", "--", f":(literal){rel}", check=False).stdout:
                warn(f"task {task.id}: its role {role!r} is ignored: {rel} is tracked by git (it came with the "
                     "repository, not from you)")
                return None
        return role

    def tracked_ids(self) -> set[int]:
        """The ids of the task files git tracks: they came with the repository (a clone, a pull), so their
        `agent` does not choose which of the user's agents runs their text by itself (the queue leaves them)."""
        root = self.project.root
        if not self.project.is_git or not self.dir.is_relative_to(root):
            return set()
        rel = self.dir.relative_to(root).as_posix()
        listed = g.git(root, "ls-files", "-z", "--", f":(literal){rel}/", check=False).stdout
        return {int(m.group(1)) for name in listed.split("\0") if (m := TASK_FILE.match(Path(name).name))}

    # -- writing -------------------------------------------------------------------------------------------

    def save(self, task: Task) -> None:
        task.updated_at = time.time()
        write_json(self.path(task.id), task.to_dict())

    def create(self, subject: str, description: str = "", blocked_by: Iterable[int] = (),
               extra: dict[str, object] | None = None) -> Task:
        """Create a task with the next free id (allocated under the lock: parallel creators never collide)."""
        subject = escape_controls(subject.strip())
        description = escape_controls(description)
        if not subject:
            raise InputError("a task needs a non-empty subject")
        blocked = sorted(set(blocked_by))
        with self.project.lock.hold():
            ids = self.ids_on_disk()
            for dep in blocked:
                if dep not in ids:
                    raise InputError(f"blocked-by names no task with id {dep}")
            self.project.ensure_excluded()
            now = time.time()
            task = Task(id=(ids[-1] + 1) if ids else 1, subject=subject, description=description,
                        blockedBy=blocked, created_at=now, updated_at=now, extra=dict(extra or {}))
            self.dir.mkdir(parents=True, exist_ok=True)
            write_json(self.path(task.id), task.to_dict())
            self.project.events.append("task.created", task=task.brief())
        return task

    def update(self, task_id: int, *, status: TaskStatus | None = None, owner: str | None = None,
               subject: str | None = None, description: str | None = None,
               blocked_by: Iterable[int] | None = None) -> Task:
        """Change the given fields; `task.completed` is logged when the status becomes completed."""
        if subject is not None and not subject.strip():
            raise InputError("a task needs a non-empty subject")
        with self.project.lock.hold():
            task = self.get(task_id)
            if blocked_by is not None:
                blocked = sorted(set(blocked_by))
                ids = self.ids_on_disk()
                for dep in blocked:
                    if dep == task_id:
                        raise InputError("a task cannot be blocked by itself")
                    if dep not in ids:
                        raise InputError(f"blocked-by names no task with id {dep}")
                task.blockedBy = blocked
            before = task.status
            if status is not None:
                task.status = status
            if owner is not None:
                task.owner = owner
            if subject is not None:
                task.subject = escape_controls(subject.strip())
            if description is not None:
                task.description = escape_controls(description)
            self.save(task)
            bound = {"name": task.worktree} if task.worktree else None  # the plane it is linked to (docs/design.md 1)
            self.project.events.append("task.updated", task=task.brief(), worktree=bound)
            if task.status == TaskStatus.COMPLETED and before != TaskStatus.COMPLETED:
                self.project.events.append("task.completed", task=task.brief(), worktree=bound)
        return task

    def bind(self, task_id: int, worktree: str) -> Task:
        """Bind a task to a worktree: pending becomes in_progress. Caller holds the lock."""
        task = self.get(task_id)
        task.worktree = worktree
        if task.status == TaskStatus.PENDING:
            task.status = TaskStatus.IN_PROGRESS
        self.save(task)
        self.project.events.append("task.updated", task=task.brief(), worktree={"name": worktree})
        return task

    def unbind(self, task_id: int, *, complete: bool = False) -> Task | None:
        """Unbind a task from its worktree: it goes back to pending, or completed when asked. Caller holds the lock."""
        task = self.find(task_id)
        if task is None:
            return None
        name = task.worktree
        task.worktree = ""
        if complete:
            task.status = TaskStatus.COMPLETED
        elif task.status == TaskStatus.IN_PROGRESS:
            task.status = TaskStatus.PENDING
        self.save(task)
        self.project.events.append("task.updated", task=task.brief(), worktree={"name": name})
        if complete:
            self.project.events.append("task.completed", task=task.brief(), worktree={"name": name})
        return task
