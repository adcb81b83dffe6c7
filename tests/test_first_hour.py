"""What a new user met in a first hour with the dashboard and the CLI (trial6), each through the real app, real
git and real tmux on a private socket."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.widgets import Label, Static

from daintree_tui.cli.dispatch import build_parser
from daintree_tui.core.project import Project
from daintree_tui.demo import registry
from daintree_tui.sessions.control import Activity, SessionEvents
from daintree_tui.sessions.last_words import last_output_line
from daintree_tui.tui.app import make_app
from daintree_tui.tui.widgets.task_table import TaskTable
from daintree_tui.tui.widgets.terminal import TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.conftest import CLI, trusted_config, wait_for
from tests.helpers.agents import CLAUDE_OFFLINE_TAIL
from tests.helpers.control import drain
from tests.helpers.dashboard import configure, main_screen, on_screen, select, title_text, toasts, until

pytestmark = pytest.mark.usefixtures("tmux_socket")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_help_says_how_to_close_it_at_any_size(repo: Path, size: tuple[int, int]) -> None:
    """The help's last line ran past the dialog's edge, so "Esc closes." was cut off at 80 and at 120 columns."""
    app = make_app(Project.discover(repo))
    async with app.run_test(size=size) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.started)
        await pilot.press("question_mark")
        await on_screen(pilot, app, "HelpScreen")
        note = next(label for label in app.screen.query(Label) if "Esc closes" in str(label.render()))
        dialog = app.screen.query_one("#dialog")
        await until(pilot, lambda: note.size.width > 0)
        assert note.region.right <= dialog.content_region.right
        shown = " ".join(line.text for line in note.render_lines(note.region.reset_offset)).split()
        assert "closes." in shown


async def test_opening_the_dashboard_leaves_git_status_clean(repo: Path) -> None:
    """Opening the dashboard in a repository and quitting wrote `.worktrees/.ui.json` (the terminal's size) but not
    the exclude lines, so the user's `git status` showed `?? .worktrees/` afterwards."""
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.started)
        await until(pilot, lambda: (repo / ".worktrees" / ".ui.json").exists())
        await pilot.press("q")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                            capture_output=True, text=True, check=True)
    assert status.stdout == ""


def test_the_exit_toast_quotes_the_agents_words_not_its_terminal_controls(tmp_path: Path) -> None:
    """claude exited at once and the toast said `claude exited (1): (B78`: the letters and digits of the escapes
    it prints on exit were taken for its last line; and its words, placed by cursor moves, ran together."""
    log = tmp_path / "claude.log"
    log.write_bytes(CLAUDE_OFFLINE_TAIL)
    assert last_output_line(log) == "supported countries at https://anthropic.com/supported-countries"
    log.write_bytes(CLAUDE_OFFLINE_TAIL.split(b"\r\r\n\x1b[2Gsupported")[0])
    assert last_output_line(log) == "Note: Claude Code might not be available in your country. Check"


def test_every_option_of_every_command_says_what_it_does() -> None:
    """`daintree gc --help` listed `--older-than DAYS` and `--dry-run` with nothing beside them (and so did
    `doctor --fix`, `approvals --all`, `worktree create --task/--base` and twenty more), and `daintree task --help`
    had no description line where `daintree session --help` had one."""
    undocumented: list[str] = []
    parsers = [("daintree", build_parser())]
    while parsers:
        path, parser = parsers.pop()
        if path != "daintree" and not parser.description:
            undocumented.append(path)
        if parser.commands is not None:
            parsers += [(f"{path} {name}", sub) for name, sub in parser.commands.choices.items()
                        if name not in ("wt", "rm")]  # aliases: the same parser again
        for action in parser._actions:  # argparse lists a parser's options nowhere public
            if action.option_strings and not action.help and action.dest != "help":
                undocumented.append(f"{path} {action.option_strings[0]}")
    assert undocumented == []


@pytest.mark.parametrize(("command", "actions"), [
    ("task", "create, list, show, update"),
    ("wt", "create, list, conflicts, status, keep, remove, run, diff, commit, merge, pr, events"),
])
def test_a_command_without_its_action_names_the_actions(cli: CLI, command: str, actions: str) -> None:
    """`daintree task` alone said "daintree: error: the following arguments are required: ACTION", naming
    neither the command nor what it takes."""
    result = cli(command)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"daintree: {'worktree' if command == 'wt' else command} needs an action: {actions} "
        f"(see daintree {'worktree' if command == 'wt' else command} --help)"]


async def test_the_typing_hint_names_the_users_leave_key_and_an_exited_agent(repo: Path, cli: CLI) -> None:
    """The title said "ctrl+] leaves; keys go to the agent" with `leave_terminal` remapped (ctrl+] then went to the
    agent), and still said keys go to the agent once it had exited (claude without a route to its API exits at
    once, and the terminal keeps the focus on its dead pane)."""
    configure(repo)
    trusted_config(repo, (repo / ".daintree.toml").read_text() + '[keys]\nleave_terminal = "ctrl+g"\n')
    cli.ok("worktree", "create", "hint", "--agent", "echo")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "hint" in screen.sessions)
        await pilot.press("enter")
        await until(pilot, lambda: "⌨ ctrl+g leaves; keys go to the agent" in title_text(screen))
        await until(pilot, lambda: screen.query_one(TerminalView).attached)
        await pilot.press("ctrl+d")  # the echo agent ends at the end of its input
        await until(pilot, lambda: str(screen.sessions["hint"].status) == "exited")
        hint = "⌨ ctrl+g leaves, then enter restarts the agent (it has exited)"
        await until(pilot, lambda: hint in title_text(screen))
        await pilot.press("ctrl+g")
        await until(pilot, lambda: screen.query_one(WorktreeTable).has_focus)
        assert "⌨" not in title_text(screen)
        await pilot.press("enter")  # what the hint says
        # (the old session leaves the list for a moment while the new one starts)
        await until(pilot, lambda: (info := screen.sessions.get("hint")) is not None and str(info.status) != "exited")
        await until(pilot, lambda: "⌨ ctrl+g leaves; keys go to the agent" in title_text(screen))


async def test_the_remove_dialog_says_it_stops_the_running_agent(repo: Path, cli: CLI) -> None:
    """`x` on a worktree whose agent was running asked only about files ("The worktree is clean; its branch
    stays."), and removing then stopped the agent without a word of warning."""
    configure(repo)
    cli.ok("worktree", "create", "busy", "--agent", "echo")
    cli.ok("worktree", "create", "idle")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "busy" in screen.sessions and len(screen.entries) == 2)
        for name, warned in (("busy", True), ("idle", False)):
            await select(pilot, screen, name)
            await pilot.press("x")
            await on_screen(pilot, app, "RemoveScreen")
            said = " ".join(str(s.render()) for s in app.screen.query(Static))
            assert ("Its echo session is still running: removing stops it." in said) is warned
            await pilot.press("escape")
            await until(pilot, lambda: type(app.screen).__name__ == "MainScreen")
        assert "busy" in screen.sessions and len(screen.entries) == 2


async def test_a_bake_off_on_a_completed_task_is_refused_at_b(repo: Path, cli: CLI) -> None:
    """After merging task 1, `b` opened "Bake-off: <task 1's subject>" (the unfocused tasks list's cursor stays on
    the first task), and only Start, after choosing agents and a score, said the task was completed."""
    configure(repo)
    cli.ok("task", "create", "merged already")
    cli.ok("task", "update", "1", "--status", "completed")
    cli.ok("task", "create", "still to do")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.query_one(TaskTable).row_count == 2)
        await pilot.press("b")
        await until(pilot, lambda: any("Task 1 (merged already) is completed" in t for t in toasts(app)))
        assert type(app.screen).__name__ == "MainScreen"
        await pilot.press("shift+tab")  # what the notice says
        await until(pilot, lambda: screen.query_one(TaskTable).has_focus)
        await pilot.press("down", "b")
        await on_screen(pilot, app, "BakeoffNewScreen")
        assert "still to do" in " ".join(str(label.render()) for label in app.screen.query(Label))


def log_on_a_terminal(repo: Path, *args: str) -> bytes:
    """`daintree ARGS` with its stdout on a real PTY (as in a user's terminal): everything it wrote there."""
    leader, follower = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", *args], cwd=repo, stdout=follower,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(follower)
    out = b""
    while chunk := _read_or_end(leader):
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    return out


def _read_or_end(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the writer closed the PTY
        return b""


def test_session_log_on_a_terminal_is_text_not_the_agents_controls(repo: Path, cli: CLI) -> None:
    """The README's way to see why an agent died, `daintree session log NAME`, wrote Codex's raw output to the
    user's terminal: it switched to the alternate screen, turned mouse reporting on and asked the terminal
    questions (`OSC 10 ?`) whose answers landed at the shell prompt; and Codex's words, each placed by its own
    cursor move, came out glued together."""
    trusted_config(repo, "[agents.tui]\ncommand = '''sh -c 'printf \"\\033[?1049h\\033[?1000h\\033[2;3HChoose\\033"
                         "[2;10Hhow\\033[2;14Hto\\033[2;17Hsign\\033[2;22Hin\\033[4;3H> 1. ChatGPT\\r\\n"
                         "\\033]10;?\\033\\\\\"; sleep 60' '''\n")
    cli.ok("worktree", "create", "tui", "--agent", "tui")
    log = repo / ".worktrees" / ".logs" / "tui.log"
    wait_for(lambda: log.exists() and b"ChatGPT" in log.read_bytes())
    shown = log_on_a_terminal(repo, "session", "log", "tui")
    assert b"\x1b" not in shown
    assert shown.decode().splitlines() == ["Choose how to sign in", "> 1. ChatGPT"]
    assert log_on_a_terminal(repo, "session", "log", "tui", "-n", "1").decode().splitlines() == ["> 1. ChatGPT"]
    assert b"\x1b[?1049h" in log_on_a_terminal(repo, "session", "log", "tui", "--raw")
    # A pipe may end at a terminal too: cursor moves and colours pass, mode switches do not; --raw is the bytes.
    piped = cli.ok("session", "log", "tui").stdout
    assert "\x1b[?1049h" not in piped and "\x1b[2;3HChoose" in piped
    assert "\x1b[?1049h" in cli.ok("session", "log", "tui", "--raw").stdout


def test_demo_without_the_dashboard_says_its_agents_run_and_how_to_stop_them(cli: CLI, tmp_path: Path) -> None:
    """`daintree demo --no-ui` printed a bare path and left three demo agents running, with no word of them, of
    how to open the demo, or of how to stop them."""
    path = tmp_path / "demo"
    proc = cli("demo", "--no-ui", "--path", str(path), timeout=120)
    try:
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == f"{path}\n"  # stdout is still the path alone, for scripts
        assert proc.stderr.strip() == (f"its demo agents are running: `daintree --repo {path}` opens it, "
                                       "`daintree demo --clean` stops them and deletes it")
        assert {s["name"] for s in cli.json("--repo", str(path), "session", "list")} == {
            "auth-refactor", "cart-discount", "readme-tests"}
    finally:
        registry.stop_demo_sessions(path)


async def test_a_hook_skipped_for_want_of_trust_is_said_in_the_dashboard(repo: Path) -> None:
    """After "Not now" to the trust prompt, a quick-create skipped the repository's `post_create` hook (`npm ci`)
    without a word: the warning went to stderr, which the dashboard's screen hides."""
    (repo / ".daintree.toml").write_text('default_agent = "shell"\n[hooks]\npost_create = ["echo installing"]\n'
                                         "[notifications]\nbell = false\n")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await on_screen(pilot, app, "ConfirmScreen")  # trust this repository's hooks?
        await until(pilot, lambda: not getattr(app.screen, "settling", True))  # it takes keys once they stop
        await pilot.press("escape")  # not now
        screen = main_screen(app)
        await until(pilot, lambda: app.screen is screen)
        await pilot.press("n")
        await on_screen(pilot, app, "NewTaskScreen")
        await pilot.press(*"hooked", "enter")
        await until(pilot, lambda: "hooked" in screen.sessions)
        await until(pilot, lambda: any("skipped 'echo installing': .daintree.toml is not trusted" in t
                                       for t in toasts(app)))


async def test_sending_the_task_where_no_agent_runs_says_so(repo: Path, cli: CLI) -> None:
    """`i` (paste the task into the session) on a worktree whose agent had exited or never started did nothing at
    all."""
    trusted_config(repo, "[agents.brief]\ncommand = \"sh -c 'echo done; exit 0'\"\n[notifications]\nbell = false\n")
    cli.ok("task", "create", "Add multiply")
    cli.ok("task", "create", "Add divide")
    cli.ok("worktree", "create", "never", "--task", "1")
    cli.ok("worktree", "create", "ended", "--task", "2", "--agent", "brief")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "ended" in screen.sessions and str(screen.sessions["ended"].status) == "exited")
        for name in ("never", "ended"):
            await select(pilot, screen, name)
            await pilot.press("i")
            said = f"No agent runs in {name}: enter starts one"
            await until(pilot, lambda: any(said in t for t in toasts(app)))  # noqa: B023 (awaited here)


@pytest.mark.parametrize(("agent", "said"), [("echo", "agents keep running in tmux (1 now)"),
                                              ("brief", "no agent is running")])
async def test_quitting_says_how_many_agents_keep_running(repo: Path, cli: CLI, agent: str, said: str) -> None:
    """`q` said "agents keep running in tmux" also when every agent had exited (claude, with no route to its API,
    had died at once)."""
    configure(repo)
    trusted_config(repo, (repo / ".daintree.toml").read_text()
                   + "[agents.brief]\ncommand = \"sh -c 'echo done; exit 0'\"\n")
    cli.ok("worktree", "create", "w", "--agent", agent)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: "w" in screen.sessions
                    and (agent == "echo") == (str(screen.sessions["w"].status) != "exited"))
        await pilot.press("q")
        await until(pilot, lambda: app.exit_message)
    assert app.exit_message == f"daintree: {said}; `daintree --repo {repo}` brings you back"


def test_resizing_a_quiet_session_is_not_output(tmux_socket: str) -> None:
    """Resizing the dashboard flipped the session on screen to `running` and back ("auth-refactor: demo is waiting
    for you", with the bell, at a resize of the window), and put a running/waiting pair in the events: a resize
    moves the cursor and pushes lines into the scrollback, which was taken for output."""
    def tmux(*args: str) -> None:
        subprocess.run(["tmux", "-L", tmux_socket, "-f", "/dev/null", *args], check=True, capture_output=True)

    tmux("new-session", "-d", "-s", "dt-quiet", "-x", "80", "-y", "10", "sh", "-c", "printf 'a\\nb\\nc\\n'; exec cat")
    events = SessionEvents(["tmux", "-L", tmux_socket, "-f", "/dev/null"], idle_retry=0.2)
    seen: list[object] = []

    def activity() -> int:
        seen.extend(drain(events))
        return sum(isinstance(e, Activity) for e in seen)

    try:
        events.start()
        # The three lines are printed (cursor on row 3, nothing in the scrollback), and reported.
        wait_for(lambda: "dt-quiet" in events.records() and events.records()["dt-quiet"].screen_mark == "0,3,0")
        quiet = events.records()["dt-quiet"]
        already = activity()
        tmux("resize-window", "-t", "=dt-quiet:", "-x", "60", "-y", "2")  # the lines go to the scrollback
        wait_for(lambda: events.records()["dt-quiet"].screen_mark != quiet.screen_mark)
        tmux("send-keys", "-t", "=dt-quiet:", "marker", "Enter")  # real output, reported after the resize
        wait_for(lambda: events.records()["dt-quiet"].activity > quiet.activity and activity() > already)
        deadline = time.monotonic() + 1.5  # what the listing thread queued with the marker's report, if anything
        while time.monotonic() < deadline and activity() == already + 1:
            time.sleep(0.05)
        assert activity() == already + 1, seen  # the marker's alone: the resize was no output
    finally:
        events.close()


def test_help_explains_the_task_glyphs() -> None:
    """The tasks list marks each task ○, ◐ or ● and a blocked one "⧗1"; the help explained only the worktree
    table's columns."""
    from daintree_tui.tui.screens.help import column_legend
    from daintree_tui.tui.widgets.task_table import STATUS_GLYPH

    legend = column_legend().plain
    assert all(f"{glyph.plain} {status.replace('_', ' ')}" in legend for status, glyph in STATUS_GLYPH.items())
    assert "⧗N waits for task N" in legend


def test_a_worktree_in_a_repository_without_a_commit_says_to_commit_first(tmp_path: Path) -> None:
    """In a repository just made with `git init`, `worktree create` (and the dashboard's quick-create) said
    "invalid base ref 'HEAD': it names no commit", which told a newcomer nothing of what to do."""
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=fresh, check=True)
    cli = CLI(fresh)
    result = cli("worktree", "create", "one")
    assert result.returncode == 2
    assert result.stderr == ("daintree: the repository has no commit yet, and a worktree starts from one: commit "
                             "first (git commit --allow-empty -m 'first commit' will do)\n")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m",
                    "first commit"], cwd=fresh, check=True)
    cli.ok("worktree", "create", "one")  # as it says
    assert cli("worktree", "create", "two", "--base", "nosuch").stderr == (
        "daintree: invalid base ref 'nosuch': it names no commit\n")


def test_text_sent_to_an_agent_that_has_exited_is_refused(repo: Path, cli: CLI) -> None:
    """`daintree session send add-divide hello` said "sent 5 characters to add-divide" (exit 0) while claude had
    exited: the text went to a dead pane and nobody read it."""
    trusted_config(repo, "[agents.brief]\ncommand = \"sh -c 'echo done; exit 3'\"\n")
    cli.ok("task", "create", "Add divide")
    cli.ok("worktree", "create", "ended", "--task", "1", "--agent", "brief")
    wait_for(lambda: "exited (3)" in cli.ok("session", "list").stdout)
    said = ("daintree: the agent in ended has exited (3), so nothing would read it: `daintree session start ended` "
            "starts it again\n")
    for args in (("send", "ended", "hello"), ("keys", "ended", "Enter"), ("send", "ended", "--task")):
        result = cli("session", *args)
        assert (result.returncode, result.stdout, result.stderr) == (1, "", said)


def test_removing_a_worktree_says_it_closed_its_session(repo: Path, cli: CLI) -> None:
    """`daintree worktree remove` stopped the codex running there and said only "removed worktree add-divide"."""
    configure(repo)
    cli.ok("worktree", "create", "busy", "--agent", "echo")
    cli.ok("worktree", "create", "idle")
    assert cli.ok("worktree", "remove", "busy").stdout == "removed worktree busy and closed its session\n"
    assert cli.ok("worktree", "remove", "idle").stdout == "removed worktree idle\n"


def test_starting_a_session_that_runs_names_the_commands(repo: Path, cli: CLI) -> None:
    """A second `session start` said "session dt-w is already running (stop it first)": stop what, and how?"""
    configure(repo)
    cli.ok("worktree", "create", "w", "--agent", "echo")
    result = cli("session", "start", "w", "--agent", "echo")
    assert result.returncode == 2
    assert result.stderr == ("daintree: session dt-w is already running (`daintree session stop w` first, or "
                             "`daintree session send w TEXT` to talk to it)\n")


def test_help_names_the_users_leave_key() -> None:
    """With `keys.leave_terminal = "ctrl+g"`, the help and the palette still said z's zoom ends with "ctrl+]",
    a key that then went to the agent."""
    from daintree_tui.tui.app import DaintreeApp
    from daintree_tui.tui.bindings import key_rows
    from daintree_tui.tui.keymap import user_keymap
    from daintree_tui.tui.screens.actions import every_binding
    from daintree_tui.tui.screens.main import MainScreen

    bindings = every_binding(MainScreen.BINDINGS, DaintreeApp.BINDINGS, "ctrl+p")

    def zoom_help(keymap: dict[str, str]) -> str:
        return next(r.help for r in key_rows(bindings, keymap, MainScreen, lambda b: b.key) if r.action == "zoom")

    assert "(ctrl+] comes back" in zoom_help({})
    assert "(ctrl+g comes back" in zoom_help(user_keymap({"leave_terminal": "ctrl+g"}))
