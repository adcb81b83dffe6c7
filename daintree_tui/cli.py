"""The `daintree` command line: every operation, for people, scripts and the agents themselves.

Exit codes: 0 ok (no-ops included), 1 the operation failed or was refused, 2 bad input. Errors are one line on
stderr. With `--json`, stdout carries exactly one JSON document (a list for listings, an object otherwise).
Importing this module does not import textual: the dashboard is imported only when it opens.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from daintree_tui.core.errors import DaintreeError, InputError
from daintree_tui.core.project import Project

Handler = Callable[[argparse.Namespace, Project], int]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"daintree: error: {message}\n")
        raise SystemExit(2)


class _WarningHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(f"warning: {record.getMessage()}\n")


# -- output ----------------------------------------------------------------------------------------------------


def _emit(args: argparse.Namespace, data: Any, text: str | Callable[[], str]) -> None:
    """Print `data` as JSON with --json, else the human text."""
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    else:
        out = text() if callable(text) else text
        if out:
            sys.stdout.write(out.rstrip("\n") + "\n")


def _ago(ts: float | None) -> str:
    if not ts:
        return "-"
    delta = max(0.0, time.time() - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= size:
            return f"{int(delta // size)}{unit} ago"
    return f"{int(delta)}s ago"


def _table(rows: list[list[str]], header: list[str]) -> str:
    if not rows:
        return ""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


# -- task ------------------------------------------------------------------------------------------------------


def _ids(text: str | None, flag: str) -> list[int]:
    if text is None or text.strip() == "":
        return []
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"{flag} takes task ids separated by commas (got {text!r})") from None
    if any(i <= 0 for i in ids):
        raise InputError(f"{flag} takes positive task ids (got {text!r})")
    return ids


def _task_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"invalid task id {text!r}: expected a positive integer") from None
    if value <= 0:
        raise InputError(f"invalid task id {text!r}: expected a positive integer")
    return value


def cmd_task_create(args: argparse.Namespace, project: Project) -> int:
    from daintree_tui.core.tasks import TaskService

    extra: dict[str, object] = {}
    if args.agent:
        from daintree_tui.sessions.presets import resolve_preset

        extra["agent"] = resolve_preset(project.config, args.agent).name
    if args.role:
        if args.role not in project.config.roles:
            raise InputError(f"unknown role {args.role!r} (configure [roles.{args.role}])")
        extra["role"] = args.role
    task = TaskService(project).create(args.subject, args.description or "", _ids(args.blocked_by, "--blocked-by"),
                                       extra=extra)
    _emit(args, task.to_dict(), f"created task {task.id}: {task.subject}")
    return 0


_GLYPH = {"pending": "○", "in_progress": "◐", "completed": "●"}


def cmd_task_list(args: argparse.Namespace, project: Project) -> int:
    from daintree_tui.core.tasks import TaskService, parse_status

    status = parse_status(args.status) if args.status else None
    tasks = TaskService(project).list(status)
    rows = [[f"{_GLYPH[str(t.status)]} {t.id}", str(t.status), t.subject, t.worktree or "-", t.owner or "-",
             ",".join(map(str, t.blockedBy)) or "-"] for t in tasks]
    _emit(args, [t.to_dict() for t in tasks],
          lambda: _table(rows, ["ID", "STATUS", "SUBJECT", "WORKTREE", "OWNER", "BLOCKED BY"]) or "no tasks")
    return 0


def _task_text(data: dict[str, Any]) -> str:
    lines = [f"task {data['id']}: {data['subject']}", f"  status:     {data['status']}",
             f"  worktree:   {data['worktree'] or '-'}", f"  owner:      {data['owner'] or '-'}",
             f"  blocked by: {', '.join(map(str, data['blockedBy'])) or '-'}",
             f"  updated:    {_ago(data['updated_at'])}"]
    if data.get("description"):
        lines += ["", *("  " + ln for ln in str(data["description"]).splitlines())]
    return "\n".join(lines)


def cmd_task_show(args: argparse.Namespace, project: Project) -> int:
    from daintree_tui.core.tasks import TaskService

    data = TaskService(project).get(_task_id(args.id)).to_dict()
    _emit(args, data, lambda: _task_text(data))
    return 0


def cmd_task_update(args: argparse.Namespace, project: Project) -> int:
    from daintree_tui.core.tasks import TaskService, parse_status

    task_id = _task_id(args.id)
    status = parse_status(args.status) if args.status else None
    blocked = _ids(args.blocked_by, "--blocked-by") if args.blocked_by is not None else None
    if all(v is None for v in (status, args.owner, args.subject, args.description, blocked)):
        raise InputError("nothing to update: give --status, --owner, --subject, --description or --blocked-by")
    task = TaskService(project).update(task_id, status=status, owner=args.owner, subject=args.subject,
                                       description=args.description, blocked_by=blocked)
    _emit(args, task.to_dict(), f"updated task {task.id}: {task.status}")
    return 0


# -- worktree --------------------------------------------------------------------------------------------------


def _session_control(project: Project) -> Any:
    """The session host used to stop a worktree's session before its removal (None when sessions are absent)."""
    from daintree_tui.sessions.host import host_for
    from daintree_tui.sessions.manager import SessionManager

    host = host_for(project, create=False)
    return SessionManager(project, host) if host is not None else None


def _worktrees(project: Project) -> Any:
    from daintree_tui.core.worktrees import WorktreeService

    return WorktreeService(project, _session_control(project))


def cmd_wt_create(args: argparse.Namespace, project: Project) -> int:
    from daintree_tui.core.worktrees import validate_name

    validate_name(args.name)
    task_id = _task_id(args.task) if args.task is not None else None
    agent = None
    if args.agent:
        from daintree_tui.sessions.presets import resolve_preset

        agent = resolve_preset(project.config, args.agent)  # a bad preset is rejected before anything happens
        agent.check_program()
        if _session_control(project) is None:
            from daintree_tui.sessions.manager import SessionManager

            SessionManager(project).host  # noqa: B018 - raises the clear "tmux is not installed" error
    entry = _worktrees(project).create(args.name, task_id=task_id, base=args.base)
    data = entry.to_dict()
    text = f"created worktree {entry.name} at {entry.path} (branch {entry.branch}, port {entry.ports[0]})"
    if agent is not None:
        from daintree_tui.sessions.manager import SessionManager

        info = SessionManager(project).start(entry.name, agent.name, prompt=args.prompt)
        data["session"] = info.to_dict()
        text += f"\nstarted session {info.session} with agent {agent.name}"
    _emit(args, data, text)
    return 0


def _entry_row(entry: Any, facts: Any, session: str) -> list[str]:
    port = str(entry.ports[0]) if entry.ports else "-"
    if facts is None:
        dirty, ab = "-", "-"
    else:
        dirty = str(facts.dirty) if facts.exists else "gone"
        ab = f"+{facts.ahead}/-{facts.behind}"
    return [entry.name, str(entry.status), entry.branch, port, dirty, ab,
            str(entry.task_id) if entry.task_id is not None else "-", session]


def cmd_wt_list(args: argparse.Namespace, project: Project) -> int:
    project.require_git()
    service = _worktrees(project)
    entries = service.entries(include_removed=args.all)
    facts = service.facts_for([e for e in entries if e.live])
    sessions = _session_states(project)
    from daintree_tui.core.hygiene import DiskUsage, human

    disk = DiskUsage(service).measure([e for e in entries if e.live])
    data = [{**e.to_dict(), **({"facts": facts[e.name].to_dict()} if e.name in facts else {}),
             "session": sessions.get(e.name), "disk_bytes": disk.get(e.name)} for e in entries]
    rows = [[*_entry_row(e, facts.get(e.name), (sessions.get(e.name) or {}).get("status", "-")),
             human(disk[e.name]) if e.name in disk else "-"] for e in entries]
    _emit(args, data, lambda: _table(rows, ["NAME", "STATUS", "BRANCH", "PORT", "DIRTY", "AHEAD/BEHIND", "TASK",
                                            "SESSION", "DISK"]) or "no worktrees")
    return 0


def _session_states(project: Project) -> dict[str, dict[str, Any]]:
    try:
        from daintree_tui.sessions.manager import SessionManager
    except ImportError:
        return {}
    try:
        return {s.name: s.to_dict() for s in SessionManager(project).list()}
    except DaintreeError:
        return {}


def cmd_wt_status(args: argparse.Namespace, project: Project) -> int:
    project.require_git()
    service = _worktrees(project)
    entry = service.get(args.name)
    facts = service.facts(entry)
    dirty = service.dirty_files(entry) if entry.live else []
    session = _session_states(project).get(entry.name)
    data = {**entry.to_dict(), "facts": facts.to_dict(), "dirty_files": dirty, "session": session}

    def text() -> str:
        lines = [f"worktree {entry.name} ({entry.status})", f"  path:    {entry.path}",
                 f"  branch:  {entry.branch} from {entry.base_ref} ({entry.base_commit[:10]})",
                 f"  task:    {entry.task_id if entry.task_id is not None else '-'}",
                 f"  ports:   {', '.join(map(str, entry.ports)) or '-'}",
                 f"  ahead/behind: +{facts.ahead}/-{facts.behind}",
                 f"  session: {session['status'] if session else '-'}",
                 f"  dirty:   {len(dirty)} file(s)"]
        lines += [f"    {f}" for f in dirty[:50]]
        return "\n".join(lines)

    _emit(args, data, text)
    return 0


def cmd_wt_keep(args: argparse.Namespace, project: Project) -> int:
    entry = _worktrees(project).keep(args.name)
    _emit(args, entry.to_dict(), f"kept worktree {entry.name}")
    return 0


def cmd_wt_remove(args: argparse.Namespace, project: Project) -> int:
    result = _worktrees(project).remove(args.name, force=args.force, complete_task=args.complete_task,
                                        delete_branch=args.delete_branch)
    text = result.message + ("\ndeleted branch " + result.entry.branch if result.branch_deleted and result.entry
                             else "")
    _emit(args, result.to_dict(), text)
    return 0


def cmd_wt_run(args: argparse.Namespace, project: Project) -> int:
    argv = [*args.cmd, *getattr(args, "after_dashes", [])]
    result = _worktrees(project).run(args.name, argv, timeout=args.timeout)
    if getattr(args, "json", False):
        _emit(args, result.to_dict(), "")
    else:
        sys.stdout.write(result.stdout)
        sys.stdout.flush()
        sys.stderr.write(result.stderr)
        if result.timed_out:
            sys.stderr.write(f"daintree: command timed out after {args.timeout:g}s\n")
    return result.exit_code


def _event_line(rec: dict[str, Any]) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(rec.get("ts", 0)))
    wt = (rec.get("worktree") or {}).get("name", "")
    task = (rec.get("task") or {}).get("id", "")
    extra = rec.get("error") or rec.get("fix") or ""
    return f"{when}  {rec.get('event', '?'):<24} {wt:<20} {('#' + str(task)) if task else '':<6} {extra}".rstrip()


def cmd_wt_events(args: argparse.Namespace, project: Project) -> int:
    if args.limit is not None and args.limit < 0:
        raise InputError("--limit must be zero or more")
    log = project.events
    records, skipped = log.read(args.limit)
    if skipped:
        logging.getLogger("daintree").warning(f"skipped {skipped} torn or unreadable line(s) in {log.path}")
    if not args.follow:
        _emit(args, records, lambda: "\n".join(_event_line(r) for r in records) or "no events")
        return 0
    for rec in records:
        sys.stdout.write((json.dumps(rec) if args.json else _event_line(rec)) + "\n")
    sys.stdout.flush()
    from daintree_tui.core.follow import follow_lines

    for line in follow_lines(log.path):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        sys.stdout.write((json.dumps(rec) if args.json else _event_line(rec)) + "\n")
        sys.stdout.flush()
    return 0


def _review(project: Project) -> Any:
    from daintree_tui.core.review import ReviewService

    return ReviewService(_worktrees(project))


def cmd_wt_diff(args: argparse.Namespace, project: Project) -> int:
    text = _review(project).diff(args.name, stat=args.stat)
    _emit(args, {"name": args.name, "diff": text}, text or f"{args.name}: no changes against its base")
    return 0


def cmd_wt_commit(args: argparse.Namespace, project: Project) -> int:
    result = _review(project).commit(args.name, args.message, all_changes=args.all)
    _emit(args, result, f"committed {len(result['files'])} file(s) in {args.name}: {result['commit'][:10]}")
    return 0


def cmd_wt_merge(args: argparse.Namespace, project: Project) -> int:
    result = _review(project).merge(args.name, strategy=args.strategy, into=args.into, remove=args.remove,
                                    complete_task=args.complete_task)
    text = result.message + (f"\nremoved worktree {args.name}" if result.removed else "")
    _emit(args, result.to_dict(), text)
    return 0


def cmd_wt_pr(args: argparse.Namespace, project: Project) -> int:
    result = _review(project).pr(args.name, draft=args.draft)
    _emit(args, result, f"opened {'draft ' if args.draft else ''}pull request: {result['url']}")
    return 0


# -- doctor, trust ---------------------------------------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace, project: Project) -> int:
    from daintree_tui.core.reconcile import reconcile

    findings = reconcile(project, fix=args.fix, sessions=_session_control(project))
    verb = "fixed" if args.fix else "found"
    _emit(args, {"fixed": args.fix, "findings": findings},
          lambda: "\n".join(f"{verb}: {f}" for f in findings) or "all consistent: tasks, index and git agree")
    return 0 if args.fix or not findings else 1


def cmd_trust(args: argparse.Namespace, project: Project) -> int:
    from daintree_tui.core.hooks import trust, trust_status

    if args.show:
        status = trust_status(project)
        _emit(args, status, f"{status['path']}: {'trusted' if status['trusted'] else 'not trusted'}")
        return 0
    record = trust(project)
    _emit(args, record, f"trusted {record['path']} (sha256 {record['sha256'][:12]})")
    return 0


# -- dashboard -------------------------------------------------------------------------------------------------


def cmd_dashboard(args: argparse.Namespace, project: Project) -> int:
    from daintree_tui.tui.app import run_dashboard

    return run_dashboard(project)


# -- parser ----------------------------------------------------------------------------------------------------


def _common() -> _Parser:
    common = _Parser(add_help=False)
    common.add_argument("--repo", metavar="PATH", default=argparse.SUPPRESS, help="the repository (default: cwd)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print one JSON document on stdout")
    return common


def build_parser() -> _Parser:
    common = _common()
    parser = _Parser(prog="daintree", parents=[common],
                     description="Parallel AI coding agents, each in its own git worktree.")
    parser.add_argument("--version", action="version", version=f"daintree {__import__('daintree_tui').__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(parent: Any, name: str, handler: Handler, help: str, aliases: Sequence[str] = ()) -> Any:
        p = parent.add_parser(name, parents=[common], help=help, aliases=list(aliases), description=help)
        p.set_defaults(handler=handler)
        return p

    task = sub.add_parser("task", parents=[common], help="tasks: what to do")
    tsub = task.add_subparsers(dest="task_command", metavar="ACTION", required=True)
    p = add(tsub, "create", cmd_task_create, "create a task")
    p.add_argument("subject")
    p.add_argument("--description", "-d", default="")
    p.add_argument("--agent", help="agent preset that should work on it (queue)")
    p.add_argument("--role", help="role that limits what its agent may do")
    p.add_argument("--blocked-by", metavar="IDS", help="comma-separated task ids this task waits for")
    p = add(tsub, "list", cmd_task_list, "list tasks")
    p.add_argument("--status", help="pending, in_progress or completed")
    p = add(tsub, "show", cmd_task_show, "show one task")
    p.add_argument("id")
    p = add(tsub, "update", cmd_task_update, "change a task")
    p.add_argument("id")
    p.add_argument("--status")
    p.add_argument("--owner")
    p.add_argument("--subject")
    p.add_argument("--description")
    p.add_argument("--blocked-by", metavar="IDS")

    wt = sub.add_parser("worktree", parents=[common], aliases=["wt"], help="worktrees: where to do it")
    wsub = wt.add_subparsers(dest="wt_command", metavar="ACTION", required=True)
    p = add(wsub, "create", cmd_wt_create, "create a worktree on branch wt/NAME")
    p.add_argument("name")
    p.add_argument("--task", metavar="ID")
    p.add_argument("--base", metavar="REF")
    p.add_argument("--agent", metavar="PRESET", help="start a session with this agent right away")
    p.add_argument("--prompt", help="first prompt for the agent")
    p = add(wsub, "list", cmd_wt_list, "list worktrees with live git facts")
    p.add_argument("--all", action="store_true", help="include removed ones")
    p = add(wsub, "status", cmd_wt_status, "one worktree in detail")
    p.add_argument("name")
    p = add(wsub, "keep", cmd_wt_keep, "mark an active worktree kept")
    p.add_argument("name")
    p = add(wsub, "remove", cmd_wt_remove, "remove a worktree", aliases=["rm"])
    p.add_argument("name")
    p.add_argument("--force", action="store_true", help="discard uncommitted work; delete an unmerged branch")
    p.add_argument("--complete-task", action="store_true", help="mark its task completed")
    p.add_argument("--delete-branch", action="store_true", help="delete its branch (only if merged, unless --force)")
    p = add(wsub, "run", cmd_wt_run, "run a command in a worktree")
    p.add_argument("name")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S")
    p.add_argument("cmd", nargs="*", metavar="-- CMD", help="the command, after --")
    p = add(wsub, "diff", cmd_wt_diff, "changes against the base commit, untracked files included")
    p.add_argument("name")
    p.add_argument("--stat", action="store_true")
    p = add(wsub, "commit", cmd_wt_commit, "commit the agent's work in its worktree")
    p.add_argument("name")
    p.add_argument("-m", "--message", required=True)
    p.add_argument("--all", "-a", action="store_true", help="stage everything first, untracked files included")
    p = add(wsub, "merge", cmd_wt_merge, "merge a worktree's branch back (through a temporary worktree)")
    p.add_argument("name")
    p.add_argument("--strategy", default="ff", help="ff (default), squash or rebase")
    p.add_argument("--into", metavar="BRANCH", help="target branch (default: the base branch, else the primary's)")
    p.add_argument("--remove", action="store_true", help="remove the worktree afterwards")
    p.add_argument("--complete-task", action="store_true", help="mark its task completed")
    p = add(wsub, "pr", cmd_wt_pr, "push the branch and open a pull request with gh")
    p.add_argument("name")
    p.add_argument("--draft", action="store_true")
    p = add(wsub, "events", cmd_wt_events, "the lifecycle log")
    p.add_argument("--limit", type=int, metavar="N")
    p.add_argument("--follow", "-f", action="store_true")

    p = add(sub, "doctor", cmd_doctor, "reconcile tasks, index and git; report (or --fix) what disagrees")
    p.add_argument("--fix", action="store_true")
    p = add(sub, "trust", cmd_trust, "allow the hooks in this repo's .daintree.toml to run (for you only)")
    p.add_argument("--show", action="store_true", help="only say whether it is trusted")

    _add_session_commands(sub, add)
    return parser


def _add_session_commands(sub: Any, add: Callable[..., Any]) -> None:
    """The sessions layer's commands (`session ...`, `demo`)."""
    from daintree_tui import cli_orchestrate, cli_sessions

    cli_sessions.register(sub, add)
    cli_orchestrate.register(sub, add)


# -- main ------------------------------------------------------------------------------------------------------


def _configure_logging() -> None:
    logger = logging.getLogger("daintree")
    if not any(isinstance(h, _WarningHandler) for h in logger.handlers):
        logger.addHandler(_WarningHandler())
    logger.setLevel(logging.WARNING)
    logger.propagate = False


def main(argv: Sequence[str] | None = None, approved: bool = False) -> int:
    """Entry point of the `daintree` console script."""
    _configure_logging()
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first `--` is a command to run, never options of ours (argparse would mix them).
    after: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, after = argv[:cut], argv[cut + 1:]
    try:
        args = parser.parse_args(argv)
        if after and getattr(args, "handler", None) is not cmd_wt_run:
            parser.error(f"unexpected arguments after --: {' '.join(after)}")
        args.after_dashes = after
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 2
    handler: Handler | None = getattr(args, "handler", None)
    try:
        project = Project.discover(getattr(args, "repo", None))
        if handler is None:
            if args.command:  # `daintree task` without an action
                parser.error(f"{args.command} needs an action (see daintree {args.command} --help)")
            handler = cmd_dashboard
        if not approved:
            from daintree_tui.cli_orchestrate import policy_gate

            stop = policy_gate(args, project, [*argv, *(["--", *after] if after else [])])
            if stop is not None:
                return stop
        return handler(args, project)
    except DaintreeError as exc:
        sys.stderr.write(f"daintree: {exc}\n")
        return exc.exit_code
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 2
    except KeyboardInterrupt:
        sys.stderr.write("daintree: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if os.environ.get("DAINTREE_DEBUG"):
            raise
        sys.stderr.write(f"daintree: internal error: {type(exc).__name__}: {exc} (DAINTREE_DEBUG=1 for details)\n")
        return 1


def run() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    run()
