"""Whether bubblewrap can start now: one run of the probe, with nothing imported but `subprocess`, so that a
session's launcher (sessions/launch.py, the first process of every sandboxed pane) can ask just before its agent
starts without loading the sandbox's mount table (core.sandbox: ~0.1 s of imports)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


def probe_failure(argv: Sequence[str]) -> str | None:
    """Run a probe (`core.sandbox.probe_argv`): None when the sandbox started, else bubblewrap's own last line of why
    not (`bwrap: Creating new namespace failed: No space left on device`)."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap cannot start: {exc}"
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return None
