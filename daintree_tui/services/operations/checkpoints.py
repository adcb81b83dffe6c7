"""A worktree's checkpoints (`ops.checkpoints`): listing them, taking one by hand or at the end of an agent's
turn, the diff between two, and restoring one. The chain itself, stored as commits under a ref of ours, is
core/checkpoints.py; these add what an operation adds: a person's checks and the events."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daintree_tui.core.errors import InputError, OperationError

if TYPE_CHECKING:
    from daintree_tui.core.checkpoints import Checkpoint, Restored
    from daintree_tui.core.models import WorktreeEntry
    from daintree_tui.services.operations.core import Operations


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


class CheckpointOps:
    """`ops.checkpoints`: the checkpoint operations of one project."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops
        self.services = ops.services

    def list(self, name: str, every: bool = False) -> builtins.list[Checkpoint]:
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

    def _made(self, entry: WorktreeEntry, made: Checkpoint) -> None:
        services = self.services
        services.project.events.append("checkpoint.created", worktree=entry.brief(), checkpoint=made.id,
                                       commit=made.commit, reason=made.reason, files=made.files,
                                       task=services.tasks.brief_of(entry.task_id))

    def create(self, name: str) -> tuple[Checkpoint | None, Checkpoint | None]:
        """A checkpoint of worktree `name`'s files now, by hand: the new one (None when nothing changed since the
        last) and the newest after (None: there is none, the files are as at the worktree's base)."""
        from daintree_tui.core import checkpoints

        entry = self._checkpointable(name, "create")
        made, newest = checkpoints.take(self.services.project, entry, "manual")
        if made is not None:
            self._made(entry, made)
        return made, newest

    def turn(self, name: str, status: str) -> Checkpoint | None:
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
        prompt = services.sessions.records.turn_prompt(name, newest.ts if newest else 0.0)
        made, _ = checkpoints.take(project, entry, status if status in checkpoints.REASONS else "manual", prompt)
        if made is not None:
            self._made(entry, made)
        return made

    def diff(self, name: str, first: str, second: str | None = None, *,
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

    def restore(self, name: str, ident: str) -> Restored:
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
            self._made(entry, made)
        if before is None:  # no checkpoint at all, though the target is one: it was removed meanwhile
            raise OperationError(f"worktree {name}'s checkpoints went away meanwhile: nothing was restored")
        files, exact = checkpoints.restore(project, entry, target, tree)
        result = checkpoints.Restored(name, target, before, tuple(files), exact)
        project.events.append("checkpoint.restored", worktree=entry.brief(), checkpoint=target.id,
                              commit=target.commit, before=before.id, files=len(files), exact=exact,
                              task=services.tasks.brief_of(entry.task_id))
        return result
