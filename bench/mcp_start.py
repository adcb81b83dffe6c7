"""Benchmark 10: an agent's MCP server, from its spawn until `initialize` and `list_tools` are answered.

Each sample is the MCP SDK's own stdio client (the SDK imported before the clock starts) spawning the server in a
repository with three tasks: the clock runs from just before the spawn to the answer of `initialize`, and on to
the answer of `list_tools`. Three servers, interleaved sample by sample so that the machine's load falls on all:
- `daintree mcp`, the installed script (stdio served with the standard library, `daintree_tui/mcp/stdio.py`);
- the same tools on the SDK's low-level `Server` over stdio, as `daintree mcp` served them before (the SDK's
  import is what it adds);
- the floor: Python answering the same two requests with fixed replies (`python -S`, nothing imported): what any
  Python server pays for its interpreter.
The load average is printed at the start and at the end.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import DAINTREE, ensure_bytecode, loadavg, small_repo, table

RUNS = int(os.environ.get("DAINTREE_BENCH_MCP_RUNS", "9"))

SDK_SERVER = """
import sys, anyio
from mcp.server.stdio import stdio_server
from daintree_tui.cli.common import build_services
from daintree_tui.core.project import Project
from daintree_tui.mcp.access import resolve_access
from daintree_tui.mcp.server import build_server
from daintree_tui.mcp.tools import DaintreeTools
project = Project.discover(sys.argv[1])
tools = DaintreeTools(build_services(project), resolve_access(project, None, None))
server = build_server(tools)
async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
anyio.run(main)
"""

FLOOR_SERVER = """
import json, sys
TOOL = {"name": "task_list", "description": "List tasks.", "inputSchema": {"type": "object", "properties": {}}}
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "floor", "version": "0"}}
    elif msg["method"] == "tools/list":
        result = {"tools": [TOOL]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""


async def sample(argv: list[str], cwd: Path) -> tuple[float, float]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(cwd), env=dict(os.environ))
    with open(os.devnull, "w") as errlog:
        start = time.perf_counter()
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            ready = time.perf_counter() - start
            tools = await session.list_tools()
            listed = time.perf_counter() - start
    if not tools.tools:
        raise RuntimeError(f"{argv[:3]} listed no tools")
    return ready, listed


def run() -> str:
    ensure_bytecode()
    import mcp  # noqa: F401 - the client's own import stays out of every sample

    with tempfile.TemporaryDirectory(prefix="daintree-bench-mcp-") as tmp:
        repo = small_repo(Path(tmp) / "repo")
        for subject in ("one", "two", "three"):
            subprocess.run([*DAINTREE, "task", "create", subject, "--repo", str(repo)], check=True,
                           capture_output=True)
        servers = {
            "daintree mcp (stdio, standard library)": [*DAINTREE, "mcp"],
            "the same tools on the SDK's Server (before)": [sys.executable, "-c", SDK_SERVER, str(repo)],
            "floor: python -S answering both with fixed replies": [sys.executable, "-S", "-c", FLOOR_SERVER],
        }
        load_start = loadavg()
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in servers}
        for i in range(RUNS + 1):  # the first round warms the page cache and is not counted
            for name, argv in servers.items():
                got = asyncio.run(sample(argv, repo))
                if i:
                    samples[name].append(got)
        load_end = loadavg()
    floor = statistics.median(listed for _, listed in samples[list(servers)[-1]])
    ours = statistics.median(listed for _, listed in samples[next(iter(servers))])
    rows = []
    for k, (name, got) in enumerate(samples.items()):
        ready = statistics.median(r for r, _ in got) * 1000
        times = [listed for _, listed in got]
        listed = statistics.median(times)
        rows.append([name, f"{ready:.0f} ms", f"{listed * 1000:.0f} ms",
                     f"{min(times) * 1000:.0f}-{max(times) * 1000:.0f} ms", f"{listed / floor:.2f}x",
                     f"{listed / ours:.2f}x", "< 500 ms" if k == 0 else ""])
    return table(f"10. MCP server, spawn to `initialize` and to `list_tools` answered, the SDK's stdio client, median "
                 f"of {RUNS} interleaved (load {load_start} to {load_end})", rows,
                 ["server", "initialize", "list_tools", "min-max", "vs floor", "vs daintree mcp", "target"])


if __name__ == "__main__":
    print(run())
