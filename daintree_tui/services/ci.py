"""CI status of a worktree's pull request, from `gh pr checks`, and the failed checks' log tails (`gh run view`).

Only for a worktree whose pull request `worktree pr` opened (its review record keeps the URL), and only when `gh`
is on PATH: otherwise there is nothing to show and nothing fails. What the forge says is data: check names and log
lines come from the repository's CI configuration (the agent's branch can change it), so they are shown without
their terminal controls and never acted on.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daintree_tui.core.validate import escape_controls
from daintree_tui.sessions.last_words import readable_lines

GH_TIMEOUT = 20.0
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
                "failed": [c.name for c in self.failed]}


def _gh(root: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    gh = shutil.which("gh")
    if gh is None:
        return None
    try:
        # From the primary, as `worktree pr` runs it: the worktree and its admin dir are the agent's.
        return subprocess.run([gh, *args], capture_output=True, text=True, cwd=root, timeout=GH_TIMEOUT,
                              stdin=subprocess.DEVNULL, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return None


def _text(value: Any, limit: int = 200) -> str:
    return escape_controls(str(value))[:limit] if isinstance(value, str) else ""


def pr_checks(root: Path, pr: str) -> ChecksReport | None:
    """The checks of pull request `pr` (its URL), or None: no gh, no answer, an answer that is no list of checks.
    gh exits 1 when a check failed and 8 while one is pending, with the list on stdout all the same."""
    proc = _gh(root, "pr", "checks", pr, "--json", "name,state,bucket,link")
    if proc is None:
        return None
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        return None
    if not isinstance(data, list):
        return None
    checks = tuple(Check(_text(c.get("name")) or "?", _text(c.get("bucket"), 20).lower() or "pending",
                         _text(c.get("state"), 40), _text(c.get("link"), 500))
                   for c in data[:MAX_CHECKS] if isinstance(c, dict))
    return ChecksReport(pr, checks)


def failed_log_tail(root: Path, check: Check) -> str:
    """The end of a failed check's log (`gh run view --log-failed`), its terminal controls gone; "" when gh has
    none (a check of another CI than GitHub Actions)."""
    found = _JOB.search(check.link)
    if found is None:
        return ""
    run, job = found.groups()
    proc = _gh(root, "run", "view", *(["--job", job] if job else [run]), "--log-failed")
    if proc is None or proc.returncode != 0:
        return ""
    return "\n".join(readable_lines(proc.stdout)[-TAIL_LINES:])[-TAIL_CHARS:]
