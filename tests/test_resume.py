"""Back after a reboot (issue 31): sessions whose tmux server is gone are found by `daintree doctor` and started
again with their agents' resume flags, in their own worktrees, once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from daintree_tui.core.project import Project
from tests.conftest import CLI, path_without_agents, wait_for

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import fake_agent  # noqa: E402

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake claude and codex first on PATH (never the real CLIs), with a HOME of their own."""
    bin_dir = fake_agent.install(tmp_path / "bin", ("claude", "codex"))
    home = tmp_path / "agent-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{path_without_agents()}")
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(var, raising=False)
    return bin_dir


def _panes(socket: str) -> dict[str, str]:
    """Session -> the pane's start directory, of the panes whose agent runs."""
    proc = subprocess.run(["tmux", "-L", socket, "list-panes", "-a", "-F",
                           "#{session_name}\t#{pane_dead}\t#{pane_start_path}"], capture_output=True, text=True)
    return {name: path for name, dead, path in (line.split("\t") for line in proc.stdout.splitlines())
            if dead == "0"}


@needs_tmux
def test_agents_resume_with_their_flags_after_the_tmux_server_is_killed(
        repo: Path, tmux_socket: str, fake_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from daintree_tui.services import resume

    monkeypatch.setattr(resume, "START_SETTLE", 0.0)  # the records are seconds old: no start is under way here
    (repo / ".daintree.toml").write_text("[sessions]\nresume_after_restart = true\n")
    cli = CLI(repo)
    cli.ok("worktree", "create", "one", "--agent", "claude")
    cli.ok("worktree", "create", "two", "--agent", "codex")
    wait_for(lambda: set(_panes(tmux_socket)) == {"dt-one", "dt-two"}, timeout=20)
    subprocess.run(["tmux", "-L", tmux_socket, "kill-server"], check=True)  # what a reboot does to them
    wait_for(lambda: not _panes(tmux_socket), timeout=10)

    report = cli("doctor", "--json")
    assert report.returncode == 1  # only reported: found something
    found = json.loads(report.stdout)
    assert {(s["name"], s["agent"], s["can_resume"]) for s in found["lost_sessions"]} == {
        ("one", "claude", True), ("two", "codex", True)}
    assert found["resumed"] == [] and not _panes(tmux_socket)

    fixed = json.loads(cli.ok("doctor", "--fix", "--json").stdout)
    commands = {r["name"]: r["command"] for r in fixed["resumed"] if r["resumed"]}
    assert commands["one"][0] == "claude" and commands["one"][-1] == "--continue"
    assert commands["two"][0] == "codex" and commands["two"][-2:] == ["resume", "--last"]
    panes = wait_for(lambda: (p := _panes(tmux_socket)) and set(p) == {"dt-one", "dt-two"} and p, timeout=20)
    manager_records = {name: json.loads((repo / ".worktrees" / ".sessions" / f"{name}.json").read_text())
                       for name in ("one", "two")}
    assert all(record["resumed"] is True for record in manager_records.values())
    assert Path(panes["dt-one"]).resolve() == (repo / ".worktrees" / "one").resolve()  # its own worktree
    assert Path(panes["dt-two"]).resolve() == (repo / ".worktrees" / "two").resolve()

    # Once: the next look finds nothing to start (the new runs are alive), and nothing was started twice.
    again = json.loads(cli.ok("doctor", "--fix", "--json").stdout)
    assert again["lost_sessions"] == [] and again["resumed"] == []
    starts = [json.loads(line) for line in (repo / ".worktrees" / "events.jsonl").read_text().splitlines()
              if '"session.started"' in line]
    assert sorted(e["worktree"]["name"] for e in starts) == ["one", "one", "two", "two"]


@needs_tmux
def test_a_declined_or_fresh_run_is_not_offered(repo: Path, tmux_socket: str, fake_bin: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from daintree_tui.services import Services, resume

    cli = CLI(repo)
    cli.ok("worktree", "create", "one", "--agent", "claude")
    wait_for(lambda: "dt-one" in _panes(tmux_socket), timeout=20)
    subprocess.run(["tmux", "-L", tmux_socket, "kill-server"], check=True)
    services = Services(Project.discover(repo))
    started = services.sessions.record("one").started_at
    assert resume.lost_sessions(services, now=started + 1) == []  # as young as a start under way: not lost
    lost = resume.lost_sessions(services, now=started + 60)
    assert [item.name for item in lost] == ["one"]
    resume.decline(services, lost)
    assert resume.lost_sessions(services, now=started + 60) == []
    assert resume.resume(services, lost) == []  # claimed already: never started twice


@needs_tmux
async def test_the_dashboard_offers_to_resume_after_a_restart(repo: Path, tmux_socket: str, fake_bin: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets import Button

    from daintree_tui.services import resume
    from daintree_tui.tui.app import make_app
    from tests.helpers.dashboard import on_screen, until

    monkeypatch.setattr(resume, "START_SETTLE", 0.0)
    CLI(repo).ok("worktree", "create", "one", "--agent", "claude")
    wait_for(lambda: "dt-one" in _panes(tmux_socket), timeout=20)
    subprocess.run(["tmux", "-L", tmux_socket, "kill-server"], check=True)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        await on_screen(pilot, app, "ConfirmScreen", timeout=30)
        assert "one (claude)" in str(app.screen.body)  # type: ignore[attr-defined]
        buttons = await until(pilot, lambda: app.screen.query("#yes"))
        buttons.first(Button).press()
        await until(pilot, lambda: "dt-one" in _panes(tmux_socket), timeout=30)
    record = json.loads((repo / ".worktrees" / ".sessions" / "one.json").read_text())
    assert record["resumed"] is True and record["command"][-1] == "--continue"
