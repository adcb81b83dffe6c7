"""`make bench`: run every benchmark and print its table."""

from __future__ import annotations

import compileall
import os
import platform
from pathlib import Path

import daintree_tui
from bench import (
    create,
    dashboard,
    first_screen,
    latency,
    mcp_start,
    radar,
    remote,
    remote_idle,
    sandbox,
    scale,
    scale_live,
    terminal,
    tree_watch,
)


def main() -> None:
    # An installed wheel ships compiled modules; an editable checkout under PYTHONDONTWRITEBYTECODE=1 would
    # recompile every module on every CLI start. Compile once so the CLI is measured as users run it.
    compileall.compile_dir(Path(daintree_tui.__file__).parent, quiet=1)
    print(f"# daintree benchmarks on {platform.node() or 'this machine'}: {os.cpu_count()} cores, "
          f"Python {platform.python_version()}\n")
    for module in (create, dashboard, first_screen, terminal, latency, scale, scale_live, remote, remote_idle, sandbox,
                   radar, mcp_start, tree_watch):
        print(module.run(), flush=True)


if __name__ == "__main__":
    main()
