"""How the dashboard shows agents: installed or not, where status comes from, what a session spent, budget alerts.

Pure functions over what the services return (`Backend.agent_facts()`, `SessionInfo.usage`, event records), so
every picker, the worktree table, the session title and the notifications say the same thing the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual.notifications import SeverityLevel

AgentFacts = Mapping[str, Mapping[str, object]]

NOT_INSTALLED = "not installed"

STATUS_SOURCE_GLYPH = {
    "hooks": Text("◆", style="green"),  # the agent's own hooks say when it works and when it waits
    "hooks-pending": Text("◇", style="yellow"),  # wired; the agent has not reported yet
    "output": Text("~", style="dim"),  # guessed from its output going quiet
}
STATUS_SOURCE_MEANING = {
    "hooks": "status from the agent's own hooks",
    "hooks-pending": "hooks wired, no report from the agent yet",
    "output": "status guessed from output going quiet",
}


def is_installed(facts: AgentFacts, agent: str) -> bool:
    """An agent missing from `facts` counts as installed: the services check it again before starting it."""
    return bool(facts.get(agent, {}).get("installed", True))


def can_resume(facts: AgentFacts, agent: str | None) -> bool:
    return agent is not None and bool(facts.get(agent, {}).get("resume"))


def agent_label(facts: AgentFacts, agent: str) -> Text:
    """The agent's name, dimmed with "not installed" when its program is not on PATH."""
    if is_installed(facts, agent):
        return Text(agent)
    return Text.assemble((agent, "dim"), (f"  {NOT_INSTALLED}", "dim italic"))


def not_installed_notice(agent: str) -> str:
    return f"{agent} is not installed (its program is not on PATH): pick another agent, or install it"


def status_source_glyph(source: str | None) -> Text:
    return STATUS_SOURCE_GLYPH.get(source or "", Text(" ")).copy()


def short_count(tokens: int) -> str:
    """12345 -> 12.3k, 2_500_000 -> 2.5M."""
    for limit, suffix in ((1_000_000, "M"), (1_000, "k")):
        if tokens >= limit:
            return f"{tokens / limit:.1f}{suffix}"
    return str(tokens)


def usage_text(usage: Mapping[str, Any] | None) -> str:
    """Tokens and estimated cost, e.g. `12.3k tok $0.04` (empty when nothing was spent or read yet)."""
    if not usage:
        return ""
    tokens = int((usage.get("tokens") or {}).get("total") or 0)
    cost = float(usage.get("cost") or 0.0)
    if not tokens and not cost:
        return ""
    return f"{short_count(tokens)} tok ${cost:.2f}"


def budget_notice(record: Mapping[str, Any]) -> tuple[str, str, SeverityLevel] | None:
    """(key, text, severity) for a budget event worth a notification, else None. A repeat of the same alert (the
    same budget at the same limit, the same session stopped by it) has the same key, so it is shown once."""
    event = record.get("event")
    raw = record.get("budget")
    budget: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    which = f"{budget.get('scope')}:{budget.get('subject')}:{budget.get('unit')}:{budget.get('limit')}"
    if event == "budget.warning":
        return f"warning:{which}", f"Budget: {record.get('message') or 'a limit is nearly reached'}", "warning"
    if event == "session.over_budget":
        worktree = record.get("worktree")
        name = worktree.get("name") if isinstance(worktree, Mapping) else None
        scope = str(budget.get("scope") or "budget").replace("_", " ")
        text = (f"{name} ({record.get('agent')}) went over the {scope} budget and was interrupted; raise the "
                "limit (budget.* in config) to let it go on")
        return f"over:{name}:{which}", text, "error"
    return None


def unsandboxed_notice(record: Mapping[str, Any]) -> str | None:
    """The one line for a `session.unsandboxed` event (an `auto` session whose sandbox could not start with it),
    else None."""
    if record.get("event") != "session.unsandboxed":
        return None
    worktree = record.get("worktree")
    name = worktree.get("name") if isinstance(worktree, Mapping) else "?"
    return f"{name}: {record.get('agent')} runs WITHOUT the sandbox (sandbox = auto): {record.get('reason')}"


class BudgetAlerts:
    """Which budget events became notifications: each alert once, and none from before the dashboard started
    (the events log is read from its tail at startup; the status cell shows a session that is over budget)."""

    def __init__(self, since: float) -> None:
        self.since = since
        self.shown: set[str] = set()

    def new(self, records: list[dict[str, object]]) -> list[tuple[str, SeverityLevel]]:
        """(text, severity) of the alerts in `records` not shown yet."""
        out = []
        for record in records:
            ts = record.get("ts")
            if not isinstance(ts, int | float) or ts < self.since:
                continue
            notice = budget_notice(record)
            if notice is not None and notice[0] not in self.shown:
                self.shown.add(notice[0])
                out.append((notice[1], notice[2]))
        return out
