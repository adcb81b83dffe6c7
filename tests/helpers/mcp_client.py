"""`daintree mcp` through the MCP SDK's own client over stdio, and the calls a test makes with it."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK is imported where a client starts: 1.1 CPU-s, in every xdist worker at collection
    from mcp import ClientSession


@asynccontextmanager
async def mcp_client(repo: Path, *flags: str, env: dict[str, str] | None = None,
                     command: list[str] | None = None) -> AsyncIterator[ClientSession]:
    """A real client session with `python -m daintree_tui mcp --repo REPO` (or `command`) as a subprocess."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    argv = command or [sys.executable, "-m", "daintree_tui", "mcp", "--repo", str(repo), *flags]
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(repo), env={**os.environ, **(env or {})})
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not result.is_error, text
    data = json.loads(text)
    # Structured on success too (only errors were): the object itself, or a list or value under "result".
    assert result.structured_content == (data if isinstance(data, dict) else {"result": data})
    return data


async def fails(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, f"{tool} {arguments} should have failed"
    return str(result.content[0].text)  # type: ignore[union-attr]


def task_file(repo: Path, task_id: int) -> dict[str, Any]:
    return json.loads((repo / ".tasks" / f"task_{task_id}.json").read_text())


async def tool_names(session: ClientSession) -> set[str]:
    return {tool.name for tool in (await session.list_tools()).tools}
