"""`daintree bakeoff|queue|policy|approvals|approve|reject|gc`, and the policy gate in front of every command an
agent runs from its session."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from daintree_tui.cli.common import AddCommand, ctrl_c_stops, task_id
from daintree_tui.cli.output import emit, error, table, wants_json, write_line
from daintree_tui.core.errors import InputError
from daintree_tui.services import Services

if TYPE_CHECKING:
    from daintree_tui.services.queue import QueueEvent, StepReport


def _score_rows(scores: list[dict[str, Any]]) -> str:
    """The scoreboard: every judge side by side (an older record has no gate, diff or cost: `-`)."""

    def cell(value: Any, shown: str) -> str:
        return "-" if value is None else shown

    rows = [[str(i), s["name"], str(s["exit_code"]), f"{s['wall']:.2f}s",
             cell(s.get("score"), f"{s.get('score') or 0:g}"), cell(s.get("gate"), str(s.get("gate"))),
             cell(s.get("diff_lines"), str(s.get("diff_lines"))), cell(s.get("tokens"), str(s.get("tokens"))),
             cell(s.get("cost"), f"${s.get('cost') or 0:.2f}")] for i, s in enumerate(scores, start=1)]
    return table(rows, ["RANK", "CANDIDATE", "EXIT", "WALL", "SCORE", "GATE", "DIFF", "TOKENS", "COST"])


def cmd_bakeoff_create(args: argparse.Namespace, services: Services) -> int:
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    record = services.ops.bakeoff.create(task_id(args.task_id), agents, score=args.score, base=args.base)
    emit(args, record.to_dict(), f"bake-off {record.id}: {', '.join(record.candidates)}")
    return 0


def cmd_bakeoff_score(args: argparse.Namespace, services: Services) -> int:
    if args.timeout is not None and args.timeout <= 0:
        raise InputError("--timeout must be a positive number of seconds")
    scores = services.bakeoffs.score(args.id, command=args.score, minimize=args.minimize,
                                     timeout=args.timeout or 600.0)
    data = [s.to_dict() for s in scores]
    emit(args, data, _score_rows(data))
    return 0


def cmd_bakeoff_pick(args: argparse.Namespace, services: Services) -> int:
    if (args.name is None) == (not args.best):
        raise InputError("name the winner, or pick the best of the last scoring with --best (one of the two)")
    from daintree_tui.services.policy import in_session

    name = services.bakeoffs.best(args.id) if args.best else args.name
    result = services.ops.bakeoff.pick(args.id, name, strategy=args.strategy, delete_branches=args.delete_branches,
                                       caller=in_session())  # a session's role must allow the merge
    text = f"picked {name}: {result['merge']['message']}"
    if result["removed"]:
        text += f"\nremoved: {', '.join(result['removed'])}"
    if result["kept"]:
        text += f"\nkept (uncommitted work): {', '.join(result['kept'])}"
    emit(args, result, text)
    return 0


def cmd_bakeoff_list(args: argparse.Namespace, services: Services) -> int:
    records = services.bakeoffs.records()
    rows = [[r.id, str(r.task_id), r.status, ",".join(r.candidates), r.picked or "-"] for r in records]
    emit(args, [r.to_dict() for r in records],
         table(rows, ["ID", "TASK", "STATUS", "CANDIDATES", "PICKED"]) or "no bake-offs")
    return 0


def cmd_bakeoff_show(args: argparse.Namespace, services: Services) -> int:
    record = services.bakeoffs.get(args.id)
    text = (f"bake-off {record.id} for task {record.task_id} ({record.status})\n"
            f"  candidates: {', '.join(record.candidates)}\n"
            f"  score: {record.score_command or '-'}\n"
            + (_score_rows(list(record.scores)) if record.scores else "  not scored yet"))
    emit(args, record.to_dict(), text)
    return 0


def cmd_queue_run(args: argparse.Namespace, services: Services) -> int:
    if args.hosts:
        from daintree_tui.cli.host import run_host_queue

        return run_host_queue(args, services)
    services.sessions.host  # noqa: B018 - a clear error without tmux
    failed: list[str] = []
    # One line per start, completion, failure and stop as it happens (a run said nothing for a minute): on stdout,
    # or on stderr with --json, whose stdout is the one summary document.
    said = sys.stderr if wants_json(args) else sys.stdout
    waits = WaitsTeller(said)

    def report_errors(step: StepReport) -> None:  # as they happen: a run can last hours
        for message in step.errors:
            error(message)
        failed.extend(step.errors)
        waits(step.waiting_on)

    def tell(event: QueueEvent) -> None:
        write_line(said, event.line())
        said.flush()

    with ctrl_c_stops() as stop:
        report = services.queue.run(once=args.once, interval=args.interval, on_step=report_errors, stop=stop,
                                    on_event=tell)

    text = "; ".join([
        f"started: {labelled(report.started_tasks, report.worktrees)}",
        f"completed: {labelled(report.completed, report.worktrees)}",
        *([f"failed: {labelled(report.failed, report.worktrees)}"] if report.failed else []),
        *([f"stopped: {', '.join(report.stopped)}"] if report.stopped else []),
        f"running: {report.running}", f"ready or blocked: {report.waiting_tasks}"])
    text += (f"\nskipped (git tracks them: the repository's, not yours): task "
             f"{', '.join(map(str, report.skipped_tracked))}; start one yourself with `daintree worktree create "
             "NAME --task ID --agent AGENT`" if report.skipped_tracked else "")
    text += (f"\nnothing new starts: {report.blocked} (raise the limit in [budget])" if report.blocked else "")
    text += stuck_text(report.stuck)
    emit(args, report.to_dict(), text)
    if stop.is_set():
        error("interrupted")  # what the run did is above
        return 130
    return 1 if failed else 0  # a task that could not start (its error is above)


def labelled(ids: list[int], worktrees: dict[int, str]) -> str:
    """Task ids with their worktrees, each labelled: `task 3 (fix-login)`, `task 4 (job-4@far)`."""
    return ", ".join(f"task {i} ({worktrees[i]})" if i in worktrees else f"task {i}" for i in ids) or "-"


class WaitsTeller:
    """Says which task waits on which task no queue pass will finish, once, and again only when that changes
    (`queue run` waited on a person's task in silence)."""

    def __init__(self, said: Any) -> None:
        self.said = said
        self.last: dict[int, tuple[int, str]] = {}

    def __call__(self, waiting_on: dict[int, tuple[int, str]]) -> None:
        new = [(task, held) for task, held in sorted(waiting_on.items()) if self.last.get(task) != held]
        for task, (blocker, why) in new:
            write_line(self.said, f"waiting: task {task} waits on task {blocker} ({why})")
        if new:
            self.said.flush()
        self.last = dict(waiting_on)


def stuck_text(stuck: dict[int, int]) -> str:
    """What a queue run that ended leaves waiting on failed tasks, and how to let it go on."""
    if not stuck:
        return ""
    failed = sorted(set(stuck.values()))
    waits = ", ".join(f"task {t} on task {b}" for t, b in sorted(stuck.items()))
    return (f"\nwaiting on failed tasks (nothing starts them by itself): {waits}; once task "
            f"{', '.join(map(str, failed))} is fixed, `daintree task update ID --status completed` lets them start")


def cmd_policy_show(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.core.config import ROLE_ACTIONS
    from daintree_tui.services.policy import matrix

    rows = matrix(services.project)
    cells = [[r["role"] + (" (default)" if r["default"] else ""), *("yes" if r[a] else "no" for a in ROLE_ACTIONS),
              r["approval"]] for r in rows]
    emit(args, rows, table(cells, ["ROLE", *(a.upper() for a in ROLE_ACTIONS), "APPROVAL"])
         or "no roles configured: agents may do everything")
    return 0


def cmd_approvals(args: argparse.Namespace, services: Services) -> int:
    records = services.approvals.records(None if args.all else "pending")
    rows = [[str(r.id), r.worktree, r.action, r.status, " ".join(r.argv)] for r in records]
    emit(args, [r.to_dict() for r in records],
         table(rows, ["ID", "FROM", "ACTION", "STATUS", "COMMAND"]) or "no pending requests")
    return 0


def request_id(text: str) -> int:
    if not text.isdecimal() or int(text) <= 0:
        raise InputError(f"invalid request id {text!r}: expected a positive integer")
    return int(text)


def cmd_approve(args: argparse.Namespace, services: Services) -> int:
    record = services.approvals.resolve(request_id(args.id), approve=True)
    # With --json, stdout is the approved command's one JSON document; what is being run is said on stderr.
    said = sys.stderr if wants_json(args) else sys.stdout
    write_line(said, f"approved request {record.id}: running daintree {' '.join(record.argv)}")
    said.flush()
    run = services.approvals.run(record, ("--json",) if wants_json(args) else ())
    sys.stdout.write(run.stdout)
    sys.stdout.flush()
    sys.stderr.write(run.stderr)
    return run.exit_code


def cmd_reject(args: argparse.Namespace, services: Services) -> int:
    record = services.approvals.resolve(request_id(args.id), approve=False)
    emit(args, record.to_dict(), f"rejected request {record.id} ({record.action} from {record.worktree})")
    return 0


def cmd_gc(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.services.hygiene import human

    if args.older_than < 0:
        raise InputError("--older-than takes a number of days, zero or more")
    report = services.ops.gc(older_than_days=args.older_than, dry_run=args.dry_run)
    verb = "would free" if args.dry_run else "freed"
    lines = [("would " if args.dry_run else "") + a for a in report.actions]
    if report.kept_dirty:
        lines.append(f"kept (uncommitted work): {', '.join(report.kept_dirty)}")
    lines.append(f"{verb} {human(report.freed)}")
    emit(args, report.to_dict(), "\n".join(lines))
    return 0


# -- policy gate -----------------------------------------------------------------------------------------------

POLICED = {"commit": "commit", "merge": "merge", "pr": "pr", "remove": "remove", "rm": "remove"}


def policy_gate(args: argparse.Namespace, services: Services, argv: list[str]) -> int | None:
    """For commands run inside an agent's session: None to go ahead, else the exit code to stop with."""
    action = POLICED.get(getattr(args, "wt_command", "") or "")
    if action is None:
        return None  # most commands: decided without importing the policy
    from daintree_tui.core.errors import OperationError
    from daintree_tui.services.policy import in_session

    try:
        queued = services.ops.police(in_session(), action, [a for a in argv if a not in ("--json",)])
    except OperationError as exc:
        error(str(exc))
        return 1
    if queued is None:
        return None
    emit(args, queued.to_dict(),
         f"queued for a person's approval as request {queued.request} (daintree approve {queued.request})")
    return 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    bake = add(sub, "bakeoff", None, "several agents on one task; keep the best")
    bsub = bake.add_subparsers(dest="bakeoff_command", metavar="ACTION", required=True)
    p = add(bsub, "create", cmd_bakeoff_create, "one worktree and session per agent, same base")
    p.add_argument("task_id", metavar="TASK_ID", help="the task every candidate works on")
    p.add_argument("--agents", required=True, metavar="A,B,C", help="agent presets, one candidate each")
    p.add_argument("--score", metavar="CMD", help="score command (prints SCORE: N)")
    p.add_argument("--base", metavar="REF", help="every candidate branches from this commit (default: HEAD)")
    p = add(bsub, "score", cmd_bakeoff_score, "run the score command in every candidate and rank them")
    p.add_argument("id", help="the bake-off's id (daintree bakeoff list)")
    p.add_argument("--score", metavar="CMD", help="score command (default: the one given at create)")
    p.add_argument("--minimize", action="store_true", help="lower SCORE is better")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds per candidate (default 600)")
    p = add(bsub, "pick", cmd_bakeoff_pick, "merge the winner, remove the others, complete the task")
    p.add_argument("id", help="the bake-off's id (daintree bakeoff list)")
    p.add_argument("name", nargs="?", help="the winning candidate's worktree")
    p.add_argument("--best", action="store_true",
                   help="the best of the last scoring: score, then gate, diff size and cost (instead of NAME)")
    p.add_argument("--strategy", default="ff", help="ff (default), squash or rebase")
    p.add_argument("--delete-branches", action="store_true", help="delete the losers' branches too")
    add(bsub, "list", cmd_bakeoff_list, "list bake-offs")
    p = add(bsub, "show", cmd_bakeoff_show, "one bake-off with its scoreboard")
    p.add_argument("id", help="the bake-off's id (daintree bakeoff list)")
    queue = add(sub, "queue", None, "work through ready tasks, a few agents at a time")
    qsub = queue.add_subparsers(dest="queue_command", metavar="ACTION", required=True)
    p = add(qsub, "run", cmd_queue_run, "claim and start ready tasks while fewer than max_sessions run")
    p.add_argument("--once", action="store_true", help="one pass, then exit")
    p.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    p.add_argument("--hosts", metavar="NAMES", help="place tasks on these remote hosts (a,b), by free slots")
    policy = add(sub, "policy", None, "roles and approvals")
    psub = policy.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    add(psub, "show", cmd_policy_show, "the effective role matrix")
    p = add(sub, "approvals", cmd_approvals, "requests waiting for a person")
    p.add_argument("--all", action="store_true", help="approved and rejected ones too")
    p = add(sub, "approve", cmd_approve, "approve a request (and run it)")
    p.add_argument("id", help="the request's id (daintree approvals)")
    p = add(sub, "reject", cmd_reject, "reject a request")
    p.add_argument("id", help="the request's id (daintree approvals)")
    p = add(sub, "gc", cmd_gc, "reclaim disk: logs and temp dirs of removed worktrees, old clean kept ones")
    p.add_argument("--older-than", type=float, default=14.0, metavar="DAYS",
                   help="also remove worktrees kept this long ago, if clean and merged (default 14)")
    p.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
