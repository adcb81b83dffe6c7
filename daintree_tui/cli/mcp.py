"""`daintree mcp` (serve the tools over MCP) and `daintree mcp config --agent A` (print a config snippet)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from daintree_tui.cli.common import AddCommand
from daintree_tui.core.errors import InputError
from daintree_tui.services import Services


def cmd_mcp(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.mcp.access import resolve_access
    from daintree_tui.mcp.tools import DaintreeTools, ToolBackend

    if args.http is not None and not 0 < args.http < 65536:
        raise InputError(f"--http takes a port number (1-65535), got {args.http}")
    if args.reply_wait is not None and args.reply_wait <= 0:
        raise InputError("--reply-wait must be a positive number of seconds")
    tools: ToolBackend
    inbox = _mounted_inbox()
    if inbox is not None:  # inside a session's sandbox: the state is read-only, calls go through its inbox
        from daintree_tui.mcp.inbox import REPLY_WAIT, InboxTools

        tools = InboxTools(services, inbox, args.role, args.worktree, reply_wait=args.reply_wait or REPLY_WAIT)
    else:
        tools = DaintreeTools(services, resolve_access(services.project, args.role, args.worktree))
    if args.http is not None:
        _require_free_port(args.http)  # uvicorn's own failure was its URL, a traceback line and exit 3
        from daintree_tui.mcp import server  # the SDK is imported here, by `--http` only

        token, path = server.http_token()
        sys.stderr.write(f"daintree: MCP on http://127.0.0.1:{args.http}/mcp; clients send `Authorization: Bearer "
                         f"TOKEN`, the token in {path}\n")
        sys.stderr.flush()
        server.serve_http(tools, args.http, token)
    else:
        from daintree_tui.mcp.stdio import serve_stdio  # the standard library only: ready in a fraction of a second

        serve_stdio(tools)
    return 0


def _require_free_port(port: int) -> None:
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise InputError(f"port {port} on 127.0.0.1 is taken ({exc.strerror or exc}): pick another with "
                             "--http PORT") from None


def daintree_program() -> str:
    """The absolute path of this daintree's executable (beside its Python, or on PATH): an agent's MCP client
    runs the server with its own PATH, where a bare `daintree` may be another one, or none."""
    import shutil

    beside = Path(sys.executable).parent / "daintree"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("daintree")
    return str(Path(found).resolve()) if found else "daintree"


def _mounted_inbox() -> Path | None:
    """The inbox of the sandbox this server runs in, found by the mount (as the CLI's own routing does)."""
    from daintree_tui.core.mounts import INBOX_MOUNT

    if not INBOX_MOUNT.is_dir():
        return None
    from daintree_tui.services.inbox import mounted_inbox

    return mounted_inbox()


def cmd_mcp_config(args: argparse.Namespace, services: Services) -> int:
    from daintree_tui.sessions.presets import mcp_snippet

    sys.stdout.write(mcp_snippet(args.agent, [daintree_program(), "mcp"]) + "\n")
    return 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    from daintree_tui.sessions.presets import MCP_AGENTS

    p = add(sub, "mcp", cmd_mcp, "serve the task and worktree tools over MCP (stdio; --http PORT for HTTP)")
    p.add_argument("--role", help="the tool set of this role (a session's own role always wins)")
    p.add_argument("--worktree", metavar="NAME", help="serve the session of this worktree (set by the wiring)")
    p.add_argument("--reply-wait", type=float, metavar="S",
                   help="inside a sandbox: seconds to wait for the outside to apply a call (default 30)")
    p.add_argument("--http", type=int, metavar="PORT", help="streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio")
    msub = p.add_subparsers(dest="mcp_command", metavar="ACTION")
    c = add(msub, "config", cmd_mcp_config, "print the config that adds this server to an agent everywhere")
    c.add_argument("--agent", required=True, choices=MCP_AGENTS, help="the agent whose config to print")
