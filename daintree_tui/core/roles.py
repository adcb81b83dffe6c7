"""The role a worktree's commands run under (docs/design.md 2a rule 8: roles are capabilities of the mount table).

The one rule for roles: services.policy.role_of uses it too (it lives in core because hooks and `run` need it to
pick the sandbox mode, and core cannot import sessions or services).
"""

from __future__ import annotations

from daintree_tui.core.index import Index, find
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.state_files import read_own_state
from daintree_tui.core.tasks import TaskService


def worktree_role(project: Project, name: str, entry: WorktreeEntry | None = None) -> str | None:
    """The role a worktree's commands run under: its task's, else its session's agent's, else `default_role`.
    `entry`: the worktree's index entry when the caller holds it (the facts of 100 worktrees read the index once,
    not once each)."""
    cfg = project.config
    if entry is None or entry.name != name:
        entry = find(Index(project).load(), name)
    if entry is not None and entry.task_id is not None:
        tasks = TaskService(project)
        task = tasks.find(entry.task_id)
        role = tasks.role(task) if task is not None else None
        if role is not None:
            return role
    record = read_own_state(project, project.state_dir / ".sessions" / f"{name}.json", "session record")
    if isinstance(record, dict) and isinstance(record.get("role"), str):
        return str(record["role"])  # the role its session was started with
    agent = record.get("agent") if isinstance(record, dict) else None
    if isinstance(agent, str) and agent in cfg.agents and cfg.agents[agent].role:
        return cfg.agents[agent].role
    return cfg.default_role
