"""Gemini CLI: hooks in a per-session "system defaults" settings file (GEMINI_CLI_SYSTEM_DEFAULTS_PATH, the
lowest settings layer: the user's settings still win, hook lists are concatenated), built on top of whatever
system defaults file was there; usage from its chat recordings `~/.gemini/tmp/<project>/chats/session-*.jsonl`
whose metadata line carries `projectHash` = sha256 of this worktree's path.

Gemini runs configured hooks only in a trusted folder (when folder trust is on): until it trusts the worktree,
no signal arrives and the session's status comes from its output.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from daintree_tui.sessions.agents.base import (
    AgentIntegration,
    SessionContext,
    Wiring,
    own_files,
    recent_records,
    scan_limit,
    write_private,
)

ENV = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"


OUR_FILE = "gemini-system-defaults.json"


def system_defaults_path(ctx: SessionContext) -> Path:
    # A path to our own file came from the session that started this one (an agent running daintree): the
    # user's defaults are where Gemini looks without it, never that session's hooks.
    if ctx.env.get(ENV) and Path(ctx.env[ENV]).name != OUR_FILE:
        return Path(ctx.env[ENV])
    system = ctx.env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or "/etc/gemini-cli/settings.json"
    return Path(system).parent / "system-defaults.json"


def our_hooks(ctx: SessionContext) -> dict[str, list[dict[str, Any]]]:
    def hook(state: str, background: bool = False, matcher: str | None = None) -> list[dict[str, Any]]:
        entry: dict[str, Any] = {"hooks": [{"type": "command", "name": f"daintree-{state}",
                                            "command": ctx.signal_command(state, background), "timeout": 30000}]}
        if matcher:
            entry["matcher"] = matcher
        return [entry]

    return {
        "SessionStart": hook("waiting"),
        "BeforeAgent": hook("running"),  # the user submitted a prompt
        "AfterTool": hook("running", background=True, matcher=".*"),  # going on after a permission prompt
        "Notification": hook("waiting"),  # a tool asks for permission
        "AfterAgent": hook("waiting"),  # the turn is over
    }


class GeminiIntegration(AgentIntegration):
    program = "gemini"
    hook_mechanism = f"{ENV}=<session file>: SessionStart, BeforeAgent, AfterTool, Notification, AfterAgent"
    usage_source = "~/.gemini/tmp/<project>/chats/session-*.jsonl (tokens per message)"
    usage_kind = "gemini"
    rescan_every = 3.0  # reads the first line of every recent record file
    resume_args = ("--resume", "latest")
    interrupt_keys = ("Escape",)

    def wire(self, ctx: SessionContext, argv: list[str]) -> Wiring:
        base: dict[str, Any] = {}
        try:
            loaded = json.loads(system_defaults_path(ctx).read_text(encoding="utf-8"))
            base = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            pass
        raw_hooks = base.get("hooks")
        merged: dict[str, Any] = dict(raw_hooks) if isinstance(raw_hooks, dict) else {}
        for event, entries in our_hooks(ctx).items():
            prior = merged.get(event)
            merged[event] = [*(prior if isinstance(prior, list) else []), *entries]
        settings = {**base, "hooks": merged}
        path = ctx.session_dir / OUR_FILE
        write_private(path, json.dumps(settings, indent=2) + "\n")
        return Wiring(list(argv), {ENV: str(path)})

    def gemini_home(self, ctx: SessionContext) -> Path:
        return Path(ctx.env.get("GEMINI_CLI_HOME") or ctx.home()) / ".gemini"

    def records_root(self, ctx: SessionContext) -> Path:
        if ctx.private_home is not None:  # the sandbox's own tmp/ (sessions/sandbox.py AGENT_PRIVATE)
            return ctx.private_home / ".gemini" / "tmp"
        return self.gemini_home(ctx) / "tmp"

    def record_files(self, ctx: SessionContext) -> list[Path]:
        """The chat recordings in the session's own folder (a sandboxed session's private tmp/, see
        sessions/sandbox.py) whose metadata names the worktree (`projectHash`): the folder makes them the
        session's, and one naming another project is ignored."""
        tmp = self.records_root(ctx)
        want = hashlib.sha256(str(ctx.worktree).encode()).hexdigest()
        found = []
        for path, first in recent_records(own_files(tmp, ("*", "chats", "session-*.jsonl"), scan_limit(ctx)), root=tmp):
            if isinstance(first, dict) and first.get("projectHash") == want:
                found.append(path)
        return sorted(found)
