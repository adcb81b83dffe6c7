"""The dashboard and real agents (issues 14 and 12 item 1): installed presets in every picker, resume and a
confirmation on restart, the first quick-create's word on its agent, status source, tokens, today's total and
budget alerts. Agents are the fakes of tests/fixtures/fake_agent.py on PATH, sessions real tmux on a private
socket."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import OptionList, Select

from daintree_tui.core.project import Project
from daintree_tui.tui.app import make_app
from daintree_tui.tui.widgets.terminal import TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.conftest import CLI, path_without_agents
from tests.helpers.dashboard import main_screen, on_screen, select, title_text, toasts, until

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import fake_agent

pytestmark = pytest.mark.usefixtures("tmux_socket")


@pytest.fixture
def only_codex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake codex is the one agent installed (claude, gemini, opencode, aider are not on PATH)."""
    bin_dir = fake_agent.install(tmp_path / "bin", ("codex",))
    home = tmp_path / "agent-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{path_without_agents()}")  # the real CLIs, if here, too
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return bin_dir


def tmux(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, check=False)


async def test_pickers_show_which_agents_are_installed(repo: Path, cli: CLI, only_codex: Path) -> None:
    cli.ok("worktree", "create", "w")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.entries)
        await select(pilot, screen, "w")
        await pilot.press("s")
        await on_screen(pilot, app, "AgentPickerScreen")
        options = app.screen.query_one(OptionList)
        claude, codex = options.get_option("claude"), options.get_option("codex")
        assert "not installed" in str(claude.prompt) and "not installed" not in str(codex.prompt)
        assert options.highlighted is not None and options.get_option_at_index(options.highlighted).id == "codex"
        options.highlighted = [options.get_option_at_index(i).id for i in range(options.option_count)].index("claude")
        await pilot.press("enter")  # reached by the arrows, not skipped; enter on it says why it cannot start
        await until(pilot, lambda: any("claude is not installed" in t for t in toasts(app)))
        assert type(app.screen).__name__ == "AgentPickerScreen"
        await pilot.press("escape")
        await on_screen(pilot, app, "MainScreen")
        # The new-task dialog lists them the same way and refuses an agent that is not installed.
        await pilot.press("n", *"Fix it")
        await on_screen(pilot, app, "NewTaskScreen")
        dialog = app.screen
        dialog.query_one("#agent", Select).value = "claude"
        await pilot.press("enter")
        await until(pilot, lambda: any("claude is not installed" in t for t in toasts(app)))
        assert app.screen is dialog  # still open: nothing was created
        assert not list((repo / ".tasks").glob("task_*.json"))


async def test_restart_offers_resume_and_asks_before_replacing_a_live_agent(repo: Path, cli: CLI, tmux_socket: str,
                                                                           only_codex: Path) -> None:
    from daintree_tui.services import Services

    cli.ok("worktree", "create", "w")
    cli.ok("session", "start", "w", "--agent", "codex")
    manager = Services(Project.discover(repo)).sessions
    first = manager.meta("w")["started_at"]
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "w" in screen.sessions)
        await select(pilot, screen, "w")
        await pilot.press("s")
        await on_screen(pilot, app, "AgentPickerScreen")
        options = app.screen.query_one(OptionList)
        assert options.get_option_at_index(0).id == "resume:codex" and options.highlighted == 0
        await pilot.press("enter")
        await on_screen(pilot, app, "ConfirmScreen")
        assert "Replace the running codex?" in str(app.screen.query_one(".dialog-title").render())
        await pilot.press("escape")  # no: the running agent stays
        await on_screen(pilot, app, "MainScreen")
        assert manager.meta("w")["started_at"] == first
        await pilot.press("s")
        await on_screen(pilot, app, "AgentPickerScreen")
        await pilot.press("enter")
        await on_screen(pilot, app, "ConfirmScreen")
        await pilot.click("#yes")
        await until(pilot, lambda: manager.meta("w").get("resumed") is True, timeout=30)
        assert manager.meta("w")["command"][-2:] == ["resume", "--last"]
        await until(pilot, lambda: any("Resumed codex in w" in t for t in toasts(app)))


async def test_a_refused_restart_shows_the_running_agent_again(repo: Path, cli: CLI, tmux_socket: str,
                                                               only_codex: Path) -> None:
    from daintree_tui.services import Services

    fake_agent.install(only_codex, ("gemini",))
    cli.ok("worktree", "create", "w")
    cli.ok("session", "start", "w", "--agent", "codex")
    manager = Services(Project.discover(repo)).sessions
    first = manager.meta("w")["started_at"]
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "w" in screen.sessions)
        await select(pilot, screen, "w")
        await until(pilot, lambda: screen.query_one(TerminalView).worktree == "w")
        await pilot.press("s")
        await on_screen(pilot, app, "AgentPickerScreen")
        (only_codex / "gemini").unlink()  # uninstalled while the dialog is open
        app.screen.query_one(OptionList).highlighted = sorted(screen.backend.agent_facts()).index("gemini") + 1
        await pilot.press("enter")
        await on_screen(pilot, app, "ConfirmScreen")
        await pilot.click("#yes")
        await until(pilot, lambda: any("not on PATH" in t for t in toasts(app)))
        await until(pilot, lambda: screen.query_one(TerminalView).worktree == "w")
        assert manager.meta("w")["started_at"] == first and manager.meta("w")["agent"] == "codex"
        # A restart refused after the terminal let go (flows.start_session releases it first) shows it again.
        screen.release("w")
        assert screen.query_one(TerminalView).worktree is None
        screen.reattach("w")
        await until(pilot, lambda: screen.query_one(TerminalView).worktree == "w")


async def test_first_quick_create_says_which_agent_and_how_to_change_it(repo: Path, cli: CLI,
                                                                        only_codex: Path) -> None:
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.started)
        await pilot.press("n", *"First thing", "enter")
        await until(pilot, lambda: "first-thing" in screen.sessions, timeout=30)
        told = await until(pilot, lambda: [t for t in toasts(app) if "Quick-create started codex" in t])
        assert "default_agent" in told[0] and "first installed" in told[0]
        await pilot.press("ctrl+right_square_bracket", "n", *"Second thing", "enter")
        await until(pilot, lambda: "second-thing" in screen.sessions, timeout=30)
        await until(pilot, lambda: any("second-thing" in t for t in toasts(app)))
        # The second dialog cleared the first toast as it opened: one shown now would be said a second time.
        assert not [t for t in toasts(app) if "Quick-create started" in t]


async def test_quick_create_never_types_the_task_into_a_shell(repo: Path, tmux_socket: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from daintree_tui.sessions.presets import default_agent_name

    monkeypatch.setenv("PATH", path_without_agents())  # the agent CLIs this machine may have are not installed here
    project = Project.discover(repo)
    assert default_agent_name(project.config) == "shell"  # no agent CLI on this PATH
    app = make_app(project)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.started)
        await pilot.press("n", *"touch typed-marker", "enter")
        await until(pilot, lambda: "touch-typed-marker" in screen.sessions, timeout=30)
        assert screen.sessions["touch-typed-marker"].agent == "shell"
        told = await until(pilot, lambda: [t for t in toasts(app) if "Quick-create started shell" in t])
        assert "no agent CLI is installed" in told[0] and "first installed" not in told[0]
        worktree = repo / ".worktrees" / "touch-typed-marker"
        # The shell runs what it is given: a command of ours arrives, the subject never did.
        tmux(tmux_socket, "send-keys", "-t", "=dt-touch-typed-marker:", "touch shell-alive", "Enter")
        await until(pilot, lambda: (worktree / "shell-alive").exists(), timeout=30)
        assert not (worktree / "typed-marker").exists()


async def test_status_source_tokens_and_todays_total(repo: Path, cli: CLI, tmux_socket: str,
                                                     only_codex: Path) -> None:
    cli.ok("worktree", "create", "w")
    cli.ok("session", "start", "w", "--agent", "codex")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(200, 50)) as pilot:
        screen = main_screen(app)
        screen.feed.today_interval = 0.2
        await until(pilot, lambda: "w" in screen.sessions)
        await select(pilot, screen, "w")
        table = screen.query_one(WorktreeTable)
        assert "source" in table.column_keys

        def source_glyph() -> str:
            return table.cell_text("w", "source")

        await until(pilot, lambda: source_glyph() in ("◆", "◇"), timeout=15)  # hooks, not output quiet
        tmux(tmux_socket, "send-keys", "-t", "=dt-w:", "do the thing", "Enter")  # one turn: the fake spends
        await until(pilot, lambda: screen.sessions["w"].status_source == "hooks", timeout=20)
        await until(pilot, lambda: source_glyph() == "◆")
        await until(pilot, lambda: " tok" in title_text(screen), timeout=20)
        await until(pilot, lambda: "today" in screen.title and "tok $" in screen.title, timeout=20)


async def test_budget_events_notify_once_each(repo: Path) -> None:
    project = Project.discover(repo)
    budget = {"scope": "daily", "subject": "2026-11-30", "unit": "cost", "limit": 5.0, "spent": 4.1}
    project.events.append("budget.warning", budget=budget, message="old warning from before")
    app = make_app(project)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.started)
        for _ in range(2):  # the same alert twice (a tick that repeats it) is shown once
            project.events.append("budget.warning", budget=budget, message="daily budget of today: $4.10 of $5")
            project.events.append("session.over_budget", worktree={"name": "w"}, agent="codex",
                                  budget={**budget, "scope": "per_session", "subject": "w"})
        await until(pilot, lambda: any("was interrupted" in t for t in toasts(app)))
        await until(pilot, lambda: any("$4.10 of $5" in t for t in toasts(app)))
        screen.feed.refresh_all()
        await pilot.pause(0.3)
        texts = toasts(app)
        assert len([t for t in texts if "$4.10 of $5" in t]) == 1
        assert len([t for t in texts if "w (codex) went over the per session budget" in t]) == 1
        assert not any("old warning" in t for t in texts)


def test_usage_text_and_budget_notice_keys() -> None:
    from daintree_tui.tui.agents_view import budget_notice, short_count, usage_text

    assert usage_text(None) == "" and usage_text({"tokens": {"total": 0}, "cost": 0}) == ""
    assert usage_text({"tokens": {"total": 12345}, "cost": 0.04321}) == "12.3k tok $0.04"
    assert short_count(999) == "999" and short_count(2_500_000) == "2.5M"
    first = budget_notice({"event": "budget.warning", "budget": {"scope": "daily", "limit": 5}, "message": "m"})
    raised = budget_notice({"event": "budget.warning", "budget": {"scope": "daily", "limit": 9}, "message": "m"})
    assert first and raised and first[0] != raised[0]  # a raised limit warns again
    assert budget_notice({"event": "session.running"}) is None


async def test_an_agent_that_dies_at_once_says_why(repo: Path, cli: CLI) -> None:
    """An agent that could not start (`bwrap: execvp claude: No such file or directory`) left a blank pane: tmux's
    "Pane is dead" line scrolled its only line out of view, and the toast said just "claude exited (1)"."""
    from tests.conftest import trusted_config

    trusted_config(repo, "[agents.broken]\ncommand = \"sh -c 'echo broken: cannot reach the service; exit 3'\"\n"
                         "[notifications]\nbell = false\n")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.started)
        await asyncio.to_thread(cli.ok, "worktree", "create", "dies", "--agent", "broken")
        await until(pilot, lambda: any("exited (3)" in str(t.render()) for t in app.screen.query("Toast")))
        toast = next(str(t.render()) for t in app.screen.query("Toast") if "exited (3)" in str(t.render()))
        assert "broken: cannot reach the service" in toast
