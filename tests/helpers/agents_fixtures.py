"""Fixtures of the agent tests (registered in tests/conftest.py's `pytest_plugins`): the fake agents of
tests/fixtures/fake_agent.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import path_without_agents

sys.path.insert(0, str(Path(__file__).parent.parent / "fixtures"))
import fake_agent


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake agents first on PATH and a private HOME (where they keep their records)."""
    bin_dir = fake_agent.install(tmp_path / "bin")
    home = tmp_path / "agent-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{path_without_agents()}")  # the fakes, never the real CLIs
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
                "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR"):
        monkeypatch.delenv(var, raising=False)
    return bin_dir
