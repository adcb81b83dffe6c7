"""Usage and budgets, where the sessions' usage records meet the tasks, bake-offs and the queue.

Usage: per session (its current run), per task, per bake-off candidate and in total, from the sessions' usage
records (sessions/records.py, read by sessions/usage.py's parsers).

Budgets: `budget.per_session`, `budget.per_task`, `budget.daily` (in the pricing's currency, or in tokens with a
`_tokens` suffix). At `warn_at` (80 %) a `budget.warning` event; at 100 % the sessions in scope are interrupted the
way their agent expects (Esc or ctrl+c, through the session host), marked `over_budget` in their session record
(`session.over_budget`, `session.interrupted`), and the queue starts nothing new while any limit is exceeded; when
the user raises the limit, `budget.cleared`. Tokens count everything the model processed: input, output, cache
reads and cache writes.

`evaluate` is pure; `BudgetGuard.tick` acts, and is called from the observer's tick (`SessionObserver.poll`: the
dashboard's session poll, `daintree session watch`, every queue pass). What was warned and stopped is remembered
in `.worktrees/budget.json`, so each step is one event, also across processes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from daintree_tui.core.errors import DaintreeError
from daintree_tui.core.store import read_json, write_json
from daintree_tui.sessions.manager import SessionInfo, SessionManager
from daintree_tui.sessions.presets import all_presets
from daintree_tui.sessions.usage import PRICING_CHECKED, Totals

SCOPES = ("per_session", "per_task", "daily")


@dataclass(frozen=True)
class BudgetCheck:
    """One limit against what was spent in its scope."""

    scope: str  # per_session | per_task | daily
    subject: str  # the session name, the task id, or the day
    unit: str  # cost | tokens
    limit: float
    spent: float
    warn_at: float = 0.8
    # False when some of `spent` came from records that could not be trusted (shrunk, replaced or deleted after
    # they were counted, links, ...: Totals.untrusted): the spend never went down for them, but may be wrong.
    trusted: bool = True

    @property
    def fraction(self) -> float:
        return self.spent / self.limit if self.limit > 0 else 0.0

    @property
    def level(self) -> str:
        if self.fraction >= 1.0:
            return "over"
        return "warn" if self.fraction >= self.warn_at else "ok"

    @property
    def key(self) -> str:
        return f"{self.scope}:{self.subject}:{self.unit}"

    def describe(self) -> str:
        amount = (lambda v: f"{v:,.0f} tokens") if self.unit == "tokens" else (lambda v: f"${v:.2f}")
        return (f"{self.scope.replace('_', ' ')} budget of {self.subject}: {amount(self.spent)} of "
                f"{amount(self.limit)} ({self.fraction:.0%})"
                + ("" if self.trusted else ", counted from records that cannot be trusted"))

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "subject": self.subject, "unit": self.unit, "limit": self.limit,
                "spent": round(self.spent, 6), "fraction": round(self.fraction, 4), "level": self.level,
                "trusted": self.trusted}


def _measure(totals: Totals, unit: str) -> float:
    return float(totals.tokens.total) if unit == "tokens" else totals.cost


def evaluate(limits: Mapping[str, float], warn_at: float, sessions: Mapping[str, Totals],
             tasks: Mapping[int, Totals], today: Totals, day: str) -> list[BudgetCheck]:
    """Every configured limit checked against its scope's spend (pure)."""
    checks = []
    for key, limit in limits.items():
        scope, unit = (key[:-len("_tokens")], "tokens") if key.endswith("_tokens") else (key, "cost")
        if scope == "per_session":
            subjects: Mapping[str, Totals] = sessions
        elif scope == "per_task":
            subjects = {str(t): v for t, v in tasks.items()}
        elif scope == "daily":
            subjects = {day: today}
        else:
            continue
        for subject, totals in subjects.items():
            checks.append(BudgetCheck(scope, subject, unit, limit, _measure(totals, unit), warn_at, totals.trusted))
    return checks


@dataclass
class BudgetReport:
    checks: list[BudgetCheck] = field(default_factory=list)
    interrupted: list[str] = field(default_factory=list)

    @property
    def blocked(self) -> list[BudgetCheck]:
        return [c for c in self.checks if c.level == "over"]

    @property
    def reason(self) -> str | None:
        over = self.blocked
        return "; ".join(c.describe() for c in over) if over else None


def local_midnight(now: float | None = None) -> float:
    t = time.localtime(now if now is not None else time.time())
    return time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))


class BudgetGuard:
    """Checks budgets and stops spend. One per project; every step is one event."""

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager
        self.project = manager.project

    @property
    def path(self) -> Any:
        return self.project.state_dir / "budget.json"

    def _load(self) -> dict[str, Any]:
        data, _ = read_json(self.path, "budget state")
        data = data if isinstance(data, dict) else {}
        data.setdefault("warned", {})
        data.setdefault("over", {})
        return data

    def tick(self, infos: Sequence[SessionInfo] | None = None) -> BudgetReport:
        """Read new usage of live sessions, check every limit, warn, interrupt, clear."""
        cfg = self.project.config
        if infos is None:
            infos = self.manager.list(with_screens=False)
        live = {i.name: i for i in infos if str(i.status) != "exited"}
        for name, info in live.items():
            if info.status_source != "output":  # only an agent wired to report (hooks) has usage records to read:
                self.manager.update_usage(name)  # the others' session records are not read on every poll
        if not cfg.budget:
            return BudgetReport()
        checks, session_task = budget_checks(self.manager, live)
        report = BudgetReport(checks)
        with self.project.lock.hold():
            state = self._load()
        before = repr(state)
        self._act(report, state, live, session_task)
        if repr(state) != before:
            with self.project.lock.hold():
                write_json(self.path, state)
        return report

    def _in_scope(self, check: BudgetCheck, live: Mapping[str, SessionInfo],
                  session_task: Mapping[str, int | None]) -> list[str]:
        if check.scope == "per_session":
            return [check.subject] if check.subject in live else []
        if check.scope == "per_task":
            return [n for n in live if str(session_task.get(n)) == check.subject]
        return list(live)

    def _act(self, report: BudgetReport, state: dict[str, Any], live: Mapping[str, SessionInfo],
             session_task: Mapping[str, int | None]) -> None:
        events = self.project.events
        presets = all_presets(self.project.config)
        current = {c.key: c for c in report.checks}
        for check in report.checks:
            if check.level in ("warn", "over") and state["warned"].get(check.key) != check.limit:
                state["warned"][check.key] = check.limit
                events.append("budget.warning", budget=check.to_dict(), message=check.describe())
            if check.level != "over":
                continue
            record = state["over"].get(check.key)
            if record is None or record.get("limit") != check.limit:
                record = {"limit": check.limit, "since": time.time(), "interrupted": {}}
                state["over"][check.key] = record
                events.append("budget.exceeded", budget=check.to_dict(), message=check.describe())
            for name in self._in_scope(check, live, session_task):
                info = live[name]
                spent_then = record["interrupted"].get(name)
                if spent_then is not None and check.spent <= spent_then:
                    continue  # already stopped at this spend: nothing new was spent since
                first = spent_then is None
                record["interrupted"][name] = check.spent
                preset = presets.get(info.agent)
                keys = list(preset.interrupt_keys) if preset is not None else ["C-c"]
                if first:
                    self._mark(name, check)
                    events.append("session.over_budget", worktree={"name": name}, agent=info.agent,
                                  budget=check.to_dict())
                try:
                    self.manager.keys(name, keys)
                except DaintreeError as exc:  # a session that just ended: the event says so, the tick goes on
                    events.append("session.interrupt_failed", worktree={"name": name}, error=str(exc))
                    continue
                events.append("session.interrupted", worktree={"name": name}, agent=info.agent, keys=keys,
                              reason="budget", budget=check.to_dict())
                report.interrupted.append(name)
        for key in [k for k in state["over"] if k not in current or current[k].level != "over"]:
            record = state["over"].pop(key)
            now_check = current.get(key)
            events.append("budget.cleared", key=key, budget=now_check.to_dict() if now_check else None,
                          previous_limit=record.get("limit"))
            for name in record.get("interrupted", {}):
                self._mark(name, None)
        for key in [k for k in state["warned"] if k not in current or current[k].level == "ok"]:
            state["warned"].pop(key)

    def _mark(self, name: str, check: BudgetCheck | None) -> None:
        """Record (or clear) `over_budget` in the session record."""
        self.manager.records.mark_over_budget(name, check.to_dict() if check is not None else None)


def budget_checks(manager: SessionManager, sessions: Iterable[str]) -> tuple[list[BudgetCheck], dict[str, int | None]]:
    """Every configured limit against its scope's spend: the current run of each of `sessions`, every task, today;
    and the task of each session that ever ran."""
    cfg = manager.project.config
    tracker = manager.usage
    current: dict[str, Totals] = {}
    for name in sessions:
        runs = tracker.runs(name, current_only=True)
        if runs:
            current[name] = runs[0].totals
    tasks: dict[int, Totals] = {}
    today = Totals()
    midnight = local_midnight()
    all_runs = tracker.all_runs()
    for run in all_runs:
        if run.task_id is not None:
            tasks[run.task_id] = tasks.get(run.task_id, Totals()).merge(run.totals)
    for run in tracker.all_runs(since=midnight):
        today = today.merge(run.totals)
    day = time.strftime("%Y-%m-%d", time.localtime(midnight))
    return (evaluate(cfg.budget, cfg.budget_warn_at, current, tasks, today, day),
            {r.name: r.task_id for r in all_runs})


def usage_report(manager: SessionManager, bakeoff_records: Sequence[Mapping[str, Any]],
                 since: float) -> dict[str, Any]:
    """Usage per session, task and bake-off candidate, and the total, counted from `since` (as last read:
    `BudgetGuard.tick` reads the live sessions' new records first)."""
    project = manager.project
    runs = [r for r in manager.usage.all_runs(since) if r.totals.tokens.total or r.totals.cost]
    sessions: dict[str, Totals] = {}
    agents: dict[str, str] = {}
    tasks: dict[int, Totals] = {}
    total = Totals()
    for run in runs:
        sessions[run.name] = sessions.get(run.name, Totals()).merge(run.totals)
        agents[run.name] = run.agent
        if run.task_id is not None:
            tasks[run.task_id] = tasks.get(run.task_id, Totals()).merge(run.totals)
        total = total.merge(run.totals)
    bakeoffs = []
    for record in bakeoff_records:
        cands = [{"name": c, **sessions.get(c, Totals()).to_dict()} for c in record.get("candidates", [])]
        bakeoffs.append({"id": record.get("id"), "task_id": record.get("task_id"), "candidates": cands})
    # The budgets as the guard checks them (each session's current run, every task, today), whatever `since` is.
    checks = budget_checks(manager, sorted({r.name for r in manager.usage.all_runs()}))[0] \
        if project.config.budget else []
    return {
        "since": since,
        "trusted": total.trusted,
        "sessions": [{"name": n, "agent": agents[n], **t.to_dict()} for n, t in sorted(sessions.items())],
        "tasks": [{"task_id": k, **t.to_dict()} for k, t in sorted(tasks.items())],
        "bakeoffs": bakeoffs,
        "total": total.to_dict(),
        "pricing_checked": PRICING_CHECKED,
        "currency": "USD",
        "budget": project.config.budget,
        "budget_checks": [c.to_dict() for c in checks],
    }
