"""Back after a reboot: sessions whose tmux server is gone, started again with their agent's resume.

A session is lost when its record says it ran (not exited, or exited with the hangup its server's death gave it),
its worktree is live, and the server has no session of that name any more: the machine restarted, or the server
was killed. The dashboard's start and `daintree doctor` look for them; they offer to start each again, and with
`sessions.resume_after_restart = true` (or `doctor --resume`) do so: the agent's own resume (`claude --continue`,
`codex resume --last`, ...; an agent without one starts plainly, with no first prompt, so it does not start the
task over) in its own worktree.

Once: each lost run is claimed in `.worktrees/.resumed.json` under the project lock before it is started (or when
the offer is declined), so two dashboards, or a dashboard and `doctor`, never start it twice, and a declined
offer is not made again for that run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daintree_tui.core.errors import DaintreeError
from daintree_tui.core.project import Project
from daintree_tui.core.state_files import read_own_state
from daintree_tui.core.store import write_json

if TYPE_CHECKING:
    from daintree_tui.services.container import Services

START_SETTLE = 30.0  # a record younger than this may be a start under way (its pane not up yet): not lost


@dataclass(frozen=True)
class LostSession:
    """A session that vanished with its tmux server."""

    name: str
    agent: str
    started_at: float
    can_resume: bool

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "agent": self.agent, "started_at": self.started_at,
                "can_resume": self.can_resume}


@dataclass(frozen=True)
class Resumed:
    """What became of one lost session: started again (`session`), or why not (`error`)."""

    lost: LostSession
    session: str | None = None
    command: tuple[str, ...] = ()
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.lost.to_dict(), "resumed": self.error is None, "session": self.session,
                "command": list(self.command), "error": self.error}


def _handled_path(project: Project) -> Path:
    return project.state_dir / ".resumed.json"


def _handled(project: Project) -> dict[str, float]:
    data = read_own_state(project, _handled_path(project), "resume record")
    runs = data.get("handled") if isinstance(data, dict) else None
    if not isinstance(runs, dict):
        return {}
    return {k: float(v) for k, v in runs.items() if isinstance(k, str) and isinstance(v, int | float)}


def lost_sessions(services: Services, now: float | None = None) -> list[LostSession]:
    """The sessions lost with their tmux server and not yet resumed nor declined (none without tmux)."""
    from daintree_tui.services.container import HANGUP_EXIT
    from daintree_tui.sessions.presets import all_presets
    from daintree_tui.sessions.tmux import TmuxHost

    host = services.host
    project = services.project
    if not isinstance(host, TmuxHost) or not project.is_git:
        return []
    on_server = {pane.worktree for pane in host.list()}
    handled = _handled(project)
    presets = all_presets(project.config)
    now = time.time() if now is None else now
    lost = []
    for entry in services.worktrees.entries():
        if entry.name in on_server or not Path(entry.path).is_dir():
            continue
        record = services.sessions.record(entry.name)
        if record is None or not record.agent or record.started_at is None:
            continue
        if record.ended and record.exit_code != HANGUP_EXIT:
            continue  # it ended on its own, or was stopped on purpose
        if now - record.started_at < START_SETTLE or handled.get(entry.name) == record.started_at:
            continue
        preset = presets.get(record.agent)
        if preset is None:
            continue  # an agent no longer in the config: nothing to start again
        lost.append(LostSession(entry.name, record.agent, record.started_at, preset.can_resume))
    return lost


def _claim(project: Project, lost: LostSession) -> bool:
    """Mark the lost run handled; False when another process did first."""
    with project.lock.hold():
        raw = read_own_state(project, _handled_path(project), "resume record")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        found = data.get("handled")
        runs: dict[str, Any] = found if isinstance(found, dict) else {}
        if runs.get(lost.name) == lost.started_at:
            return False
        runs[lost.name] = lost.started_at
        write_json(_handled_path(project), {**data, "handled": runs})
    return True


def decline(services: Services, lost: Sequence[LostSession]) -> None:
    """The person said no: the offer is not made again for these runs."""
    for item in lost:
        _claim(services.project, item)


def resume(services: Services, lost: Sequence[LostSession], size: tuple[int, int] | None = None) -> list[Resumed]:
    """Start each lost session again in its own worktree, with its agent's resume where it has one; each once."""
    results = []
    for item in lost:
        if not _claim(services.project, item):
            continue
        try:
            # Through the operation: a resumed agent's command meets the same checks (trust) as a new start.
            info = services.ops.start_session(item.name, item.agent, size=size, resume=item.can_resume,
                                              use_task_prompt=False)
        except DaintreeError as exc:
            results.append(Resumed(item, error=str(exc)))
            continue
        command = services.sessions.meta(item.name).get("command")
        results.append(Resumed(item, session=info.session,
                               command=tuple(command) if isinstance(command, list) else ()))
    return results


def describe(lost: LostSession) -> str:
    how = f"`daintree session start {lost.name} --resume`" if lost.can_resume else \
        f"`daintree session start {lost.name}` (its agent has no resume)"
    return f"session of {lost.name} ({lost.agent}) ended with its tmux server (a restart?): {how} continues it"
