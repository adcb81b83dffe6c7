"""`daintree checkpoint`: a worktree's checkpoints (its files after each turn of its agent), their diffs, and a
restore of one (core/checkpoints.py)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from daintree_tui.cli.common import AddCommand
from daintree_tui.cli.output import emit
from daintree_tui.core.validate import escape_controls
from daintree_tui.core.validate import files as count_files
from daintree_tui.services import Services


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "?"


def cmd_checkpoint_list(args: argparse.Namespace, services: Services) -> int:
    found = services.ops.checkpoints.list(args.name, every=args.all)

    def text() -> str:
        if not found:
            return f"{args.name} has no checkpoints yet (one is taken each time its agent's turn ends)"
        lines = [f"{'ID':>3}  {'WHEN':19}  {'COMMIT':12}  {'FILES':>5}  {'WHY':8}  PROMPT"]
        if found[0].id > 1:
            lines.append(f"...  the newest {len(found)} of {found[-1].id} (--all lists every one)")
        for c in found:
            lines.append(f"{c.id:>3}  {_when(c.ts):19}  {c.commit[:12]}  {c.files:>5}  {c.reason:8}  "
                         f"{c.prompt or ''}")
        return "\n".join(lines)

    emit(args, [c.to_dict() for c in found], text)
    return 0


def cmd_checkpoint_create(args: argparse.Namespace, services: Services) -> int:
    made, newest = services.ops.checkpoints.create(args.name)
    if made is None:
        last = f"checkpoint {newest.id}" if newest else "its base"
        emit(args, {"created": False, "checkpoint": newest.to_dict() if newest else None},
             f"{args.name}: nothing changed since {last}: no checkpoint taken")
        return 0
    emit(args, {"created": True, "checkpoint": made.to_dict()},
         f"{args.name}: checkpoint {made.id} ({made.commit[:12]}, {count_files(made.files)} changed)")
    return 0


def cmd_checkpoint_diff(args: argparse.Namespace, services: Services) -> int:
    result = services.ops.checkpoints.diff(args.name, args.id, args.id2, step=args.step)

    def text() -> str:
        if not result.files:
            return f"{args.name}: no difference from {result.start} to {result.end}"
        if args.stat:
            return "\n".join([f"{result.start} -> {result.end}: {count_files(len(result.files))}",
                              *(f"  {escape_controls(p)}" for p in result.files)])
        return escape_controls(result.patch)  # the agent's bytes: seen, never obeyed by the terminal

    emit(args, result.to_dict(), text)
    return 0


def cmd_checkpoint_restore(args: argparse.Namespace, services: Services) -> int:
    result = services.ops.checkpoints.restore(args.name, args.id)
    target, before = result.target, result.before
    said = (f"{args.name}: restored checkpoint {target.id} ({count_files(len(result.files))} changed); what "
            f"was there is checkpoint {before.id} (`daintree checkpoint restore {args.name} {before.id}` undoes it)")
    if not result.files:
        said = f"{args.name}: its files are checkpoint {target.id}'s already"
    elif not result.exact:
        said += "; the files changed again meanwhile (its agent is working?): see `checkpoint diff`"
    emit(args, result.to_dict(), said)
    return 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    checkpoint = add(sub, "checkpoint", None, "a worktree's files after each turn of its agent: list, diff, restore")
    csub = checkpoint.add_subparsers(dest="checkpoint_command", metavar="ACTION", required=True)
    p = add(csub, "list", cmd_checkpoint_list, "the newest 200 checkpoints of a worktree, oldest first (id 1: the "
            "first of all)")
    p.add_argument("name", metavar="NAME", help="a live worktree")
    p.add_argument("--all", action="store_true", help="every checkpoint, not only the newest 200")
    p = add(csub, "create", cmd_checkpoint_create, "take a checkpoint of the worktree's files now")
    p.add_argument("name", metavar="NAME", help="a live worktree")
    p = add(csub, "diff", cmd_checkpoint_diff, "the diff from checkpoint ID to ID2 (default: the files now)")
    p.add_argument("name", metavar="NAME", help="a live worktree")
    p.add_argument("id", metavar="ID", help="a checkpoint's id (1 = oldest) or 4+ hex digits of its commit")
    p.add_argument("id2", metavar="ID2", nargs="?", help="the other checkpoint (default: the worktree's files now)")
    p.add_argument("--step", action="store_true", help="what checkpoint ID changed (from the one before it)")
    p.add_argument("--stat", action="store_true", help="only the files that differ")
    p = add(csub, "restore", cmd_checkpoint_restore,
            "make the worktree's files checkpoint ID's exactly (the files before are checkpointed first)")
    p.add_argument("name", metavar="NAME", help="a live worktree")
    p.add_argument("id", metavar="ID", help="a checkpoint's id (1 = oldest) or 4+ hex digits of its commit")
