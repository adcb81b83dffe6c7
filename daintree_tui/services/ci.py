"""CI status of a worktree's pull request, from `gh pr checks`, and the failed checks' log tails (`gh run view`).

Only for a worktree whose pull request `worktree pr` opened (its review record keeps the URL), and only when `gh`
is on PATH: otherwise there is nothing to show and nothing fails. What the forge says is data: check names and log
lines come from the repository's CI configuration (the agent's branch can change it), so they are shown without
their terminal controls and never acted on.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from daintree_tui.core.runner import RunResult, run_command
from daintree_tui.core.validate import escape_controls
from daintree_tui.sessions.last_words import readable_lines

GH_TIMEOUT = 20.0
QUICK_TIMEOUT = 4.0
"""How long a read that must answer soon (MCP `review_get` from an agent's turn, the dashboard's watch) waits for
gh before it answers with the last checks it has, or none."""
QUICK_MAX_AGE = 60.0
"""Checks read less than this many seconds ago are answered as they are, without asking gh again."""
TAIL_LINES = 40
TAIL_CHARS = 3000
MAX_CHECKS = 100
FAILED = ("fail", "cancel")
_JOB = re.compile(r"/actions/runs/(\d+)(?:/job/(\d+))?")


@dataclass(frozen=True)
class Check:
    """One check of a pull request: its name, `bucket` (pass, fail, pending, skipping, cancel) and link."""

    name: str
    bucket: str
    state: str
    link: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bucket": self.bucket, "state": self.state, "link": self.link}


@dataclass(frozen=True)
class ChecksReport:
    """The checks of pull request `pr` as gh reports them."""

    pr: str
    checks: tuple[Check, ...]
    checked_at: float = 0.0
    """When gh said so (time.time())."""
    stale: bool = False
    """gh did not answer the latest read in time: these are the checks of an earlier one (see `age`)."""

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.bucket in FAILED]

    @property
    def state(self) -> str:
        """fail (any failed or cancelled), pending (any still running), pass, or none (no checks)."""
        if self.failed:
            return "fail"
        if any(c.bucket == "pending" for c in self.checks):
            return "pending"
        return "pass" if self.checks else "none"

    def to_dict(self) -> dict[str, Any]:
        return {"pr": self.pr, "state": self.state, "checks": [c.to_dict() for c in self.checks],
                "failed": [c.name for c in self.failed], "checked_at": self.checked_at,
                "age": round(max(time.time() - self.checked_at, 0.0), 1), "stale": self.stale}


def _gh(root: Path, *args: str, timeout: float = GH_TIMEOUT) -> RunResult | None:
    gh = shutil.which("gh")
    if gh is None:
        return None
    # From the primary, as `worktree pr` runs it: the worktree and its admin dir are the agent's. In a process group
    # killed whole at the timeout, its output in files: a child gh left holding a pipe cannot make us wait.
    result = run_command([gh, *args], root, os.environ, timeout=timeout)
    return None if result.timed_out or result.exit_code in (126, 127) else result


def _text(value: Any, limit: int = 200) -> str:
    return escape_controls(str(value))[:limit] if isinstance(value, str) else ""


def pr_checks(root: Path, pr: str, *, timeout: float = GH_TIMEOUT) -> ChecksReport | None:
    """The checks of pull request `pr` (its URL), or None: no gh, no answer (within `timeout` seconds), an answer
    that is no list of checks. gh exits 1 when a check failed and 8 while one is pending, with the list on stdout
    all the same."""
    proc = _gh(root, "pr", "checks", pr, "--json", "name,state,bucket,link", timeout=timeout)
    if proc is None:
        return None
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        return None
    if not isinstance(data, list):
        return None
    every = [Check(_text(c.get("name")) or "?", _text(c.get("bucket"), 20).lower() or "pending",
                   _text(c.get("state"), 40), _text(c.get("link"), 500)) for c in data if isinstance(c, dict)]
    # Every check counts; only what is kept to show is capped, failures and running ones first. The list is the
    # branch's CI config's (the agent's to write): 100 quick jobs listed before a failing one read as "pass".
    rank = {bucket: i for i, bucket in enumerate((*FAILED, "pending"))}
    kept = sorted(every, key=lambda c: rank.get(c.bucket, len(rank)))[:MAX_CHECKS]
    return ChecksReport(pr, tuple(kept), time.time())


class ChecksCache:
    """The last checks read of each pull request in this process (the dashboard's, an MCP server's), so that a
    read that must answer soon answers with those when gh is slow or they are recent (thread-safe)."""

    def __init__(self) -> None:
        self._last: dict[str, ChecksReport] = {}
        self._lock = threading.Lock()

    def last(self, pr: str) -> ChecksReport | None:
        with self._lock:
            return self._last.get(pr)

    def read(self, root: Path, pr: str, *, timeout: float = GH_TIMEOUT, max_age: float = 0.0) -> ChecksReport | None:
        """The checks of `pr`: the last ones when read less than `max_age` seconds ago, else gh's answer within
        `timeout`; without one in time, the last ones marked `stale` (None when there are none)."""
        last = self.last(pr)
        if last is not None and not last.stale and time.time() - last.checked_at < max_age:
            return last
        report = pr_checks(root, pr, timeout=timeout)
        if report is None:
            return replace(last, stale=True) if last is not None else None
        with self._lock:
            self._last[pr] = report
        return report


def failed_log_tail(root: Path, check: Check) -> str:
    """The end of a failed check's log (`gh run view --log-failed`), its terminal controls gone; "" when gh has
    none (a check of another CI than GitHub Actions)."""
    found = _JOB.search(check.link)
    if found is None:
        return ""
    run, job = found.groups()
    proc = _gh(root, "run", "view", *(["--job", job] if job else [run]), "--log-failed")
    if proc is None or proc.exit_code != 0:
        return ""
    return "\n".join(readable_lines(proc.stdout)[-TAIL_LINES:])[-TAIL_CHARS:]
