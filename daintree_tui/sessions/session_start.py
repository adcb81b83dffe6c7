"""SessionStarter (`SessionManager.starter`): how an agent starts in a worktree, every check first.

A start checks all that can refuse before anything is made (a live worktree of ours, a known preset whose command
is trusted and whose program is installed, a prompt it takes, no session running there), then builds the agent's
command (its task as the first prompt, its own hooks, the `daintree mcp` its role asks for, its sandbox), writes
the new run's record and only then starts its pane: an observer never sees a pane of ours without its record, and
a pane that fails to start gives the previous record back. `SessionManager.start` is the entry point.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daintree_tui.core import trust
from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import DaintreeError, InputError
from daintree_tui.core.log import warn
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.sessions.agent_start import type_first_prompt, wire_mcp
from daintree_tui.sessions.agent_worktree_files import keep_out_of_worktree
from daintree_tui.sessions.agents import SessionContext
from daintree_tui.sessions.agents.base import write_signal_script
from daintree_tui.sessions.host import PaneState, SessionHost, session_name
from daintree_tui.sessions.pane_size import load_pane_size
from daintree_tui.sessions.presets import Preset
from daintree_tui.sessions.session_records import first_prompts
from daintree_tui.sessions.status import SessionStatus

if TYPE_CHECKING:
    from daintree_tui.sessions.manager import SessionManager


class SessionStarter:
    """Starts the sessions of one manager (its project, host, task board, records and usage)."""

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager
        self.project = manager.project

    def start(self, name: str, agent: str | None, prompt: str | None, size: tuple[int, int] | None,
              use_task_prompt: bool, resume: bool) -> tuple[PaneState, dict[str, Any]]:
        """Start `agent` in worktree `name` (`SessionManager.start` says how): the new pane's state and the run's
        record."""
        manager, project = self.manager, self.project
        entry, preset, env = self._checked(name, agent, prompt, resume)
        host = manager.host
        self._replace_exited(host, name)
        prompt = self._task_prompt(entry, preset, prompt, use_task_prompt)
        if resume:
            prompt = None
            argv = preset.resume_argv()
        else:
            argv = preset.argv(prompt if preset.prompt_mode != "type" else None)
        log = project.log_path(name)
        project.tmpdir_for(name).mkdir(parents=True, exist_ok=True)
        role = self._role(entry, preset)
        now = time.time()
        argv, ctx = self._wired(name, entry, preset, role, argv, env)
        # Imported by a start alone: the dashboard's first poll (observing only) waited ~8 ms for it.
        from daintree_tui.sessions.sandbox import private_home, session_sandbox

        sandbox = session_sandbox(project, entry, preset, role=role)
        unconfined_env = dict(env)
        if sandbox.spec is not None:  # its agent's conversations are in its sandbox's own folders: read only those
            ctx = replace(ctx, private_home=private_home(project.sandbox_home_for(name)))
        manager.usage.begin(name, ctx, preset.integration, preset.name, entry.task_id, now)
        pane_argv = sandbox.wrap(argv, env)
        start_check = sandbox.start_check(argv, unconfined_env)
        if start_check is not None:  # the launcher records it here when the sandbox cannot start after all
            start_check["record"] = {"root": str(project.root), "worktree": name, "started_at": now}
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
        previous = manager.records.begin(name, meta)
        try:
            state = host.start(name, pane_argv, Path(entry.path), env, log, size or load_pane_size(project),
                               start_check=start_check)
        except BaseException:
            manager.records.give_back(name, previous)
            raise
        if prompt and preset.prompt_mode == "type" and preset.name != "shell":
            type_first_prompt(host, name, prompt, log, offset=log_offset)
        project.events.append("session.started", worktree=entry.brief(), agent=preset.name,
                              session=session_name(name), pid=state.pid, task=manager.tasks.brief_of(entry.task_id))
        if manager.after_start is not None:
            try:
                manager.after_start(name)
            except (OSError, DaintreeError) as exc:  # the session runs: what follows a start never undoes it
                warn(f"after starting {name}: {exc}")
        return state, meta

    def _checked(self, name: str, agent: str | None, prompt: str | None,
                 resume: bool) -> tuple[WorktreeEntry, Preset, dict[str, str]]:
        """The live worktree, the preset (without `agent` on a resume: the last run's) and the agent's environment,
        once everything about the agent that can refuse has been asked."""
        manager = self.manager
        entry = manager.live_entry(name)
        if resume and agent is None:
            agent = manager.meta(name).get("agent") or None
        preset = manager.preset(agent)
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
        return entry, preset, env

    @staticmethod
    def _replace_exited(host: SessionHost, name: str) -> None:
        """A session that runs in the worktree refuses the start; an exited one's pane goes."""
        existing = next((s for s in host.list() if s.worktree == name), None)
        if existing is not None and not existing.dead:
            raise InputError(f"session {session_name(name)} is already running (`daintree session stop {name}` "
                             f"first, or `daintree session send {name} TEXT` to talk to it)")
        if existing is not None:
            host.stop(name)

    def _task_prompt(self, entry: WorktreeEntry, preset: Preset, prompt: str | None,
                     use_task_prompt: bool) -> str | None:
        """`prompt`, else (with `use_task_prompt`, for an agent that takes one) the worktree's task as its preset
        renders it."""
        if prompt is None and use_task_prompt and entry.task_id is not None and preset.prompt_mode != "none":
            task = self.manager.tasks.find(entry.task_id)
            if task is not None:
                prompt = preset.render_prompt(subject=task.subject, description=task.description,
                                              worktree=entry.name, port=entry.ports[0] if entry.ports else "")
        return prompt

    def _wired(self, name: str, entry: WorktreeEntry, preset: Preset, role: str | None, argv: list[str],
               env: dict[str, str]) -> tuple[list[str], SessionContext]:
        """The agent's command with its own hooks, its `daintree mcp` and its state files out of the worktree
        (`env` gets what they need), and the paths its integration reads."""
        project = self.project
        integration = preset.integration
        ctx = self.manager.context(name, env)
        if integration is not None:
            # The agent's own hooks report its state; wired in files of ours, never in the user's.
            write_signal_script(ctx)
            wiring = integration.wire(ctx, argv)
            argv = wiring.argv
            env.update(wiring.env)
        argv = wire_mcp(project, name, preset, role, argv, env)
        # Its own state files (aider's histories and cache) are not the worktree's work: kept out of git's sight.
        argv = keep_out_of_worktree(argv, Path(entry.path), project.tmpdir_for(name) / "aider")
        return argv, ctx

    def _role(self, entry: WorktreeEntry, preset: Preset) -> str | None:
        """The session's role, recorded at its start (the task's, else its agent's, else the default role): what
        `daintree mcp` inside the session trusts, rather than anything the agent can set."""
        tasks = self.manager.tasks
        task = tasks.find(entry.task_id) if entry.task_id is not None else None
        role = tasks.role(task) if task is not None else None
        return role or preset.role or self.project.config.default_role
