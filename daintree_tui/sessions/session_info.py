"""What the other layers read of a session: its record on disk, and `SessionInfo`, a session as the CLI and the
dashboard see it.

The record (`.worktrees/.sessions/<name>.json`: agent, command, start time, last recorded status, the agent's own
signal) is written by the sessions layer alone (sessions/session_records.py); the other layers read it here, never
by a path of their own. A record that git tracks came with the repository's history, not from us, and is ignored
(state_files.read_own_state).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daintree_tui.core import state_files
from daintree_tui.core.project import Project
from daintree_tui.sessions.status import SessionStatus


def session_record_path(project: Project, name: str) -> Path:
    """Where the sessions layer keeps worktree `name`'s session record (other layers ask here, never guess)."""
    return project.state_dir / ".sessions" / f"{name}.json"


@dataclass(frozen=True)
class SessionRecord:
    """What the sessions layer remembers of a worktree's session (the other layers' view of the record)."""

    agent: str | None
    status: str | None  # the status last recorded
    exit_code: int | None
    started_at: float | None
    role: str | None = None  # the role it was started with (what `daintree mcp` inside the session trusts)

    @property
    def ended(self) -> bool:
        """Recorded as exited, whether it was stopped on purpose or ended by itself."""
        return self.status == "exited"


def read_session_record(project: Project, name: str) -> SessionRecord | None:
    """Worktree `name`'s session record, or None when it has none (or it is unreadable)."""
    data = state_files.read_own_state(project, session_record_path(project, name), "session record")
    if not isinstance(data, dict) or not data:
        return None
    agent, status, code, started, role = (data.get(k) for k in ("agent", "status", "exit_code", "started_at", "role"))
    return SessionRecord(agent=agent if isinstance(agent, str) else None,
                         status=status if isinstance(status, str) else None,
                         exit_code=code if isinstance(code, int) else None,
                         started_at=float(started) if isinstance(started, int | float) else None,
                         role=role if isinstance(role, str) and role else None)


@dataclass(frozen=True)
class SessionInfo:
    """One session as the CLI and the dashboard see it."""

    name: str
    session: str
    agent: str
    status: SessionStatus
    exit_code: int | None
    pid: int | None
    started_at: float
    log: str
    persistent: bool
    recorded: str | None = None  # the status last recorded for it; None when it has no session record
    socket: str | None = None  # the tmux server (`tmux -L`): how a remote dashboard attaches over ssh
    tmux_conf: str | None = None
    sandbox: dict[str, Any] | None = None  # backend, mode, active, reason (None: started before sandboxing)
    status_source: str = "output"  # hooks (the agent's own word), hooks-pending (wired, none yet), output
    over_budget: dict[str, Any] | None = None  # set when a budget stopped this session
    limit: str | None = None  # "oom-killed" or "pids limit": the cgroup limit that stopped this session
    usage: dict[str, Any] | None = None  # tokens and estimated cost of the current run, when asked for

    @property
    def unrecorded(self) -> bool:
        """Whether its observed status differs from the one last recorded (a transition to record)."""
        return self.recorded is not None and self.recorded != str(self.status)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "session": self.session, "agent": self.agent, "status": str(self.status),
                "exit_code": self.exit_code, "pid": self.pid, "started_at": self.started_at, "log": self.log,
                "persistent": self.persistent, "socket": self.socket, "tmux_conf": self.tmux_conf,
                "sandbox": self.sandbox, "status_source": self.status_source, "over_budget": self.over_budget,
                "limit": self.limit, "usage": self.usage}


def limit_of(meta: Mapping[str, Any]) -> str | None:
    """The limit that stopped the session's run, by its record (the limits runner's word, read at its exit)."""
    limit = meta.get("limit")
    return limit if limit in ("oom-killed", "pids limit") else None


def status_source_of(meta: Mapping[str, Any]) -> str:
    """Where a session's status comes from, by its record: `hooks` (the agent's own word), `hooks-pending` (wired,
    no signal yet) or `output` (its output going quiet)."""
    if meta.get("status_source") == "hooks":
        return "hooks" if meta.get("signal") else "hooks-pending"
    return "output"
