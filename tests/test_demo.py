"""`daintree demo`: its agents end when its dashboard quits (nobody else's do); `--clean` removes only our demos."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from daintree_tui.core.project import Project
from daintree_tui.demo import registry
from daintree_tui.sessions.manager import SessionManager
from daintree_tui.sessions.tmux import socket_name
from tests.conftest import CLI, wait_for

pytestmark = pytest.mark.usefixtures("tmux_socket")

DEMO_WORKTREES = {"auth-refactor", "cart-discount", "readme-tests"}


def live_sessions(root: Path) -> set[str]:
    """Live sessions of `root`'s worktrees (the tests share one tmux server between repositories)."""
    project = Project.discover(root)
    names = {p.name for p in project.state_dir.glob(".sessions/*.json")}
    return {s.name for s in SessionManager(project).observe(with_screens=False)
            if str(s.status) != "exited" and f"{s.name}.json" in names}


@pytest.fixture
def own_servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each demo on its own tmux server, as for a user (two demos share worktree names); killed at teardown."""
    monkeypatch.delenv("DAINTREE_TMUX_SOCKET")
    sockets: list[str] = []
    yield sockets
    for name in sockets:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)


def make_demo(cli: CLI, path: Path, sockets: list[str]) -> Path:
    proc = cli("demo", "--no-ui", "--path", str(path), "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    root = Path(json.loads(proc.stdout)["path"])
    sockets.append(socket_name(Project.discover(root)))
    return root


def user_agent_config() -> None:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[agents.sleeper]\ncommand = \"sleep 300\"\n")


@pytest.fixture
def outer_tmux(tmux_socket: str) -> Iterator[str]:
    """A second tmux server playing the user's terminal (the demo's sessions live on `tmux_socket`)."""
    name = f"{tmux_socket}-outer-{uuid.uuid4().hex[:6]}"
    yield name
    subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)


def test_quitting_the_demo_stops_its_agents_and_no_one_elses(cli: CLI, repo: Path, tmp_path: Path,
                                                              outer_tmux: str) -> None:
    user_agent_config()
    cli.ok("worktree", "create", "mine")
    cli.ok("session", "start", "mine", "--agent", "sleeper")  # the user's own agent, on the same tmux server
    demo = tmp_path / "demo"
    env = {k: os.environ[k] for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "DAINTREE_TMUX_SOCKET",
                                       "DAINTREE_DEMO_SPEED", "PATH", "HOME")}
    command = ["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "daintree_tui", "demo",
               "--path", str(demo)]
    subprocess.run(["tmux", "-L", outer_tmux, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40",
                    "-c", str(repo), *command, ";", "set-option", "remain-on-exit", "on"], check=True)

    def screen() -> str:
        return subprocess.run(["tmux", "-L", outer_tmux, "capture-pane", "-p"], capture_output=True,
                              text=True).stdout

    wait_for(lambda: "auth-refactor" in screen(), timeout=90)
    wait_for(lambda: live_sessions(demo) >= DEMO_WORKTREES, timeout=30)
    subprocess.run(["tmux", "-L", outer_tmux, "send-keys", "q"], check=True)
    wait_for(lambda: "stopped 3 demo agents" in screen(), timeout=60)
    assert "keep running" not in screen()  # not the dashboard's own farewell, which the demo's contradicted
    assert live_sessions(demo) == set()
    assert live_sessions(repo) == {"mine"}
    assert (demo / ".git" / registry.MARKER).is_file()  # the repository stays until --clean


def test_clean_removes_our_demos_and_refuses_anything_else(cli: CLI, tmp_path: Path, own_servers: list[str]) -> None:
    first, second = make_demo(cli, tmp_path / "d1", own_servers), make_demo(cli, tmp_path / "d2", own_servers)
    assert live_sessions(first) == DEMO_WORKTREES
    # Entries that must never be deleted: a repository of the user's, a copied marker with another token, a
    # link to a demo, and a demo a dashboard is showing.
    users = tmp_path / "users-repo"
    (users / ".git").mkdir(parents=True)
    (users / "precious.txt").write_text("keep me")
    forged = tmp_path / "forged"
    (forged / ".git").mkdir(parents=True)
    (forged / ".git" / registry.MARKER).write_text(json.dumps({"token": "not-ours"}))
    shown = make_demo(cli, tmp_path / "d3", own_servers)
    link = tmp_path / "link-to-d3"
    link.symlink_to(shown)
    path = registry.registry_path()
    demos = json.loads(path.read_text())["demos"]
    token = demos[-1]["token"]
    demos += [{"path": str(users), "token": "x"}, {"path": str(forged), "token": "real"},
              {"path": str(link), "token": token}, {"path": str(tmp_path / "gone"), "token": "y"}]
    path.write_text(json.dumps({"demos": demos}))

    with registry.showing(shown):
        result = cli.json("demo", "--clean")
    assert sorted(result["removed"]) == sorted([str(first), str(second)])
    assert result["in_use"] == [str(shown)]
    refused = {r["path"]: r["reason"] for r in result["refused"]}
    assert set(refused) == {str(users), str(forged), str(link)}
    assert "marker" in refused[str(users)] and "not the one we wrote" in refused[str(forged)]
    assert not first.exists() and not second.exists()
    for removed_demo_server in own_servers[:2]:  # their agents were stopped first
        assert subprocess.run(["tmux", "-L", removed_demo_server, "list-sessions"],
                              capture_output=True).returncode != 0
    assert (users / "precious.txt").read_text() == "keep me" and forged.is_dir() and shown.is_dir()
    assert live_sessions(shown) == DEMO_WORKTREES  # the demo in use keeps its agents

    # Refused entries are forgotten; the demo in use is cleaned once nothing shows it.
    assert [d["path"] for d in json.loads(path.read_text())["demos"]] == [str(shown)]
    assert cli.json("demo", "--clean")["removed"] == [str(shown)]
    assert not shown.exists() and link.is_symlink()
    assert "no demo repositories" in cli.ok("demo", "--clean").stdout


def test_clean_takes_no_path(cli: CLI, tmp_path: Path) -> None:
    proc = cli("demo", "--clean", "--path", str(tmp_path / "x"))
    assert proc.returncode == 2 and "--clean" in proc.stderr
