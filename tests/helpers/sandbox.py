"""The sandbox a session would get, built without a session, and a script run in it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.sandbox import BwrapSandbox
from tests.conftest import CLI
from tests.helpers.config import write_user_config

_OK, _WHY = BwrapSandbox().available()
needs_bwrap = pytest.mark.skipif(not _OK, reason=f"bubblewrap cannot run here: {_WHY}")


def agent_sandbox_of_me(repo: Path, agent: str) -> tuple[Any, dict[str, str]]:
    """A worktree `me` and the sandbox a session of `agent` (its command being `sh`) would get, with its env."""
    from daintree_tui.core.index import Index, find
    from daintree_tui.core.project import Project
    from daintree_tui.sessions.presets import resolve_preset
    from daintree_tui.sessions.sandbox import session_sandbox

    write_user_config(f'[agents.{agent}]\ncommand = "sh"\n')
    CLI(repo).ok("worktree", "create", "me")
    project = Project.discover(repo)
    entry = find(Index(project).load(), "me")
    assert entry is not None
    return session_sandbox(project, entry, resolve_preset(project.config, agent)), dict(os.environ)


def run_inside(sandbox: Any, env: dict[str, str], script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(sandbox.wrap(["sh", "-c", script], env), env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
