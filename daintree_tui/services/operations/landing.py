"""Landing a worktree's work (`ops.landing`): its commit, its pull request, its merge (through the approval gate
its role asks, `ops.review`), the merge train, and the radar's predicted conflicts between worktrees' work."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from daintree_tui.core.errors import DaintreeError
from daintree_tui.core.log import suppressed, warn

if TYPE_CHECKING:
    from daintree_tui.core.radar import RadarReport
    from daintree_tui.core.review import MergeResult
    from daintree_tui.services.operations.core import Operations
    from daintree_tui.services.train import TrainProgress, TrainResult


class LandingOps:
    """`ops.landing`: what takes a worktree's work towards its target branch."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops
        self.services = ops.services

    def commit(self, name: str, message: str, *, all_changes: bool = False) -> dict[str, Any]:
        return self.services.review.commit(name, message, all_changes=all_changes)

    def merge(self, name: str, *, strategy: str = "ff", into: str | None = None, remove: bool = False,
              complete_task: bool = False, verify: bool = True) -> MergeResult:
        """Merge worktree `name`'s branch into `into` (default: its base branch, else the primary's) through a
        temporary worktree, the target moved only to the tested result. `verify=False` skips the pre_merge
        checks (a person's choice, refused inside a session). Returns the target, the strategy, the commit the
        target now points at and whether the worktree was removed; raises OperationError when it cannot merge
        (diverged for ff, a conflict, a failing check, uncommitted work), with nothing changed."""
        gate = self.ops.review
        gate.require_approved(name, verify=verify)
        # Asked again of the very commit merged, once the merge brought in what the agent committed meanwhile.
        return self.services.review.merge(name, strategy=strategy, into=into, remove=remove,
                                          complete_task=complete_task, verify=verify,
                                          gate=lambda tip: gate.require_approved(name, verify=verify, head=tip))

    def pr(self, name: str, *, draft: bool = False) -> dict[str, Any]:
        result = self.services.review.pr(name, draft=draft)
        with suppressed(DaintreeError):
            self.services.reviews.remember_pr(name, str(result.get("url") or ""))  # its checks show from now on
        return result

    def conflicts(self, name: str | None = None) -> RadarReport:
        """The radar's predicted conflicts of every live worktree's work (`name`: an unknown one is InputError);
        each worktree read in its sandbox, nothing of it changed."""
        if name is not None:
            self.services.worktrees.get(name, live=True)
        return self.services.radar.scan()

    def conflicts_by_name(self, live: Sequence[Any], facts: Mapping[str, Any]) -> dict[str, list[str]]:
        """name -> the worktrees and branches its work is predicted to conflict with, for `worktree list --json`
        and MCP's `worktree_list` alike (a worktree the facts found clean is read from its branch alone)."""
        report = self.services.radar.scan(list(live), dirty={n: f.dirty for n, f in facts.items() if f.exists})
        for name, why in report.unreadable.items():
            warn(f"radar: {name}: {why}")
        return {e.name: report.others(e.name) for e in live}

    def train(self, names: Sequence[str] | None = None, *, into: str | None = None, strategy: str = "squash",
              test: str | None = None, remove: bool = False, complete_task: bool = False,
              on_progress: Callable[[TrainProgress], None] | None = None) -> list[TrainResult]:
        """Land worktrees one after another, each built and checked in a temporary worktree, the target moved
        only to a tested commit (services/train.py); a person's operation, refused inside a session."""
        return self.services.train.run(names, into=into, strategy=strategy, test=test, remove=remove,
                                       complete_task=complete_task, on_progress=on_progress)
