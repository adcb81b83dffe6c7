"""The link between a session and its agent's usage records, and the usage it has accumulated.

`.worktrees/.sessions/<name>/usage.json` holds one entry per run of a session (each start or resume): which record
files belong to it and where reading them stopped (inode, offset, per-file parser state), and the tokens it added,
in hourly buckets per model. Files the agent had written before the run started (a resumed conversation's
transcript) are read up to their size at the start without counting, so a resume counts only new spend; a file
that is truncated or replaced later is read again from its start and its parser counts nothing twice.

Costs are computed when asked, from the tokens and the current prices: changing `[pricing]` re-prices history.

The agent writes its records; usage.json is ours (0600 in the 0700 session dir, read-only in every sandbox). It is
the outside's own high-water mark: a count only ever grows, so a record that shrinks, is rewritten lower, replaced
or deleted after it was counted never lowers it. What made a record untrustworthy (that, a link, a FIFO, lines that
are no JSON, a file past MAX_RECORD_BYTES, more files than MAX_RECORD_FILES) is kept per run as `untrusted`
(`{file: what}`) and shown with its usage (`"trusted": false`) and with every budget it counts in.
A sandboxed run's records are read from the folder its sandbox shows at the agent's (`private_home`, kept in the
run: the outside's choice when it began, never what a record says).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from daintree_tui.core.errors import OperationError
from daintree_tui.core.fs_safe import private_dir
from daintree_tui.core.log import suppressed
from daintree_tui.core.project import Project
from daintree_tui.core.store import read_json, write_json
from daintree_tui.sessions.agents import AgentIntegration, SessionContext
from daintree_tui.sessions.agents.base import MAX_RECORD_FILES
from daintree_tui.sessions.usage import hour_key, parser_for
from daintree_tui.sessions.usage_cost import DEFAULT_PRICES, Price, Tokens, Totals, UsageRecord
from daintree_tui.sessions.usage_tail import TailState, read_new_lines

MAX_UNTRUSTED = 50  # untrusted record files remembered per run (the first ones found)
START_SLACK = 5.0  # a record file touched this long before the start still belongs to the run
PRIME_BYTES = 64 * 1024 * 1024  # of a record file that exists when a run begins, read to learn what was counted


def session_dir(project: Project, name: str) -> Path:
    """`.worktrees/.sessions/<name>/`: the session's own files (hook config, signal script, usage), 0700."""
    path = project.state_dir / ".sessions" / name
    if path.is_symlink():  # ours to write hook config and scripts into: never somewhere a link points
        raise OperationError(f"refusing to use {path}: it is a symlink")
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def prices_from(config_pricing: Mapping[str, Mapping[str, float]]) -> dict[str, Price]:
    """The shipped prices with the user's `[pricing.<model>]` tables over them."""
    prices = dict(DEFAULT_PRICES)
    for model, p in config_pricing.items():
        prices[model.lower()] = Price(p["input"], p["output"], p.get("cache_read"), p.get("cache_write"))
    return prices


@dataclass(frozen=True)
class RunUsage:
    """One run of one session, with its usage since a moment (everything when `since` is 0)."""

    name: str
    agent: str
    task_id: int | None
    started_at: float
    totals: Totals
    last_record_at: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "agent": self.agent, "task_id": self.task_id, "started_at": self.started_at,
                "last_record_at": self.last_record_at, **self.totals.to_dict()}


def _untrusted(run: Mapping[str, Any]) -> set[str]:
    """`<record file's name>: <what was found>` for each record of `run` that could not be trusted."""
    raw = run.get("untrusted")
    if not isinstance(raw, dict):
        return set()
    return {f"{Path(str(key)).name}: {value}" for key, value in raw.items()}


def _bucket_totals(run: Mapping[str, Any], prices: Mapping[str, Price], since: float) -> Totals:
    totals = Totals(untrusted=_untrusted(run))
    floor = hour_key(since) if since else ""
    for hour, models in (run.get("hours") or {}).items():
        if hour < floor:
            continue
        for model, b in models.items():
            tokens = Tokens.from_dict(b.get("tokens"))
            reported_tokens = Tokens.from_dict(b.get("reported_tokens"))
            priced = UsageRecord((tokens - reported_tokens).clamp(), model if model != "?" else "")
            part = Totals()
            part.add(priced, prices)
            part.cost += float(b.get("reported_cost") or 0.0)
            part.tokens = tokens
            part.models = {model: tokens.total} if model != "?" else {}
            totals = totals.merge(part)
    return totals


class UsageTracker:
    """Reads new usage records of sessions and keeps their totals on disk."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._scanned: dict[str, float] = {}
        self._read: dict[tuple[str, float, bool], tuple[tuple[int, int, int, int], list[RunUsage]]] = {}
        """`runs` as last computed, with the file's (inode, size, mtime) and the prices it was computed from: the
        dashboard asks for every session's on every poll, and a file that did not change gives what it gave."""

    @property
    def prices(self) -> dict[str, Price]:
        return prices_from(self.project.config.pricing)

    def path(self, name: str) -> Path:
        return self.project.state_dir / ".sessions" / name / "usage.json"

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        """One updater of a session's usage at a time (the dashboard and a CLI call may look together). The lock
        is in the folder no sandbox sees: beside the usage file, an agent that held it hung every session start
        (under the state lock) and the dashboard's usage poll, with no timeout."""
        lock = private_dir(self.project.locks_dir) / f"usage-{name}.lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def load(self, name: str) -> dict[str, Any]:
        data, _ = read_json(self.path(name), "session usage")
        return data if isinstance(data, dict) and isinstance(data.get("runs"), list) else {"runs": []}

    def begin(self, name: str, ctx: SessionContext, integration: AgentIntegration | None, agent: str,
              task_id: int | None, started_at: float) -> None:
        """Start a new run: remember how far the agent's existing record files go, so only new spend counts."""
        run: dict[str, Any] = {"agent": agent, "kind": integration.usage_kind if integration else "none",
                               "program": integration.program if integration else "", "task_id": task_id,
                               "worktree": str(ctx.worktree), "started_at": started_at, "files": {}, "hours": {},
                               "private_home": str(ctx.private_home) if ctx.private_home is not None else None}
        if integration is not None:
            root = integration.records_root(ctx)
            run["records_root"] = str(root) if root is not None else None
            for path in integration.record_files(ctx)[:MAX_RECORD_FILES]:
                run["files"][str(path)] = self._prime(path, run["kind"], root)
        with self._locked(name):
            data = self.load(name)
            data["runs"].append(run)
            write_json(self.path(name), data)
        self._scanned.pop(name, None)

    def _prime(self, path: Path, kind: str, root: Path | None) -> dict[str, Any]:
        """Read a file that existed before the run without counting it: its parser learns what was counted.

        Only its last PRIME_BYTES: the agent writes these files, and a sparse one of a terabyte was read whole
        before its session could start. What the parsers need (the latest cumulative total, the recent message
        ids) is at the end."""
        tail = TailState()
        with suppressed(OSError):
            st = path.lstat()
            if st.st_size > PRIME_BYTES:
                tail = TailState(inode=st.st_ino, offset=st.st_size - PRIME_BYTES, skipping=True)
        parser = parser_for(kind)
        while True:
            before = tail.offset
            lines = read_new_lines(path, tail, root)
            parser.feed(lines)
            if tail.offset <= before or tail.problem:  # at its end, or nothing more to read (a link, a FIFO)
                break
        # What was read before the run is not this run's: its reading cap counts from here.
        tail.read = 0
        return {"tail": tail.to_dict(), "parser": parser.state}

    @staticmethod
    def _distrust(run: dict[str, Any], key: str, problem: str) -> bool:
        """Keep that record file `key` of `run` could not be trusted (the first reason found); True when new."""
        untrusted: dict[str, str] = run.setdefault("untrusted", {})
        if key in untrusted or len(untrusted) >= MAX_UNTRUSTED:
            return False
        untrusted[key] = problem
        return True

    def update(self, name: str, ctx: SessionContext | None, integration: AgentIntegration | None) -> None:
        """Read what the session's record files gained since the last look (new files found every few seconds)."""
        if integration is None or ctx is None:
            return
        now = time.time()
        with self._locked(name):
            data = self.load(name)
            if not data["runs"]:
                return
            run = data["runs"][-1]
            # Where this run's records are is what the outside chose when it began (its sandbox's own folder),
            # never what the caller's environment or a record says now.
            own = run.get("private_home")
            ctx = replace(ctx, private_home=Path(own) if isinstance(own, str) and own else None)
            kept = run.get("records_root")
            root = Path(kept) if isinstance(kept, str) and kept else integration.records_root(ctx)
            files: dict[str, Any] = run.setdefault("files", {})
            changed = False
            if now - self._scanned.get(name, 0.0) >= integration.rescan_every:
                self._scanned[name] = now
                for path in integration.record_files(ctx):
                    key = str(path)
                    if key in files:
                        continue
                    if len(files) >= MAX_RECORD_FILES:
                        changed |= self._distrust(run, key, f"more than {MAX_RECORD_FILES} record files: not read")
                        break
                    with suppressed(OSError):
                        if path.lstat().st_mtime >= float(run["started_at"]) - START_SLACK:
                            files[key] = {"tail": {}, "parser": {}}
            started = float(run["started_at"])
            for key, entry in files.items():
                tail = TailState.from_dict(entry.get("tail") or {})
                before = (tail.inode, tail.offset)
                parser = parser_for(str(run.get("kind")), entry.get("parser"))
                lines = read_new_lines(Path(key), tail, root)
                if tail.resets != int((entry.get("tail") or {}).get("resets") or 0):
                    parser.reset()
                records = parser.feed(lines)
                problem = tail.problem or (f"{parser.unparsed} line(s) that are no JSON" if parser.unparsed else "")
                # A file that gave no usage and then went (gemini deletes its empty chats while it signs in) took
                # nothing away: only one that counted something can have been made to count less.
                harmless = tail.problem.endswith("after it was counted") and not entry.get("counted")
                if problem and not harmless:
                    changed |= self._distrust(run, key, problem)
                if records:
                    entry["counted"] = True
                if (tail.inode, tail.offset) != before or records:
                    changed = True
                    entry["tail"], entry["parser"] = tail.to_dict(), parser.state
                for record in records:
                    # A record's own time is the agent's word: one before this run (or in the future) would
                    # leave today's budget, so it counts when it was read.
                    fair = started - START_SLACK <= record.ts <= now + START_SLACK
                    self._add(run, record if fair else replace(record, ts=now))
            if changed:
                write_json(self.path(name), data)

    @staticmethod
    def _add(run: dict[str, Any], record: UsageRecord) -> None:
        bucket = run.setdefault("hours", {}).setdefault(hour_key(record.ts), {}).setdefault(record.model or "?", {})
        bucket["tokens"] = (Tokens.from_dict(bucket.get("tokens")) + record.tokens).to_dict()
        if record.reported_cost is not None:
            bucket["reported_tokens"] = (Tokens.from_dict(bucket.get("reported_tokens")) + record.tokens).to_dict()
            bucket["reported_cost"] = float(bucket.get("reported_cost") or 0.0) + record.reported_cost
        run["last_record_at"] = max(float(run.get("last_record_at") or 0.0), record.ts)

    def runs(self, name: str, since: float = 0.0, current_only: bool = False) -> list[RunUsage]:
        """Usage of a session's runs (the current one only, or all), counted from `since`."""
        return self._runs(name, since, current_only, self.project.config.pricing)

    def current_runs(self, names: Iterable[str]) -> dict[str, list[RunUsage]]:
        """`runs(name, current_only=True)` of each session, the config looked at once for all: each look checks
        its files for changes (three stats), and the dashboard asks for every session at every poll."""
        pricing = self.project.config.pricing
        return {name: self._runs(name, 0.0, True, pricing) for name in names}

    def _runs(self, name: str, since: float, current_only: bool,
              pricing: Mapping[str, Mapping[str, float]]) -> list[RunUsage]:
        key = (name, since, current_only)
        try:
            st = os.stat(self.path(name), follow_symlinks=False)
            seen: tuple[int, int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns, id(pricing))
        except OSError:
            seen = None
        known = self._read.get(key)
        if seen is not None and known is not None and known[0] == seen:
            return list(known[1])
        runs = self.load(name)["runs"]
        if current_only:
            runs = runs[-1:]
        prices = prices_from(pricing)
        found = [RunUsage(name, str(r.get("agent") or "?"), r.get("task_id"), float(r.get("started_at") or 0.0),
                          _bucket_totals(r, prices, since), r.get("last_record_at")) for r in runs]
        if seen is not None:
            self._read[key] = (seen, found)
        return list(found)

    def all_runs(self, since: float = 0.0) -> list[RunUsage]:
        """Every run of every session that ever recorded usage here (removed worktrees included)."""
        base = self.project.state_dir / ".sessions"
        if not base.is_dir():
            return []
        out: list[RunUsage] = []
        for entry in sorted(base.iterdir()):
            if entry.is_dir() and (entry / "usage.json").exists():
                out += self.runs(entry.name, since)
        return out

    def record_mtime(self, name: str) -> float | None:
        """When the current run's record files last changed (a Codex turn starting shows here first)."""
        runs = self.load(name)["runs"]
        if not runs:
            return None
        latest = None
        for key in runs[-1].get("files") or {}:
            with suppressed(OSError):
                mtime = os.lstat(key).st_mtime
                latest = mtime if latest is None else max(latest, mtime)
        return latest
