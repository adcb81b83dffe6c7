"""CLI of the sandbox: `daintree sandbox check`, and the routing of an agent's own calls through its inbox.

Inside a sandbox (found by the mounted inbox, never by an environment variable the agent controls) the state is
read-only, so the commands that change it are written as requests into the inbox and applied outside by
`services.inbox.process_inboxes`, which decides by the inbox they arrived in.
"""

from __future__ import annotations

import argparse
from typing import Any

from daintree_tui.cli.common import AddCommand, task_ids
from daintree_tui.cli.output import emit, error
from daintree_tui.core.project import Project
from daintree_tui.services import Services

# Commands a sandboxed agent may ask for, by handler name -> request kind.
_ROUTED = {
    "cmd_session_signal": "signal",
    "cmd_task_create": "task_create",
    "cmd_wt_commit": "action",
    "cmd_wt_merge": "action",
    "cmd_wt_remove": "action",
    "cmd_wt_pr": "action",
}
_ACTION_OF = {"cmd_wt_commit": "commit", "cmd_wt_merge": "merge", "cmd_wt_remove": "remove", "cmd_wt_pr": "pr"}
# Commands that change state nobody inside may change: refused with one line rather than failing on EROFS halfway.
_REFUSED = {"cmd_approve", "cmd_reject", "cmd_trust", "cmd_task_update", "cmd_wt_create", "cmd_wt_keep",
            "cmd_wt_run", "cmd_session_start", "cmd_session_stop", "cmd_session_send", "cmd_session_keys",
            "cmd_bakeoff_create", "cmd_bakeoff_pick", "cmd_bakeoff_score", "cmd_queue_run", "cmd_gc",
            "cmd_dashboard", "cmd_demo", "cmd_train"}
# Commands run outside that apply pending inbox requests first (the dashboard's poll does the same).
_PROCESSING = {"cmd_doctor", "cmd_session_list", "cmd_session_watch", "cmd_approvals", "cmd_session_signal",
               "cmd_sandbox_check"}
REPLY_WAIT = 5.0


def _payload(name: str, args: argparse.Namespace) -> dict[str, Any]:
    if name == "cmd_session_signal":
        return {"state": args.state, "code": args.code, "at": getattr(args, "at", None)}
    if name == "cmd_task_create":
        return {"subject": args.subject, "description": args.description or "",
                "blocked_by": task_ids(args.blocked_by, "--blocked-by"), "role": args.role}
    action = _ACTION_OF[name]
    payload: dict[str, Any] = {"action": action, "worktree": args.name}
    if action == "commit":
        payload.update(message=args.message, all=bool(args.all))
    elif action == "merge":
        if args.into:
            payload["into"] = args.into  # refused outside: a session merges only into its base
        payload.update(strategy=args.strategy, remove=bool(args.remove), complete_task=bool(args.complete_task))
    elif action == "remove":
        payload.update(complete_task=bool(args.complete_task), delete_branch=bool(args.delete_branch),
                       force=bool(args.force))
    else:
        payload.update(draft=bool(args.draft))
    return payload


def route(args: argparse.Namespace, services: Services) -> int | None:
    """Inside a sandbox: send state changes through the inbox (exit code), else None to run the command here.
    Outside: apply pending inbox requests before the commands that show them, then None."""
    from daintree_tui.core.mounts import INBOX_MOUNT

    handler = getattr(args, "handler", None)
    name = getattr(handler, "__name__", "")
    if not INBOX_MOUNT.is_dir():  # the common case: decided with one stat, nothing imported
        if name in _PROCESSING and services.project.is_git:
            from daintree_tui.services.inbox import process_inboxes

            process_inboxes(services)
        return None
    from daintree_tui.services.inbox import mounted_inbox, submit, wait_reply

    inbox = mounted_inbox()
    if inbox is None:
        return None
    if name in _REFUSED:
        error("not available inside the sandbox: ask a person (or the lead) outside")
        return 1
    kind = _ROUTED.get(name)
    if kind is None:
        return None
    payload = _payload(name, args)
    if kind == "action":
        # The friendly answer at once (config and index are readable here); the request still goes out, so the
        # outside logs the denial. The outside decides again by the inbox: this check is not the enforcement.
        from daintree_tui.services.policy import decide

        decision = decide(services.project, args.name, payload["action"])
        if not decision.allowed:
            submit(inbox, kind, payload)
            error(f"policy: {decision.reason} (ask a person to run it)")
            return 1
        if payload.get("into") or payload.get("force"):
            error("--into and --force are not available inside the sandbox")
            return 1
    request_id = submit(inbox, kind, payload)
    reply = wait_reply(inbox, request_id, 0.0 if kind == "signal" else REPLY_WAIT)
    if reply is None:
        emit(args, {"queued": True, "request": request_id},
              f"sent as request {request_id[:8]}: applied when the dashboard (or `daintree doctor`) next looks")
        return 0
    if not reply.get("ok"):
        error(str(reply.get("error") or "refused"))
        return 1
    result = reply.get("result") or {}
    text = (f"queued for a person's approval as request {result['request']} (daintree approve {result['request']})"
            if isinstance(result, dict) and result.get("queued") else f"done: {kind}")
    emit(args, result, text)
    return 0


def cmd_sandbox_check(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.sessions.sandbox_check import check, describe, describe_containment

    project = services.project
    project.require_git()
    name = args.name
    temporary = False
    if name is None:
        live = [e for e in services.worktrees.entries() if e.live]
        if live:
            name = live[0].name
        else:
            import uuid

            name = f"sandbox-check-{uuid.uuid4().hex[:6]}"
            services.ops.create(name)
            temporary = True
    try:
        report = check(project, name, agent=args.agent)
    finally:
        if temporary:
            services.ops.remove(name, force=True, delete_branch=True)
    sandbox = report.sandbox

    def text() -> str:
        head = f"worktree {report.worktree}, agent {report.agent} ({report.agent_from}): {sandbox['reason']}"
        lines = [head, *(describe(r) for r in report.results),
                 *(describe_containment(r) for r in report.containment)]
        lines.append("the boundary holds" if report.holds else "the boundary does NOT hold (see FAIL lines)")
        return "\n".join(lines)

    emit(args, report.to_dict(), text)
    return 0 if report.holds else 1


def sandbox_status(project: Project) -> dict[str, object]:
    """Whether a session here would be sandboxed, and why (`doctor`, `sandbox status`): never raises."""
    from daintree_tui.core import limits
    from daintree_tui.core.errors import OperationError
    from daintree_tui.core.sandbox import choose

    backend, why = limits.choose_backend()
    # The limits' backend, in one line: where none works, `auto` sessions run without their limits, `on` refuse.
    cgroups = {"cgroups": backend.name if backend is not None else None, "cgroups_reason": why}
    try:
        return {**choose(project.config).to_dict(), **cgroups}
    except OperationError as exc:  # mode "on" and nothing works: every session would refuse to start
        return {"backend": "bwrap", "mode": "on", "active": False, "reason": str(exc), **cgroups}


def cmd_sandbox_status(args: argparse.Namespace, services: Services) -> int:
    data = sandbox_status(services.project)
    emit(args, data, str(data["reason"]))
    return 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    sandbox = add(sub, "sandbox", None, "the sandbox every session, hook and run gets")
    ssub = sandbox.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)
    p = add(ssub, "check", cmd_sandbox_check, "try, inside a session's sandbox, what it can and cannot write")
    p.add_argument("name", nargs="?", help="a live worktree (default: the first; none: a temporary one)")
    p.add_argument("--agent", metavar="PRESET", help="the agent whose sandbox to check (default: the worktree's "
                   "own: its session's, else its task's, else the default agent)")
    add(ssub, "status", cmd_sandbox_status, "whether sessions here are sandboxed, and why")
