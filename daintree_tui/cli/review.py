"""`daintree review NAME`: comments on lines of a worktree's diff sent to its agent, CI failures sent likewise, and
a person's approval (or request for changes) of its current head, which the approval gate of a merge reads."""

from __future__ import annotations

import argparse
from typing import Any

from daintree_tui.cli.common import AddCommand
from daintree_tui.cli.output import ago, emit
from daintree_tui.core.errors import InputError
from daintree_tui.core.validate import escape_controls
from daintree_tui.services import Services


def parse_place(place: str) -> tuple[str, int]:
    """`PATH:LINE` as (path, line)."""
    path, sep, line = place.rpartition(":")
    if not sep or not path or not line.isdigit() or int(line) < 1:
        raise InputError(f"--comment takes PATH:LINE TEXT, the line a number from 1 (got {place!r})")
    return path, int(line)


def _text(view: dict[str, Any], done: list[str]) -> str:
    head = view["head"][:12] if view["head"] else "none"
    lines = [*done, f"review of {view['worktree']}: {view['state']} (head {head}; role {view['role'] or '-'}, "
             f"approval {view['approval']})"]
    for comment in view["comments"]:
        marks = "".join(f" [{word}]" for word in ("sent", "outdated") if comment[word])
        lines.append(f"  #{comment['id']} {escape_controls(comment['path'])}:{comment['line']}{marks}  "
                     f"{escape_controls(comment['text'])}  ({comment['by']}, {ago(comment['at'])})")
    for verdict in view["verdicts"][-3:]:
        said = f": {escape_controls(verdict['message'])}" if verdict["message"] else ""
        lines.append(f"  {verdict['kind']} of {verdict['head'][:12]} by {verdict['by']}, {ago(verdict['at'])}"
                     f"{said}")
    checks = view["checks"]
    if checks is not None:
        failed = f" ({', '.join(checks['failed'])})" if checks["failed"] else ""
        lines.append(f"  CI: {checks['state']}{failed}")
    if view["missing"]:
        lines.append("  a merge now is refused: " + "; ".join(view["missing"]))
    return "\n".join(lines)


def cmd_review(args: argparse.Namespace, services: Services) -> int:
    ops = services.ops
    name = args.name
    comments = [(*parse_place(place), text) for place, text in args.comment or []]
    kind = "approve" if args.approve else "request-changes" if args.request_changes else None
    if args.message is not None and kind is None:
        raise InputError("-m is the message of --approve or --request-changes")
    if any(not text.strip() for *_, text in comments):
        raise InputError("a comment needs some text")
    done: list[str] = []
    if comments:
        for comment in ops.review.comment(name, comments):
            done.append(f"added comment #{comment.id} on {escape_controls(comment.path)}:{comment.line}")
    if kind is not None:
        ops.review.verdict(name, kind, args.message or "")
        done.append(f"{'approved' if kind == 'approve' else 'requested changes on'} the head of {name}")
    sent: dict[str, Any] = {}
    if args.send:
        sent["send"] = result = ops.review.send(name)
        how = "pasted into its session" if result["how"] == "pasted" else "its agent started with them"
        done.append(f"sent {len(result['sent'])} comment{'s' if len(result['sent']) != 1 else ''} to {name} ({how})")
    if args.send_ci:
        sent["send_ci"] = result = ops.review.send_ci(name)
        done.append(f"sent the failed checks ({', '.join(result['failed'])}) to {name}")
    view = ops.review.get(name)
    emit(args, {**view, **sent}, lambda: _text(view, done))
    return 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    p = add(sub, "review", cmd_review, "comment on a worktree's diff, send it to the agent, approve its head")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("--comment", nargs=2, action="append", metavar=("PATH:LINE", "TEXT"),
                   help="a comment on a line of the new side (repeatable)")
    p.add_argument("--send", action="store_true",
                   help="send every unsent comment to the agent as one paste (starting it when none runs)")
    p.add_argument("--send-ci", action="store_true",
                   help="send the pull request's failed checks, with their log tails, to the agent")
    verdict = p.add_mutually_exclusive_group()
    verdict.add_argument("--approve", action="store_true",
                         help="approve the current head (refused inside a session; a new commit asks again)")
    verdict.add_argument("--request-changes", action="store_true", help="request changes on the current head")
    p.add_argument("-m", "--message", metavar="TEXT", help="what the approval or the request says")
