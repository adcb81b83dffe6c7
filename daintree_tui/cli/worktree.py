"""`daintree worktree ...`: where to do it, and the review of what was done there (diff, commit, merge, pr)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from daintree_tui.cli.common import AddCommand, ctrl_c_stops, task_id
from daintree_tui.cli.output import emit, error, table, wants_json, write_line
from daintree_tui.core.errors import DaintreeError, InputError
from daintree_tui.core.event_log import event_detail
from daintree_tui.core.log import warn
from daintree_tui.core.sandbox.containment import allow_hint, denied_of
from daintree_tui.core.validate import escape_controls, files
from daintree_tui.services import Services


def cmd_wt_create(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.core.worktrees import validate_name

    validate_name(args.name)  # a bad name is said before a bad task id, as ever
    the_task = task_id(args.task) if args.task is not None else None
    created = services.ops.create(args.name, task_id=the_task, base=args.base, agent=args.agent or None,
                                  prompt=args.prompt)
    entry, provided, info = created.entry, created.provided, created.session
    text = f"created worktree {entry.name} at {entry.path} (branch {entry.branch}, port {entry.ports[0]})"
    if provided.copied:
        text += f"\ncopied {', '.join(provided.copied)}"
    for mode in ("symlink", "copy"):
        paths = [link["path"] for link in provided.linked if link["mode"] == mode]
        if paths:
            text += f"\n{'linked' if mode == 'symlink' else 'copied'} {', '.join(paths)} ({mode})"
    if info is not None:
        text += f"\nstarted session {info.session} with agent {info.agent}"
    emit(args, created.to_dict(), text)
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


def _session_states(services: Services) -> dict[str, dict[str, Any]]:
    """Each worktree's session, or none, said on stderr, when they cannot be read: the list still shows the
    worktrees, but an unreadable config (a broken .daintree.toml) had every running agent shown as "-", no
    session, exit 0 and not a word."""
    try:
        return {s.name: s.to_dict() for s in services.sessions.list()}
    except DaintreeError as exc:
        warn(f"sessions not shown: {exc}")
        return {}


def _session_word(session: dict[str, Any] | None) -> str:
    """A session's status as `session list` says it: "exited (1)", not a bare "exited" that hid a failed agent."""
    if not session:
        return "-"
    code = session.get("exit_code")
    word = f"exited ({code})" if session.get("status") == "exited" and code is not None else str(session["status"])
    return f"{word} {session['limit']}" if session.get("limit") else word


def cmd_wt_list(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.services.hygiene import human

    services.project.require_git()
    worktrees = services.worktrees
    entries = worktrees.entries(include_removed=args.all)
    facts = worktrees.facts_for([e for e in entries if e.live])
    sessions = _session_states(services)
    disk = services.disk.measure([e for e in entries if e.live])
    conflicts = _conflicts(services, [e for e in entries if e.live], facts) if wants_json(args) else {}
    data = [{**e.to_dict(), **({"facts": facts[e.name].to_dict()} if e.name in facts else {}),
             "session": sessions.get(e.name), "disk_bytes": disk.get(e.name),
             **({"conflicts": conflicts.get(e.name, [])} if wants_json(args) else {})} for e in entries]
    rows = [[*_entry_row(e, facts.get(e.name), _session_word(sessions.get(e.name))),
             human(disk[e.name]) if e.name in disk else "-"] for e in entries]
    emit(args, data, lambda: table(rows, ["NAME", "STATUS", "BRANCH", "PORT", "DIRTY", "AHEAD/BEHIND", "TASK",
                                          "SESSION", "DISK"]) or "no worktrees")
    return 0


def _conflicts(services: Services, live: list[Any], facts: dict[str, Any]) -> dict[str, list[str]]:
    return services.ops.landing.conflicts_by_name(live, facts)


def cmd_wt_conflicts(args: argparse.Namespace, services: Services) -> int:
    services.project.require_git()
    report = services.ops.landing.conflicts(args.name)  # an unknown name: exit 2
    for name, why in report.unreadable.items():
        warn(f"radar: {name}: {why}")
    found = report.involving(args.name) if args.name is not None else list(report.conflicts)
    emit(args, [c.to_dict() for c in found],
         lambda: "\n".join(f"{c.worktree} <> {c.other}: {', '.join(c.files)}" for c in found)
         or "no predicted conflicts")
    return 0


def cmd_wt_status(args: argparse.Namespace, services: Services) -> int:
    services.project.require_git()
    worktrees = services.worktrees
    entry = worktrees.get(args.name)
    facts = worktrees.facts(entry)
    dirty = worktrees.dirty_files(entry) if entry.live else []
    session = _session_states(services).get(entry.name)
    # Hosts the allow-list refused (sandbox.denied), each with the one line of config that admits it. An agent
    # can make its commands ask for any name: this is data to show, never acted on.
    denied = denied_of(services.project.events, entry.name)
    checks = services.ops.review.ci_checks(entry.name) if entry.live else None  # its pull request's CI, when it has one
    data = {**entry.to_dict(), "facts": facts.to_dict(), "dirty_files": dirty, "session": session,
            "denied_hosts": denied, "checks": checks}

    def text() -> str:
        lines = [f"worktree {entry.name} ({entry.status})", f"  path:    {entry.path}",
                 f"  branch:  {entry.branch} from {entry.base_ref} ({entry.base_commit[:10]})",
                 f"  task:    {entry.task_id if entry.task_id is not None else '-'}",
                 f"  ports:   {', '.join(map(str, entry.ports)) or '-'}",
                 f"  ahead/behind: +{facts.ahead}/-{facts.behind}",
                 f"  session: {_session_word(session)}",
                 f"  dirty:   {files(len(dirty))}"]
        lines += [f"    {f}" for f in dirty[:50]]
        if checks is not None:
            failed = f" ({', '.join(checks['failed'])})" if checks["failed"] else ""
            lines.append(f"  checks:  {checks['state']}{failed} {checks['pr']}")
        if denied:
            lines.append(f"  denied:  {', '.join(escape_controls(h) for h in denied[-10:])}")
            lines.append(f"    to allow, add to your config.toml: {escape_controls(allow_hint(denied[-10:]))}")
        return "\n".join(lines)

    emit(args, data, text)
    return 0


def cmd_wt_keep(args: argparse.Namespace, services: Services) -> int:
    entry = services.ops.keep(args.name)
    emit(args, entry.to_dict(), f"kept worktree {entry.name}")
    return 0


def cmd_wt_remove(args: argparse.Namespace, services: Services) -> int:
    result = services.ops.remove(args.name, force=args.force, complete_task=args.complete_task,
                                 delete_branch=args.delete_branch)
    text = result.message + ("\ndeleted branch " + result.entry.branch if result.branch_deleted and result.entry
                             else "")
    emit(args, result.to_dict(), text)
    return 0


def cmd_wt_run(args: argparse.Namespace, services: Services) -> int:
    argv = [*args.cmd, *getattr(args, "after_dashes", [])]
    result = services.worktrees.run(args.name, argv, timeout=args.timeout)
    if wants_json(args):
        emit(args, result.to_dict(), "")
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
    extra, _ = event_detail(rec)
    return f"{when}  {rec.get('event', '?'):<24} {wt:<20} {('#' + str(task)) if task else '':<6} {extra}".rstrip()


def cmd_wt_events(args: argparse.Namespace, services: Services) -> int:
    if args.limit is not None and args.limit < 0:
        raise InputError("--limit must be zero or more")
    log = services.project.events
    # Following: read up to a point, then follow from that same point (events appended in between are neither
    # missed nor printed twice).
    end = log.complete_end() if args.follow else None
    records, skipped = log.read(args.limit, end=end)
    if skipped:
        warn(f"skipped {skipped} torn or unreadable line(s) in {log.path}")
    if not args.follow:
        emit(args, records, lambda: "\n".join(_event_line(r) for r in records) or "no events")
        return 0
    for rec in records:
        write_line(sys.stdout, json.dumps(rec) if wants_json(args) else _event_line(rec))
    sys.stdout.flush()
    from daintree_tui.core.follow import follow_lines

    with ctrl_c_stops() as stop:  # as `session log --follow`: Ctrl-C ends it between two looks of the watch
        for line in follow_lines(log.path, offset=end, stop=stop):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            write_line(sys.stdout, json.dumps(rec) if wants_json(args) else _event_line(rec))
            sys.stdout.flush()
    if stop.is_set():
        error("interrupted")
        return 130
    return 0


def cmd_wt_diff(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.core.review import marked

    text, ignored = services.review.diff_report(args.name, stat=args.stat)
    emit(args, {"name": args.name, "diff": text, "replaces_ignored": ignored},
         marked(text, ignored) or f"{args.name}: no changes against its base")
    return 0


def cmd_wt_commit(args: argparse.Namespace, services: Services) -> int:
    result = services.ops.landing.commit(args.name, args.message, all_changes=args.all)
    emit(args, result, f"committed {files(len(result['files']))} in {args.name}: {result['commit'][:10]}")
    return 0


def cmd_wt_merge(args: argparse.Namespace, services: Services) -> int:
    result = services.ops.landing.merge(args.name, strategy=args.strategy, into=args.into, remove=args.remove,
                                complete_task=args.complete_task, verify=not args.no_verify)
    text = result.message + (f"\nremoved worktree {args.name}" if result.removed else "")
    emit(args, result.to_dict(), text)
    return 0


def cmd_wt_pr(args: argparse.Namespace, services: Services) -> int:
    result = services.ops.landing.pr(args.name, draft=args.draft)
    emit(args, result, f"opened {'draft ' if args.draft else ''}pull request: {result['url']}")
    return 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    wt = add(sub, "worktree", None, "worktrees: where to do it", aliases=["wt"])
    wsub = wt.add_subparsers(dest="wt_command", metavar="ACTION", required=True)
    p = add(wsub, "create", cmd_wt_create, "create a worktree on branch wt/NAME")
    p.add_argument("name", help="the new worktree's name (its branch is wt/NAME)")
    p.add_argument("--task", metavar="ID", help="the task it works on (its subject is the first prompt)")
    p.add_argument("--base", metavar="REF", help="branch from this commit (default: config `base`, HEAD)")
    p.add_argument("--agent", metavar="PRESET", help="start a session with this agent right away")
    p.add_argument("--prompt", help="first prompt for the agent")
    p = add(wsub, "list", cmd_wt_list, "list worktrees with live git facts")
    p.add_argument("--all", action="store_true", help="include removed ones")
    p = add(wsub, "conflicts", cmd_wt_conflicts,
            "predicted conflicts of live worktrees' work (commits and uncommitted) with each other and their base")
    p.add_argument("name", nargs="?", help="only the conflicts of this worktree")
    p = add(wsub, "status", cmd_wt_status, "one worktree in detail")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p = add(wsub, "keep", cmd_wt_keep, "mark an active worktree kept")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p = add(wsub, "remove", cmd_wt_remove, "remove a worktree", aliases=["rm"])
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("--force", action="store_true", help="discard uncommitted work; delete an unmerged branch")
    p.add_argument("--complete-task", action="store_true", help="mark its task completed")
    p.add_argument("--delete-branch", action="store_true", help="delete its branch (only if merged, unless --force)")
    p = add(wsub, "run", cmd_wt_run, "run a command in a worktree")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="seconds before the command is stopped (default 300; exit 124)")
    p.add_argument("cmd", nargs="*", metavar="-- CMD", help="the command, after --")
    p = add(wsub, "diff", cmd_wt_diff, "changes against the base commit, untracked files included")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("--stat", action="store_true", help="files and line counts only")
    p = add(wsub, "commit", cmd_wt_commit, "commit the agent's work in its worktree")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("-m", "--message", required=True, help="the commit message")
    p.add_argument("--all", "-a", action="store_true", help="stage everything first, untracked files included")
    p = add(wsub, "merge", cmd_wt_merge, "merge a worktree's branch back (through a temporary worktree)")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("--strategy", default="ff", help="ff (default), squash or rebase")
    p.add_argument("--into", metavar="BRANCH", help="target branch (default: the base branch, else the primary's)")
    p.add_argument("--remove", action="store_true", help="remove the worktree afterwards")
    p.add_argument("--complete-task", action="store_true", help="mark its task completed")
    p.add_argument("--no-verify", action="store_true",
                   help="skip the pre_merge checks (a person's choice: refused inside a session)")
    p = add(wsub, "pr", cmd_wt_pr, "push the branch and open a pull request with gh")
    p.add_argument("name", help="a worktree's name (daintree worktree list)")
    p.add_argument("--draft", action="store_true", help="open it as a draft")
    p = add(wsub, "events", cmd_wt_events, "the lifecycle log")
    p.add_argument("--limit", type=int, metavar="N", help="only the last N events")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new events until interrupted")
