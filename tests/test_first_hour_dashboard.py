"""What a new user met in a first hour with the dashboard and the CLI (trial7), each through the real app, real
git and real tmux on a private socket."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.screen import ModalScreen
from textual.widgets import Button, Label
from textual.widgets._toast import Toast

from daintree_tui.cli.dispatch import build_parser
from daintree_tui.core.project import Project
from daintree_tui.core.trust import untrusted_commands
from daintree_tui.sessions.last_words import with_last_words
from daintree_tui.tui.app import make_app
from daintree_tui.tui.screens.agent_picker import AgentPickerScreen
from daintree_tui.tui.screens.bakeoff_new import BakeoffNewScreen
from daintree_tui.tui.screens.commit import CommitScreen
from daintree_tui.tui.screens.confirm import ConfirmScreen
from daintree_tui.tui.screens.merge import MergeScreen
from daintree_tui.tui.screens.new_task import NewTaskScreen
from daintree_tui.tui.screens.remove import RemoveScreen
from daintree_tui.tui.widgets.terminal import TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.conftest import CLI, trusted_config, wait_for
from tests.helpers.dashboard import configure, main_screen, on_screen, title_text, until
from tests.helpers.dialogs import DashboardHost

pytestmark = pytest.mark.usefixtures("tmux_socket")


async def test_tab_cycles_the_lists_and_never_enters_the_terminal(repo: Path, cli: CLI) -> None:
    """Tab from the worktrees list moved the focus into the embedded terminal, where every later key (tab too)
    went to the agent: the user was in the agent's prompt without asking. Tab and shift+tab go round the lists
    and the tabs below; enter (or a click) is how the terminal gets the keys."""
    configure(repo)
    cli.ok("task", "create", "one")
    cli.ok("worktree", "create", "w", "--task", "1", "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "w" in screen.sessions and screen.later_mounted)
        await until(pilot, lambda: screen.query_one(TerminalView).attached)
        assert screen.query_one(WorktreeTable).has_focus
        seen = []
        for key in ["tab"] * 6 + ["shift+tab"] * 6:
            await pilot.press(key)
            await pilot.pause()
            seen.append(type(app.focused).__name__)
            assert not isinstance(app.focused, TerminalView), seen
        assert {"TaskTable", "WorktreeTable"} <= set(seen)
        screen.query_one(WorktreeTable).focus()
        await pilot.press("enter")  # the explicit way in
        await until(pilot, lambda: screen.query_one(TerminalView).has_focus)
        await pilot.press("tab")  # and there tab is the agent's key
        assert screen.query_one(TerminalView).has_focus


def trusted(repo: Path) -> bool:
    return not untrusted_commands(Project.discover(repo).config)


AGENTS = {name: {"installed": True} for name in ("claude", "codex", "gemini", "opencode", "aider", "shell")}
FILES = [f"src/module_{n}.py" for n in range(40)]
DIALOGS: dict[str, Callable[[], ModalScreen[Any]]] = {
    "new task": lambda: NewTaskScreen(AGENTS, "claude"),
    "new task with hosts": lambda: NewTaskScreen(AGENTS, "claude", [("box (dev@box)", "box")]),
    "commit": lambda: CommitScreen("w", FILES, "Add multiply"),
    "remove": lambda: RemoveScreen("w", FILES, True, "claude"),
    "merge": lambda: MergeScreen("w", "main"),
    "confirm": lambda: ConfirmScreen("Trust this repository's commands?", "\n".join(FILES), yes="Trust"),
    "bake-off": lambda: BakeoffNewScreen("Add multiply", AGENTS, "claude"),
    "agent picker": lambda: AgentPickerScreen("w", AGENTS, "claude", restart=True, current="claude", failed=True),
}


@pytest.mark.parametrize("size", [(80, 24), (70, 18), (60, 16)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dialog", list(DIALOGS))
async def test_every_dialog_shows_its_question_and_buttons_in_a_small_window(dialog: str,
                                                                           size: tuple[int, int]) -> None:
    """The new-task dialog put its buttons below the window's edge under 80x24 (with a remote host, at 80x24
    itself), and so did the commit and remove dialogs with many files: Enter in the subject still worked, but
    "Task only" could not be seen. The fields scroll; the title and the buttons stay in sight."""
    app = DashboardHost(DIALOGS[dialog]())
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.screen is app.dialog and bool(app.dialog.query("#dialog")))
        box = app.dialog.query_one("#dialog")
        await until(pilot, lambda: box.size.height > 0)
        await pilot.pause()
        view = box.content_region
        title = app.dialog.query_one(".dialog-title")
        assert view.contains_region(title.region), (title.region, view)
        for button in app.dialog.query(Button):
            assert button.region.height > 0 and view.contains_region(button.region), (button.label, view)
        assert box.scroll_y == 0  # opens at its question, not scrolled down to the focused button


async def test_keys_typed_as_the_trust_prompt_appears_do_not_answer_it(repo: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The trust prompt comes a moment after the dashboard opens, so what the user was already typing answered
    it: shift+tab (to the Trust button) then enter trusted the repository's hooks, unread. Keys wait until the
    typing stops; then the prompt takes them."""
    monkeypatch.setattr(ConfirmScreen, "UNASKED_SETTLE", 2.0)  # longer than any stall of a busy machine
    (repo / ".daintree.toml").write_text('[hooks]\npost_create = ["echo installing"]\n')
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(100, 30)) as pilot:
        typed_over_it = 0
        prompt: object = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20  # it shows within seconds (REST_AT_THE_LATEST), however slow the start
        while typed_over_it < 4 and loop.time() < deadline:  # typing on, before and after the prompt shows
            await pilot.press("shift+tab", "enter")
            await pilot.pause(0.05)  # a typist's pace
            if isinstance(app.screen, ConfirmScreen):
                prompt = app.screen
                typed_over_it += 1
            elif prompt is not None or trusted(repo):
                break  # answered by the typing
        assert app.screen is prompt and not trusted(repo)
        assert isinstance(prompt, ConfirmScreen) and prompt.settling
        assert "keys wait until you stop typing" in str(prompt.query_one("#settling", Label).render())
        await until(pilot, lambda: not prompt.settling)
        assert app.screen is prompt and not trusted(repo) and not prompt.query_one("#settling").display
        await pilot.press("shift+tab", "enter")  # now deliberate: the Trust button
        await until(pilot, lambda: trusted(repo))


async def test_a_prompt_that_finds_the_keyboard_quiet_takes_keys_at_once(repo: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys wait only when the user was typing as the prompt appeared: one who waited for it, read it and answers
    (or a script driving the dashboard) is not made to wait again."""
    monkeypatch.setattr(ConfirmScreen, "UNASKED_SETTLE", 2.0)
    (repo / ".daintree.toml").write_text('[hooks]\npost_create = ["echo installing"]\n')
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), timeout=20)
        prompt = app.screen
        assert isinstance(prompt, ConfirmScreen) and not prompt.settling and not prompt.query("#settling")
        await pilot.press("shift+tab", "enter")  # the Trust button
        await until(pilot, lambda: trusted(repo))


async def test_enter_on_an_agent_that_failed_again_says_why_and_asks(repo: Path, cli: CLI) -> None:
    """Enter on an agent that had exited with an error (claude not signed in, no network) started the same command
    again at once, which failed again: a loop with no word of why. Enter still restarts a failed agent once (issue
    12: enter on an exited session restarts its own agent); failing again after that restart, enter shows its exit
    code and last lines and asks, with Cancel focused, so a second enter does not restart it."""
    trusted_config(repo, "[agents.nokey]\ncommand = \"sh -c 'echo starting; for n in 1 2 3 4 5 6; do echo step $n; "
                         "done; echo error: no API key found; echo run nokey login first; exit 3'\"\n"
                         "[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "w", "--agent", "nokey")
    log = repo / ".worktrees" / ".logs" / "w.log"
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(app)

        def exited_since(started: float) -> bool:
            info = screen.sessions.get("w")
            return info is not None and str(info.status) == "exited" and info.started_at > started

        await until(pilot, lambda: exited_since(0))
        await until(pilot, lambda: screen.query_one(WorktreeTable).has_focus and screen.selected == "w")
        screen.query_one(TerminalView).focus()  # as after a quick-create: the terminal has the focus
        await until(pilot, lambda: "⌨ ctrl+] leaves, then enter restarts the agent (it failed)" in title_text(screen))
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: screen.query_one(WorktreeTable).has_focus)
        first = screen.sessions["w"].started_at
        await pilot.press("enter")  # restarted, as any exited session is
        await until(pilot, lambda: log.read_text().count("starting") == 2 and exited_since(first), timeout=30)
        if not screen.query_one(WorktreeTable).has_focus:  # the restart gave the terminal the keys
            await pilot.press("ctrl+right_square_bracket")
            await until(pilot, lambda: screen.query_one(WorktreeTable).has_focus)
        for _ in range(2):
            await pilot.press("enter")  # it failed again: asked
            await on_screen(pilot, app, "ConfirmScreen")
            prompt = app.screen
            assert isinstance(prompt, ConfirmScreen)
            assert prompt.question == "nokey exited (3) in w"
            assert "  error: no API key found\n  run nokey login first\n" in prompt.body
            body = prompt.query_one("#dirty-files")
            await until(pilot, lambda: body.size.height > 0)  # noqa: B023 (awaited here)
            assert body.max_scroll_y == 0  # read whole, the way out (s, session log) included
            await pilot.press("enter")  # Cancel has the focus
            await until(pilot, lambda: app.screen is screen)
            assert log.read_text().count("starting") == 2  # not started again
        await pilot.press("enter")
        await on_screen(pilot, app, "ConfirmScreen")
        await pilot.click("#yes")  # asked for
        await until(pilot, lambda: log.read_text().count("starting") == 3)


async def test_enter_on_an_agent_that_ended_well_starts_it_again(repo: Path, cli: CLI) -> None:
    """An agent the user quit (exit 0) starts again at enter, as the title's hint says: no question."""
    trusted_config(repo, "[agents.brief]\ncommand = \"sh -c 'echo done; exit 0'\"\n[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "w", "--agent", "brief")
    log = repo / ".worktrees" / ".logs" / "w.log"
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "w" in screen.sessions and str(screen.sessions["w"].status) == "exited")
        await until(pilot, lambda: screen.query_one(WorktreeTable).has_focus and screen.selected == "w")
        await pilot.press("enter")
        await until(pilot, lambda: log.read_text().count("done") == 2)
        assert app.screen is screen


async def test_a_dialog_opens_clear_of_earlier_toasts_and_shows_its_own(repo: Path, cli: CLI) -> None:
    """At 80x24 the toasts of a moment before (an agent waiting, "Quick-create started claude", a skipped hook)
    lay over a dialog's right half: the merge dialog's "Merge" and "Cancel" and the restart question's buttons
    could not be seen. A dialog clears them as it opens; what it says itself (a missing subject) still shows."""
    configure(repo)
    cli.ok("worktree", "create", "w")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.selected == "w")
        for n in range(3):
            app.notify(f"earlier news {n}", timeout=60)
        await until(pilot, lambda: len(screen.query(Toast)) == 3)
        await pilot.press("m")
        await on_screen(pilot, app, "MergeScreen")
        await until(pilot, lambda: not app.screen.query(Toast))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        await pilot.press("n")
        await on_screen(pilot, app, "NewTaskScreen")
        await pilot.press("enter")  # no subject
        await until(pilot, lambda: any("A task needs a subject" in str(t.render()) for t in app.screen.query(Toast)))


def test_help_says_that_daintree_alone_opens_the_dashboard(cli: CLI) -> None:
    """`daintree --help` listed eighteen commands and not what a newcomer types first: `daintree` alone (the
    dashboard), nor `daintree demo` to try it."""
    shown = " ".join(cli.ok("--help").stdout.split())
    assert "Without a COMMAND: the dashboard of the repository here (or --repo PATH)" in shown
    assert "`daintree demo` opens it on a throwaway repository" in shown


def test_a_missing_argument_names_the_command_and_its_help(cli: CLI) -> None:
    """`daintree wt diff` said "daintree: error: the following arguments are required: name": which command, and
    what is `name` (the usage and the README write NAME, and its --help said nothing of it)?"""
    for args, said in ((("wt", "diff"), "worktree diff: the following arguments are required: NAME"),
                       (("session", "send"), "session send: the following arguments are required: NAME"),
                       (("task", "show"), "task show: the following arguments are required: ID")):
        result = cli(*args)
        command = said.split(":")[0]
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == f"daintree: {said} (see daintree {command} --help)\n"
    positionals = []
    parsers = [build_parser()]
    while parsers:
        parser = parsers.pop()
        if parser.commands is not None:
            parsers += parser.commands.choices.values()
        positionals += [(action.metavar, action.help) for action in parser._actions  # listed nowhere public
                        if not action.option_strings and action.dest not in ("command",)
                        and not action.dest.endswith("_command") and action.help != argparse.SUPPRESS]
    # Each reads as the README writes it (NAME, ID) and says what it is (`worktree create --help`: "NAME" alone).
    assert positionals and all(isinstance(m, str) and m == m.upper() and h for m, h in positionals), positionals


async def test_agents_that_wait_at_once_make_one_toast(repo: Path, cli: CLI) -> None:
    """The demo's three agents asked their question at the same moment: three toasts, "demo is waiting for you"
    three times, stacked over the terminal (at 80x24 over half of it) and over the first dialog. One poll's news
    is one toast, a line a session."""
    configure(repo)
    trusted_config(repo, (repo / ".daintree.toml").read_text() + "[sessions]\nwaiting_debounce = 0.3\n")
    for name in ("one", "two", "three"):
        cli.ok("worktree", "create", name, "--agent", "echo")
    wait_for(lambda: cli.ok("session", "list").stdout.count("waiting") == 3)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.sessions) == 3 and screen.query(Toast))
        await pilot.pause()
        shown = [str(t.render()) for t in screen.query(Toast)]
        assert len(shown) == 1, shown
        assert all(f"{name}: echo is waiting for you" in shown[0] for name in ("one", "two", "three"))


async def test_the_preview_of_an_exited_agent_is_its_last_words_not_tmuxs(repo: Path, cli: CLI) -> None:
    """The worktrees list's latest-output column said "Pane is dead (status 1, Tue Dec  1 02:34:54 2026)" for
    claude that had died at once: tmux's line, next to a status that already said "exited 1", where the agent's
    own last line (why it died) belonged."""
    trusted_config(repo, "[agents.nokey]\ncommand = \"sh -c 'echo error: no API key found; exit 1'\"\n"
                         "[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "first")
    cli.ok("worktree", "create", "died", "--agent", "nokey")
    # tmux writes its own line when the pane dies, most often over the agent's one line (scrolled away); under
    # load the agent's line can stay above it (and `session capture` then drops tmux's): either way the preview
    # must be the agent's words. Waited on: the session is seen exited.
    wait_for(lambda: cli.json("session", "list")[0]["status"] == "exited")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(200, 50)) as pilot:
        screen = main_screen(app)
        table = screen.query_one(WorktreeTable)
        await until(pilot, lambda: "died" in screen.sessions and "died" in screen.previews)
        await until(pilot, lambda: table.cell_text("died", "activity") == "error: no API key found")


def test_with_last_words_replaces_only_tmuxs_line() -> None:
    dead = "Pane is dead (status 1, Tue Dec  1 02:34:54 2026)"
    assert with_last_words(f"\n\n{dead}", "error: no key") == "\n\nerror: no key"
    assert with_last_words(f"working\nerror: no key\n{dead}", "error: no key") == "working\nerror: no key"
    assert with_last_words(f"ok\n{dead}", "") == "ok"
    assert with_last_words("Pane is dead (my own words)\nstill running", "x") == \
        "Pane is dead (my own words)\nstill running\nx"


def test_a_merge_conflict_says_how_to_go_on(repo: Path, cli: CLI) -> None:
    """`worktree merge` of a branch that conflicts said "conflicts in: calc.py; nothing was changed", and the user
    was left with a branch that would never merge and no word of what to do."""
    for name, text in (("c1", "one\n"), ("c2", "two\n")):
        cli.ok("worktree", "create", name)
        (repo / ".worktrees" / name / "calc.py").write_text(text)
        cli.ok("worktree", "commit", name, "-m", name, "--all")
    cli.ok("worktree", "merge", "c1")
    result = cli("worktree", "merge", "c2", "--strategy", "squash")
    assert result.returncode == 1
    path = repo / ".worktrees" / "c2"
    assert result.stderr == (
        "daintree: merge of wt/c2 into main conflicts in: calc.py; nothing was changed (resolve it on the branch: "
        f"`git rebase main` in {path}, or ask its agent to; then merge again)\n")
    subprocess.run(["git", "rebase", "main"], cwd=path, capture_output=True)  # as it says: conflicts, stops
    (path / "calc.py").write_text("one\ntwo\n")
    subprocess.run(["git", "add", "calc.py"], cwd=path, check=True)
    subprocess.run(["git", "-c", "core.editor=true", "rebase", "--continue"], cwd=path, check=True,
                   capture_output=True)
    cli.ok("worktree", "merge", "c2", "--strategy", "squash")
    assert (repo / "calc.py").read_text() == "one\ntwo\n"


def test_worktree_list_and_status_say_an_agents_exit_code(repo: Path, cli: CLI) -> None:
    """`worktree list` and `worktree status` said "exited" where `session list` said "exited (1)": a failed agent
    looked like one that had finished."""
    trusted_config(repo, "[agents.nokey]\ncommand = \"sh -c 'echo error: no API key found; exit 3'\"\n")
    cli.ok("worktree", "create", "died", "--agent", "nokey")
    wait_for(lambda: "exited (3)" in cli.ok("session", "list").stdout)
    listed = cli.ok("worktree", "list").stdout.splitlines()
    assert listed[1].split()[7:9] == ["exited", "(3)"], listed
    assert "  session: exited (3)\n" in cli.ok("worktree", "status", "died").stdout
