"""`DaintreeTools` on the wire over streamable HTTP on 127.0.0.1: the MCP SDK's low-level `Server` (stdio is
`stdio.py`'s, without the SDK: its import took 2 s of every agent session's start).

The low-level server because the schemas and the results are ours to the byte: the tool list follows the
caller's access, a tool's result is the CLI's `--json` text, and a `DaintreeError` becomes a tool error
(`is_error`) whose text is the CLI's one-line message (`daintree: ...`), with its exit code beside it in
`structured_content`. Calls run one at a time in a worker thread: the services block (git, tmux, locks) and the
event loop must keep answering.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types.jsonrpc import INVALID_PARAMS
from starlette.types import ASGIApp, Receive, Scope, Send

from daintree_tui import __version__
from daintree_tui.core.errors import DaintreeError
from daintree_tui.core.sandbox import secrets_dir
from daintree_tui.mcp.tools import INSTRUCTIONS, ToolBackend, to_json


def _error(message: str, exit_code: int) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True,
                                structured_content={"error": message, "exit_code": exit_code})


def build_server(tools: ToolBackend) -> Server[Any]:
    """An MCP server whose tools and resources are those `tools` offers its caller."""
    one_at_a_time = anyio.Lock()

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=spec.name, description=spec.description, input_schema=spec.input_schema)
            for spec in tools.specs()])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            async with one_at_a_time:
                data = await anyio.to_thread.run_sync(tools.call, params.name, dict(params.arguments or {}))
        except DaintreeError as exc:
            return _error(f"daintree: {exc}", exc.exit_code)
        except Exception as exc:
            if os.environ.get("DAINTREE_DEBUG"):
                raise
            return _error(f"daintree: internal error: {type(exc).__name__}: {exc} (DAINTREE_DEBUG=1 for details)", 1)
        # Structured too, as errors are (an object: a list or a value goes under "result").
        structured = data if isinstance(data, dict) else {"result": data}
        return types.CallToolResult(content=[types.TextContent(type="text", text=to_json(data))],
                                    structured_content=json.loads(to_json(structured)))

    async def list_resources(ctx: ServerRequestContext[Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[
            types.Resource(uri=uri, name=name, description=description, mime_type="application/json")
            for uri, (name, description, _) in tools.resources().items()])

    async def read_resource(ctx: ServerRequestContext[Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        found = tools.resources().get(uri)
        if found is None:
            raise MCPError(INVALID_PARAMS, f"daintree: no resource {uri!r} (known: {', '.join(tools.resources())})")
        try:
            async with one_at_a_time:
                data = await anyio.to_thread.run_sync(found[2])
        except DaintreeError as exc:
            raise MCPError(INVALID_PARAMS if exc.exit_code == 2 else -32603, f"daintree: {exc}") from None
        return types.ReadResourceResult(contents=[
            types.TextResourceContents(uri=uri, mime_type="application/json", text=to_json(data))])

    return Server("daintree", version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool, on_list_resources=list_resources, on_read_resource=read_resource)


TOKEN_FILE = "mcp-http-token"


def http_token() -> tuple[str, Path]:
    """The bearer token HTTP clients must send, and the 0600 file that keeps it (made once, then reused so that a
    client's config stays valid). It lives in daintree's secrets folder, which every sandbox hides."""
    path = secrets_dir() / TOKEN_FILE
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    if len(token) < 32:
        token = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
    return token, path


def require_token(app: ASGIApp, token: str) -> ASGIApp:
    """`app` answering 401 to an HTTP request without `Authorization: Bearer <token>`. A port on 127.0.0.1 is
    open to every local process: other users' and every sandboxed agent's (they share the network), and this
    server acts with the access of the person who started it."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"daintree: missing or wrong bearer token\n"})
                return
        await app(scope, receive, send)

    return guarded


def serve_http(tools: ToolBackend, port: int, token: str) -> None:
    """Serve streamable HTTP on 127.0.0.1:`port` at /mcp to clients that send the bearer `token`
    (DNS-rebinding protection on, as the SDK does for loopback hosts)."""
    import uvicorn

    app = build_server(tools).streamable_http_app(host="127.0.0.1")
    uvicorn.run(require_token(app, token), host="127.0.0.1", port=port, log_level="warning")
