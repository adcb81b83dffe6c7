"""The MCP tools of a sandboxed session: the calls that change state go through its inbox like its CLI calls.

Inside a sandbox the project's state is read-only, so `daintree mcp` there serves `InboxTools`: the reads that
need nothing but files (the task board, the event log) run here; every other call is written into the mounted
inbox as a request of kind `mcp` (tool name and arguments only) and answered outside by `apply_call`, which the
dashboard's poll and `daintree session watch` run through `services.inbox.process_inboxes`. The access the call
runs with outside is that of the inbox's owner (its session record), never anything in the request.

The tool list shown inside is computed inside from the same read-only records (the owner found by the mounted
inbox itself), so it matches what the outside allows; it is a courtesy, not the enforcement.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.mcp.access import Access, resolve_access, session_access
from daintree_tui.mcp.tools import RUN_TIMEOUT, DaintreeTools, ToolSpec, to_json
from daintree_tui.services import Services
from daintree_tui.services.inbox import inbox_owner, submit, wait_reply, withdraw

KIND = "mcp"
REPLY_WAIT = 30.0  # for the outside to pick a call up (the dashboard polls every second or two)
# Reads of files only: run here, where the state is readable (tmux is not: session facts come from outside).
LOCAL_TOOLS = frozenset({"task_list", "task_get", "worktree_events"})
MAX_ARGUMENTS_BYTES = 48 * 1024  # the inbox takes requests up to 64 KiB


def _runtime(name: str, arguments: dict[str, Any]) -> float:
    """How long the tool itself may take outside, on top of the wait for the outside to pick it up."""
    if name == "worktree_run":
        return RUN_TIMEOUT
    if name == "bakeoff_score":
        timeout = arguments.get("timeout")
        return float(timeout) if isinstance(timeout, int | float) and timeout > 0 else 600.0
    return 0.0


class InboxTools:
    """A `ToolBackend` for a server that runs inside a session's sandbox (found by its mounted inbox)."""

    def __init__(self, services: Services, inbox: Path, role_flag: str | None = None,
                 worktree_flag: str | None = None, reply_wait: float = REPLY_WAIT) -> None:
        self.inbox = inbox
        self.reply_wait = reply_wait
        owner = inbox_owner(services.project)
        # The owner by the mount; should it not be found, the flags (for the listing only: the outside decides).
        access = (session_access(services.project, owner, role_flag) if owner is not None
                  else resolve_access(services.project, role_flag, worktree_flag))
        self.local = DaintreeTools(services, access)

    @property
    def access(self) -> Access:
        return self.local.access

    def specs(self) -> list[ToolSpec]:
        return self.local.specs()

    def resources(self) -> dict[str, tuple[str, str, Callable[[], Any]]]:
        return self.local.resources()

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        arguments = arguments or {}
        if name in LOCAL_TOOLS:
            return self.local.call(name, arguments)
        if len(json.dumps(arguments)) > MAX_ARGUMENTS_BYTES:
            raise InputError(f"{name}: arguments larger than {MAX_ARGUMENTS_BYTES} bytes")
        request_id = submit(self.inbox, KIND, {"tool": name, "arguments": arguments})
        wait = self.reply_wait + _runtime(name, arguments)
        reply = wait_reply(self.inbox, request_id, wait)
        if reply is None:
            fate = ("it was withdrawn" if withdraw(self.inbox, request_id)
                    else "it may still be applied")
            raise OperationError(f"{name}: no reply within {wait:g}s: calls from inside the sandbox are applied "
                                 "outside by the dashboard or `daintree session watch`, and neither is running "
                                 f"({fate})")
        if not reply.get("ok"):
            message = str(reply.get("error") or "refused")
            raise InputError(message) if reply.get("exit_code") == 2 else OperationError(message)
        result = reply.get("result")
        return result.get("data") if isinstance(result, dict) else None


def apply_call(services: Services, owner: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Outside: run one `mcp` request from `owner`'s inbox with the access of `owner`'s session.

    Only the tool name and its arguments are read from the request; a role, a worktree or anything else in it is
    ignored. Returns `{"data": <the tool's JSON>}`; raises `DaintreeError` as the tool would (the reply carries
    its message and exit code).
    """
    tool = payload.get("tool")
    arguments = payload.get("arguments", {})
    if not isinstance(tool, str) or len(tool) > 100:
        raise InputError("bad request: tool must be a tool's name")
    if not isinstance(arguments, dict):
        raise InputError(f"{tool}: arguments must be a JSON object")
    tools = DaintreeTools(services, session_access(services.project, owner))
    try:
        data = tools.call(tool, arguments)
    except DaintreeError:
        raise
    except Exception as exc:  # one hostile call must not stop the poll that applies everyone's requests
        raise OperationError(f"internal error: {type(exc).__name__}: {exc}") from None
    return {"data": json.loads(to_json(data))}
