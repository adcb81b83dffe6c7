"""Fixtures of the remote-host tests (registered in tests/conftest.py's `pytest_plugins`): a private sshd on
127.0.0.1 (tests/sshd.py) with our own client config, and host `far`, localhost over SSH."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.helpers.remote import DAINTREE
from tests.sshd import Sshd


@pytest.fixture
def sshd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Sshd]:
    login_shell = getattr(request, "param", None)  # indirect parametrization: the far side's login shell
    if login_shell and not shutil.which(login_shell):
        pytest.skip(f"{login_shell} not installed")
    base = tmp_path / "ssh"
    base.mkdir(mode=0o700)
    server = Sshd(base, tmp_path / "remote-home", shutil.which(login_shell) if login_shell else None)
    # Control sockets need a short path (unix socket paths are limited to about 104 bytes).
    controls = Path(tempfile.mkdtemp(prefix="dt-ssh-"))
    monkeypatch.setenv("DAINTREE_SSH_CONFIG", str(server.client_config))
    monkeypatch.setenv("DAINTREE_SSH_CONTROL_DIR", str(controls))
    server.start()
    yield server
    for alias in ("dt-far", "dt-other"):
        subprocess.run(["ssh", "-F", str(server.client_config), "-o", f"ControlPath={controls}/%C", "-O", "exit",
                        alias], capture_output=True, stdin=subprocess.DEVNULL)
    server.kill()
    # The far side's tmux servers: one per repository, named from its path (only the repos of this test).
    for path in tmp_path.glob("*repo*"):
        name = "daintree-" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)
    shutil.rmtree(controls, ignore_errors=True)


@pytest.fixture
def far_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "far-repo")


@pytest.fixture
def far(sshd: Sshd, far_repo: Path) -> str:
    """Host `far`: localhost over SSH, its own repository, this venv's daintree."""
    from daintree_tui.services.remote import HostConfig, save_host

    save_host(HostConfig("far", "dt-far", str(far_repo), max_sessions=2, daintree=DAINTREE))
    return "far"
