"""Honest status and messages for real agents (issue 27 items 3 and 4): an agent that draws nothing is not
`waiting`; the exit toast and the latest-output column quote the line that says why; `sandbox check` checks the
worktree's own agent; an `auto` sandbox that cannot start at run time runs the agent unsandboxed and says so.
Sessions are real tmux on a private socket; the agents are small scripts replaying what real CLIs printed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from textual.widgets._toast import Toast

from daintree_tui.core.project import Project
from daintree_tui.sessions.last_words import telling
from daintree_tui.tui.app import make_app
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.conftest import CLI, events, trusted_config, wait_for
from tests.helpers.agents import CLAUDE_OFFLINE_TAIL
from tests.helpers.dashboard import main_screen, until

pytestmark = pytest.mark.usefixtures("tmux_socket")

# A replayed agent: prints the bytes of a recording, then exits with the code given or stays (reading its input).
REPLAY = """\
import os
import sys
sys.stdout.buffer.write(open(sys.argv[1], "rb").read())
sys.stdout.flush()
if sys.argv[2] != "stay":
    sys.exit(int(sys.argv[2]))
for _ in sys.stdin:
    pass
"""

# claude 2.1 with no route to its API, as it places its words (cursor moves): the cause, four lines above the
# URL it ends with (the end is the recorded CLAUDE_OFFLINE_TAIL).
CLAUDE_OFFLINE = (
    b"\x1b[2GUnable\x1b[9Gto\x1b[12Gconnect\x1b[20Gto\x1b[23GAnthropic\x1b[33Gservices\r\r\n\r\r\n"
    b"\x1b[2GFailed\x1b[9Gto\x1b[12Gconnect\x1b[20Gto\x1b[23Gapi.anthropic.com:\x1b[42GERR_BAD_REQUEST\r\r\n"
    + CLAUDE_OFFLINE_TAIL
)


def _row(row: int, text: str) -> bytes:
    return f"\x1b[{row};1H{text}".encode()


# gemini 0.61's sign-in screen, drawn in a box on the alternate screen: its last line is the box's bottom.
GEMINI_SIGN_IN = b"\x1b[?1049h\x1b[2J" + b"".join(_row(r, t) for r, t in enumerate((
    "╭──────────────────────────────────────────────────────────╮",
    "│ Get started                                              │",
    "│                                                          │",
    "│ How would you like to authenticate for this project?     │",
    "│                                                          │",
    "│ ● 1. Login with Google                                   │",
    "│   2. Use Gemini API Key                                  │",
    "│   3. Vertex AI                                           │",
    "│                                                          │",
    "│ (Use Enter to select)                                    │",
    "╰──────────────────────────────────────────────────────────╯",
), start=1))


def replayed(repo: Path, name: str, recording: bytes, then: str) -> str:
    """The command of an agent that replays `recording` (a file in the repository, which its sandbox can read)."""
    (repo / "replay.py").write_text(REPLAY)
    (repo / f"{name}.rec").write_bytes(recording)
    return f"{sys.executable} {repo / 'replay.py'} {repo / f'{name}.rec'} {then}"


def test_the_line_that_says_why_is_an_error_over_a_url_over_a_border() -> None:
    assert telling(["Failed to connect to api.anthropic.com", "Please check your connection.",
                    "Check supported countries at", "https://anthropic.com/supported-countries"]) == \
        "Failed to connect to api.anthropic.com"
    assert telling(["│ How would you like to authenticate │", "│ (Use Enter to select) │", "╰────────╯"]) == \
        "(Use Enter to select)"
    assert telling(["working", "see https://example.com/docs"]) == "working"
    assert telling(["╭──╮", "", "+----+"]) == ""
    assert telling(["error: old", *(f"line {i}" for i in range(10))]) == "line 9"  # an old error is old news


async def test_the_exit_toast_and_the_latest_output_quote_the_cause(repo: Path, cli: CLI) -> None:
    """claude exited (1) offline and the toast and the column said `https://anthropic.com/supported-countries`,
    its last line, while `Failed to connect to api.anthropic.com` stood four lines up; gemini's row showed the
    bottom of its box."""
    trusted_config(repo, f"[agents.offline]\ncommand = '''{replayed(repo, 'claude', CLAUDE_OFFLINE, '1')}'''\n"
                         f"[agents.signin]\ncommand = '''{replayed(repo, 'gemini', GEMINI_SIGN_IN, 'stay')}'''\n"
                         "[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "died", "--agent", "offline")
    cli.ok("worktree", "create", "asks", "--agent", "signin")
    wait_for(lambda: {s["name"]: s["status"] for s in cli.json("session", "list")}.get("died") == "exited")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(200, 50), notifications=True) as pilot:
        screen = main_screen(app)
        table = screen.query_one(WorktreeTable)
        told = await until(pilot, lambda: [str(t.render()) for t in screen.query(Toast) if "died" in str(t.render())])
        assert "exited (1): Failed to connect to api.anthropic.com: ERR_BAD_REQUEST" in told[0], told
        await until(pilot, lambda: table.cell_text("died", "activity").startswith(
            "Failed to connect to api.anthropic.com"))
        await until(pilot, lambda: table.cell_text("asks", "activity") == "(Use Enter to select)")


# opencode 1.18 with its database read-only: the alternate screen, a clear, the cursor hidden, a question to the
# terminal (DCS), and then nothing, ever.
OPENCODE_BLANK = b"\x1b[?1049h\x1b[2J\x1b[H\x1b[?25l\x1bP+q544e\x1b\\\x1b[?1000h\x1b[?2004h"


async def test_an_agent_that_draws_nothing_is_stalled_not_waiting(repo: Path, cli: CLI) -> None:
    """opencode drew a blank screen (4 of 4 starts) and its row said WAITING, which hid the hang; an agent that
    prints nothing at all was `waiting` after three seconds too."""
    trusted_config(repo, f"[agents.blank]\ncommand = '''{replayed(repo, 'opencode', OPENCODE_BLANK, 'stay')}'''\n"
                         f"[agents.mute]\ncommand = '''{sys.executable} -c \"import sys; sys.stdin.read()\"'''\n"
                         "[sessions]\nwaiting_debounce = 0.5\nstalled_after = 3\n"
                         "[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "blank", "--agent", "blank")
    cli.ok("worktree", "create", "mute", "--agent", "mute")
    seen: dict[str, list[str]] = {"blank": [], "mute": []}

    def statuses() -> dict[str, str]:
        now = {s["name"]: s["status"] for s in cli.json("session", "list")}
        for name, status in now.items():
            seen[name].append(status)
        return now

    wait_for(lambda: set(statuses().values()) == {"stalled"}, timeout=30)
    assert all(set(said) <= {"starting", "stalled"} for said in seen.values()), seen
    assert (repo / ".worktrees" / ".logs" / "blank.log").stat().st_size > 0  # it printed: controls only
    recorded = cli.json("session", "watch", "--once")
    assert {(r["name"], r["status"]) for r in recorded} == {("blank", "stalled"), ("mute", "stalled")}
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(200, 50), notifications=True) as pilot:
        screen = main_screen(app)
        table = screen.query_one(WorktreeTable)
        for name in ("blank", "mute"):
            await until(pilot, lambda n=name: table.cell_text(n, "session") == "◌ STALLED")  # type: ignore[misc]
            assert table.cell_text(name, "activity") == "nothing drawn since it started"
        told = await until(pilot, lambda: [str(t.render()) for t in screen.query(Toast)
                                           if "has drawn nothing since it started" in str(t.render())])
        assert "blank" in told[0] and "mute" in told[0]


async def test_an_agent_that_draws_is_no_longer_stalled(repo: Path, cli: CLI, tmux_socket: str) -> None:
    """The hint while it starts, and the first visible character ends `stalled`: a slow start is not a hang."""
    script = repo / "late.py"
    script.write_text("import sys\nsys.stdin.readline()\nprint('ready at last', flush=True)\nsys.stdin.read()\n")
    trusted_config(repo, f"[agents.late]\ncommand = '''{sys.executable} {script}'''\n"
                         "[sessions]\nwaiting_debounce = 0.5\nstalled_after = 2\n[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "late", "--agent", "late")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(200, 50)) as pilot:
        screen = main_screen(app)
        table = screen.query_one(WorktreeTable)
        await until(pilot, lambda: table.cell_text("late", "session") == "◌ STALLED")
        cli.ok("session", "send", "late", "go")
        await until(pilot, lambda: table.cell_text("late", "activity") == "ready at last")
        await until(pilot, lambda: screen.sessions["late"].status == "waiting")
    assert cli.json("session", "list")[0]["status"] == "waiting"


def test_sandbox_check_checks_the_worktrees_own_agent(repo: Path, cli: CLI) -> None:
    """`daintree sandbox check` of an opencode worktree checked the default agent's folders (claude's) and said
    "the boundary holds"; it checks the agent the worktree runs (its session's, else its task's), or `--agent`."""
    trusted_config(repo, "[agents.opencode]\ncommand = \"sh -c 'echo up; exec cat'\"\n")
    cli.ok("worktree", "create", "oc", "--agent", "opencode")
    home = Path.home()

    def checked(*args: str) -> tuple[dict[str, object], set[str]]:
        report = cli.json("sandbox", "check", *args)
        assert report["holds"] is True, report
        return report, {r["target"] for r in report["results"] if r["what"].startswith("agent state")}

    report, targets = checked("oc")
    assert (report["agent"], report["agent_from"]) == ("opencode", "its session")
    assert any(t.startswith(str(home / ".local" / "share" / "opencode")) for t in targets), targets
    assert not any("/.claude" in t for t in targets), targets
    assert "worktree oc, agent opencode (its session)" in cli.ok("sandbox", "check", "oc").stdout
    report, targets = checked("oc", "--agent", "codex")
    assert (report["agent"], report["agent_from"]) == ("codex", "--agent")
    assert {Path(t).parent for t in targets} == {home / ".codex"}, targets
    task = cli.json("task", "create", "Sign in", "--agent", "gemini")
    cli.ok("worktree", "create", "gm", "--task", str(task["id"]))
    report, targets = checked("gm")
    assert (report["agent"], report["agent_from"]) == ("gemini", f"its task #{task['id']}")
    assert {Path(t).parent for t in targets} == {home / ".gemini"}, targets


@pytest.fixture
def namespaces_run_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `bwrap` first on PATH that is the real one until the returned file exists, and from then on fails as
    bubblewrap does when the machine's user namespaces are used up (without using them up: this machine is shared).
    Its probe has passed once already, as in a dashboard that started before they ran out."""
    import shutil

    from daintree_tui.core.sandbox import BwrapSandbox

    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("bubblewrap is not installed")
    out = tmp_path / "namespaces-used-up"
    bin_dir = tmp_path / "bwrap-bin"
    bin_dir.mkdir()
    (bin_dir / "bwrap").write_text(
        f"#!/bin/sh\nif [ -e '{out}' ]; then\n"
        "  echo 'bwrap: Creating new namespace failed: No space left on device' >&2\n  exit 1\nfi\n"
        f"exec '{real}' \"$@\"\n")
    (bin_dir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    sandbox = BwrapSandbox()
    assert sandbox.binary == str(bin_dir / "bwrap") and sandbox.available()[0]
    return out


def test_auto_runs_the_agent_unsandboxed_when_bubblewrap_cannot_start_and_says_so(
        repo: Path, cli: CLI, namespaces_run_out: Path) -> None:
    """With user namespaces used up (ENOSPC) after the probe had passed, `auto` sessions died with bwrap's message
    and the queue marked their tasks failed. The launcher tries the sandbox once more before the agent: an `auto`
    session then runs unsandboxed, with a one-line notice, an event and a SANDBOX column that say so; `on` refuses
    with the reason."""
    home = Path.home()
    agent = f"sh -c 'touch {home}/wrote-home; echo agent ran; exec cat'"
    trusted_config(repo, f"[agents.loose]\ncommand = \"{agent}\"\n"
                         f"[agents.strict]\ncommand = \"{agent}\"\nsandbox = \"on\"\n")
    cli.ok("worktree", "create", "w")
    cli.ok("worktree", "create", "s")
    namespaces_run_out.touch()
    cli.ok("session", "start", "w", "--agent", "loose")
    log = repo / ".worktrees" / ".logs" / "w.log"
    wait_for(lambda: b"agent ran" in log.read_bytes())
    text = log.read_text()
    assert ("daintree: bubblewrap cannot start (bwrap: Creating new namespace failed: No space left on device): "
            "running without the sandbox (sandbox = auto)") in text
    assert (home / "wrote-home").exists()  # unconfined: inside, HOME is read-only
    listed = {s["name"]: s for s in cli.json("session", "list")}
    assert listed["w"]["status"] != "exited"
    sandbox = listed["w"]["sandbox"]
    assert sandbox["active"] is False and sandbox["mode"] == "auto" and "No space left on device" in sandbox["reason"]
    assert "none (auto: bwrap failed)" in cli.ok("session", "list").stdout
    told = [e for e in events(repo) if e["event"] == "session.unsandboxed"]
    assert len(told) == 1 and told[0]["worktree"]["name"] == "w" and told[0]["agent"] == "loose"
    assert told[0]["reason"] == "bwrap: Creating new namespace failed: No space left on device"
    (home / "wrote-home").unlink()
    cli.ok("session", "start", "s", "--agent", "strict")
    wait_for(lambda: {s["name"]: s["status"] for s in cli.json("session", "list")}["s"] == "exited")
    refused = {s["name"]: s for s in cli.json("session", "list")}["s"]
    assert refused["exit_code"] == 1 and not (home / "wrote-home").exists()
    assert ("daintree: the sandbox is required (sandbox = on) but bubblewrap cannot start: bwrap: Creating new "
            "namespace failed: No space left on device; the agent was not started") in \
        (repo / ".worktrees" / ".logs" / "s.log").read_text()
    assert len([e for e in events(repo) if e["event"] == "session.unsandboxed"]) == 1


async def test_the_dashboard_says_when_a_session_runs_unsandboxed(repo: Path, cli: CLI,
                                                                  namespaces_run_out: Path) -> None:
    trusted_config(repo, "[agents.loose]\ncommand = \"sh -c 'echo agent ran; exec cat'\"\n"
                         "[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "w")
    namespaces_run_out.touch()
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(200, 50), notifications=True) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.started)
        cli.ok("session", "start", "w", "--agent", "loose")
        told = await until(pilot, lambda: [str(t.render()) for t in screen.query(Toast)
                                           if "WITHOUT the sandbox" in str(t.render())])
        assert "w: loose runs WITHOUT the sandbox (sandbox = auto): bwrap: Creating new namespace failed: No space " \
               "left on device" in told[0]


def test_the_latest_output_column_says_why_it_is_empty() -> None:
    from dataclasses import replace

    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.sessions.status import SessionStatus
    from daintree_tui.tui.widgets.worktree_table import activity_cell

    starting = SessionInfo(name="w", session="dt-w", agent="x", status=SessionStatus.STARTING, exit_code=None,
                           pid=None, started_at=0.0, log="", persistent=True)
    assert str(activity_cell(starting, "\n\n")) == "no output yet"
    assert str(activity_cell(replace(starting, status=SessionStatus.STALLED), "")) == "nothing drawn since it started"
    assert str(activity_cell(replace(starting, status=SessionStatus.RUNNING), "")) == ""
    assert str(activity_cell(starting, "loading…")) == "loading…"
    assert str(activity_cell(None, "")) == ""
