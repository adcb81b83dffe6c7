"""Restarting a session: the new agent is checked before the old one stops; without an agent, the worktree's own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from daintree_tui.core.errors import InputError
from daintree_tui.core.project import Project
from daintree_tui.core.store import write_json
from daintree_tui.core.worktrees import WorktreeService
from daintree_tui.sessions.manager import SessionManager
from daintree_tui.sessions.status import SessionStatus
from tests.conftest import CLI, wait_for

pytestmark = pytest.mark.usefixtures("tmux_socket")

ECHO_AGENT = f"{sys.executable} -c \"import sys; print('agent ready', flush=True); [print('echo:', l.strip(), flush=True) for l in sys.stdin]\""  # noqa: E501


def user_agents() -> None:
    """Agents in the user's own config (trusted, unlike a repository's)."""
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"[agents.echo]\ncommand = '''{ECHO_AGENT}'''\n"
                      "[agents.ghost]\ncommand = \"no-such-agent-binary --flag\"\n"
                      "[agents.sleeper]\ncommand = \"sleep 300\"\n")


@pytest.fixture
def manager(repo: Path) -> SessionManager:
    user_agents()
    project = Project.discover(repo)
    WorktreeService(project).create("one")
    return SessionManager(project)


def live_pid(manager: SessionManager, name: str) -> int | None:
    info = next((i for i in manager.observe(with_screens=False) if i.name == name), None)
    return info.pid if info is not None and info.status != SessionStatus.EXITED else None


def test_restart_with_a_missing_program_leaves_the_running_agent_alone(manager: SessionManager) -> None:
    started = manager.start("one", "echo")
    pid = wait_for(lambda: live_pid(manager, "one"))
    assert started.agent == "echo"
    with pytest.raises(InputError, match="no-such-agent-binary"):
        manager.restart("one", "ghost")
    with pytest.raises(InputError, match="unknown agent preset"):
        manager.restart("one", "nobody")
    assert live_pid(manager, "one") == pid
    assert manager.record("one") is not None and manager.record("one").agent == "echo"  # type: ignore[union-attr]


def test_restart_without_an_agent_brings_back_the_worktrees_own(manager: SessionManager) -> None:
    manager.start("one", "echo")
    log = manager.project.log_path("one")
    wait_for(lambda: log.exists() and "agent ready" in log.read_text(), timeout=30)
    manager.stop("one")
    assert manager.record("one").ended  # type: ignore[union-attr]
    info = manager.restart("one")
    assert info.agent == "echo"  # not the default agent (a shell)
    wait_for(lambda: log.read_text().count("agent ready") == 2, timeout=30)


def test_restart_replaces_a_live_agent_with_the_chosen_one(manager: SessionManager) -> None:
    manager.start("one", "echo")
    old = wait_for(lambda: live_pid(manager, "one"))
    info = manager.restart("one", "sleeper")
    assert info.agent == "sleeper"
    new = wait_for(lambda: live_pid(manager, "one"))
    assert new != old
    assert manager.record("one").agent == "sleeper"  # type: ignore[union-attr]


def test_restart_of_a_worktree_that_never_had_a_session_starts_the_default(manager: SessionManager) -> None:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    config.write_text(config.read_text().replace("[agents.echo]", "default_agent = \"sleeper\"\n[agents.echo]"))
    project = Project.discover(manager.project.root)
    info = SessionManager(project).restart("one")
    assert info.agent == "sleeper"


def test_dashboard_restart_of_an_exited_session_runs_the_worktrees_agent(manager: SessionManager) -> None:
    """The dashboard's `enter` on an exited session and `s` on a running one go through this call."""
    from daintree_tui.services import Services
    from daintree_tui.tui.backend import Backend

    backend = Backend(Services(manager.project, pty_fallback=True))
    backend.start_session("one", "echo", (80, 24))
    wait_for(lambda: live_pid(manager, "one"))
    backend.services.sessions.stop("one")
    info = backend.start_session("one", None, (80, 24), restart=True)
    assert info.agent == "echo"
    with pytest.raises(InputError):
        backend.start_session("one", "ghost", (80, 24), restart=True)
    assert live_pid(manager, "one") is not None


def test_sessions_lost_with_the_server_are_offered_even_when_their_hangup_was_recorded(repo: Path,
                                                                                        tmux_socket: str) -> None:
    """Killing the server hangs up every agent; an observer may record that exit just before the sessions
    vanish. Those are still lost with the server; one stopped on purpose or ended by itself is not."""
    import subprocess

    from daintree_tui.services.container import HANGUP_EXIT, Services

    user_agents()
    services = Services(Project.discover(repo))
    seen = {}
    for name in ("hung", "stopped", "done", "running"):
        WorktreeService(services.project).create(name)
        seen[name] = services.sessions.start(name, "echo").started_at
    services.sessions.records.transition("hung", SessionStatus.EXITED, HANGUP_EXIT)
    services.sessions.stop("stopped")
    services.sessions.records.transition("done", SessionStatus.EXITED, 0)
    names = ["hung", "stopped", "done", "running"]
    assert services.lost_sessions(dict.fromkeys(names)) == {}, "the server still runs: nothing is lost"
    subprocess.run(["tmux", "-L", tmux_socket, "kill-server"], check=True)
    assert services.lost_sessions(dict.fromkeys(names)) == {"hung": "echo", "running": "echo"}
    assert services.lost_sessions(seen) == {"hung": "echo", "running": "echo"}


def test_restarting_the_only_session_is_not_a_lost_server(repo: Path, tmux_socket: str) -> None:
    """Enter on the only session, exited: the restart stops it, and the tmux server ends with its last session
    until the new one starts it again. A dashboard poll in that moment saw every session vanish and a record of
    a run not ended (the new one's), and asked whether to restart the sessions of a lost tmux server."""
    from daintree_tui.services.container import Services

    user_agents()
    services = Services(Project.discover(repo))
    WorktreeService(services.project).create("only")
    seen = {"only": services.sessions.start("only", "echo").started_at}
    services.sessions.stop("only")
    assert not services.sessions.host.serves_sessions()
    # The new run's record, written before its pane (and before the server is back).
    record = services.sessions.meta("only")
    record.update(status="starting", exit_code=None, started_at=seen["only"] + 1)
    write_json(services.sessions.meta_path("only"), record)
    assert services.lost_sessions(seen) == {}
    assert services.lost_sessions({"only": None}) == {"only": "echo"}  # without the runs seen, as before


def test_start_without_an_agent_after_a_stop_runs_the_worktrees_own(cli: CLI, repo: Path) -> None:
    """`session stop W` then `session start W` on a worktree made with `--agent X` started the default agent."""
    user_agents()
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    config.write_text(config.read_text().replace("[agents.echo]", "default_agent = \"sleeper\"\n[agents.echo]"))
    cli.ok("worktree", "create", "made", "--agent", "echo")
    log = repo / ".worktrees" / ".logs" / "made.log"
    wait_for(lambda: log.exists() and "agent ready" in log.read_text(), timeout=30)
    cli.ok("session", "stop", "made")
    info = cli.json("session", "start", "made")
    assert info["agent"] == "echo"
    wait_for(lambda: log.read_text().count("agent ready") == 2, timeout=30)
    assert [s["agent"] for s in cli.json("session", "list")] == ["echo"]
    cli.ok("worktree", "create", "fresh")
    assert cli.json("session", "start", "fresh")["agent"] == "sleeper"  # never had a session: the default
    assert "the one the worktree's last session ran" in " ".join(cli.ok("session", "start", "--help").stdout.split())
