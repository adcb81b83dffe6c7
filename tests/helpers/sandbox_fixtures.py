"""Fixtures of the sandbox tests (registered in tests/conftest.py's `pytest_plugins`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BIN = str(Path(sys.executable).parent)  # the venv's `daintree` and `python`


@pytest.fixture
def sandbox_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmux_socket: str) -> Iterator[Path]:
    """A private HOME (read-only inside the sandbox) and the venv's `daintree` on PATH."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    yield home
