"""CLI commands about the agents themselves: `daintree agents` (presets, installed or not, how each reports its
state, where its usage comes from, how it resumes) and `daintree usage` (tokens and estimated cost per session,
task, bake-off candidate and in total)."""

from __future__ import annotations

import argparse
import re
import time
from datetime import datetime
from typing import Any

from daintree_tui.cli.common import AddCommand, Parser
from daintree_tui.cli.output import emit, table
from daintree_tui.core.errors import InputError
from daintree_tui.services import Services


def cmd_agents(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.sessions.presets import all_presets, default_agent_name

    project = services.project
    presets = all_presets(project.config)
    default = default_agent_name(project.config)
    data = [{**p.to_dict(), "default": name == default} for name, p in presets.items()]
    rows = [[("* " if d["default"] else "  ") + str(d["name"]), "yes" if d["installed"] else "no",
             str(d["program"]), str(d["prompt_mode"]), str(d["status_source"]), str(d["resume"] or "-")]
            for d in data]
    how = ("" if project.config.default_agent else
           "\n* default: the first installed of claude, codex, gemini, opencode, aider (else shell); "
           "set default_agent in config to choose")
    emit(args, data, lambda: table(rows, ["AGENT", "INSTALLED", "PROGRAM", "FIRST PROMPT", "STATUS", "RESUME"])
          + how)
    return 0


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([mhdw])$")


def parse_since(text: str | None, now: float | None = None) -> float:
    """`--since`: a date (YYYY-MM-DD, local midnight), an ISO time, or a duration back from now (30m, 6h, 7d, 2w).
    Without it: today (local midnight)."""
    from daintree_tui.services.usage import local_midnight

    now = time.time() if now is None else now
    if not text:
        return local_midnight(now)
    match = _DURATION.match(text.strip())
    if match:
        return now - float(match.group(1)) * {"m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise InputError(f"--since takes a date (2026-11-30), a time (2026-11-30T09:00) or a duration "
                         f"(30m, 6h, 7d, 2w), not {text!r}") from None


def _money(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"


def _tokens(value: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if value >= size:
            return f"{value / size:.1f}{unit}"
    return str(value)


def _usage_text(report: dict[str, Any]) -> str:
    def row(label: str, d: dict[str, Any], extra: str = "") -> list[str]:
        t = d["tokens"]
        unpriced = " (no price: " + ", ".join(d["unpriced_models"]) + ")" if d["unpriced_models"] else ""
        return [label, extra or d.get("model") or "-", _tokens(t["input"]), _tokens(t["output"]),
                _tokens(t["cache_read"]), _tokens(t["cache_write"]), _money(d["cost"]) + unpriced]

    header = ["", "AGENT/MODEL", "IN", "OUT", "CACHE READ", "CACHE WRITE", "EST. COST"]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(report["since"]))
    parts = [f"usage since {when}"]
    if report["sessions"]:
        parts.append(table([row(s["name"], s, s["agent"]) for s in report["sessions"]], ["SESSION", *header[1:]]))
    if report["tasks"]:
        parts.append(table([row(f"#{t['task_id']}", t) for t in report["tasks"]], ["TASK", *header[1:]]))
    for bake in report["bakeoffs"]:
        rows = [row(c["name"], c) for c in bake["candidates"]]
        parts.append(f"bake-off {bake['id']} (task {bake['task_id']})\n" + table(rows, ["CANDIDATE", *header[1:]]))
    parts.append(table([row("total", report["total"])], ["", *header[1:]]))
    if report["budget"]:
        parts.append("budgets: " + ", ".join(f"{k} = {v:g}" for k, v in report["budget"].items()))
    if not report["trusted"]:
        names = [s["name"] for s in report["sessions"] if not s["trusted"]]
        parts.append(f"warning: the usage of {', '.join(names) or 'a session'} was counted from records that cannot "
                     "be trusted (" + "; ".join(report["total"]["untrusted"][:3]) + "): the counts never go down, "
                     "the budgets say so (--json: \"trusted\": false)")
    parts.append(f"estimated from list prices checked {report['pricing_checked']} "
                 "([pricing.<model>] in your config overrides them)")
    return "\n\n".join(p for p in parts if p)


def cmd_usage(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.services.usage import usage_report

    since = parse_since(args.since)
    if services.host is not None:
        for info in services.sessions.list(with_screens=False):  # what the live sessions' records gained
            if str(info.status) != "exited":
                services.sessions.update_usage(info.name)
    records = services.bakeoffs.records() if services.project.is_git else []
    report = usage_report(services.sessions, records, since)
    emit(args, report, lambda: _usage_text(report))
    return 0


def register(sub: Any, add: AddCommand, common: Parser) -> None:
    add(sub, "agents", cmd_agents, "agent presets: installed or not, status and usage source, resume command")
    p = add(sub, "usage", cmd_usage, "tokens and estimated cost per session, task and bake-off candidate")
    p.add_argument("--since", metavar="DATE|DURATION",
                   help="from this date (2026-11-30) or this long ago (30m, 6h, 7d); default: today")
