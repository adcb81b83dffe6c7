"""Fixtures of the checkpoint tests (registered in tests/conftest.py's `pytest_plugins`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def watcher(repo: Path, tmux_socket: str) -> Iterator[None]:
    """`daintree session watch`, an observer beside the watcher a session start brings up: two observers, one
    checkpoint per turn."""
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", "session", "watch", "--interval", "0.2"],
                            cwd=repo, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=os.environ.copy())
    yield
    proc.terminate()
    proc.wait(timeout=30)
