"""`DaintreeTools` over stdio without the SDK: MCP's JSON-RPC, one message a line, in the standard library only.

Every agent session starts `daintree mcp`, and the SDK's import (its pydantic models: ~2 s of a 2-core machine's
CPU, 90% of the start) held each agent's tools back for that long. Serving stdio needs a line reader and a JSON
writer: this is the handshake protocol (`initialize`; revisions 2024-11-05 to 2025-11-25) with the methods our
server answers (`ping`, `tools/list`, `tools/call`, `resources/list`, `resources/read`); anything else is
"method not found", which is also what sends a client probing the stateless revision (`server/discover`) back to
the handshake. The results are the same bytes as `server.py`'s (the SDK serves streamable HTTP there): a tool's
result is the CLI's `--json` text, a `DaintreeError` a tool error with its one-line message and exit code. The
tests drive it with the SDK's own client.

Calls run one at a time on a worker thread, in the order they came: the services block (git, tmux, locks) and
the reader must keep answering `ping` meanwhile.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from daintree_tui import __version__
from daintree_tui.core.errors import DaintreeError
from daintree_tui.mcp.tools import INSTRUCTIONS, ToolBackend, to_json

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The revisions negotiated by `initialize`: a client asking for another gets the newest (the spec's rule)."""

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
MAX_LINE = 16 * 1024 * 1024
"""A request longer than this is refused unread (our largest arguments are a task's text)."""


class Refused(Exception):
    """A request answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def tool_error(message: str, exit_code: int) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True,
            "structuredContent": {"error": message, "exit_code": exit_code}}


class StdioServer:
    """One client on a pair of byte streams, until it closes its end."""

    def __init__(self, tools: ToolBackend, instructions: str, reader: BinaryIO, writer: BinaryIO) -> None:
        self.tools = tools
        self.instructions = instructions
        self.reader = reader
        self.writer = writer
        self._write_lock = threading.Lock()
        self._calls: queue.Queue[tuple[Any, Callable[[], dict[str, Any]]] | None] = queue.Queue()

    def serve(self) -> None:
        worker = threading.Thread(target=self._work, name="mcp-calls", daemon=True)
        worker.start()
        try:
            while True:
                line = self.reader.readline(MAX_LINE + 1)
                if not line:
                    break
                if len(line) > MAX_LINE:
                    self._send({"jsonrpc": "2.0", "id": None,
                                "error": {"code": INVALID_REQUEST, "message": "daintree: request too long"}})
                    while line and not line.endswith(b"\n"):  # the rest of that line, unread
                        line = self.reader.readline(MAX_LINE)
                    continue
                if line.strip():
                    self._take(line)
        finally:
            self._calls.put(None)  # the calls already asked for are answered, then the worker ends
            worker.join()

    def _take(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            self._send({"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": "Parse error"}})
            return
        for one in message if isinstance(message, list) else [message]:
            self._dispatch(one)

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            if isinstance(message, dict) and "id" in message and ("result" in message or "error" in message):
                return  # a reply to a request of ours: we send none
            self._send({"jsonrpc": "2.0", "id": None,
                        "error": {"code": INVALID_REQUEST, "message": "Invalid Request"}})
            return
        if "id" not in message:
            return  # notifications: initialized, cancelled (a call in progress runs to its end), progress
        request_id, method, params = message["id"], message["method"], message.get("params")
        if params is None:
            params = {}
        try:
            if not isinstance(params, dict):
                raise Refused(INVALID_PARAMS, "params must be an object")
            if method == "tools/call":
                name, arguments = params.get("name"), params.get("arguments")
                if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
                    raise Refused(INVALID_PARAMS, "tools/call takes a name and an object of arguments")
                self._calls.put((request_id, lambda: self._call_tool(name, arguments or {})))
                return
            if method == "resources/read":
                uri = params.get("uri")
                if not isinstance(uri, str):
                    raise Refused(INVALID_PARAMS, "resources/read takes a uri")
                self._calls.put((request_id, lambda: self._read_resource(uri)))
                return
            result = self._answer(method, params)
        except Refused as exc:
            self._send({"jsonrpc": "2.0", "id": request_id, "error": {"code": exc.code, "message": str(exc)}})
            return
        self._send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            asked = params.get("protocolVersion")
            return {"protocolVersion": asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
                    "capabilities": {"tools": {"listChanged": False},
                                     "resources": {"subscribe": False, "listChanged": False}},
                    "serverInfo": {"name": "daintree", "version": __version__},
                    "instructions": self.instructions}
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [{"name": s.name, "description": s.description, "inputSchema": s.input_schema}
                              for s in self.tools.specs()]}
        if method == "resources/list":
            return {"resources": [{"uri": uri, "name": name, "description": description,
                                   "mimeType": "application/json"}
                                  for uri, (name, description, _) in self.tools.resources().items()]}
        raise Refused(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            data = self.tools.call(name, dict(arguments))
        except DaintreeError as exc:
            return tool_error(f"daintree: {exc}", exc.exit_code)
        except Exception as exc:
            if os.environ.get("DAINTREE_DEBUG"):
                raise
            return tool_error(f"daintree: internal error: {type(exc).__name__}: {exc} (DAINTREE_DEBUG=1 for details)",
                              1)
        text = to_json(data)
        # Structured too, as errors are (an object: a list or a value goes under "result"), as server.py does.
        structured = json.loads(text) if isinstance(data, dict) else {"result": json.loads(text)}
        return {"content": [{"type": "text", "text": text}], "structuredContent": structured}

    def _read_resource(self, uri: str) -> dict[str, Any]:
        found = self.tools.resources().get(uri)
        if found is None:
            raise Refused(INVALID_PARAMS, f"daintree: no resource {uri!r} (known: {', '.join(self.tools.resources())})")
        try:
            data = found[2]()
        except DaintreeError as exc:
            raise Refused(INVALID_PARAMS if exc.exit_code == 2 else INTERNAL_ERROR, f"daintree: {exc}") from None
        return {"contents": [{"uri": uri, "mimeType": "application/json", "text": to_json(data)}]}

    def _work(self) -> None:
        while (job := self._calls.get()) is not None:
            request_id, run = job
            try:
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": run()}
            except Refused as exc:
                reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": exc.code, "message": str(exc)}}
            except Exception as exc:  # DAINTREE_DEBUG re-raised it: the client still gets its answer
                reply = {"jsonrpc": "2.0", "id": request_id,
                         "error": {"code": INTERNAL_ERROR, "message": f"{type(exc).__name__}: {exc}"}}
                self._send(reply)
                raise
            self._send(reply)

    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        with self._write_lock:
            try:
                self.writer.write(data)
                self.writer.flush()
            except (BrokenPipeError, ValueError):  # the client went away: its answer has no one to go to
                pass


def serve_stdio(tools: ToolBackend) -> None:
    """Serve one client on this process's stdin/stdout until it hangs up."""
    StdioServer(tools, INSTRUCTIONS, sys.stdin.buffer, sys.stdout.buffer).serve()
