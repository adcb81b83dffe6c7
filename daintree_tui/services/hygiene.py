"""Disk hygiene: how much each worktree takes (measured in the background, cached), and `gc`."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daintree_tui.core import admin_dirs, checkpoints, ownership, validate
from daintree_tui.core import git as g
from daintree_tui.core.errors import DaintreeError, OperationError
from daintree_tui.core.log import suppressed
from daintree_tui.core.models import WorktreeEntry, WorktreeStatus
from daintree_tui.core.review_record import ReviewStore
from daintree_tui.core.store import read_json, remove_tree, write_json
from daintree_tui.core.worktrees import WorktreeService
from daintree_tui.sessions.session_info import session_record_path

CACHE_TTL = 300.0


# An agent's worktree can hold millions of files (or a folder a network mount made slow): `worktree list`, the
# dashboard's disk column and the MCP listing must not wait on it for minutes. A tree not measured in time counts
# as 0 until the cache expires.
DU_TIMEOUT = 10.0


def tree_size(path: Path) -> int:
    """Bytes used by a tree (`du`, which does not follow the symlinked node_modules; where there is no `du`, the
    same sum walked here: `worktree list` was an internal error without it); 0 when it takes longer than
    DU_TIMEOUT."""
    try:
        proc = subprocess.run(["du", "-sk", "--", str(path)], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=DU_TIMEOUT)
    except subprocess.TimeoutExpired:
        return 0
    except OSError:
        return _walked_size(path)
    try:
        return int(proc.stdout.split()[0]) * 1024
    except (IndexError, ValueError):
        return 0


def _walked_size(path: Path) -> int:
    """Blocks in use under `path`, symlinks not followed (what `du -s` counts); 0 after DU_TIMEOUT."""
    total = 0
    deadline = time.monotonic() + DU_TIMEOUT
    for folder, dirs, files in os.walk(path, onerror=lambda _exc: None):
        if time.monotonic() > deadline:
            return 0
        for name in [*dirs, *files]:
            with suppressed(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    with suppressed(OSError):
        total += os.lstat(path).st_blocks * 512
    return total


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


class DiskUsage:
    """Per-worktree disk use, cached in `.worktrees/.cache/disk.json` for CACHE_TTL seconds."""

    def __init__(self, worktrees: WorktreeService) -> None:
        self.worktrees = worktrees
        self.path = worktrees.project.state_dir / ".cache" / "disk.json"

    def cached(self) -> dict[str, dict[str, float]]:
        data, _ = read_json(self.path, "disk cache")
        return data if isinstance(data, dict) else {}

    def measure(self, entries: list[WorktreeEntry], max_age: float = CACHE_TTL) -> dict[str, int]:
        cache = self.cached()
        now = time.time()
        out = {}
        measured = False
        for entry in entries:
            hit = cache.get(entry.name)
            if not (isinstance(hit, dict) and validate.is_number(hit.get("at")) and validate.is_int(hit.get("bytes"))):
                hit = None  # the cache is a file in the repository: a bad record is a miss
            if hit and now - hit["at"] < max_age:
                out[entry.name] = int(hit["bytes"])
                continue
            size = tree_size(Path(entry.path)) if Path(entry.path).is_dir() else 0
            cache[entry.name] = {"bytes": size, "at": now}
            out[entry.name] = size
            measured = True
        if measured:  # a listing served from the cache writes nothing (a write and its fsyncs cost it ~25 ms)
            with suppressed(DaintreeError):
                write_json(self.path, cache)
        return out


@dataclass
class GcReport:
    dry_run: bool
    actions: list[str] = field(default_factory=list)
    freed: int = 0
    kept_dirty: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "actions": self.actions, "freed_bytes": self.freed,
                "kept_dirty": self.kept_dirty}


def collect(worktrees: WorktreeService, remove: Callable[[str], object], older_than_days: float = 14.0,
            dry_run: bool = False) -> GcReport:
    """Prune git's records, delete logs, temp dirs and review records of removed worktrees, finish interrupted
    deletes, and remove kept worktrees that are clean, merged and older than the limit (with `remove`: the remove
    operation, branch and all). A dirty worktree is never touched."""
    project = worktrees.project
    project.require_git()
    older_than_days = validate.finite_number(older_than_days, "--older-than", minimum=0, maximum=36500)
    problem = project.state_dir_problem()  # and no committed `.trash -> ~` whose contents we would delete
    if problem:
        raise OperationError(problem)
    report = GcReport(dry_run)
    root = project.root
    # Never git's word on which records are stale alone: what an agent wrote in its own decides nothing.
    pruned = admin_dirs.prune(project, dry_run=True, fix=not dry_run)
    report.actions += [f"repair: {f.split('; ')[0]}" for f in pruned.findings]  # what, not the verb (dry runs)
    if pruned.stale:
        report.actions.append(f"prune git worktree records: {len(pruned.stale)}")
        if not dry_run:
            admin_dirs.prune(project)
    entries = worktrees.entries(include_removed=True)
    live = {e.name for e in entries if e.live}
    removed = [e for e in entries if e.status == WorktreeStatus.REMOVED and e.name not in live]
    reviews = ReviewStore(project)
    for entry in removed:
        review = reviews.path(entry.name)  # its comments and verdicts: nobody reads them once it is gone
        for path in (project.log_path(entry.name), project.logs_dir / f"{entry.name}.hooks.log",
                     session_record_path(project, entry.name), project.tmpdir_for(entry.name),
                     project.sandbox_home_for(entry.name), review, review.with_name(review.name + ".bak")):
            if path.exists():
                size = tree_size(path) if path.is_dir() else path.stat().st_size
                report.actions.append(f"delete {path.relative_to(project.state_dir)} ({human(size)})")
                report.freed += size
                if not dry_run:
                    remove_tree(path) if path.is_dir() else path.unlink(missing_ok=True)
        # Its review, left by a remove of before reviews went with their worktree: deleted as safely as a remove
        # deletes it (a regular file of ours in the real folder, never a link's target).
        review_files = reviews.files(entry.name)
        for path, size in review_files:
            report.actions.append(f"delete {path.relative_to(project.state_dir)} ({human(size)})")
            report.freed += size
        if review_files and not dry_run:
            reviews.discard(entry.name)
    for name in checkpoints.names_with_checkpoints(project):
        if name not in live:  # a worktree removed before its checkpoints went with it, or by hand
            report.actions.append(f"delete the checkpoints of {name}")
            if not dry_run:
                with suppressed(DaintreeError):
                    checkpoints.drop(project, name)
    trash = project.trash_dir
    if trash.is_dir():
        for child in list(trash.iterdir()):
            size = tree_size(child)
            report.actions.append(f"finish deleting {child.name} ({human(size)})")
            report.freed += size
            if not dry_run:
                remove_tree(child)
    cutoff = time.time() - older_than_days * 86400
    for entry in entries:
        if entry.status != WorktreeStatus.KEPT or (entry.kept_at or entry.created_at) > cutoff:
            continue
        path = Path(entry.path)
        if path.exists() or path.is_symlink():
            # Never on the index's word alone: the path must be ours, and nothing in it may be lost.
            problem = ownership.ownership_problem(project, path)
            reasons = [problem] if problem else worktrees.work_at_risk(entry)
            if reasons:
                report.kept_dirty.append(entry.name)
                report.actions.append(f"keep {entry.name}: {'; '.join(reasons)}")
                continue
        targets = [t for t in (g.rev_parse_commit(root, entry.base_ref), g.rev_parse_commit(root, "HEAD")) if t]
        if not any(g.is_ancestor(root, entry.branch, t) for t in targets):
            continue
        size = tree_size(path) if path.is_dir() else 0
        report.actions.append(f"remove kept worktree {entry.name} (clean, merged; {human(size)})")
        report.freed += size
        if not dry_run:
            try:
                remove(entry.name)
            except DaintreeError as exc:
                report.actions.append(f"kept {entry.name}: {exc}")
                continue
            worktrees.empty_trash()
    if not dry_run:
        project.events.append("gc.ran", actions=report.actions, freed=report.freed)
    return report
