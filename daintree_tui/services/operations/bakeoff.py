"""Bake-offs (`ops.bakeoff`): one task given to several agents, each in its own worktree from the same base commit,
and the pick of the winner (merged through the merge flow, the others removed, the task completed). The registry
and the scoring are services/bakeoff.py; these are the operations, every check made before a first candidate."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from daintree_tui.core import git as g
from daintree_tui.core import trust
from daintree_tui.core.errors import InputError
from daintree_tui.core.models import TaskStatus
from daintree_tui.core.worktrees import base_ref_error, slugify

if TYPE_CHECKING:
    from daintree_tui.services.bakeoff import Bakeoff
    from daintree_tui.services.operations.core import Operations


class BakeoffOps:
    """`ops.bakeoff`: creating a bake-off and picking its winner."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops
        self.services = ops.services

    def create(self, task_id: int, agents: list[str], *, score: str | None = None, base: str | None = None,
                       start_sessions: bool = True) -> Bakeoff:
        """One worktree per agent from the same base commit, each running its agent with the task as its prompt.
        Every agent is checked before any candidate exists; a failed create removes the candidates it made."""
        from daintree_tui.services.bakeoff import Bakeoff

        ops, services = self.ops, self.services
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
                ops.check_agent(preset)
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
            ops.check_host(names)  # before any worktree: no session host, or a name another repo holds
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

    def pick(self, bakeoff_id: str, name: str, *, strategy: str = "ff", delete_branches: bool = False,
                     caller: str | None = None) -> dict[str, Any]:
        """Merge the winner through the merge flow, remove the others (never one with uncommitted work),
        complete the task. `caller` is the session asking (its worktree; None: a person): its role must allow
        `merge` (and `remove`, when there are others), and a pick needing a person's approval is refused with the
        command for that person (no approval request can hold a pick)."""
        from daintree_tui.core.merge import STRATEGIES

        if strategy not in STRATEGIES:
            raise InputError(f"invalid strategy {strategy!r} (expected one of: {', '.join(STRATEGIES)})")
        ops, services = self.ops, self.services
        bakeoffs = services.bakeoffs
        record = bakeoffs.get(bakeoff_id)
        if name not in record.candidates:
            raise InputError(f"{name!r} is not a candidate of bake-off {bakeoff_id} "
                             f"({', '.join(record.candidates)})")
        command = ["bakeoff", "pick", bakeoff_id, name, "--strategy", strategy,
                   *(["--delete-branches"] if delete_branches else [])]
        for action in ("merge", "remove") if len(record.candidates) > 1 else ("merge",):
            ops.police(caller, action, command, queue=False)
        merged = ops.landing.merge(name, strategy=strategy, remove=True)
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
            ops.remove(other, delete_branch=delete_branches, force=delete_branches)
            removed.append(other)
        task = services.tasks.update(record.task_id, status=TaskStatus.COMPLETED)
        record = replace(record, status="picked", picked=name,
                         later={**record.later, "picked_at": time.time(), "removed": removed, "kept": kept})
        bakeoffs.update(record)
        services.project.events.append("bakeoff.picked", task=task.brief(), bakeoff=bakeoff_id, winner=name,
                                       removed=removed, kept=kept)
        return {"bakeoff": bakeoff_id, "winner": name, "merge": merged.to_dict(), "removed": removed, "kept": kept}
