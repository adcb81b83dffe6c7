"""`daintree task ...`: what to do."""

from __future__ import annotations

import argparse
from typing import Any

from daintree_tui.cli.common import AddCommand, task_id, task_ids
from daintree_tui.cli.output import ago, emit, table
from daintree_tui.core.errors import InputError
from daintree_tui.services import Services

_GLYPH = {"pending": "○", "in_progress": "◐", "completed": "●"}


def cmd_task_create(args: argparse.Namespace, services: Services) -> int:
    config = services.project.config
    extra: dict[str, object] = {}
    if args.agent:
        from daintree_tui.sessions.presets import resolve_preset

        extra["agent"] = resolve_preset(config, args.agent).name
    if args.role:
        if args.role not in config.roles:
            raise InputError(f"unknown role {args.role!r} (configure [roles.{args.role}])")
        extra["role"] = args.role
    task = services.tasks.create(args.subject, args.description or "", task_ids(args.blocked_by, "--blocked-by"),
                                 extra=extra)
    emit(args, task.listed(), f"created task {task.id}: {task.subject}")
    return 0


def cmd_task_list(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.core.tasks import parse_status

    status = parse_status(args.status) if args.status else None
    tasks = services.tasks.list(status)
    rows = [[f"{_GLYPH[str(t.status)]} {t.id}", str(t.status), t.subject, t.where or "-", t.owner or "-",
             ",".join(map(str, t.blockedBy)) or "-"] for t in tasks]
    emit(args, [t.listed() for t in tasks],
         lambda: table(rows, ["ID", "STATUS", "SUBJECT", "WORKTREE", "OWNER", "BLOCKED BY"]) or "no tasks")
    return 0


def _task_text(data: dict[str, Any]) -> str:
    lines = [f"task {data['id']}: {data['subject']}", f"  status:     {data['status']}",
             f"  worktree:   {data['where'] or '-'}", f"  owner:      {data['owner'] or '-'}",
             f"  blocked by: {', '.join(map(str, data['blockedBy'])) or '-'}",
             f"  updated:    {ago(data['updated_at'])}"]
    if data.get("description"):
        lines += ["", *("  " + ln for ln in str(data["description"]).splitlines())]
    return "\n".join(lines)


def cmd_task_show(args: argparse.Namespace, services: Services) -> int:
    data = services.tasks.get(task_id(args.id)).listed()
    emit(args, data, lambda: _task_text(data))
    return 0


def cmd_task_update(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.core.tasks import parse_status

    the_id = task_id(args.id)
    status = parse_status(args.status) if args.status else None
    blocked = task_ids(args.blocked_by, "--blocked-by") if args.blocked_by is not None else None
    if all(v is None for v in (status, args.owner, args.subject, args.description, blocked)):
        raise InputError("nothing to update: give --status, --owner, --subject, --description or --blocked-by")
    task = services.tasks.update(the_id, status=status, owner=args.owner, subject=args.subject,
                                 description=args.description, blocked_by=blocked)
    emit(args, task.listed(), f"updated task {task.id}: {task.status}")
    return 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    task = add(sub, "task", None, "tasks: what to do")
    tsub = task.add_subparsers(dest="task_command", metavar="ACTION", required=True)
    p = add(tsub, "create", cmd_task_create, "create a task")
    p.add_argument("subject", help="what to do (text that starts with a dash goes after --)")
    p.add_argument("--description", "-d", default="", help="more detail for the agent (its first prompt)")
    p.add_argument("--agent", help="agent preset that should work on it (queue)")
    p.add_argument("--role", help="role that limits what its agent may do")
    p.add_argument("--blocked-by", metavar="IDS", help="comma-separated task ids this task waits for")
    p = add(tsub, "list", cmd_task_list, "list tasks")
    p.add_argument("--status", help="pending, in_progress or completed")
    p = add(tsub, "show", cmd_task_show, "show one task")
    p.add_argument("id", help="the task's id (daintree task list)")
    p = add(tsub, "update", cmd_task_update, "change a task")
    p.add_argument("id", help="the task's id (daintree task list)")
    p.add_argument("--status", help="pending, in_progress or completed")
    p.add_argument("--owner", help="who works on it")
    p.add_argument("--subject", help="a new subject")
    p.add_argument("--description", help="a new description")
    p.add_argument("--blocked-by", metavar="IDS", help="comma-separated task ids this task waits for (replaces)")
