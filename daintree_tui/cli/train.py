"""`daintree train`: land several worktrees one after another, each built and gated in a temporary worktree."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from daintree_tui.cli.common import AddCommand
from daintree_tui.cli.output import emit, wants_json, write_line
from daintree_tui.services import Services

if TYPE_CHECKING:
    from daintree_tui.services.train import TrainProgress


def cmd_train(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.services.train import DEFAULT_STRATEGY

    # Each step as it happens (a train of ten test suites runs for a while): on stdout, or on stderr with --json,
    # whose stdout is the one list of results.
    said = sys.stderr if wants_json(args) else sys.stdout

    def progress(step: TrainProgress) -> None:
        write_line(said, step.line())
        said.flush()

    results = services.ops.landing.train(args.names or None, into=args.into, strategy=args.strategy or DEFAULT_STRATEGY,
                                test=args.test, remove=args.remove, complete_task=args.complete_task,
                                on_progress=progress)
    merged = [r for r in results if r.result == "merged"]
    if not results:
        text = "nothing to land: no finished worktree has commits its target lacks"
    else:
        text = f"landed {len(merged)} of {len(results)}" + "".join(
            f"\n  {r.line()}" for r in results if r.result != "merged")
    emit(args, [r.to_dict() for r in results], text)
    return 0 if len(merged) == len(results) else 1


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    p = add(sub, "train", cmd_train, "land worktrees one by one, each built and tested in a temporary worktree")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="worktrees to land (default: every finished one with commits its target lacks)")
    p.add_argument("--into", metavar="BRANCH", help="target branch (default: each one's base, else the primary's)")
    p.add_argument("--strategy", choices=("squash", "rebase", "merge"), default=None,
                   help="squash (default: one commit per worktree), rebase, or merge (a merge commit)")
    p.add_argument("--test", metavar="CMD", help="a check to run in each candidate, after the pre_merge hooks")
    p.add_argument("--remove", action="store_true", help="remove each worktree that landed")
    p.add_argument("--complete-task", action="store_true", help="mark the task of each one that landed completed")
