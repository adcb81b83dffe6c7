"""`daintree mcp`: the task board and the worktree registry as MCP tools, so one agent can lead the others.

An interface layer beside the CLI: it imports core, sessions and services; nothing but the CLI imports it. The
`mcp` SDK is imported only by `server.py` (streamable HTTP), so no other command pays for it.

- `access.py` decides who is asking (a person's own server, or the session whose agent started it) and so which
  tools it sees.
- `tools.py` is the tool table (names, JSON schemas, who may call them) and `DaintreeTools`, the one object
  every call goes through: `call(name, arguments) -> JSON data`, raising `DaintreeError` like the CLI.
- `inbox.py` is the backend of a server inside a session's sandbox (calls go through the session inbox) and the
  outside's handler of those calls.
- `stdio.py` puts that object on stdin/stdout (MCP's JSON-RPC lines, the standard library only: an agent's
  server is ready in a fraction of the SDK's 2 s import); `server.py` serves it over streamable HTTP with the
  SDK's low-level `Server`.
"""
