"""Who is asking, and so which tools an MCP server offers.

Two levels: `lead` (every tool: create tasks and worktrees, start sessions, bake-offs) and `worker` (its own
task, its own worktree's status, its own session, the events that concern it). A person's own `daintree mcp`
outside any session is a lead unless `--role` says otherwise: the user's own command line is trusted.

Inside a session the role comes from the session's record, which daintree wrote when it started the session
(`.worktrees/.sessions/<name>.json`: `role`, else the configured role of its agent), never from an environment
variable or a flag the agent could set itself: a `--role` that disagrees with the record is ignored with a
warning. Which worktree is "this session" is found from `--worktree` (set by the wiring), `DAINTREE_WORKTREE`, or
the linked worktree that holds the current directory (all that are given must agree); naming one only ever
narrows what is offered.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from daintree_tui.core.config import MCP_LEVELS, Config
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.log import warn
from daintree_tui.core.project import Project
from daintree_tui.sessions.session_info import read_session_record

LEAD = "lead"
WORKER = "worker"
LEVELS = MCP_LEVELS


@dataclass(frozen=True)
class Access:
    """What one MCP server may do.

    Attributes:
        level: `lead` or `worker`.
        role: the configured role the level came from (None for a person's own server).
        worktree: the worktree of the session this server serves (None outside sessions).
        task_id: that worktree's task, the only one a worker may read or update.
    """

    level: str
    role: str | None = None
    worktree: str | None = None
    task_id: int | None = None

    @property
    def is_lead(self) -> bool:
        return self.level == LEAD

    def to_dict(self) -> dict[str, object]:
        return {"level": self.level, "role": self.role, "worktree": self.worktree, "task_id": self.task_id}


def level_of(cfg: Config, role: str | None) -> str:
    """The tool set of a role: its `mcp` key in `[roles.<role>]`, else `lead` for a role named lead, else worker."""
    if role is None:
        return WORKER
    configured = cfg.roles.get(role)
    if configured is not None and configured.mcp in LEVELS:
        return str(configured.mcp)
    return LEAD if role == LEAD else WORKER


def _containing_worktree(project: Project, cwd: Path) -> str | None:
    """The live linked worktree that holds `cwd`, if any (an agent's tools start in its worktree)."""
    if not project.is_git:
        return None
    here = cwd.resolve()
    for entry in Index(project).load():
        path = Path(entry.path)
        if entry.live and (here == path or path in here.parents):
            return entry.name
    return None


def session_worktree(project: Project, flag: str | None, cwd: Path | None = None) -> str | None:
    """The worktree whose session this server serves, or None for a person's own server. `--worktree`,
    `DAINTREE_WORKTREE` and the current directory must agree: a server that a session inherited from another (a
    lead's wiring leaking into a worker it started) refuses rather than serve the wrong session."""
    named = {n for n in (flag, os.environ.get("DAINTREE_WORKTREE"), _containing_worktree(project, cwd or Path.cwd()))
             if n}
    if len(named) > 1:
        raise OperationError(f"conflicting session identity: {', '.join(sorted(named))} (from --worktree, "
                             "DAINTREE_WORKTREE and the current directory)")
    return named.pop() if named else None


def recorded_role(project: Project, worktree: str) -> str | None:
    """The role daintree recorded when it started the session of `worktree` (older records: its agent's)."""
    record = read_session_record(project, worktree)
    if record is None:
        return None
    if record.role:
        return record.role
    cfg = project.config
    if record.agent in cfg.agents and cfg.agents[record.agent].role:
        return cfg.agents[record.agent].role
    return cfg.default_role


def resolve_access(project: Project, role_flag: str | None = None, worktree_flag: str | None = None,
                   cwd: Path | None = None) -> Access:
    """Decide the access of a server started with these flags from here (see the module docstring)."""
    cfg = project.config
    if role_flag is not None and role_flag not in cfg.roles and role_flag not in LEVELS:
        known = sorted({*cfg.roles, *LEVELS})
        raise InputError(f"unknown role {role_flag!r} (known: {', '.join(known)})")
    worktree = session_worktree(project, worktree_flag, cwd)
    if worktree is None:
        return Access(level_of(cfg, role_flag) if role_flag else LEAD, role_flag)
    return session_access(project, worktree, role_flag)


def session_access(project: Project, worktree: str, role_flag: str | None = None) -> Access:
    """The access of the session of `worktree`, from daintree's own record of it (a sandboxed session's calls
    through its inbox get the access of the inbox's owner this way, whatever the request says)."""
    project.require_git()
    entry = find(Index(project).load(), worktree)
    if entry is None or not entry.live:
        raise InputError(f"no live worktree named {worktree!r}")
    role = recorded_role(project, worktree)
    if role_flag is not None and role_flag != role:
        warn(f"--role {role_flag} ignored: the session of {worktree} was started with role {role or '(none)'}")
    return Access(level_of(project.config, role), role, worktree, entry.task_id)
