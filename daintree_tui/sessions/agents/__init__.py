"""Per-agent integration: how each agent CLI reports its state (its own hooks, wired per session without touching
the user's files), where it records its token usage, how it resumes, and how it is interrupted.

`integration_for(program)` picks the integration by the program a preset runs (`claude`, `codex`, `gemini`,
`opencode`), so a user's own preset that runs `claude --model opus` is wired like the built-in one.
"""

from __future__ import annotations

import os

from daintree_tui.sessions.agents.base import AgentIntegration, SessionContext, Wiring
from daintree_tui.sessions.agents.claude import ClaudeIntegration
from daintree_tui.sessions.agents.codex import CodexIntegration
from daintree_tui.sessions.agents.gemini import GeminiIntegration
from daintree_tui.sessions.agents.opencode import OpencodeIntegration

INTEGRATIONS: dict[str, AgentIntegration] = {
    i.program: i for i in (ClaudeIntegration(), CodexIntegration(), GeminiIntegration(), OpencodeIntegration())
}


def integration_for(program: str | None) -> AgentIntegration | None:
    """The integration for a program (`claude`, `/usr/local/bin/codex`, ...), or None for unknown commands."""
    if not program:
        return None
    return INTEGRATIONS.get(os.path.basename(program))


__all__ = ["INTEGRATIONS", "AgentIntegration", "SessionContext", "Wiring", "integration_for"]
