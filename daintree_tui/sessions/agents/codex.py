"""Codex: its `notify` program (a `-c notify=[...]` override on the command line; it receives a JSON argument
with `type: agent-turn-complete` at the end of every turn), usage from its rollouts
`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl` whose `session_meta` names this worktree as `cwd`.

Codex's own hooks (hooks.json, `[hooks]`) run only after the user has reviewed and trusted each one, so they
cannot be wired per session; `notify` needs no trust. It only reports the end of a turn: a new turn shows as
the rollout growing again (the observer watches the record file).
"""

from __future__ import annotations

import json
from pathlib import Path

from daintree_tui.sessions.agents.base import (
    AgentIntegration,
    SessionContext,
    Wiring,
    names_worktree,
    own_files,
    read_agent_file,
    recent_records,
    scan_limit,
    write_signal_script,
)

CONFIG_LIMIT = 1024 * 1024  # ~/.codex/config.toml read for its `notify` (a larger one is not the user's)


class CodexIntegration(AgentIntegration):
    program = "codex"
    hook_mechanism = "-c notify=[<session script>] (agent-turn-complete); new turns from the rollout growing"
    usage_source = "~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl (token_count events)"
    usage_kind = "codex"
    rescan_every = 3.0  # reads the first line of every recent record file
    resume_args = ("resume", "--last")
    interrupt_keys = ("C-c",)

    def home(self, ctx: SessionContext) -> Path:
        override = ctx.env.get("CODEX_HOME")
        return Path(override) if override else ctx.home() / ".codex"

    def user_notify(self, ctx: SessionContext) -> list[str] | None:
        """The user's own `notify` program, kept working: our script runs it after signalling."""
        import tomllib  # only when a Codex session starts: every command that lists agents imports this module

        try:  # the agent's own folder: never a FIFO, a file without end or `a = [[[[...` (RecursionError)
            value = tomllib.loads(read_agent_file(self.home(ctx) / "config.toml", CONFIG_LIMIT).decode()).get("notify")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
            return None
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return list(value)
        return None

    def wire(self, ctx: SessionContext, argv: list[str]) -> Wiring:
        script = write_signal_script(ctx, chain=self.user_notify(ctx))
        # TOML accepts a JSON array of strings; the state is the first argument, Codex appends its JSON.
        override = "notify=" + json.dumps([str(script), "waiting"])
        return Wiring([argv[0], "-c", override, *argv[1:]])

    def records_root(self, ctx: SessionContext) -> Path:
        if ctx.private_home is not None:  # the sandbox's own sessions/ (sessions/sandbox.py AGENT_PRIVATE)
            return ctx.private_home / ".codex" / "sessions"
        return self.home(ctx) / "sessions"

    def record_files(self, ctx: SessionContext) -> list[Path]:
        """The rollouts in the session's own folder (a sandboxed session's private one) whose `session_meta`
        names the worktree (or a folder in it) as `cwd`. The folder is what makes a rollout the session's: the
        agent writes the `cwd`, and one naming another worktree (written in the agent's own folder, the only one
        it can reach) is ignored, never charged to that worktree."""
        sessions = self.records_root(ctx)
        found = []
        listed = own_files(sessions, ("*", "*", "*", "rollout-*.jsonl"), scan_limit(ctx), newest_first=True)
        for path, first in recent_records(listed, root=sessions):
            payload = first.get("payload") if isinstance(first, dict) else None
            cwd = payload.get("cwd") if isinstance(payload, dict) else None
            if isinstance(cwd, str) and names_worktree(cwd, ctx.worktree):
                found.append(path)
        return sorted(found)

    def resume_argv(self, argv: list[str]) -> list[str]:
        # `codex resume --last` is a subcommand: our `-c` overrides stay before it, as root options.
        return [*argv, *self.resume_args]
