"""The dashboard through Pilot, over real repositories and real tmux sessions on a private socket."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.binding import Binding
from textual.widgets import Button, Checkbox, Input

from daintree_tui.core.project import Project
from daintree_tui.tui.app import DaintreeApp, make_app
from daintree_tui.tui.messages import SessionsPolled
from daintree_tui.tui.screens.confirm import ConfirmScreen
from daintree_tui.tui.screens.main import MainScreen
from daintree_tui.tui.screens.remove import RemoveScreen
from daintree_tui.tui.widgets.session_title import TYPING_HINT
from daintree_tui.tui.widgets.task_table import TaskTable
from daintree_tui.tui.widgets.terminal import TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.conftest import CLI, trusted_config
from tests.helpers.dashboard import configure, confirm, main_screen, on_screen, select, title_text, until

pytestmark = pytest.mark.usefixtures("tmux_socket", "cpu_load")

BURN = "while True: pass"


def start_burners(count: int = 2) -> list[subprocess.Popen[bytes]]:
    """CPU-bound processes at the tests' own niceness (0 when the suite runs plainly): agents compiling beside
    the dashboard is the normal case, and they get an equal share of the CPU, not less."""
    return [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(count)]


def busy_already() -> int:
    """About how many runnable processes besides this one the machine has (the 1-minute load average, this test
    counted out): other test workers, the user's builds, the two `yes` that `make test` must pass beside."""
    return max(0, int(os.getloadavg()[0]) - 1)


@pytest.fixture
def cpu_burners() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two CPU-bound processes beside the test that asks for them, counting those already there: in a parallel
    run the other workers are that load, and two burners more only took whole cores from them."""
    burners = start_burners(max(0, 2 - busy_already()))
    yield burners
    for proc in burners:
        proc.kill()
        proc.wait()


@pytest.fixture
def cpu_load(request: pytest.FixtureRequest) -> Iterator[None]:
    """With DAINTREE_TEST_CPU_LOAD=1 every dashboard test runs beside two burners."""
    if os.environ.get("DAINTREE_TEST_CPU_LOAD") != "1" or "cpu_burners" in request.fixturenames:
        yield
        return
    burners = start_burners()
    yield
    for proc in burners:
        proc.kill()
        proc.wait()


def index(repo: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((repo / ".worktrees" / "index.json").read_text())
    return {e["name"]: e for e in data["worktrees"]}


@pytest.mark.usefixtures("cpu_burners")
async def test_quick_create_from_n_then_type_into_terminal_and_leave(repo: Path) -> None:
    configure(repo)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MainScreen) and main_screen(app).started)
        await pilot.press("n")
        await on_screen(pilot, app, "NewTaskScreen")
        await pilot.press(*"Fix login bug")
        await pilot.press("enter")
        await until(pilot, lambda: "fix-login-bug" in index(repo) if (repo / ".worktrees/index.json").exists()
                    else False)
        # The task is bound to its worktree after the index has it: wait for the binding, then read what it says.
        task_file = repo / ".tasks" / "task_1.json"
        await until(pilot, lambda: task_file.exists() and json.loads(task_file.read_text()).get("worktree"))
        task = json.loads(task_file.read_text())
        assert task["subject"] == "Fix login bug" and task["worktree"] == "fix-login-bug"
        terminal = app.screen.query_one(TerminalView)
        await until(pilot, lambda: terminal.has_focus and terminal.worktree == "fix-login-bug")
        await until(pilot, lambda: "agent ready" in terminal.screen_text())
        await pilot.press(*"hello", "enter")
        log = repo / ".worktrees" / ".logs" / "fix-login-bug.log"
        await until(pilot, lambda: b"echo: hello" in log.read_bytes())
        await until(pilot, lambda: "echo: hello" in terminal.screen_text())
        # The row of the session on screen follows it too (it is not captured, the terminal shows it).
        await until(pilot, lambda: "echo: hello" in main_screen(app).previews.get("fix-login-bug", ""))
        await pilot.press("ctrl+q")  # goes to the agent, does not quit
        await pilot.pause(0.2)
        assert app.is_running
        # The footer offers only what works while typing here: the leave key, not the lists' keys.
        shown = {b.binding.action for b in app.screen.active_bindings.values() if b.binding.show}
        assert "leave" in shown and "new_task" not in shown and "quit" not in shown, shown
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: app.screen.query_one(WorktreeTable).has_focus)


async def test_a_repository_without_worktrees_says_how_to_make_one(repo: Path, cli: CLI) -> None:
    # It used to suggest enter and s, which do nothing without a worktree.
    configure(repo)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MainScreen) and main_screen(app).started)
        terminal = app.screen.query_one(TerminalView)
        shown = "".join(strip.text for strip in (terminal.render_line(y) for y in range(terminal.size.height)))
        assert "Press n to create a task and its worktree" in shown and "Press enter" not in shown
        cli.ok("worktree", "create", "first")
        await until(pilot, lambda: main_screen(app).selected == "first")
        await until(pilot, lambda: not terminal.no_worktree)


async def test_enter_on_task_without_worktree_starts_one(repo: Path, cli: CLI) -> None:
    configure(repo)
    cli.ok("task", "create", "Write docs")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: main_screen(app).tasks)
        app.screen.query_one(TaskTable).focus()
        await pilot.press("enter")
        await until(pilot, lambda: (repo / ".worktrees/index.json").exists() and "write-docs" in index(repo))
        terminal = app.screen.query_one(TerminalView)
        await until(pilot, lambda: terminal.has_focus and "agent ready" in terminal.screen_text())


@pytest.mark.usefixtures("cpu_burners")
async def test_switch_sessions_keep_and_palette(repo: Path, cli: CLI) -> None:
    configure(repo)
    for name in ("alpha", "beta"):
        cli.ok("worktree", "create", name, "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.sessions) == 2)
        terminal = screen.query_one(TerminalView)
        table = screen.query_one(WorktreeTable)
        await pilot.press("alt+2")
        await until(pilot, lambda: terminal.worktree == "beta")
        assert table.has_focus and screen.selected == "beta"
        await pilot.press("1")  # digits work where alt does not (inside tmux)
        await until(pilot, lambda: terminal.worktree == "alpha")
        # ] and [ move through the sessions; focus never goes into the terminal, so a second ] is not typed there
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: terminal.worktree == "beta")
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: terminal.worktree == "alpha")
        assert table.has_focus and "]" not in terminal.screen_text()
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: terminal.worktree == "beta" and screen.selected == "beta")
        await select(pilot, screen, "alpha")
        await pilot.press("k")  # asked first: keeping cannot be undone, and `k` is where a vim user moves up
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted)
        assert app.screen.question == "Keep alpha?"
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        assert index(repo)["alpha"]["status"] == "active"
        await pilot.press("k")
        await confirm(pilot, app)
        await until(pilot, lambda: index(repo)["alpha"]["status"] == "kept")
        await select(pilot, screen, "beta")
        await pilot.press("ctrl+p")
        await on_screen(pilot, app, "CommandPalette")
        await pilot.press(*"Keep")
        await until(pilot, lambda: "Keep: beta" in str([str(o.prompt) for o in
                                                        app.screen.query("OptionList").first().options]))
        await pilot.press("enter")
        await confirm(pilot, app)
        await until(pilot, lambda: index(repo)["beta"]["status"] == "kept")


async def test_remove_dialog_dirty_needs_second_confirmation(repo: Path, cli: CLI) -> None:
    def armed() -> bool:
        button = app.screen.query_one("#remove", Button)
        return "Yes, discard" in str(button.label) and not button.has_class("-active")

    configure(repo)
    cli.ok("task", "create", "t")
    cli.ok("worktree", "create", "dirty", "--task", "1")
    cli.ok("worktree", "create", "clean")
    (repo / ".worktrees" / "dirty" / "scratch.txt").write_text("unsaved")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.entries) == 2)
        await select(pilot, screen, "dirty")
        await pilot.press("x")
        await on_screen(pilot, app, "RemoveScreen")
        assert app.screen.dirty == ["scratch.txt"]
        await pilot.click("#remove")
        await until(pilot, armed)
        assert isinstance(app.screen, RemoveScreen)  # armed, not removed
        assert (repo / ".worktrees" / "dirty" / "scratch.txt").exists()
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        assert index(repo)["dirty"]["status"] == "active"
        await pilot.press("x")
        await on_screen(pilot, app, "RemoveScreen")
        await pilot.click("#complete")
        await pilot.click("#remove")
        await until(pilot, armed)  # a second, deliberate press: one within the first's effect is ignored
        await pilot.click("#remove")
        await until(pilot, lambda: index(repo)["dirty"]["status"] == "removed")
        # The entry is marked removed a moment before its task is completed (DESIGN 3's order): waited for, not
        # read in that moment.
        await until(pilot, lambda: json.loads((repo / ".tasks" / "task_1.json").read_text())["status"] == "completed")
        await until(pilot, lambda: [e.name for e in screen.entries] == ["clean"])
        await select(pilot, screen, "clean")
        await pilot.press("x")
        await on_screen(pilot, app, "RemoveScreen")
        await pilot.click("#remove")
        await until(pilot, lambda: index(repo)["clean"]["status"] == "removed")


async def test_a_confirmed_discard_loses_only_the_files_the_dialog_listed(repo: Path, cli: CLI) -> None:
    """The agent writes a file while the remove dialog is open: confirming twice discards what was listed, so
    the remove is refused and both files stay; a fresh dialog lists both and removes."""
    def armed() -> bool:
        button = app.screen.query_one("#remove", Button)
        return "Yes, discard" in str(button.label) and not button.has_class("-active")

    configure(repo)
    cli.ok("worktree", "create", "busy")
    tree = repo / ".worktrees" / "busy"
    (tree / "listed.txt").write_text("shown in the dialog")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.entries) == 1)
        await pilot.press("x")
        await on_screen(pilot, app, "RemoveScreen")
        assert app.screen.dirty == ["listed.txt"]
        (tree / "written-meanwhile.txt").write_text("the agent's newest work")
        await pilot.click("#remove")
        await until(pilot, armed)
        await pilot.click("#remove")
        await until(pilot, lambda: any("not removed" in str(t.render()) and "written-meanwhile.txt" in str(t.render())
                                       for t in app.screen.query("Toast")))
        assert index(repo)["busy"]["status"] == "active"
        assert (tree / "written-meanwhile.txt").read_text() == "the agent's newest work"
        assert (tree / "listed.txt").exists()
        await pilot.press("x")
        await on_screen(pilot, app, "RemoveScreen")
        assert sorted(app.screen.dirty) == ["listed.txt", "written-meanwhile.txt"]
        await pilot.click("#remove")
        await until(pilot, armed)
        await pilot.click("#remove")
        await until(pilot, lambda: index(repo)["busy"]["status"] == "removed")
        assert not tree.exists()


async def test_cli_change_appears_live(repo: Path, cli: CLI) -> None:
    configure(repo)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.feed.watching)
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.to_thread(cli.ok, "task", "create", "Made in another shell")
        await until(pilot, lambda: screen.query_one(TaskTable).row_count == 1, timeout=30)
        await asyncio.to_thread(cli.ok, "worktree", "create", "from-cli")
        await until(pilot, lambda: screen.query_one(WorktreeTable).row_count == 1, timeout=30)
        assert loop.time() - start < 5


async def test_filter_and_help(repo: Path, cli: CLI) -> None:
    configure(repo)
    cli.ok("task", "create", "apples")
    cli.ok("task", "create", "pears")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.query_one(TaskTable).row_count == 2)
        await pilot.press("slash", *"pear")
        await until(pilot, lambda: screen.query_one(TaskTable).row_count == 1)
        assert screen.query_one("#filter", Input).has_focus
        await pilot.press("enter", "question_mark")
        await on_screen(pilot, app, "HelpScreen")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))


async def test_worker_errors_become_notifications(repo: Path, cli: CLI) -> None:
    trusted_config(repo, 'default_agent = "ghost"\n[agents.ghost]\ncommand = "no-such-binary-x"\n')
    cli.ok("worktree", "create", "w")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.entries)
        await pilot.press("enter")
        await until(pilot, lambda: any("no-such-binary-x" in str(t.render()) for t in app.screen.query("Toast")))
        assert app.is_running


async def test_restart_with_a_missing_agent_keeps_the_running_one(repo: Path, cli: CLI, tmux_socket: str) -> None:
    """`s`, then an agent that is not installed: the running agent was stopped first, then the start failed."""
    configure(repo)
    trusted_config(repo, (repo / ".daintree.toml").read_text() + '[agents.ghost]\ncommand = "no-such-binary-x"\n')
    cli.ok("worktree", "create", "busy", "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "busy" in screen.sessions)
        await pilot.press("s")
        await on_screen(pilot, app, "AgentPickerScreen")
        from textual.widgets import OptionList

        options = app.screen.query_one(OptionList)
        ghost = options.get_option("ghost")  # shown as not installed; picking it says so and starts nothing
        assert "not installed" in str(ghost.prompt)
        options.highlighted = [options.get_option_at_index(i).id for i in range(options.option_count)].index("ghost")
        await pilot.press("enter")
        await until(pilot, lambda: any("ghost is not installed" in str(t.render()) for t in app.screen.query("Toast")))
        assert type(app.screen).__name__ == "AgentPickerScreen"
        await pilot.press("escape")
        await on_screen(pilot, app, "MainScreen")
        # One uninstalled after the picker opened is refused before anything stops (test_dashboard_agents).
    alive = subprocess.run(["tmux", "-L", tmux_socket, "has-session", "-t", "=dt-busy"], capture_output=True)
    assert alive.returncode == 0
    assert cli.json("session", "list")[0]["agent"] == "echo"


async def test_enter_on_an_exited_session_restarts_its_own_agent(repo: Path, cli: CLI) -> None:
    """`enter` on an exited session started the default agent instead of the one that had run there."""
    configure(repo)
    trusted_config(repo, (repo / ".daintree.toml").read_text()
                   + "[agents.once]\ncommand = \"sh -c 'echo once; exit 3'\"\n")
    cli.ok("worktree", "create", "done", "--agent", "once")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: (info := screen.sessions.get("done")) and info.status == "exited"
                    and screen.selected == "done" and screen.query_one(WorktreeTable).has_focus, timeout=30)
        first = screen.sessions["done"].started_at
        await pilot.press("enter")  # issue 12: enter on an exited session restarts that worktree's own agent
        await until(pilot, lambda: (info := screen.sessions.get("done")) and info.started_at != first, timeout=30)
        assert screen.sessions["done"].agent == "once"


async def test_quit_says_agents_keep_running(repo: Path, cli: CLI, tmux_socket: str) -> None:
    configure(repo)
    cli.ok("worktree", "create", "stay", "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: main_screen(app).sessions)
        await pilot.press("q")
        await until(pilot, lambda: app.exit_message)
    assert "keep running" in app.exit_message
    alive = subprocess.run(["tmux", "-L", tmux_socket, "has-session", "-t", "=dt-stay"], capture_output=True)
    assert alive.returncode == 0


@pytest.mark.usefixtures("cpu_burners")
async def test_full_flow_from_the_keyboard(repo: Path, cli: CLI) -> None:
    """Create a task, an agent works, review the diff, commit, merge back through a trusted pre_merge hook,
    remove the worktree and complete the task: every step in events.jsonl."""
    trusted_config(repo,
        'default_agent = "worker"\n'
        "[agents.worker]\ncommand = \"sh -c 'echo implemented > feature.txt; echo work done; cat'\"\n"
        '[hooks]\npre_merge = ["test -f feature.txt"]\n[notifications]\nbell = false\n')
    git_commit_config(repo)
    cli.ok("trust")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.started)
        await pilot.press("n", *"Add feature", "enter")
        await until(pilot, lambda: (repo / ".worktrees/add-feature/feature.txt").exists())
        # The agent may write its file before the dashboard has its worktree (seen with the machine busy): the
        # leave key and `d` are for the terminal the user sees, once it is there.
        await until(pilot, lambda: screen.terminal_focused and screen.terminal.worktree == "add-feature")
        await pilot.press("ctrl+right_square_bracket", "d")
        from daintree_tui.tui.widgets.diff_view import DiffView

        await until(pilot, lambda: "feature.txt" in "\n".join(str(line.text) for line in
                                                              screen.query_one(DiffView).lines))
        await pilot.press("C")
        await on_screen(pilot, app, "CommitScreen")
        await pilot.press("enter")
        await until(pilot, lambda: "Add feature" in subprocess.run(
            ["git", "-C", str(repo), "log", "-1", "--format=%s", "wt/add-feature"], capture_output=True,
            text=True).stdout)
        await pilot.press("m")
        await on_screen(pilot, app, "MergeScreen")
        await pilot.click("#merge")
        await until(pilot, lambda: index(repo)["add-feature"]["status"] == "removed", timeout=30)
        # the index says "removed" before the flow appends its last events: wait for them, not for luck
        await until(pilot, lambda: '"worktree.remove.after"' in (repo / ".worktrees/events.jsonl").read_text(),
                    timeout=30)
    assert (repo / "feature.txt").read_text() == "implemented\n"
    assert json.loads((repo / ".tasks" / "task_1.json").read_text())["status"] == "completed"
    names = [json.loads(line)["event"] for line in (repo / ".worktrees/events.jsonl").read_text().splitlines()]
    for expected in ("task.created", "worktree.create.after", "session.started", "worktree.commit",
                     "hook.ran", "worktree.merge.after", "worktree.remove.after", "task.completed"):
        assert expected in names, expected


def git_commit_config(repo: Path) -> None:
    subprocess.run(["git", "-C", str(repo), "add", ".daintree.toml"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "config"], check=True)


async def test_keys_remap_from_config_and_previews(repo: Path, cli: CLI) -> None:
    configure(repo)
    with (repo / ".daintree.toml").open("a") as fh:
        fh.write('[keys]\nkeep = "K"\nleave_terminal = "ctrl+g"\n')
    cli.ok("trust")  # the file changed since it was trusted
    cli.ok("worktree", "create", "one", "--agent", "echo")
    cli.ok("worktree", "create", "two", "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.sessions) == 2)
        table = screen.query_one(WorktreeTable)
        await select(pilot, screen, "one")
        assert "k" not in screen.active_bindings and screen.active_bindings["K"].binding.action == "keep"
        await pilot.press("K")
        await confirm(pilot, app)
        await until(pilot, lambda: index(repo)["one"]["status"] == "kept")
        terminal = screen.query_one(TerminalView)
        await pilot.press("enter")
        await until(pilot, lambda: terminal.has_focus)
        await pilot.press("ctrl+g")
        await until(pilot, lambda: table.has_focus)
        # the session not on screen is previewed in its row
        await until(pilot, lambda: "agent ready" in screen.previews.get("two", ""))


async def test_warnings_are_toasts_not_lines_over_the_screen(repo: Path, cli: CLI,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    """A warning written to stderr lands on top of the dashboard (seen over its footer). The config's unknown
    key and a `keys.<id>` that no binding has (a typo remaps nothing) are toasts, each once."""
    configure(repo)
    with (repo / ".daintree.toml").open("a") as fh:
        fh.write('bogus_key = 1\n[keys]\nkeep = "K"\nnew_taks = "N"\ndialog_cancel = "ctrl+x"\n')
    cli.ok("trust")
    capfd.readouterr()
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        def toasts() -> list[str]:
            return [str(t.render()) for t in app.screen.query("Toast")]

        await until(pilot, lambda: any("keys.new_taks remaps nothing" in t for t in toasts()))
        await until(pilot, lambda: any("unknown keys ignored: notifications.bogus_key" in t for t in toasts()))
        assert not any("keep" in t or "dialog_cancel" in t for t in toasts()), toasts()  # ids that exist
        assert len(toasts()) == 2, toasts()
    assert "warning" not in capfd.readouterr().err


async def test_tmux_server_killed_under_the_dashboard(repo: Path, cli: CLI, tmux_socket: str) -> None:
    configure(repo)
    cli.ok("worktree", "create", "victim", "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "victim" in screen.sessions)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: terminal.worktree == "victim")
        subprocess.run(["tmux", "-L", tmux_socket, "kill-server"], check=True)
        await on_screen(pilot, app, "ConfirmScreen", timeout=30)
        assert "victim (echo)" in str(app.screen.body)
        buttons = await until(pilot, lambda: app.screen.query("#yes"))
        buttons.first(Button).press()  # a toast may sit over the button: press it, don't click
        await until(pilot, lambda: "victim" in screen.sessions, timeout=30)
        log = repo / ".worktrees" / ".logs" / "victim.log"
        await until(pilot, lambda: log.read_bytes().count(b"agent ready") == 2)
        assert app.is_running


async def test_bakeoff_view_scores_and_picks(repo: Path, cli: CLI) -> None:
    trusted_config(repo,
        'default_agent = "x"\n'
        "[agents.x]\ncommand = \"sh -c 'echo 2 > n.txt; git add -A; git commit -qm x; exec cat'\"\n"
        "[agents.y]\ncommand = \"sh -c 'echo 9 > n.txt; git add -A; git commit -qm y; exec cat'\"\n"
        '[bakeoff]\nscore = "echo SCORE: $(cat n.txt)"\n[notifications]\nbell = false\n')
    cli.ok("task", "create", "Pick a number")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(140, 45)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.tasks)
        screen.query_one(TaskTable).focus()
        await pilot.press("b")
        await on_screen(pilot, app, "BakeoffNewScreen")
        from textual.widgets import SelectionList

        app.screen.query_one(SelectionList).select("y")
        await pilot.click("#start")
        await on_screen(pilot, app, "BakeoffScreen", timeout=30)
        terminals = list(app.screen.query(TerminalView))
        assert len(terminals) == 2
        await until(pilot, lambda: all(t.attached for t in terminals))
        def committed(name: str) -> bool:
            # An agent's commit reaches its branch when daintree looks (core/agent_git.py): this look brings it in.
            from daintree_tui.core.index import Index, find
            from daintree_tui.core.sandbox import bring_in

            project = Project.discover(repo)
            entry = find(Index(project).load(), name)
            if entry is not None:
                bring_in(project, entry)
            out = subprocess.run(["git", "-C", str(repo), "rev-list", "--count", f"main..wt/{name}"],
                                 capture_output=True, text=True).stdout.strip()
            return out == "1"

        await until(pilot, lambda: committed("pick-a-number-x") and committed("pick-a-number-y"), timeout=60)
        await pilot.press("r")
        from textual.widgets import DataTable

        board = app.screen.query_one("#scoreboard", DataTable)
        await until(pilot, lambda: board.row_count == 2 and str(board.get_row_at(0)[4]) == "9")
        assert str(board.get_row_at(0)[1]) == "pick-a-number-y"
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, MainScreen), timeout=30)
        await until(pilot, lambda: (repo / "n.txt").exists())
    assert (repo / "n.txt").read_text() == "9\n"
    assert json.loads((repo / ".tasks" / "task_1.json").read_text())["status"] == "completed"


async def test_bakeoff_key_races_on_the_current_worktrees_task_not_the_unfocused_task_cursor(
        repo: Path, cli: CLI) -> None:
    """Tried for real: with a worktree current in the worktree list, `b` opened a bake-off for the task under the
    tasks list's cursor (unfocused, on the first task), not for the task of the worktree on screen."""
    configure(repo)
    cli.ok("task", "create", "First task")
    cli.ok("task", "create", "Second task")
    cli.ok("worktree", "create", "second", "--task", "2")
    cli.ok("worktree", "create", "loose")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(140, 45), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.tasks) == 2 and len(screen.entries) == 2)
        assert screen.query_one(TaskTable).selected_task_id == 1  # its cursor stays on the first task
        screen.query_one(WorktreeTable).focus()
        await select(pilot, screen, "second")
        await pilot.press("b")
        await on_screen(pilot, app, "BakeoffNewScreen")
        assert app.screen.subject == "Second task"  # type: ignore[attr-defined]
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        await select(pilot, screen, "loose")  # a worktree of no task: say so, don't take the cursor's
        await pilot.press("b")
        await until(pilot, lambda: any("loose has no task" in str(t.render())
                                         for t in app.screen.query("Toast")))
        assert isinstance(app.screen, MainScreen)
        screen.query_one(TaskTable).focus()  # in the tasks list, the task under its cursor
        await pilot.press("b")
        await on_screen(pilot, app, "BakeoffNewScreen")
        assert app.screen.subject == "First task"  # type: ignore[attr-defined]


async def test_a_merge_of_uncommitted_work_names_the_commit_key_not_the_cli(repo: Path, cli: CLI) -> None:
    """Tried for real: `m` on a worktree with uncommitted files said "commit them first: daintree worktree commit",
    a command for another terminal, where the dashboard's own key commits. The CLI keeps its words."""
    trusted_config(repo, '[keys]\ncommit = "ctrl+k"\n[notifications]\nbell = false\n')
    cli.ok("worktree", "create", "w")
    (repo / ".worktrees" / "w" / "new.txt").write_text("work\n")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.entries)
        await select(pilot, screen, "w")
        await pilot.press("m")

        def said() -> str:
            return " ".join(str(t.render()) for t in app.screen.query("Toast"))

        await until(pilot, lambda: "uncommitted" in said())
        assert "press ctrl+k to commit them" in said() and "daintree worktree commit" not in said(), said()
        assert isinstance(app.screen, MainScreen)  # refused before the merge dialog, not after it
    refused = cli("worktree", "merge", "w")
    assert refused.returncode == 1 and "daintree worktree commit" in refused.stderr


async def test_the_trust_prompt_of_an_edited_trusted_config_says_so_and_shows_the_change(repo: Path) -> None:
    """An edited, once-trusted `.daintree.toml` was asked about as if never trusted: the prompt now says it changed
    and shows how."""
    trusted_config(repo, '[hooks]\npost_create = ["echo first"]\n[notifications]\nbell = false\n')
    (repo / ".daintree.toml").write_text('[hooks]\npost_create = ["echo first", "echo added"]\n'
                                         '[notifications]\nbell = false\n')
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        await on_screen(pilot, app, "ConfirmScreen")
        prompt = app.screen
        assert "changed since you trusted it" in prompt.question  # type: ignore[attr-defined]
        assert '+post_create = ["echo first", "echo added"]' in prompt.body  # type: ignore[attr-defined]
        assert '-post_create = ["echo first"]' in prompt.body  # type: ignore[attr-defined]


async def test_auto_queue_and_approval_prompt(repo: Path, cli: CLI) -> None:
    trusted_config(repo,
        "max_sessions = 1\n[agents.job]\ncommand = \"sh -c 'exit 0'\"\n"
        '[roles.careful]\nallow = ["remove"]\napproval = "human"\n[notifications]\nbell = false\n')
    cli.ok("task", "create", "queued job", "--agent", "job")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.started)
        await pilot.press("a")
        await until(pilot, lambda: json.loads((repo / ".tasks" / "task_1.json").read_text())["status"]
                    == "completed", timeout=20)
        cli.ok("task", "create", "careful one", "--role", "careful")
        cli.ok("worktree", "create", "careful", "--task", "2")
        await asyncio.to_thread(cli, "worktree", "remove", "careful", env={"DAINTREE_WORKTREE": "careful"})
        await on_screen(pilot, app, "ConfirmScreen", timeout=30)
        assert "remove" in str(app.screen.question)
        buttons = await until(pilot, lambda: app.screen.query("#yes"))
        buttons.first(Button).press()
        await until(pilot, lambda: index(repo)["careful"]["status"] == "removed", timeout=30)


@pytest.mark.usefixtures("cpu_burners")
async def test_waiting_session_raises_a_notification_and_paste_is_bracketed(repo: Path, cli: CLI) -> None:
    trusted_config(repo,
        # It shows a prompt: an agent that has drawn nothing is `starting`, never `waiting` (sessions/status.py).
        "[agents.paster]\ncommand = \"sh -c 'printf \\\"\\\\033[?2004hpaste here> \\\"; stty raw -echo; exec od -c'\"\n"
        "[sessions]\nwaiting_debounce = 0.5\n[notifications]\nbell = false\ndesktop = false\n")
    cli.ok("worktree", "create", "p", "--agent", "paster")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "p" in screen.sessions)
        await until(pilot, lambda: any("waiting for you" in str(t.render()) for t in app.screen.query("Toast")))
        terminal = screen.query_one(TerminalView)
        screen.attach_and_focus("p")
        await until(pilot, lambda: terminal.attached and terminal.emulator.bracketed_paste)
        from textual import events as textual_events

        terminal.post_message(textual_events.Paste("abcdefghijklmnopqrstuvwxyz0123456789"))
        log = repo / ".worktrees" / ".logs" / "p.log"
        # od -c prints what arrived, 16 bytes a line: ESC [ 2 0 0 ~ a b c ...
        await until(pilot, lambda: "2   0   0   ~   a   b   c" in log.read_text(errors="replace"))


async def test_terminal_resizes_the_pty_with_the_widget(repo: Path, cli: CLI, tmux_socket: str) -> None:
    configure(repo)
    cli.ok("worktree", "create", "sized", "--agent", "echo")

    def pane_width() -> int:
        out = subprocess.run(["tmux", "-L", tmux_socket, "display-message", "-p", "-t", "=dt-sized:",
                              "#{pane_width}"], capture_output=True, text=True).stdout.strip()
        return int(out or 0)

    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "sized" in screen.sessions)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: terminal.worktree == "sized")
        await until(pilot, lambda: pane_width() == terminal.size.width)
        before = terminal.size.width
        await pilot.resize_terminal(150, 40)
        await until(pilot, lambda: terminal.size.width > before)
        await until(pilot, lambda: pane_width() == terminal.size.width)


async def test_mouse_wheel_scrolls_back_through_tmux_copy_mode(repo: Path, cli: CLI, tmux_socket: str) -> None:
    trusted_config(repo,
        "[agents.chatty]\ncommand = \"sh -c 'seq 1 300; exec cat'\"\n[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "scroll", "--agent", "chatty")

    def in_copy_mode() -> bool:
        out = subprocess.run(["tmux", "-L", tmux_socket, "display-message", "-p", "-t", "=dt-scroll:",
                              "#{pane_in_mode}"], capture_output=True, text=True).stdout.strip()
        return out == "1"

    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "scroll" in screen.sessions)
        terminal = screen.query_one(TerminalView)
        screen.attach_and_focus("scroll")
        await until(pilot, lambda: "300" in terminal.screen_text() and terminal.emulator.mouse_tracking)
        assert not in_copy_mode()
        from textual import events as textual_events

        for _ in range(3):
            terminal.post_message(textual_events.MouseScrollUp(terminal, 5, 5, 0, -1, 0, False, False, False))
        await until(pilot, in_copy_mode)
        await until(pilot, lambda: "300" not in terminal.screen_text())  # showing older lines now


async def test_operations_do_not_add_poll_chains(repo: Path, cli: CLI) -> None:
    """Each operation asks for a poll now; however many ask, the polls stay at the base rate (one chain)."""
    configure(repo)
    cli.ok("worktree", "create", "busy", "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "busy" in screen.sessions)
        feed = screen.feed
        feed.poll_interval = feed.idle_interval = 0.25  # base rate: at most 4 polls a second
        for _ in range(10):  # operations, detaches and auto-queue toggles each ask for a poll
            feed.poll_now()
            await pilot.pause(0.02)
        await pilot.press("a", "a")
        await until(pilot, lambda: not feed._polling)
        loop = asyncio.get_running_loop()
        start, polls = loop.time(), feed.polls
        await pilot.pause(2.0)
        rate = (feed.polls - polls) / (loop.time() - start)
        # one chain polls at most 1 / 0.25 s; the leak this guards against ran one chain per request (12+)
        assert 0 < rate <= 5, rate


def test_ansi_colours_pass_through_as_ansi() -> None:
    from rich.color import ColorType

    from daintree_tui.sessions.emulator import TerminalEmulator
    from daintree_tui.tui.widgets.terminal_render import cell_style

    emulator = TerminalEmulator(20, 2)
    # 30-37 / 90-97 / 38;5;0-15 / 48;5;N: ANSI; 38;5;80: 256-colour; 38;2: truecolor; 0: default
    emulator.feed(b"\x1b[36mA\x1b[38;5;6mB\x1b[48;5;9mC\x1b[0;95mD\x1b[0;38;5;80mE\x1b[38;2;1;2;3mF\x1b[0mG")
    cells = [emulator.screen.buffer[0][x] for x in range(7)]
    styles = [cell_style(c.fg, c.bg, c.bold, c.italics, c.underscore, c.reverse, c.strikethrough, c.blink)
              for c in cells]
    colour = [s.color for s in styles]
    assert all(c is not None for c in colour)
    assert [c.type for c in colour[:4]] == [ColorType.STANDARD] * 4  # type: ignore[union-attr]
    assert colour[0] == colour[1]  # 38;5;6 is the same ANSI cyan as 36
    assert styles[2].bgcolor is not None and styles[2].bgcolor.type == ColorType.STANDARD
    assert styles[2].bgcolor.number == 9
    assert colour[3].number == 13  # type: ignore[union-attr]
    assert colour[4].type == ColorType.TRUECOLOR and colour[4].triplet.hex == "#5fd7d7"  # type: ignore[union-attr]
    assert colour[5].triplet.hex == "#010203"  # type: ignore[union-attr]
    assert colour[6].type == ColorType.DEFAULT  # type: ignore[union-attr]
    assert styles[6].bgcolor is not None and styles[6].bgcolor.type == ColorType.DEFAULT


def test_status_hysteresis_ignores_blips() -> None:
    from daintree_tui.sessions.status import SessionStatus as S
    from daintree_tui.sessions.status import StatusHysteresis

    h = StatusHysteresis(hold=1.5)
    assert h.settle("a", S.WAITING, 0.0) == S.WAITING  # first sight counts at once
    assert h.settle("a", S.RUNNING, 1.0) == S.WAITING  # a burst of output (a redraw, a keystroke echo)
    assert h.settle("a", S.WAITING, 2.0) == S.WAITING
    assert h.settle("a", S.RUNNING, 3.0) == S.WAITING
    assert h.settle("a", S.RUNNING, 4.6) == S.RUNNING  # held 1.6 s: real work
    assert h.settle("a", S.EXITED, 4.7) == S.EXITED  # exits count at once
    assert h.settle("b", S.STARTING, 0.0) == S.STARTING
    assert h.settle("b", S.RUNNING, 0.5) == S.RUNNING  # leaving `starting` is not held back


def test_worktree_columns_hide_by_priority() -> None:
    from daintree_tui.tui.widgets.worktree_table import fit_columns

    def keys(width: int) -> list[str]:
        return [c.key for c, _ in fit_columns(width, 14)]

    assert keys(34) == ["n", "name", "session", "source"]  # 80 columns: the sidebar's minimum
    assert keys(50) == ["n", "name", "session", "source", "dirty", "ab"]  # 120 columns
    assert keys(63)[:7] == ["n", "name", "session", "source", "dirty", "ab", "activity"]  # 200 columns
    assert keys(31) == ["n", "name", "session"]  # the status source goes first
    for width in (34, 50, 63, 120):
        assert sum(w + 2 for _, w in fit_columns(width, 14)) <= width
    # a quick-created worktree's long name ("add-a-logout-endpoint") hid the session number at 80 columns
    long_name = fit_columns(33, 21)
    assert [c.key for c, _ in long_name] == ["n", "name", "session"]
    assert sum(w + 2 for _, w in long_name) <= 33


# -- one current worktree ----------------------------------------------------------------------------------------


def consistent(screen: MainScreen, name: str) -> bool:
    """The header, the table's cursor and what the actions act on all name `name`."""
    table = screen.query_one(WorktreeTable)
    return (screen.selected == name and f" {name} " in title_text(screen)
            and (not table.show_cursor or table.cursor_name() == name))


async def test_create_makes_the_new_worktree_current(repo: Path, cli: CLI) -> None:
    configure(repo)
    for name in ("alpha", "beta"):
        cli.ok("worktree", "create", name, "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.sessions) == 2 and screen.selected == "alpha")
        await pilot.press("n")
        await on_screen(pilot, app, "NewTaskScreen")
        await pilot.press(*"Gamma ray", "enter")
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: terminal.worktree == "gamma-ray" and terminal.has_focus)
        table = screen.query_one(WorktreeTable)
        await until(pilot, lambda: table.show_cursor and table.cursor_name() == "gamma-ray")
        assert consistent(screen, "gamma-ray")
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: table.has_focus)
        await pilot.press("k")  # acts on the new worktree, not on row 1
        await confirm(pilot, app)
        await until(pilot, lambda: index(repo)["gamma-ray"]["status"] == "kept")
        assert index(repo)["alpha"]["status"] == "active"


async def test_filter_then_escape_keeps_one_current_worktree(repo: Path, cli: CLI) -> None:
    configure(repo)
    for name in ("apple", "banana", "cherry"):
        cli.ok("worktree", "create", name)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.entries) == 3)
        await select(pilot, screen, "banana")
        await pilot.press("slash", *"cher", "enter")
        await until(pilot, lambda: consistent(screen, "cherry"))  # the one row shown is the current one
        await pilot.press("escape")
        await until(pilot, lambda: screen.query_one(WorktreeTable).row_count == 3)
        await until(pilot, lambda: consistent(screen, "cherry"))
        await pilot.press("k")
        await confirm(pilot, app)
        await until(pilot, lambda: index(repo)["cherry"]["status"] == "kept")
        assert index(repo)["banana"]["status"] == index(repo)["apple"]["status"] == "active"


async def test_remove_moves_to_a_neighbour_and_never_shows_the_removed(repo: Path, cli: CLI) -> None:
    configure(repo)
    for name in ("one", "two", "three"):
        cli.ok("worktree", "create", name, "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.sessions) == 3)
        await select(pilot, screen, "two")
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: terminal.worktree == "two")
        await pilot.press("x")
        await on_screen(pilot, app, "RemoveScreen")
        await pilot.click("#remove")
        await until(pilot, lambda: index(repo)["two"]["status"] == "removed")
        await until(pilot, lambda: consistent(screen, "three"))
        assert " two " not in title_text(screen) and terminal.worktree != "two"
        await until(pilot, lambda: terminal.worktree == "three")


async def test_merge_with_remove_clears_the_diff(repo: Path, cli: CLI) -> None:
    (repo / ".daintree.toml").write_text("[notifications]\nbell = false\n")
    git_commit_config(repo)
    cli.ok("worktree", "create", "keepme")
    cli.ok("worktree", "create", "feature")
    wt = repo / ".worktrees" / "feature"
    (wt / "new.txt").write_text("new\n")
    subprocess.run(["git", "-C", str(wt), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(wt), "commit", "-qm", "feature"], check=True)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.entries) == 2)
        await select(pilot, screen, "feature")
        await pilot.press("d")
        from daintree_tui.tui.widgets.diff_view import DiffView

        diff = screen.query_one(DiffView)
        await until(pilot, lambda: diff.worktree == "feature")
        await pilot.press("m")
        await on_screen(pilot, app, "MergeScreen")
        await pilot.click("#merge")
        await until(pilot, lambda: index(repo)["feature"]["status"] == "removed", timeout=30)
        await until(pilot, lambda: consistent(screen, "keepme"))
        await until(pilot, lambda: diff.worktree != "feature"
                    and "feature" not in "\n".join(str(line.text) for line in diff.lines))


async def test_a_failed_merge_that_was_to_remove_shows_the_session_again(repo: Path, cli: CLI) -> None:
    # The terminal let go of the session before merging (to remove it after) and said "No session here" when
    # the merge failed, although the agent was still running.
    configure(repo)
    git_commit_config(repo)
    cli.ok("worktree", "create", "feat", "--agent", "echo")
    wt = repo / ".worktrees" / "feat"
    (wt / "feat.txt").write_text("feat\n")
    subprocess.run(["git", "-C", str(wt), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(wt), "commit", "-qm", "feat"], check=True)
    (repo / "main.txt").write_text("main moved on\n")  # diverged: a fast-forward merge is refused
    subprocess.run(["git", "-C", str(repo), "add", "main.txt"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "main"], check=True)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: terminal.worktree == "feat")
        # Settled: no later poll brings a change that would attach the terminal again by itself.
        await until(pilot, lambda: "feat" in screen.sessions and screen.sessions["feat"].status == "waiting")
        await pilot.press("m")
        await on_screen(pilot, app, "MergeScreen")
        assert app.screen.query_one("#remove", Checkbox).value  # "remove afterwards" is ticked
        await pilot.click("#merge")
        await until(pilot, lambda: any("diverged" in str(t.render()) for t in app.screen.query("Toast")))
        await until(pilot, lambda: terminal.worktree == "feat")
        assert index(repo)["feat"]["status"] == "active"


async def test_commit_on_a_clean_worktree_says_so_instead_of_opening_the_dialog(repo: Path, cli: CLI) -> None:
    cli.ok("worktree", "create", "clean")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.selected == "clean")
        await pilot.press("C")
        await until(pilot, lambda: any("Nothing to commit in clean" in str(t.render())
                                       for t in app.screen.query("Toast")))
        assert isinstance(app.screen, MainScreen)


async def test_external_changes_keep_the_current_worktree_right(repo: Path, cli: CLI) -> None:
    configure(repo)
    for name in ("first", "second"):
        cli.ok("worktree", "create", name)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.entries) == 2)
        await select(pilot, screen, "second")
        await asyncio.to_thread(cli.ok, "worktree", "create", "third")
        await until(pilot, lambda: len(screen.entries) == 3)
        assert consistent(screen, "second")  # a new row elsewhere does not move the selection
        await asyncio.to_thread(cli.ok, "worktree", "remove", "second")
        await until(pilot, lambda: len(screen.entries) == 2)
        await until(pilot, lambda: consistent(screen, "third"))


async def test_typing_hint_leaves_with_focus(repo: Path, cli: CLI) -> None:
    configure(repo)
    cli.ok("worktree", "create", "hint", "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "hint" in screen.sessions)
        await pilot.press("enter")
        await until(pilot, lambda: TYPING_HINT in title_text(screen))
        await pilot.click("#worktrees")  # the mouse, not the leave key
        await until(pilot, lambda: screen.query_one(WorktreeTable).has_focus)
        await until(pilot, lambda: TYPING_HINT not in title_text(screen))


@pytest.mark.parametrize("size", [(120, 40), (100, 30)], ids=["120x40", "100x30"])
async def test_typing_hint_shows_the_leave_key_beside_a_long_name(repo: Path, cli: CLI, size: tuple[int, int]) -> None:
    """At 120 columns a quick-created worktree's name pushed "ctrl+] leaves" past the title's edge; at 100 the
    agent's name and status did."""
    from daintree_tui.tui.widgets.session_title import SessionTitle

    configure(repo)
    cli.ok("worktree", "create", "add-a-logout-endpoint", "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=size) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "add-a-logout-endpoint" in screen.sessions)
        await pilot.press("enter")
        await until(pilot, lambda: TYPING_HINT in title_text(screen))
        title = screen.query_one(SessionTitle)
        await until(pilot, lambda: "⌨" in title.render_line(0).text)
        assert "ctrl+] leaves" in title.render_line(0).text


async def test_sessions_start_at_the_size_the_dashboard_shows(repo: Path, cli: CLI, tmux_socket: str) -> None:
    from daintree_tui.sessions.pane_size import DEFAULT_SIZE, load_pane_size, ui_state_path

    configure(repo)
    project = Project.discover(repo)
    app = make_app(project)
    async with app.run_test(size=(110, 33)) as pilot:
        screen = main_screen(app)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: screen.started and terminal.size.width > 0)
        shown = (terminal.size.width, terminal.size.height)
        await until(pilot, lambda: load_pane_size(project) == shown)
    # started from the CLI with no dashboard running: at the size the dashboard will show it at
    cli.ok("worktree", "create", "sized", "--agent", "echo")
    out = subprocess.run(["tmux", "-L", tmux_socket, "display-message", "-p", "-t", "=dt-sized:",
                          "#{pane_width}x#{pane_height}"], capture_output=True, text=True).stdout.strip()
    assert out == f"{shown[0]}x{shown[1]}"
    for junk in ("not json", '{"pane_size": [1, 2]}', '{"pane_size": "wide"}', "[]"):
        ui_state_path(project).write_text(junk)
        assert load_pane_size(project) == DEFAULT_SIZE


async def test_zoom_and_full_screen_diff(repo: Path, cli: CLI) -> None:
    configure(repo)
    cli.ok("worktree", "create", "big", "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(app)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: terminal.worktree == "big")
        narrow = terminal.size.width
        await pilot.press("z")
        await until(pilot, lambda: terminal.size.width == 100 and terminal.has_focus)
        await pilot.press("escape")  # the agent's key (it interrupts claude), so the zoom stays, as help says
        await pilot.pause(0.3)
        assert screen.has_class("zoomed") and terminal.has_focus
        zoom_help = next(b.tooltip for b in MainScreen.BINDINGS if isinstance(b, Binding) and b.id == "zoom")
        assert "ctrl+]" in zoom_help and "esc to come back" not in zoom_help and "or esc" not in zoom_help
        await pilot.press("ctrl+right_square_bracket")  # leaving the terminal leaves the zoom
        await until(pilot, lambda: terminal.size.width == narrow and screen.query_one(WorktreeTable).has_focus)
        await pilot.press("D")
        from daintree_tui.tui.widgets.diff_view import DiffView

        diff = screen.query_one(DiffView)
        await until(pilot, lambda: diff.worktree == "big" and diff.size.width >= 95 and diff.size.height > 20)
        await pilot.press("escape")
        await until(pilot, lambda: terminal.display and diff.size.height < 20 and screen.selected == "big")


def test_docs_key_table_is_the_bindings() -> None:
    """The docs' dashboard keys (docs/dashboard.md) are the bindings' own keys, ids and help, in order."""
    from daintree_tui.tui.bindings import key_rows, markdown_key_table
    from daintree_tui.tui.screens.actions import every_binding

    page = (Path(__file__).resolve().parent.parent / "docs" / "dashboard.md").read_text()
    section = page.split("## Keys\n", 1)[1].split("\n## ", 1)[0]
    documented = [line for line in section.splitlines() if line.startswith("|")]
    bindings = every_binding(MainScreen.BINDINGS, DaintreeApp.BINDINGS, DaintreeApp.COMMAND_PALETTE_BINDING)
    assert documented == markdown_key_table(key_rows(bindings, {}, MainScreen, lambda b: b.key))


def test_help_and_palette_come_from_the_bindings() -> None:
    """Every binding with an id appears in help; `needs_worktree` marks exactly the actions that act on one."""
    from textual.binding import Binding

    from daintree_tui.tui.bindings import acts_on_worktree, key_rows
    from daintree_tui.tui.screens.actions import every_binding

    bindings = every_binding(MainScreen.BINDINGS, DaintreeApp.BINDINGS, "ctrl+p")
    rows = key_rows(bindings, {"keep": "K"}, MainScreen, lambda b: b.key)
    ids = {row.binding_id for row in rows}
    assert {b.id for b in bindings if isinstance(b, Binding) and b.group is None} <= ids
    assert next(r for r in rows if r.binding_id == "keep").keys == "K"  # the user's keymap shows
    marked = {r.action for r in rows if r.needs_worktree}
    assert {"keep", "remove", "diff", "commit", "merge", "pr"} <= marked
    assert not {"new_task", "help", "filter", "quit_dashboard"} & marked
    assert acts_on_worktree(MainScreen, "remove") and not acts_on_worktree(MainScreen, "zoom")


async def test_type_ahead_never_reaches_the_dashboard_keys(repo: Path, cli: CLI) -> None:
    """`/cart` or `n` + a subject typed in one burst (as tmux send-keys or a fast typist does): the letters go
    to the filter or the dialog, never to `c` (copy), `a` (auto queue) or `x` (remove)."""
    from textual import events

    configure(repo)
    for name in ("apple", "cart"):
        cli.ok("worktree", "create", name)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.entries) == 2)

        def burst(keys: list[str]) -> None:
            for key in keys:
                app.post_message(events.Key(key, key if len(key) == 1 else None))

        burst(["slash", *"cart"])
        box = screen.query_one("#filter", Input)
        await until(pilot, lambda: box.value == "cart")
        assert not screen.auto_queue
        burst(["escape"])
        await until(pilot, lambda: not box.display)
        burst(["n", *"ax"])
        await on_screen(pilot, app, "NewTaskScreen")
        subject = app.screen.query_one("#subject", Input)
        await until(pilot, lambda: subject.value == "ax")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        assert not screen.auto_queue and all(e["status"] == "active" for e in index(repo).values())


async def test_filter_and_escape_keep_the_row_order(repo: Path, cli: CLI) -> None:
    configure(repo)
    for name in ("first", "second", "third"):
        cli.ok("worktree", "create", name)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        table = screen.query_one(WorktreeTable)
        await until(pilot, lambda: table.row_count == 3)
        await pilot.press("slash", *"sec", "enter")
        await until(pilot, lambda: table.row_count == 1)
        await pilot.press("escape")
        await until(pilot, lambda: table.row_count == 3)
        assert [str(k.value) for k in table.rows] == ["first", "second", "third"]
        assert consistent(screen, "second")


async def test_narrow_footer_drops_the_palette_hint(repo: Path, cli: CLI) -> None:
    """At 80 columns the footer kept "^p palette" and cut "q Quit" to "q Qui"."""
    configure(repo)
    cli.ok("worktree", "create", "w", "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "w" in screen.sessions)
        await until(pilot, lambda: screen.query("FooterKey"))
        await pilot.pause(0.3)
        assert not screen.query(".-command-palette")
        await pilot.resize_terminal(120, 40)
        await until(pilot, lambda: screen.query(".-command-palette"))


async def test_notifications_show_terminal_controls_never_send_them(repo: Path) -> None:
    """Notices carry names, task text, errors and remote hosts' words; Textual writes a toast's text to the
    terminal as it is, so an OSC or CSI in it would retitle, clear or write the clipboard of the user's terminal."""
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        app.notify("host says \x1b]2;PWNED\x07\x1b[2J hello", title="from \x1b[31mfar")
        toasts = await until(pilot, lambda: app.screen.query("Toast"))
        shown = " ".join(str(toast.render()) for toast in toasts)
        assert "PWNED" in shown and "hello" in shown and "\x1b" not in shown and "\x07" not in shown


async def test_the_last_worktree_gone_the_terminal_says_how_to_make_one(repo: Path, cli: CLI) -> None:
    """Started a session with `s`, then merged the worktree away: the title said "no worktree selected" but the
    dashboard kept the gone worktree current (it was still "arriving" from the session start), so the terminal
    said "No session here. Press enter to start one" and every key aimed at a worktree that no longer existed."""
    configure(repo)
    cli.ok("worktree", "create", "only")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(app)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: screen.selected == "only")
        await pilot.press("s")
        await on_screen(pilot, app, "AgentPickerScreen")
        await pilot.press("enter")  # the default agent (echo)
        await until(pilot, lambda: "only" in screen.sessions and terminal.worktree == "only")
        await pilot.press("ctrl+right_square_bracket")
        await asyncio.to_thread(cli.ok, "worktree", "remove", "only", "--force")
        await until(pilot, lambda: not screen.entries)
        await until(pilot, lambda: screen.selected is None)
        await until(pilot, lambda: any("No worktree yet" in terminal.render_line(y).text
                                       for y in range(terminal.size.height)), timeout=5)


async def test_an_attach_timer_that_fires_as_the_app_closes_does_nothing(repo: Path, cli: CLI) -> None:
    """Moving in the list schedules the terminal's attach a moment later; quitting in that moment removed the
    terminal before the screen's timer fired, and the attach raised NoMatches as the app closed (seen once in a
    full `make test`: test_full_flow_from_the_keyboard). A poll arriving then did the same."""
    cli.ok("worktree", "create", "w")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.entries)
        await screen.query_one(TerminalView).remove()  # as the app's closing does, before the timer
        screen.attach_selected()
        # The feed's last poll arriving then did the same (seen with the machine busy).
        screen.on_sessions_polled(SessionsPolled([], {}))
