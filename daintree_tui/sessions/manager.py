"""SessionManager: the sessions plane over a host. Starts agents in worktrees, observes them with their status,
sends them input, stops them, and stores status transitions when asked to.

Observing (`observe`, `list`) writes nothing: recording what was observed (a `session.*` event per transition,
and the hooks a transition runs) belongs to one owner above this layer, the services' `SessionObserver`.

Per-session metadata (`.worktrees/.sessions/<name>.json`: agent, command, start time, last recorded status, the
agent's own signal) is a cache of what was observed; tmux and the log file are the truth.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from daintree_tui.core import state_files, trust, validate
from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.log import warn
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.store import backup_path, write_json
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.worktrees import require_worktree_ours
from daintree_tui.sessions.agent_start import type_first_prompt, wire_mcp
from daintree_tui.sessions.agent_worktree_files import keep_out_of_worktree
from daintree_tui.sessions.agents import AgentIntegration, SessionContext, integration_for
from daintree_tui.sessions.agents.base import write_signal_script
from daintree_tui.sessions.host import PaneState, SessionHost, session_name
from daintree_tui.sessions.host_choice import host_for
from daintree_tui.sessions.pane_facts import PaneFacts
from daintree_tui.sessions.pane_size import load_pane_size
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
from daintree_tui.sessions.status import SessionStatus, derive_status

# The record and the info views live in sessions/session_info.py; many callers import them from here.
__all__ = ["SIGNAL_STATES", "SessionInfo", "SessionManager", "SessionRecord", "read_session_record",
           "session_record_path", "status_source_of"]

SIGNAL_STATES = ("waiting", "running", "exited")
PROMPTS_KEPT = 5  # prompt lines a session's record keeps (the checkpoints name each turn's first)


def first_prompts(text: str | None, at: float) -> list[dict[str, Any]]:
    """`[{"text": first non-empty line (cut to 500), "at": at}]` of a prompt, or [] when it has none."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return [{"text": line[:500], "at": at}] if line else []



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
        return session_record_path(self.project, name)

    def meta(self, name: str) -> dict[str, Any]:
        """The raw record, for this layer's own read-modify-writes; other layers use `record`."""
        data = state_files.read_own_state(self.project, self.meta_path(name), "session record")
        return validate.session_record(data)  # each field of the wrong type dropped: the file is data

    def record(self, name: str) -> SessionRecord | None:
        return read_session_record(self.project, name)

    def _live_entry(self, name: str) -> WorktreeEntry:
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
        entry = self._live_entry(name)
        if resume and agent is None:
            agent = self.meta(name).get("agent") or None
        preset = self.preset(agent)
        # The agent's command may come from the repository's .daintree.toml: it runs only once trusted.
        trust.require_trusted(self.project.config, f"agents.{preset.name}.command")
        trust.require_trusted(self.project.config, f"agents.{preset.name}.prompt_mode")
        if resume and prompt:
            raise InputError("--resume continues the last conversation: it takes no first prompt")
        if resume:
            preset.resume_argv()  # an agent without a resume command is bad input, before anything happens
        env = worktree_env(self.project, entry)
        env["DAINTREE_AGENT"] = preset.name
        preset.check_program(env)
        host = self.host
        existing = next((s for s in host.list() if s.worktree == name), None)
        if existing is not None and not existing.dead:
            raise InputError(f"session {session_name(name)} is already running (`daintree session stop {name}` "
                             f"first, or `daintree session send {name} TEXT` to talk to it)")
        if existing is not None:
            host.stop(name)
        if prompt is None and use_task_prompt and entry.task_id is not None and preset.prompt_mode != "none":
            task = self.tasks.find(entry.task_id)
            if task is not None:
                prompt = preset.render_prompt(subject=task.subject, description=task.description,
                                              worktree=entry.name, port=entry.ports[0] if entry.ports else "")
        if resume:
            prompt = None
            argv = preset.resume_argv()
        else:
            argv = preset.argv(prompt if preset.prompt_mode != "type" else None)
        log = self.project.log_path(name)
        self.project.tmpdir_for(name).mkdir(parents=True, exist_ok=True)
        role = self._role(entry, preset)
        now = time.time()
        integration = preset.integration
        ctx = self.context(name, env)
        if integration is not None:
            # The agent's own hooks report its state; wired in files of ours, never in the user's.
            write_signal_script(ctx)
            wiring = integration.wire(ctx, argv)
            argv = wiring.argv
            env.update(wiring.env)
        argv = wire_mcp(self.project, name, preset, role, argv, env)
        # Its own state files (aider's histories and cache) are not the worktree's work: kept out of git's sight.
        argv = keep_out_of_worktree(argv, Path(entry.path), self.project.tmpdir_for(name) / "aider")
        # Imported by a start alone: the dashboard's first poll (observing only) waited ~8 ms for it.
        from daintree_tui.sessions.sandbox import private_home, session_sandbox

        sandbox = session_sandbox(self.project, entry, preset, role=role)
        unconfined_env = dict(env)
        if sandbox.spec is not None:  # its agent's conversations are in its sandbox's own folders: read only those
            ctx = replace(ctx, private_home=private_home(self.project.sandbox_home_for(name)))
        self.usage.begin(name, ctx, integration, preset.name, entry.task_id, now)
        pane_argv = sandbox.wrap(argv, env)
        start_check = sandbox.start_check(argv, unconfined_env)
        if start_check is not None:  # the launcher records it here when the sandbox cannot start after all
            start_check["record"] = {"root": str(self.project.root), "worktree": name, "started_at": now}
        try:
            log_offset = log.stat().st_size  # the log keeps every run: this one's output starts here
        except OSError:
            log_offset = 0
        meta = {"agent": preset.name, "command": argv, "started_at": now, "status": str(SessionStatus.STARTING),
                "log_offset": log_offset,
                "exit_code": None, "signal": None, "host": "tmux" if host.persistent else "pty", "role": role,
                "sandbox": sandbox.record(), "program": preset.program, "status_source": preset.status_source,
                "resumed": resume, "task_id": entry.task_id, "prompts": first_prompts(prompt, now)}
        # The record is written before its pane exists: an observer never sees a pane of ours without its agent
        # (the dashboard showed `?` for the new session's first poll). Under the lock, as every read-modify-write
        # of the record. A pane that fails to start gives the previous record back.
        path = self.meta_path(name)
        with self.project.lock.hold():
            previous = self.meta(name)
            write_json(path, meta)
        try:
            state = host.start(name, pane_argv, Path(entry.path), env, log, size or load_pane_size(self.project),
                               start_check=start_check)
        except BaseException:
            with self.project.lock.hold():
                if previous:
                    write_json(path, previous)
                else:
                    path.unlink(missing_ok=True)
                    backup_path(path).unlink(missing_ok=True)
            raise
        if prompt and preset.prompt_mode == "type" and preset.name != "shell":
            type_first_prompt(host, name, prompt, log, offset=log_offset)
        self.project.events.append("session.started", worktree=entry.brief(), agent=preset.name,
                                   session=session_name(name), pid=state.pid,
                                   task=self.tasks.brief_of(entry.task_id))
        if self.after_start is not None:
            try:
                self.after_start(name)
            except (OSError, DaintreeError) as exc:  # the session runs: what follows a start never undoes it
                warn(f"after starting {name}: {exc}")
        return self._info(name, state, meta, SessionStatus.STARTING)

    def record_unsandboxed(self, name: str, started_at: float, reason: str) -> bool:
        """The session's sandbox could not start when its pane did (bubblewrap's probe failed in the launcher, after
        this process had seen it work): its `auto` agent runs unconfined. The record of that run says so, for the
        SANDBOX column, and a `session.unsandboxed` event gives the reason. False when the record is another run's."""
        with self.project.lock.hold():
            meta = self.meta(name)
            if meta.get("started_at") != started_at:
                return False
            was = meta.get("sandbox")
            mode = str(was.get("mode", "auto")) if isinstance(was, dict) else "auto"
            meta["sandbox"] = {"backend": "none", "mode": mode, "active": False, "at_start": "failed",
                               "reason": f"not sandboxed: bubblewrap could not start when the session did ({reason})"}
            write_json(self.meta_path(name), meta)
        task_id = meta.get("task_id")
        task = self.tasks.brief_of(task_id) if isinstance(task_id, int) else None
        self.project.events.append("session.unsandboxed", worktree={"name": name}, agent=meta.get("agent"),
                                   reason=reason, mode=mode, task=task)
        return True

    def _role(self, entry: WorktreeEntry, preset: Preset) -> str | None:
        """The session's role, recorded at its start (the task's, else its agent's, else the default role): what
        `daintree mcp` inside the session trusts, rather than anything the agent can set."""
        task = self.tasks.find(entry.task_id) if entry.task_id is not None else None
        role = self.tasks.role(task) if task is not None else None
        return role or preset.role or self.project.config.default_role

    def stop(self, name: str) -> bool:
        """Stop the session of worktree `name` (no error when there is none)."""
        if not self.host.exists(name):
            return False
        # Record the intent first: an observer that sees the session (or the server) vanish must already
        # know it was stopped on purpose. When the record cannot be written (a full disk: the agent that filled
        # it is the one the user stops), the stop still happens: it refused, and the agent went on writing.
        try:
            self.record_transition(name, SessionStatus.EXITED, None, reason="stopped")
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
        entry = self._live_entry(name)
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
        self._live_entry(name)
        now = time.time()
        ts = now if at is None or not (now - 3600 < at <= now + 5) else at
        with self.project.lock.hold():
            meta = self.meta(name)
            prior = meta.get("signal") or {}
            if isinstance(prior.get("ts"), int | float) and prior["ts"] > ts:
                return None
            meta["signal"] = {"state": state, "ts": ts}
            write_json(self.meta_path(name), meta)
        return SessionStatus(state)

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

    def mark_over_budget(self, name: str, budget: dict[str, Any] | None) -> None:
        """Record in the session record that a budget stopped it (or, with None, that it no longer does)."""
        with self.project.lock.hold():
            meta = self.meta(name)
            if not meta:
                return
            if budget is None:
                meta.pop("over_budget", None)
            else:
                meta["over_budget"] = {**budget, "ts": time.time()}
            write_json(self.meta_path(name), meta)

    def usage_summary(self, names: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Tokens and estimated cost of each session's current run (as last read; `update_usage` reads more)."""
        out = {}
        for name in names:
            runs = self.usage.runs(name, current_only=True)
            if runs:
                out[name] = runs[0].totals.to_dict()
        return out

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
        presets = all_presets(self.project.config)
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
                                   self.project.config.waiting_debounce, patterns.get(state.worktree),
                                   self.project.config.stalled_after)
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

    def record_transition(self, name: str, status: SessionStatus, exit_code: int | None,
                          reason: str | None = None) -> bool:
        """Store a status change and log it as `session.<status>`; True only for the one caller that made the
        change (a compare-and-set under the project lock, so several observers record it once).

        An exited run stays exited: only `start` writes a new run's record. An observer's change that was on its
        way when the session was stopped (a quiet timer saying `waiting`) wrote `waiting` over the stop, and the
        dashboard then took the stopped session for one the tmux server had lost."""
        with self.project.lock.hold():
            meta = self.meta(name)
            if meta.get("status") in (str(status), str(SessionStatus.EXITED)):
                return False
            meta["status"] = str(status)
            if status == SessionStatus.EXITED:
                meta["exit_code"] = exit_code
                self._read_limit(name, meta)
            write_json(self.meta_path(name), meta)
        if status in (SessionStatus.WAITING, SessionStatus.EXITED, SessionStatus.RUNNING, SessionStatus.STALLED):
            task_id = meta.get("task_id")
            task = self.tasks.brief_of(task_id) if isinstance(task_id, int) else None
            self.project.events.append(f"session.{status}", worktree={"name": name}, agent=meta.get("agent"),
                                       exit_code=exit_code if status == SessionStatus.EXITED else None,
                                       reason=reason, task=task, limit=limit_of(meta))
        return True

    def _read_limit(self, name: str, meta: dict[str, Any]) -> None:
        """At a run's exit: the limit that stopped it into the record as `limit` (see `_limit_said`)."""
        said = self._limit_said(name, meta)
        if said is not None:
            meta["limit"] = said
            from daintree_tui.sessions.sandbox import limit_reason_file

            limit_reason_file(self.project, name).unlink(missing_ok=True)

    def _limit_said(self, name: str, meta: dict[str, Any]) -> str | None:
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

    def _info(self, name: str, state: PaneState, meta: dict[str, Any], status: SessionStatus) -> SessionInfo:
        source = status_source_of(meta)
        return SessionInfo(name=name, session=state.session, agent=str(meta.get("agent", "?")), status=status,
                           exit_code=state.exit_code, pid=state.pid,
                           started_at=float(meta.get("started_at") or state.created),
                           log=str(self.project.log_path(name)), persistent=self.host.persistent,
                           recorded=str(meta.get("status") or "") if meta else None,
                           socket=getattr(self.host, "socket", None),
                           tmux_conf=str(conf) if (conf := getattr(self.host, "conf", None)) else None,
                           sandbox=meta.get("sandbox") if isinstance(meta.get("sandbox"), dict) else None,
                           status_source=source, over_budget=meta.get("over_budget"),
                           limit=limit_of(meta) or (self._limit_said(name, meta) if status == SessionStatus.EXITED
                                                    else None))

    # -- input -----------------------------------------------------------------------------------------------

    def send(self, name: str, text: str, *, enter: bool = True, paste: bool = False) -> None:
        self._require_live(name)
        self.host.send_text(name, text, enter=enter, paste=paste)
        self.note_prompt(name, text)

    def note_prompt(self, name: str, text: str) -> None:
        """Remember the first line of what the agent was given (a first prompt, a send, a paste) and when: the
        checkpoint at the end of its turn names the turn's first prompt (`turn_prompt`)."""
        noted = first_prompts(text, time.time())
        if not noted:
            return
        with self.project.lock.hold():
            meta = self.meta(name)
            if not meta:
                return
            kept = [p for p in meta.get("prompts") or [] if isinstance(p, dict)][-(PROMPTS_KEPT - 1):]
            meta["prompts"] = [*kept, *noted]
            write_json(self.meta_path(name), meta)

    def turn_prompt(self, name: str, since: float) -> str | None:
        """The first prompt line given to worktree `name`'s current run after `since` (epoch seconds), if any."""
        for noted in self.meta(name).get("prompts") or []:
            if isinstance(noted, dict) and isinstance(noted.get("text"), str) and validate.is_number(
                    noted.get("at")) and noted["at"] > since:
                return str(noted["text"])
        return None

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
        self.note_prompt(name, text)

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

