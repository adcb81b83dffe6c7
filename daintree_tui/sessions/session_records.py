"""SessionRecords (`SessionManager.records`): every write of a session's record, each a read-modify-write under the
project lock.

The record (`.worktrees/.sessions/<name>.json`) is a cache of what was observed: a new run's record at its start
(given back when its pane fails to start), status transitions (a compare-and-set, so several observers record one
once), the agent's own signal, a budget's stop, a sandbox that could not start, the first lines of the prompts a
run was given. The other layers read it through sessions/session_info.py, never by a path of their own.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from daintree_tui.core import state_files, validate
from daintree_tui.core.project import Project
from daintree_tui.core.store import backup_path, write_json
from daintree_tui.core.tasks import TaskService
from daintree_tui.sessions.session_info import limit_of, session_record_path
from daintree_tui.sessions.status import SessionStatus

PROMPTS_KEPT = 5  # prompt lines a session's record keeps (the checkpoints name each turn's first)


def first_prompts(text: str | None, at: float) -> list[dict[str, Any]]:
    """`[{"text": first non-empty line (cut to 500), "at": at}]` of a prompt, or [] when it has none."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return [{"text": line[:500], "at": at}] if line else []


class SessionRecords:
    """The session records of one project; `tasks` names each event's task."""

    def __init__(self, project: Project, tasks: TaskService) -> None:
        self.project = project
        self.tasks = tasks

    def path(self, name: str) -> Path:
        return session_record_path(self.project, name)

    def read(self, name: str) -> dict[str, Any]:
        """The raw record, for this layer's own read-modify-writes; other layers use `SessionManager.record`."""
        data = state_files.read_own_state(self.project, self.path(name), "session record")
        return validate.session_record(data)  # each field of the wrong type dropped: the file is data

    # -- a run's start ---------------------------------------------------------------------------------------

    def begin(self, name: str, meta: dict[str, Any]) -> dict[str, Any]:
        """Write a new run's record; the record it replaced (empty: there was none) is returned for `give_back`."""
        with self.project.lock.hold():
            previous = self.read(name)
            write_json(self.path(name), meta)
        return previous

    def give_back(self, name: str, previous: dict[str, Any]) -> None:
        """The record from before a run whose pane failed to start (none: no record at all)."""
        path = self.path(name)
        with self.project.lock.hold():
            if previous:
                write_json(path, previous)
            else:
                path.unlink(missing_ok=True)
                backup_path(path).unlink(missing_ok=True)

    def unsandboxed(self, name: str, started_at: float, reason: str) -> bool:
        """The session's sandbox could not start when its pane did (bubblewrap's probe failed in the launcher, after
        this process had seen it work): its `auto` agent runs unconfined. The record of that run says so, for the
        SANDBOX column, and a `session.unsandboxed` event gives the reason. False when the record is another run's."""
        with self.project.lock.hold():
            meta = self.read(name)
            if meta.get("started_at") != started_at:
                return False
            was = meta.get("sandbox")
            mode = str(was.get("mode", "auto")) if isinstance(was, dict) else "auto"
            meta["sandbox"] = {"backend": "none", "mode": mode, "active": False, "at_start": "failed",
                               "reason": f"not sandboxed: bubblewrap could not start when the session did ({reason})"}
            write_json(self.path(name), meta)
        task_id = meta.get("task_id")
        task = self.tasks.brief_of(task_id) if isinstance(task_id, int) else None
        self.project.events.append("session.unsandboxed", worktree={"name": name}, agent=meta.get("agent"),
                                   reason=reason, mode=mode, task=task)
        return True

    # -- what a run does -------------------------------------------------------------------------------------

    def signal(self, name: str, state: str, at: float | None = None) -> SessionStatus | None:
        """Store the agent's own word on its state (`SessionManager.signal` checks it first); the status it means,
        or None for a signal older than the one stored (`at`: when its hook fired)."""
        now = time.time()
        ts = now if at is None or not (now - 3600 < at <= now + 5) else at
        with self.project.lock.hold():
            meta = self.read(name)
            prior = meta.get("signal") or {}
            if isinstance(prior.get("ts"), int | float) and prior["ts"] > ts:
                return None
            meta["signal"] = {"state": state, "ts": ts}
            write_json(self.path(name), meta)
        return SessionStatus(state)

    def mark_over_budget(self, name: str, budget: dict[str, Any] | None) -> None:
        """Record in the session record that a budget stopped it (or, with None, that it no longer does)."""
        with self.project.lock.hold():
            meta = self.read(name)
            if not meta:
                return
            if budget is None:
                meta.pop("over_budget", None)
            else:
                meta["over_budget"] = {**budget, "ts": time.time()}
            write_json(self.path(name), meta)

    def note_prompt(self, name: str, text: str) -> None:
        """Remember the first line of what the agent was given (a first prompt, a send, a paste) and when: the
        checkpoint at the end of its turn names the turn's first prompt (`turn_prompt`)."""
        noted = first_prompts(text, time.time())
        if not noted:
            return
        with self.project.lock.hold():
            meta = self.read(name)
            if not meta:
                return
            kept = [p for p in meta.get("prompts") or [] if isinstance(p, dict)][-(PROMPTS_KEPT - 1):]
            meta["prompts"] = [*kept, *noted]
            write_json(self.path(name), meta)

    def turn_prompt(self, name: str, since: float) -> str | None:
        """The first prompt line given to worktree `name`'s current run after `since` (epoch seconds), if any."""
        for noted in self.read(name).get("prompts") or []:
            if isinstance(noted, dict) and isinstance(noted.get("text"), str) and validate.is_number(
                    noted.get("at")) and noted["at"] > since:
                return str(noted["text"])
        return None

    # -- transitions -----------------------------------------------------------------------------------------

    def transition(self, name: str, status: SessionStatus, exit_code: int | None,
                   reason: str | None = None) -> bool:
        """Store a status change and log it as `session.<status>`; True only for the one caller that made the
        change (a compare-and-set under the project lock, so several observers record it once).

        An exited run stays exited: only a start writes a new run's record. An observer's change that was on its
        way when the session was stopped (a quiet timer saying `waiting`) wrote `waiting` over the stop, and the
        dashboard then took the stopped session for one the tmux server had lost."""
        with self.project.lock.hold():
            meta = self.read(name)
            if meta.get("status") in (str(status), str(SessionStatus.EXITED)):
                return False
            meta["status"] = str(status)
            if status == SessionStatus.EXITED:
                meta["exit_code"] = exit_code
                self._read_limit(name, meta)
            write_json(self.path(name), meta)
        if status in (SessionStatus.WAITING, SessionStatus.EXITED, SessionStatus.RUNNING, SessionStatus.STALLED):
            task_id = meta.get("task_id")
            task = self.tasks.brief_of(task_id) if isinstance(task_id, int) else None
            self.project.events.append(f"session.{status}", worktree={"name": name}, agent=meta.get("agent"),
                                       exit_code=exit_code if status == SessionStatus.EXITED else None,
                                       reason=reason, task=task, limit=limit_of(meta))
        return True

    def _read_limit(self, name: str, meta: dict[str, Any]) -> None:
        """At a run's exit: the limit that stopped it into the record as `limit` (see `limit_said`)."""
        said = self.limit_said(name, meta)
        if said is not None:
            meta["limit"] = said
            from daintree_tui.sessions.sandbox import limit_reason_file

            limit_reason_file(self.project, name).unlink(missing_ok=True)

    def limit_said(self, name: str, meta: dict[str, Any]) -> str | None:
        """The limit that stopped this run, as its limits runner wrote it (outside the sandbox) for the group this
        run's record names; None when no limit did."""
        sandbox = meta.get("sandbox")
        group = sandbox.get("group") if isinstance(sandbox, dict) else None
        if not isinstance(group, str):
            return None
        from daintree_tui.sessions.sandbox import limit_reason_file

        try:
            said = json.loads(limit_reason_file(self.project, name).read_text())
        except (OSError, ValueError):
            return None
        if isinstance(said, dict) and said.get("group") == group and said.get("reason") in ("oom-killed",
                                                                                            "pids limit"):
            return str(said["reason"])
        return None
