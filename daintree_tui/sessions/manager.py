"""SessionManager: the sessions plane over a host. Starts agents in worktrees, observes them with their status,
sends them input, stops them, and stores status transitions when asked to. It is the one entry point, and holds
the parts with a job of their own: `starter` (sessions/session_start.py: how an agent starts, every check first)
and `records` (sessions/session_records.py: every write of a session's record).

Observing (`observe`, `list`) writes nothing: recording what was observed (a `session.*` event per transition,
and the hooks a transition runs) belongs to one owner above this layer, the services' `SessionObserver`.

Per-session metadata (`.worktrees/.sessions/<name>.json`: agent, command, start time, last recorded status, the
agent's own signal) is a cache of what was observed; tmux and the log file are the truth.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.log import warn
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.worktrees import require_worktree_ours
from daintree_tui.sessions.agents import AgentIntegration, SessionContext, integration_for
from daintree_tui.sessions.host import PaneState, SessionHost
from daintree_tui.sessions.host_choice import host_for
from daintree_tui.sessions.pane_facts import PaneFacts
from daintree_tui.sessions.presets import Preset, all_presets, resolve_preset
from daintree_tui.sessions.records import UsageTracker, session_dir
from daintree_tui.sessions.session_info import (
    SessionInfo,
    SessionRecord,
    limit_of,
    read_session_record,
    session_record_path,
    status_source_of,
)
from daintree_tui.sessions.session_records import SessionRecords
from daintree_tui.sessions.session_start import SessionStarter
from daintree_tui.sessions.status import SessionStatus, derive_status

# The record and the info views live in sessions/session_info.py; many callers import them from here.
__all__ = ["SIGNAL_STATES", "SessionInfo", "SessionManager", "SessionRecord", "read_session_record",
           "session_record_path", "status_source_of"]

SIGNAL_STATES = ("waiting", "running", "exited")
PASTE_SHOWS_WITHIN = 3.0  # seconds for a pasted message to show on the agent's screen before Enter


class SessionManager:
    """Sessions of one project."""

    def __init__(self, project: Project, host: SessionHost | None = None, *, tasks: TaskService | None = None,
                 index: Index | None = None) -> None:
        self.project = project
        resolved = host if host is not None else host_for(project, create=False)
        self._host = resolved
        # The services hand in the task board and the index they share with the worktrees; a manager made alone
        # (the launcher, the demo's clean-up, a test) reads its own.
        self.tasks = tasks if tasks is not None else TaskService(project)
        self.index = index if index is not None else Index(project)
        self.usage = UsageTracker(project)
        self.panes = PaneFacts(project, self.usage)
        self.records = SessionRecords(project, self.tasks)
        self.starter = SessionStarter(self)
        self.after_start: Callable[[str], object] | None = None
        """Told the worktree's name after each session start (the services start the notify watcher)."""

    @property
    def host(self) -> SessionHost:
        if self._host is None:
            raise OperationError("tmux is not installed: install tmux to run sessions from the command line "
                                 "(the dashboard can run them without it, but they end when it quits)")
        return self._host

    # -- metadata --------------------------------------------------------------------------------------------

    def meta_path(self, name: str) -> Path:
        return self.records.path(name)

    def meta(self, name: str) -> dict[str, Any]:
        """The raw record, for this layer's own reads; other layers use `record`, and every write is `records`'."""
        return self.records.read(name)

    def record(self, name: str) -> SessionRecord | None:
        return read_session_record(self.project, name)

    def live_entry(self, name: str) -> WorktreeEntry:
        """Worktree `name`, live and one of ours: where a session may start or signal."""
        self.project.require_git()
        entry = find(self.index.load(), name)
        if entry is None or not entry.live:
            raise InputError(f"no live worktree named {name!r}")
        if Path(entry.path).exists():
            require_worktree_ours(self.project, entry)  # an agent starts only in one of our worktrees
        return entry

    # -- lifecycle -------------------------------------------------------------------------------------------

    def preset(self, agent: str | None) -> Preset:
        return resolve_preset(self.project.config, agent)

    def start(self, name: str, agent: str | None = None, prompt: str | None = None,
              size: tuple[int, int] | None = None, use_task_prompt: bool = True, resume: bool = False) -> SessionInfo:
        """Start `agent` in worktree `name`; a session that already runs there is an error, an exited one is
        replaced. The task's subject and description become the first prompt unless `prompt` is given.
        With `resume`, the agent continues its last conversation in this worktree (its preset's resume command)
        and gets no first prompt; without `agent`, the agent the worktree's last session ran."""
        state, meta = self.starter.start(name, agent, prompt, size, use_task_prompt, resume)
        return self._info(name, state, meta, SessionStatus.STARTING)

    def stop(self, name: str) -> bool:
        """Stop the session of worktree `name` (no error when there is none)."""
        if not self.host.exists(name):
            return False
        # Record the intent first: an observer that sees the session (or the server) vanish must already
        # know it was stopped on purpose. When the record cannot be written (a full disk: the agent that filled
        # it is the one the user stops), the stop still happens: it refused, and the agent went on writing.
        try:
            self.records.transition(name, SessionStatus.EXITED, None, reason="stopped")
        except OperationError as exc:
            warn(f"stopping the session of {name} without recording it: {exc}")
        return self.host.stop(name)

    def restart(self, name: str, agent: str | None = None, prompt: str | None = None,
                size: tuple[int, int] = (200, 50), resume: bool = False) -> SessionInfo:
        """Replace the session of worktree `name` (running or exited) with a new one.

        Without `agent`, the agent its last session ran (else the default agent): `enter` on an exited session
        brings back that worktree's own agent, never a shell. Everything that can refuse (an unknown preset, a
        program that is not installed, a worktree that is not live) is checked before the old session is
        stopped, so a failed restart leaves the running agent alone.
        """
        entry = self.live_entry(name)
        if agent is None:
            record = self.record(name)
            agent = record.agent if record is not None else None
        preset = self.preset(agent)
        if resume:
            preset.resume_argv()  # an agent without a resume command is refused before anything stops
        preset.check_program(worktree_env(self.project, entry))
        self.stop(name)
        return self.start(name, preset.name, prompt=prompt, size=size, resume=resume)

    def signal(self, name: str, state: str, at: float | None = None) -> SessionStatus | None:
        """Store the agent's own word on its state (from its hooks); the status it means is returned for the
        observer to record. `at` is when the hook fired: a signal that arrives after a newer one (two hooks
        racing) is ignored (None)."""
        if state not in SIGNAL_STATES:
            raise InputError(f"invalid state {state!r} (expected one of: {', '.join(SIGNAL_STATES)})")
        self.live_entry(name)
        return self.records.signal(name, state, at)

    def context(self, name: str, env: dict[str, str] | None = None) -> SessionContext:
        """The paths an agent integration needs for session `name`."""
        entry = find(self.index.load(), name)
        worktree = Path(entry.path) if entry is not None else self.project.worktree_path(name)
        return SessionContext(name=name, root=self.project.root, worktree=worktree,
                              session_dir=session_dir(self.project, name), env=env if env is not None else {},
                              tmpdir=self.project.tmpdir_for(name))

    def integration_of(self, name: str, meta: dict[str, Any] | None = None) -> AgentIntegration | None:
        meta = self.meta(name) if meta is None else meta
        if meta.get("status_source") != "hooks":
            return None
        command = meta.get("command")
        return integration_for(command[0] if isinstance(command, list) and command else None)

    def usage_summary(self, names: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Tokens and estimated cost of each session's current run (as last read; `update_usage` reads more)."""
        return {name: runs[0].totals.to_dict() for name, runs in self.usage.current_runs(names).items() if runs}

    def update_usage(self, name: str) -> None:
        """Read the session's new usage records (its agent's own files)."""
        integration = self.integration_of(name)
        if integration is not None:
            self.usage.update(name, self.context(name, dict(os.environ)), integration)

    # -- observation -----------------------------------------------------------------------------------------

    def observe(self, with_screens: bool = True) -> list[SessionInfo]:
        """Every session with its derived status and the status last recorded for it. Writes nothing."""
        host = self._host
        if host is None:
            return []
        # The config once a pass: each look checks its three files for changes, and this ran two a session.
        config = self.project.config
        presets = all_presets(config)
        states = host.list()
        metas = {s.worktree: self.meta(s.worktree) for s in states}
        patterns = {w: presets[m["agent"]].waiting_pattern for w, m in metas.items() if m.get("agent") in presets}
        wanted = [w for w, p in patterns.items() if p]
        screens = self.screens(wanted) if with_screens and wanted else {}
        infos = []
        now = time.time()
        for state in states:
            meta = metas[state.worktree]
            status = derive_status(self.panes.observation(state, meta, screens.get(state.worktree)), now,
                                   config.waiting_debounce, patterns.get(state.worktree), config.stalled_after)
            infos.append(self._info(state.worktree, state, meta, status))
        return sorted(infos, key=lambda i: i.started_at)

    def list(self, with_screens: bool = True) -> list[SessionInfo]:
        """Every session with its derived status (the same as `observe`: a listing never records)."""
        return self.observe(with_screens)

    def screens(self, names: Sequence[str]) -> dict[str, str]:
        """The plain-text screens of these sessions (captured only when their log grew: see PaneFacts)."""
        return self.panes.screens(self.host, names)

    def drawn(self, name: str, meta: Mapping[str, Any], started_at: float) -> bool | None:
        """Whether the session's current run has drawn anything visible (None: its record cannot tell)."""
        return self.panes.drawn(name, meta, started_at)

    def _info(self, name: str, state: PaneState, meta: dict[str, Any], status: SessionStatus) -> SessionInfo:
        source = status_source_of(meta)
        limit = limit_of(meta) or (self.records.limit_said(name, meta) if status == SessionStatus.EXITED else None)
        return SessionInfo(name=name, session=state.session, agent=str(meta.get("agent", "?")), status=status,
                           exit_code=state.exit_code, pid=state.pid,
                           started_at=float(meta.get("started_at") or state.created),
                           log=str(self.project.log_path(name)), persistent=self.host.persistent,
                           recorded=str(meta.get("status") or "") if meta else None,
                           socket=getattr(self.host, "socket", None),
                           tmux_conf=str(conf) if (conf := getattr(self.host, "conf", None)) else None,
                           sandbox=meta.get("sandbox") if isinstance(meta.get("sandbox"), dict) else None,
                           status_source=source, over_budget=meta.get("over_budget"), limit=limit)

    # -- input -----------------------------------------------------------------------------------------------

    def send(self, name: str, text: str, *, enter: bool = True, paste: bool = False) -> None:
        self._require_live(name)
        self.host.send_text(name, text, enter=enter, paste=paste)
        self.records.note_prompt(name, text)

    def paste_context(self, name: str, text: str) -> None:
        """Paste context (a task, files, the clipboard) into the session, never into a shell: there the text would
        run as commands at the next Enter."""
        self._require_live(name)
        record = self.record(name)
        agent = record.agent if record is not None else None
        try:
            takes_text = agent is not None and self.preset(agent).prompt_mode != "none"
        except InputError:  # an agent no longer in the config: the record's word is all there is
            takes_text = agent not in (None, "shell")
        if not takes_text:
            raise InputError(f"{name} runs {agent or 'no known agent'}, which takes no task or context text (in a "
                             "shell it would run as commands): start an agent there first")
        self.host.send_text(name, text, enter=False, paste=True)
        self.records.note_prompt(name, text)

    def paste_then_enter(self, name: str, text: str, shows_within: float = PASTE_SHOWS_WITHIN) -> bool:
        """Paste `text` into the session as one bracketed paste (`paste_context`: never into a shell), then Enter
        once the paste shows on its screen (the text, or the agent's "[Pasted text]"); False, with no Enter, when
        the screen did not change within `shows_within` seconds.

        An agent may wait at a dialog (a trust or permission question, a sign-in menu) that swallows a paste, and
        there Enter would answer it with whatever is selected (in a trial, gemini's "Trust folder")."""
        before = self.capture(name)
        self.paste_context(name, text)
        deadline = time.monotonic() + shows_within
        while self.capture(name) == before:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        self.keys(name, ["Enter"])
        return True

    def keys(self, name: str, keys: Sequence[str]) -> None:
        self._require_live(name)
        self.host.send_keys(name, keys)

    def capture(self, name: str, history: int = 0) -> str:
        self._require_session(name)
        return self.host.capture(name, history=history)

    def running(self, name: str) -> bool:
        """Whether worktree `name` has a session whose agent still runs (without tmux, none does)."""
        host = self._host
        return host is not None and any(p.worktree == name and not p.dead for p in host.list())

    def _require_session(self, name: str) -> None:
        if not self.host.exists(name):
            self.require_known(name)
            raise InputError(f"no session for worktree {name!r} (start one with `daintree session start {name}`)")

    def _require_live(self, name: str) -> None:
        """A session whose agent still runs: text or keys sent to a dead pane were "sent" and read by nobody."""
        self._require_session(name)
        pane = next((p for p in self.host.list() if p.worktree == name), None)
        if pane is not None and pane.dead:
            code = f" ({pane.exit_code})" if pane.exit_code is not None else ""
            raise OperationError(f"the agent in {name} has exited{code}, so nothing would read it: "
                                 f"`daintree session start {name}` starts it again")

    def require_known(self, name: str) -> None:
        """A name that is no live worktree gets the error every command gives, not a hint to start a session."""
        if not self.project.is_git:
            return
        entry = find(self.index.load(), name)
        if entry is None:
            raise InputError(f"no worktree named {name!r}")
        if not entry.live:
            raise InputError(f"no live worktree named {name!r} (it was removed)")

