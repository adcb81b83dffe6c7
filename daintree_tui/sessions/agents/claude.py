"""Claude Code: hooks through `--settings <file>` (merged with the user's settings, hooks concatenated), usage
from its session transcripts `~/.claude/projects/<slug of the cwd>/<session>.jsonl`."""

from __future__ import annotations

import json
import re
from pathlib import Path

from daintree_tui.sessions.agents.base import (
    MAX_RECORD_FILES,
    AgentIntegration,
    SessionContext,
    Wiring,
    own_files,
    write_private,
)

SLUG_LIMIT = 200  # Claude Code cuts longer slugs and appends a hash of the path


def project_slug(path: str) -> str:
    """Claude Code's directory name for a project: every character but ASCII letters and digits becomes `-`."""
    return re.sub(r"[^a-zA-Z0-9]", "-", path)


def settings(ctx: SessionContext) -> dict[str, object]:
    def hook(state: str, background: bool = False) -> list[dict[str, object]]:
        return [{"hooks": [{"type": "command", "command": ctx.signal_command(state, background), "timeout": 30}]}]

    return {"hooks": {
        "SessionStart": hook("waiting"),
        "UserPromptSubmit": hook("running"),
        # After a permission prompt is answered the turn goes on: the next tool result says so.
        "PostToolUse": [{"matcher": "*", **hook("running", background=True)[0]}],
        "Notification": hook("waiting"),  # permission prompts and the idle reminder: it needs the user
        "Stop": hook("waiting"),
    }}


class ClaudeIntegration(AgentIntegration):
    program = "claude"
    hook_mechanism = "--settings <session file>: SessionStart, UserPromptSubmit, PostToolUse, Notification, Stop"
    usage_source = "~/.claude/projects/<slug>/*.jsonl (message.usage)"
    usage_kind = "claude"
    resume_args = ("--continue",)
    interrupt_keys = ("Escape",)

    def wire(self, ctx: SessionContext, argv: list[str]) -> Wiring:
        path = ctx.session_dir / "claude-settings.json"
        write_private(path, json.dumps(settings(ctx), indent=2) + "\n")
        return Wiring([argv[0], "--settings", str(path), *argv[1:]])

    def config_dir(self, ctx: SessionContext) -> Path:
        override = ctx.env.get("CLAUDE_CONFIG_DIR")
        return Path(override) if override else ctx.home() / ".claude"

    def records_root(self, ctx: SessionContext) -> Path:
        return self.config_dir(ctx) / "projects"

    def record_files(self, ctx: SessionContext) -> list[Path]:
        """The transcripts in the worktree's own project folder (the only one writable in its sandbox: see
        agent_folders.PER_PROJECT), never through a link."""
        projects = self.records_root(ctx)
        slug = project_slug(str(ctx.worktree))
        names = [slug]
        if len(slug) > SLUG_LIMIT:
            names = [slug[:SLUG_LIMIT] + "-*"]
        files = own_files(projects, (*names, "*.jsonl"))
        return files + own_files(projects, (*names, "*", "subagents", "*.jsonl"), MAX_RECORD_FILES - len(files))
