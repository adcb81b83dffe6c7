"""Real agents as first-class: presets that know what is installed, status from the agents' own hooks (wired per
session), usage read from their own records, budgets that stop spend, resume.

The agents are fakes (tests/fixtures/fake_agent.py) that read their wiring where the real CLIs do and call it the
way they do; the records are fixtures in each agent's format (tests/fixtures/<agent>/).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.config import load as load_config
from daintree_tui.core.project import Project
from daintree_tui.sessions.usage import (
    ClaudeParser,
    CodexParser,
    GeminiParser,
    OpencodeParser,
    Price,
    TailState,
    Tokens,
    UsageParser,
    price_for,
    read_new_lines,
)
from tests.conftest import CLI, events, git, wait_for

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import fake_agent  # noqa: E402

AGENTS = ("claude", "codex", "gemini", "opencode")
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


# -- readers: each agent's records, read while they grow -------------------------------------------------------


def _read(path: Path, parser: UsageParser, tail: TailState) -> Tokens:
    total = Tokens()
    for record in parser.feed(read_new_lines(path, tail)):
        total = total + record.tokens
    return total


def _grow(tmp_path: Path, agent: str, name: str) -> tuple[Path, list[bytes]]:
    lines = (FIXTURES / agent / name).read_bytes().splitlines(keepends=True)
    path = tmp_path / name
    path.write_bytes(b"")
    return path, lines


@pytest.mark.parametrize(("agent", "name", "parser", "steps", "final"), [
    ("claude", "transcript.jsonl", ClaudeParser, [(2, Tokens(1200, 40, 10000, 3000)),
                                                  (3, Tokens(0, 140, 0, 0)), (6, Tokens(20, 300, 13000, 500))],
     Tokens(1220, 480, 23000, 3500)),
    ("codex", "rollout.jsonl", CodexParser, [(4, Tokens()), (6, Tokens(2000, 200, 3000, 0)),
                                             (9, Tokens(1000, 300, 5000, 0))], Tokens(3000, 500, 8000, 0)),
    ("gemini", "session.jsonl", GeminiParser, [(4, Tokens(3000, 200, 1000, 0)), (5, Tokens()),
                                               (7, Tokens(500, 60, 4000, 0))], Tokens(3500, 260, 5000, 0)),
    ("opencode", "usage.jsonl", OpencodeParser, [(1, Tokens()), (2, Tokens(1500, 220, 9000, 1200)),
                                                 (4, Tokens(30, 180, 10500, 300))], Tokens(1530, 400, 19500, 1500)),
])
def test_records_read_incrementally_while_they_grow(tmp_path: Path, agent: str, name: str,
                                                    parser: type[UsageParser], steps: list[tuple[int, Tokens]],
                                                    final: Tokens) -> None:
    path, lines = _grow(tmp_path, agent, name)
    reader, tail = parser(), TailState()
    written, total = 0, Tokens()
    for upto, expected in steps:
        chunk = b"".join(lines[written:upto])
        # Half a line first: an unfinished record is never parsed, and counts once it is complete.
        with path.open("ab") as fh:
            fh.write(chunk[:-7])
        partial = _read(path, reader, tail)
        with path.open("ab") as fh:
            fh.write(chunk[-7:])
        delta = partial + _read(path, reader, tail)
        assert delta == expected, f"lines {written}..{upto}"
        total = total + delta
        written = upto
    assert total == final
    assert _read(path, reader, tail) == Tokens()  # nothing new, nothing counted


@pytest.mark.parametrize(("agent", "name", "parser"), [
    ("claude", "transcript.jsonl", ClaudeParser), ("gemini", "session.jsonl", GeminiParser),
    ("opencode", "usage.jsonl", OpencodeParser)])
def test_truncated_or_rotated_records_never_count_twice(tmp_path: Path, agent: str, name: str,
                                                        parser: type[UsageParser]) -> None:
    path, lines = _grow(tmp_path, agent, name)
    path.write_bytes(b"".join(lines))
    reader, tail = parser(), TailState()
    first = _read(path, reader, tail)
    assert first.total > 0
    path.write_bytes(b"".join(lines[:2]))  # truncated to less than was read
    assert _read(path, reader, tail) == Tokens()
    assert tail.resets == 1
    rotated = tmp_path / "rotated"
    rotated.write_bytes(b"".join(lines))
    os.replace(rotated, path)  # replaced (new inode) by the same records
    assert _read(path, reader, tail) == Tokens()
    assert tail.resets == 2


def test_codex_new_content_after_truncation_counts_from_zero(tmp_path: Path) -> None:
    path, lines = _grow(tmp_path, "codex", "rollout.jsonl")
    path.write_bytes(b"".join(lines))
    reader, tail = CodexParser(), TailState()
    assert _read(path, reader, tail) == Tokens(3000, 500, 8000, 0)
    path.write_bytes(b"".join(lines[:6]))  # a new thread: its cumulative totals restart
    reader.reset()
    assert _read(path, reader, tail) == Tokens(2000, 200, 3000, 0)


def test_pricing_longest_prefix_and_user_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  repo: Path) -> None:
    from daintree_tui.sessions.records import prices_from
    from daintree_tui.sessions.usage import DEFAULT_PRICES

    assert price_for("claude-sonnet-4-5-20250929", DEFAULT_PRICES) == DEFAULT_PRICES["claude-sonnet-4"]
    assert price_for("gemini-2.5-flash-lite", DEFAULT_PRICES) == DEFAULT_PRICES["gemini-2.5-flash-lite"]
    assert price_for("openai/gpt-5-codex", DEFAULT_PRICES) == DEFAULT_PRICES["gpt-5"]
    assert price_for("llama-local", DEFAULT_PRICES) is None
    assert Price(3.0, 15.0, 0.3, 3.75).cost(Tokens(1_000_000, 1_000_000, 1_000_000, 1_000_000)) == 22.05
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree"
    user.mkdir(parents=True)
    (user / "config.toml").write_text('[pricing."claude-sonnet-4"]\ninput = 1.0\noutput = 2.0\n'
                                      "[budget]\ndaily = 5.0\nper_session_tokens = 100000\n")
    (repo / ".daintree.toml").write_text('[pricing."claude-sonnet-4"]\ninput = 0\noutput = 0\n'
                                         "[budget]\ndaily = 50.0\nper_session_tokens = 1000\nper_task = 2\n")
    cfg = load_config(repo)
    assert prices_from(cfg.pricing)["claude-sonnet-4"].input == 1.0  # the repo's prices are ignored
    # A repository can tighten the user's budgets, never loosen them.
    assert cfg.budget == {"daily": 5.0, "per_session_tokens": 1000.0, "per_task": 2.0}


# -- presets: installed, default agent, resume -----------------------------------------------------------------


def test_default_agent_is_the_first_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: Path) -> None:
    from daintree_tui.sessions.presets import all_presets, default_agent_name, resolve_preset

    bin_dir = fake_agent.install(tmp_path / "bin", ("gemini", "opencode"))
    monkeypatch.setenv("PATH", str(bin_dir))
    cfg = load_config(repo)
    assert default_agent_name(cfg) == "gemini"
    presets = all_presets(cfg)
    assert presets["gemini"].installed() and not presets["claude"].installed()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert default_agent_name(cfg) == "shell"
    shell = resolve_preset(cfg, None)
    assert shell.name == "shell" and shell.prompt_mode == "none"  # shell never gets task text
    (repo / ".daintree.toml").write_text('default_agent = "opencode"\n')
    assert default_agent_name(load_config(repo)) == "opencode"


def test_agents_command_lists_installed_and_sources(cli: CLI, fake_bin: Path) -> None:
    data = {a["name"]: a for a in cli.json("agents")}
    for name in AGENTS:
        assert data[name]["installed"] is True
        assert data[name]["status_source"] == "hooks"
        assert data[name]["path"] == str(fake_bin / name)
    assert data["claude"]["default"] is True
    assert data["aider"]["status_source"] == "output" and data["aider"]["resume"] is None
    assert data["codex"]["resume"] == "resume --last" and data["gemini"]["resume"] == "--resume latest"
    assert data["claude"]["interrupt"] == "Escape" and data["codex"]["interrupt"] == "C-c"
    text = cli.ok("agents").stdout
    assert "* claude" in text and "INSTALLED" in text


def test_resume_argv_per_agent(repo: Path) -> None:
    from daintree_tui.core.errors import InputError
    from daintree_tui.sessions.presets import all_presets

    presets = all_presets(load_config(repo))
    assert presets["claude"].resume_argv() == ["claude", "--continue"]
    assert presets["codex"].resume_argv() == ["codex", "resume", "--last"]
    assert presets["gemini"].resume_argv() == ["gemini", "--resume", "latest"]
    assert presets["opencode"].resume_argv() == ["opencode", "--continue"]
    assert not presets["shell"].can_resume
    with pytest.raises(InputError):
        presets["shell"].resume_argv()


# -- hooks through a real tmux session -------------------------------------------------------------------------


def _statuses_since(repo: Path, name: str, start: int) -> list[str]:
    return [e["event"] for e in events(repo)[start:]
            if e["event"] in ("session.running", "session.waiting") and (e.get("worktree") or {}).get("name") == name]


def _start(cli: CLI, repo: Path, name: str, agent: str, **kwargs: Any) -> Any:
    """A worktree and a session of `agent` in it; the services that observe it."""
    from daintree_tui.services import Services

    cli.ok("worktree", "create", name)
    services = Services(Project.discover(repo))
    services.sessions.start(name, agent, size=(100, 30), **kwargs)
    return services


def _ready(services: Any, repo: Path, name: str) -> None:
    """Wait until the agent's SessionStart hook said it waits for input (the signal's event logged)."""
    wait_for(lambda: _info(services, name).status_source == "hooks"
             and "session.waiting" in _statuses_since(repo, name, 0), timeout=30)


def _info(services: Any, name: str) -> Any:
    """One observer tick, as the dashboard's poll does it: applies sandboxed sessions' inbox requests (their
    signals), records transitions, reads new usage, checks budgets."""
    return next(i for i in services.observe_tick().sessions if i.name == name)


@needs_tmux
@pytest.mark.parametrize("agent", AGENTS)
def test_hooks_wired_per_session_report_each_turn(cli: CLI, repo: Path, tmux_socket: str, fake_bin: Path,
                                                  agent: str) -> None:
    if agent == "opencode" and shutil.which("node") is None:
        pytest.skip("node is needed to run the opencode plugin")
    user_files = sorted(p for p in Path(os.environ["HOME"]).rglob("*"))
    name = f"hk-{agent}"
    services = _start(cli, repo, name, agent)
    manager = services.sessions
    meta = manager.meta(name)
    session_dir = repo / ".worktrees" / ".sessions" / name
    assert oct(session_dir.stat().st_mode & 0o777) == "0o700"
    assert meta["status_source"] == "hooks"
    if agent in ("claude", "gemini", "opencode"):  # they report being ready for input at start
        _ready(services, repo, name)
        assert str(_info(services, name).status) == "waiting"
    for turn in ("fix the bug", "and the test"):  # the second turn starts from a hook-reported `waiting`
        mark = len(events(repo))
        manager.send(name, turn)
        wait_for(lambda m=mark: _info(services, name) and "session.running" in _statuses_since(repo, name, m),
                 timeout=30)
        wait_for(lambda m=mark: _info(services, name) and _statuses_since(repo, name, m)[-1:] == ["session.waiting"]
                 and manager.capture(name).count("done") >= 1, timeout=30)
        assert _statuses_since(repo, name, mark) == ["session.running", "session.waiting"], turn
    info = _info(services, name)
    assert info.status_source == "hooks" and str(info.status) == "waiting"
    # The usage it recorded, read from its own records (new record files are looked for every few seconds).
    wait_for(lambda: _info(services, name) and manager.usage_summary([name])[name]["tokens"]["output"] >= 100,
             timeout=20, interval=0.3)
    usage = manager.usage_summary([name])[name]["tokens"]
    calls = usage["output"] // 50
    assert usage["input"] == 100 * calls and usage["cache_read"] == 300 * calls
    assert usage["cache_write"] == (20 * calls if agent in ("claude", "opencode") else 0)
    # Nothing of the user's was edited: the only new files are the agent's own records, and the empty settings
    # a sandbox makes read-only (sessions.sandbox.AGENT_AUTORUN) where the user had none, and the ownership marker
    # of gemini's history folder for the worktree (agent_folders.GEMINI_OWNER), naming the worktree.
    new = [p for p in Path(os.environ["HOME"]).rglob("*") if p not in user_files and p.is_file()]
    assert all(p.suffix == ".jsonl" or p.read_text() in ("{}\n", "")
               or (p.name == ".project_root" and p.read_text().endswith(f"/{name}")) for p in new), new
    listed = {s["name"]: s for s in cli.json("session", "list")}
    assert listed[name]["status_source"] == "hooks" and listed[name]["agent_installed"] is True
    assert listed[name]["usage"]["tokens"]["output"] == 50 * calls


# The noise tests' quiet debounce (config `sessions.waiting_debounce`, 2 s by default) and the fake agent's pause
# after each burst of output, longer than it (and than tmux's once-a-second activity report): a status that
# followed output would turn `waiting` in each pause and `running` at each burst.
NOISE_DEBOUNCE = 0.5
NOISE_PAUSE = 1.3


@needs_tmux
def test_no_status_flapping_under_bursty_output(cli: CLI, repo: Path, tmux_socket: str, fake_bin: Path) -> None:
    """Bursts of output separated by more than the quiet debounce (a user navigating, a redraw) leave a hooked
    agent `waiting`: only its own hooks start a turn."""
    name = "burst"
    (repo / ".daintree.toml").write_text(f"[sessions]\nwaiting_debounce = {NOISE_DEBOUNCE}\n")
    services = _start(cli, repo, name, "claude")
    manager = services.sessions
    _ready(services, repo, name)
    mark = len(events(repo))
    manager.send(name, f"/noise {NOISE_PAUSE}")
    seen = set()

    def bursts_over() -> bool:
        seen.add(str(_info(services, name).status))
        return "redraw 3.19" in manager.capture(name, history=200)

    wait_for(bursts_over, timeout=40, interval=0.3)  # four bursts, each followed by more than the debounce
    assert seen == {"waiting"}
    assert _statuses_since(repo, name, mark) == []


@needs_tmux
def test_resume_uses_the_preset_resume_command(cli: CLI, repo: Path, tmux_socket: str, fake_bin: Path) -> None:
    name = "again"
    manager = _start(cli, repo, name, "codex").sessions
    manager.stop(name)
    data = json.loads(cli.ok("session", "start", name, "--resume", "--json").stdout)
    assert data["agent"] == "codex"  # the worktree's own agent
    command = manager.meta(name)["command"]
    assert command[0] == "codex" and command[1] == "-c" and command[2].startswith("notify=")
    assert command[-2:] == ["resume", "--last"]
    assert manager.meta(name)["resumed"] is True
    cli.ok("session", "stop", name)
    proc = cli("session", "start", name, "--resume", "--agent", "shell")
    assert proc.returncode == 2 and "no resume command" in proc.stderr


def test_resumed_conversation_counts_only_new_spend(tmp_path: Path, repo: Path, fake_bin: Path) -> None:
    """A record file the agent wrote before the run (the conversation it resumes) is not counted again."""
    from daintree_tui.sessions.agents import integration_for
    from daintree_tui.sessions.agents.claude import project_slug
    from daintree_tui.sessions.manager import SessionManager

    project = Project.discover(repo)
    manager = SessionManager(project, host=None)
    ctx = manager.context("old", dict(os.environ))
    transcript = (Path(os.environ["HOME"]) / ".claude" / "projects" / project_slug(str(ctx.worktree))
                  / "s.jsonl")
    transcript.parent.mkdir(parents=True)
    lines = (FIXTURES / "claude" / "transcript.jsonl").read_text().splitlines(keepends=True)
    transcript.write_text("".join(lines[:3]))
    claude = integration_for("claude")
    manager.usage.begin("old", ctx, claude, "claude", None, time.time())
    manager.usage.update("old", ctx, claude)
    assert manager.usage.runs("old", current_only=True)[0].totals.tokens == Tokens()
    with transcript.open("a") as fh:
        fh.write("".join(lines[3:]))
    manager.usage.update("old", ctx, claude)
    assert manager.usage.runs("old", current_only=True)[0].totals.tokens == Tokens(20, 300, 13000, 500)


# -- budgets: a fake agent that spends is stopped --------------------------------------------------------------


def _write_user_config(text: str) -> None:
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree"
    user.mkdir(parents=True, exist_ok=True)
    (user / "config.toml").write_text(text)


@needs_tmux
@pytest.mark.parametrize(("agent", "keys"), [("claude", ["Escape"]), ("codex", ["C-c"])])
def test_budget_stops_a_spending_session_and_the_queue(cli: CLI, repo: Path, tmux_socket: str, fake_bin: Path,
                                                       agent: str, keys: list[str]) -> None:
    from daintree_tui.services import Services

    _write_user_config("[budget]\nper_session_tokens = 2500\n")
    name = f"spend-{agent}"
    services = _start(cli, repo, name, agent)
    manager = services.sessions
    if agent == "claude":
        _ready(services, repo, name)
    manager.send(name, "spend")
    # The observer's tick (the dashboard's poll, `session watch`, every queue pass) enforces the budgets.
    wait_for(lambda: services.observe_tick().budget.reason is not None, timeout=60, interval=0.2)
    wait_for(lambda: "INTERRUPTED" in manager.capture(name), timeout=20)
    log = [e for e in events(repo) if e["event"].startswith(("budget.", "session.over_budget", "session.interr"))]
    kinds = [e["event"] for e in log]
    assert kinds[:4] == ["budget.warning", "budget.warning", "budget.exceeded", "session.over_budget"] or \
        kinds[:3] == ["budget.warning", "budget.exceeded", "session.over_budget"]
    interrupted = next(e for e in log if e["event"] == "session.interrupted")
    assert interrupted["keys"] == keys and interrupted["reason"] == "budget"
    assert manager.meta(name)["over_budget"]["scope"] == "per_session"
    assert _info(services, name).over_budget is not None
    # It stopped spending: its turn ended, and nothing more is recorded after the interrupt.
    wait_for(lambda: "done" in manager.capture(name).split("INTERRUPTED", 1)[-1], timeout=20)
    manager.update_usage(name)
    spent = manager.usage_summary([name])[name]["tokens"]["total"]
    _info(services, name)
    assert manager.usage_summary([name])[name]["tokens"]["total"] == spent
    # The queue starts nothing new while a limit is exceeded.
    cli.ok("task", "create", "next job", "--agent", "claude")
    report = services.queue.step()
    assert report.blocked and report.started == []
    assert any(e["event"] == "queue.blocked" for e in events(repo))
    # Raising the limit clears it, and the queue goes on.
    _write_user_config("[budget]\nper_session_tokens = 1000000\n")
    raised = Services(Project.discover(repo))
    assert raised.observe_tick().budget.reason is None
    assert "over_budget" not in raised.sessions.meta(name)
    assert any(e["event"] == "budget.cleared" for e in events(repo))
    report = raised.queue.step()
    assert report.blocked is None and report.started == ["next-job"]


def test_budget_evaluate_scopes_and_units() -> None:
    from daintree_tui.services.usage import evaluate
    from daintree_tui.sessions.usage import Totals

    a = Totals(Tokens(1000, 500, 0, 0), 0.9)
    b = Totals(Tokens(10, 10, 0, 0), 0.01)
    checks = evaluate({"per_session": 1.0, "per_task_tokens": 1500, "daily": 0.5}, 0.8,
                      {"a": a, "b": b}, {7: a}, a.merge(b), "2026-11-30")
    levels = {c.key: c.level for c in checks}
    assert levels == {"per_session:a:cost": "warn", "per_session:b:cost": "ok", "per_task:7:tokens": "over",
                      "daily:2026-11-30:cost": "over"}


# -- the usage command ------------------------------------------------------------------------------------------


def test_usage_command_totals_sessions_tasks_and_bakeoffs(cli: CLI, repo: Path, fake_bin: Path) -> None:

    cli.ok("task", "create", "login")
    cli.ok("worktree", "create", "fix", "--task", "1")
    manager, ctx, claude, transcript = claude_usage_watched(repo, "fix")
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    text = (FIXTURES / "claude" / "transcript.jsonl").read_text().replace("2026-11-30T09:00", now[:16])
    transcript.write_text(text)
    manager.usage.update("fix", ctx, claude)
    data = cli.json("usage")
    session = next(s for s in data["sessions"] if s["name"] == "fix")
    assert session["tokens"] == {**Tokens(1220, 480, 23000, 3500).to_dict()}
    expected = (1220 * 3 + 480 * 15 + 23000 * 0.30 + 3500 * 3.75) / 1e6
    assert abs(session["cost"] - expected) < 1e-9
    assert data["tasks"][0]["task_id"] == 1 and data["total"]["cost"] == session["cost"]
    assert data["pricing_checked"]
    assert cli.json("usage", "--since", "2h")["total"]["tokens"]["total"] == Tokens(1220, 480, 23000, 3500).total
    text_out = cli.ok("usage").stdout
    assert "fix" in text_out and "checked" in text_out
    proc = cli("usage", "--since", "yesterday-ish")
    assert proc.returncode == 2 and "--since" in proc.stderr


def test_usage_records_an_agent_forges_cannot_crash_or_shrink_the_count(cli: CLI, repo: Path,
                                                                        fake_bin: Path) -> None:
    """The agent writes its own records (~/.claude is its folder, writable in its sandbox). `1e999` tokens raised
    OverflowError out of every observer tick (the dashboard's poll, `session watch`, the queue: budgets stopped
    for every session), a negative count without an id took tokens off its total, and a record dated in 2001
    left today's daily budget."""

    cli.ok("worktree", "create", "forge")
    manager, ctx, claude, transcript = claude_usage_watched(repo, "forge")

    def line(usage: str, extra: str = "") -> str:
        return f'{{"type": "assistant"{extra}, "message": {{"id": "m{len(usage)}", "usage": {{{usage}}}}}}}\n'

    transcript.write_text(line('"input_tokens": 1000')
                          + line('"input_tokens": 500', ', "timestamp": "2001-01-01T00:00:00Z"')
                          + '{"type": "assistant", "message": {"usage": {"input_tokens": -100000}}}\n'
                          + line('"input_tokens": 1e999, "output_tokens": NaN', ', "timestamp": 1e999'))
    manager.usage.update("forge", ctx, claude)  # raised OverflowError
    tokens = manager.usage_summary(["forge"])["forge"]["tokens"]
    assert tokens["input"] >= 1500, tokens
    today = cli.json("usage", "--since", "2h")["total"]["tokens"]["total"]
    assert today >= 1500, today  # the back-dated record counts today, when it was read
    assert cli("usage").returncode == 0


def test_usage_records_nested_too_deep_or_never_ending_cannot_stop_or_swell_the_count(cli: CLI, repo: Path) -> None:
    """The agent writes its own transcript. A line of `[[[[...` raised RecursionError out of every observer tick (as
    `1e999` did), and a line that never ends (a sparse file of zeros) grew the kept unfinished line by 8 MB at
    every look, in memory and in the session's usage.json (48 MB of JSON after one look, rewritten at each)."""
    cli.ok("worktree", "create", "forge")
    manager, ctx, claude, transcript = claude_usage_watched(repo, "forge")

    def line(message: str, tokens: int) -> str:
        return f'{{"type": "assistant", "message": {{"id": "{message}", "usage": {{"input_tokens": {tokens}}}}}}}\n'

    transcript.write_text(line("m1", 100) + "[" * 100_000 + "\n" + line("m2", 20))
    manager.usage.update("forge", ctx, claude)  # raised RecursionError
    assert manager.usage_summary(["forge"])["forge"]["tokens"]["input"] == 120
    with transcript.open("ab") as fh:
        fh.truncate(transcript.stat().st_size + 30 * 1024 * 1024)  # 30 MB of zeros, no newline, no disk
    usage_file = manager.usage.path("forge")
    for _ in range(5):
        manager.usage.update("forge", ctx, claude)
        assert usage_file.stat().st_size < 4 * 1024 * 1024, usage_file.stat().st_size
    with transcript.open("a") as fh:
        fh.write("\n" + line("m3", 3))
    manager.usage.update("forge", ctx, claude)
    assert manager.usage_summary(["forge"])["forge"]["tokens"]["input"] == 123


@pytest.mark.parametrize("config", ["fifo", "nested"])
def test_a_fifo_or_a_nested_file_in_codexs_folder_cannot_stall_the_observer(cli: CLI, repo: Path, fake_bin: Path,
                                                                            config: str) -> None:
    """~/.codex is the agent's to write in its sandbox. A FIFO named like a rollout blocked `recent_records`'s open
    for good (no writer comes): `session list`, the dashboard's poll and `session watch` hung at the next rescan.
    A FIFO (or `a = [[[[...`) as config.toml did the same (RecursionError) to every codex session's start."""
    import threading

    from daintree_tui.sessions.agents import integration_for
    from daintree_tui.sessions.manager import SessionManager

    cli.ok("worktree", "create", "cx")
    ctx = SessionManager(Project.discover(repo), host=None).context("cx", dict(os.environ))
    codex_home = Path(os.environ["HOME"]) / ".codex"
    day = codex_home / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True)
    os.mkfifo(day / "rollout-planted.jsonl")
    if config == "fifo":
        os.mkfifo(codex_home / "config.toml")
    else:
        (codex_home / "config.toml").write_text("notify = " + "[" * 100_000)
    codex = integration_for("codex")
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.extend([codex.record_files(ctx), codex.user_notify(ctx)]),
                              daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "blocked on the FIFO"
    assert results == [[], None]


def test_a_sparse_terabyte_record_cannot_hold_a_session_start(cli: CLI, repo: Path, fake_bin: Path) -> None:
    """A record file that exists when a run begins is read to learn what was counted already: a sparse file of a
    terabyte (the agent's own folder, no disk used) was read whole, and the session start waited for it."""
    import threading

    from daintree_tui.sessions.agents import integration_for
    from daintree_tui.sessions.agents.claude import project_slug
    from daintree_tui.sessions.manager import SessionManager

    def line(message: str, tokens: int) -> str:
        return f'{{"type": "assistant", "message": {{"id": "{message}", "usage": {{"input_tokens": {tokens}}}}}}}\n'

    cli.ok("worktree", "create", "big")
    manager = SessionManager(Project.discover(repo), host=None)
    ctx = manager.context("big", dict(os.environ))
    transcript = (Path(os.environ["HOME"]) / ".claude" / "projects" / project_slug(str(ctx.worktree)) / "s.jsonl")
    transcript.parent.mkdir(parents=True)
    transcript.write_text(line("m1", 100))
    with transcript.open("ab") as fh:
        fh.truncate(transcript.stat().st_size + 2**40)
    with transcript.open("a") as fh:
        fh.write("\n" + line("m2", 7))
    claude = integration_for("claude")
    began = threading.Thread(target=manager.usage.begin, args=("big", ctx, claude, "claude", 1, time.time()),
                             daemon=True)
    began.start()
    began.join(timeout=30)
    assert not began.is_alive(), "still reading the terabyte"
    with transcript.open("a") as fh:
        fh.write(line("m3", 20))
    manager.usage.update("big", ctx, claude)
    assert manager.usage_summary(["big"])["big"]["tokens"]["input"] == 20  # m2 was there before: not this run's


def test_signal_ignores_a_late_older_signal(cli: CLI, repo: Path) -> None:
    from daintree_tui.sessions.manager import SessionManager

    cli.ok("worktree", "create", "sig")
    manager = SessionManager(Project.discover(repo), host=None)
    now = time.time()
    assert manager.signal("sig", "waiting", at=now) is not None
    assert manager.signal("sig", "running", at=now - 0.5) is None  # fired earlier, arrived later: ignored
    assert manager.meta("sig")["signal"]["state"] == "waiting"
    proc = subprocess.run([sys.executable, "-m", "daintree_tui", "session", "signal", "sig", "running",
                           '{"type": "agent-turn-complete"}', "--repo", str(repo)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_dashboard_session_cell_shows_cost_and_over_budget() -> None:
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.sessions.status import SessionStatus
    from daintree_tui.tui.widgets.worktree_table import session_cell

    info = SessionInfo("a", "dt-a", "claude", SessionStatus.RUNNING, None, 1, 0.0, "", True, status_source="hooks",
                       usage={"cost": 0.4242, "tokens": {"total": 10}})
    assert session_cell(info).plain == "▶ running $0.42"
    stopped = SessionInfo("a", "dt-a", "claude", SessionStatus.WAITING, None, 1, 0.0, "", True,
                          status_source="hooks", over_budget={"scope": "daily"}, usage={"cost": 9.0})
    assert session_cell(stopped).plain.endswith("over budget")
    doubtful = SessionInfo("a", "dt-a", "codex", SessionStatus.RUNNING, None, 1, 0.0, "", True,
                           status_source="hooks", usage={"cost": 0.5, "tokens": {"total": 10}, "trusted": False})
    assert session_cell(doubtful).plain == "▶ running $0.50 ?"  # its records could not all be trusted


def test_wiring_inherited_from_a_parent_session_is_not_taken_for_the_users(tmp_path: Path) -> None:
    """An agent that starts another session (through daintree) passes its own wiring in its environment: the
    child's wiring replaces it rather than stacking the parent's hooks."""
    from daintree_tui.sessions.agents import SessionContext, integration_for
    from daintree_tui.sessions.agents.base import write_signal_script

    parent_dir = tmp_path / ".worktrees" / ".sessions" / "parent"
    child_dir = tmp_path / ".worktrees" / ".sessions" / "child"
    parent = SessionContext("parent", tmp_path, tmp_path / "p", parent_dir, {}, tmp_path / "tp")
    write_signal_script(parent)
    gemini, opencode = integration_for("gemini"), integration_for("opencode")
    assert gemini is not None and opencode is not None
    env = {**gemini.wire(parent, ["gemini"]).env, **opencode.wire(parent, ["opencode"]).env}
    child = SessionContext("child", tmp_path, tmp_path / "c", child_dir, env, tmp_path / "tc")
    write_signal_script(child)
    child_env = gemini.wire(child, ["gemini"]).env
    settings = json.loads(Path(child_env["GEMINI_CLI_SYSTEM_DEFAULTS_PATH"]).read_text())
    commands = [h["command"] for entries in settings["hooks"].values() for e in entries for h in e["hooks"]]
    assert commands and all("child" in c and "parent" not in c for c in commands)
    assert opencode.wire(child, ["opencode"]).env == {"OPENCODE_CONFIG": str(child_dir / "opencode.json")}


def claude_usage_watched(repo: Path, name: str) -> tuple[Any, Any, Any, Path]:
    """A claude session's usage followed for worktree `name` (no tmux): the manager, its context, the claude
    integration and the transcript file the agent would write (its folder made)."""
    from daintree_tui.sessions.agents import integration_for
    from daintree_tui.sessions.agents.claude import project_slug
    from daintree_tui.sessions.manager import SessionManager

    manager = SessionManager(Project.discover(repo), host=None)
    # Claude's folder of this test's own (never the real ~/.claude: a test wrote 30 MB transcripts there).
    config_dir = repo.parent / f"claude-{name}"
    ctx = manager.context(name, {**os.environ, "CLAUDE_CONFIG_DIR": str(config_dir)})
    claude = integration_for("claude")
    manager.usage.begin(name, ctx, claude, "claude", 1, time.time())
    transcript = config_dir / "projects" / project_slug(str(ctx.worktree)) / "s.jsonl"
    transcript.parent.mkdir(parents=True)
    return manager, ctx, claude, transcript


@needs_tmux
@pytest.mark.parametrize("agent", ["claude", "gemini"])
def test_the_dashboards_live_status_believes_hooks_as_session_list_does(cli: CLI, repo: Path, tmux_socket: str,
                                                                          fake_bin: Path, agent: str) -> None:
    """The dashboard showed gemini and opencode `running` for minutes while `session list` said `waiting`: its live
    status read the agent's `waiting` signal as another agent's, so the first redraw after it (the dashboard
    resizing the pane, a spinner, the user moving in a menu) turned it `running` until the next signal. A
    hooked agent's `waiting` now holds there too until its hooks (or, for Codex, its records) say a turn began."""
    from daintree_tui.sessions.live import LiveSessions

    name = f"live-{agent}"
    (repo / ".daintree.toml").write_text(f"[sessions]\nwaiting_debounce = {NOISE_DEBOUNCE}\n")
    services = _start(cli, repo, name, agent)
    manager = services.sessions
    _ready(services, repo, name)
    live = LiveSessions(manager, record=lambda change: None).start()
    try:
        status = lambda: next((str(i.status) for i in live.infos() if i.name == name), None)  # noqa: E731
        wait_for(lambda: status() == "waiting", timeout=15)
        manager.send(name, f"/noise {NOISE_PAUSE}")
        seen = set()

        def bursts_over() -> bool:
            seen.add(status())
            return "redraw 3.19" in manager.capture(name, history=200)

        wait_for(bursts_over, timeout=40, interval=0.3)
        assert seen == {"waiting"}
        manager.send(name, "spend")  # a turn: the agent's prompt hook says running
        # A sandboxed agent's signal arrives through its inbox, which the dashboard's poll applies.
        wait_for(lambda: _info(services, name) and status() == "running", timeout=15)
    finally:
        live.close()


AIDER = shutil.which("aider")  # looked up before any test hides the agent CLIs from PATH


@pytest.mark.skipif(AIDER is None and not os.environ.get("CI"), reason="aider is not installed")
@pytest.mark.real_agents  # the real aider (9 CPU-s, 15 s): `make test-agents` runs it, in CI after `make test`
def test_aiders_own_files_are_not_the_worktrees_work(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """The real aider, sandboxed, writes its chat history and its repo map's cache at the top of the worktree: the
    worktree stayed dirty and `train`/`worktree merge` skipped it ("uncommitted changes"). Its histories now go to
    the session's folder and its cache folder holds a `.gitignore` of `*`: the worktree is clean, and it lands."""
    assert AIDER is not None
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"[agents.aider]\ncommand = \"{AIDER} --exit --no-check-update --model gpt-4o "
                      "--openai-api-key sk-test --no-show-model-warnings --analytics-disable\"\n")
    for key, value in (("user.name", "Tester"), ("user.email", "tester@example.invalid")):
        git(repo, "config", key, value)  # else aider writes them into .git/config, read-only in its sandbox
    cli.ok("worktree", "create", "aid")
    worktree = repo / ".worktrees" / "aid"
    (worktree / "feature.py").write_text("print('feature')\n")
    cli.ok("worktree", "commit", "aid", "--all", "-m", "feature")
    (worktree / ".aider.chat.history.md").write_text("an earlier chat of the user's\n")  # stays where it is
    cli.ok("session", "start", "aid", "--agent", "aider")
    history = repo / ".worktrees" / ".tmp" / "aid" / "aider" / "chat.history.md"
    wait_for(lambda: history.is_file() and "aider chat started" in history.read_text(), timeout=60)

    def cache_written() -> bool:
        return any(p.name != ".gitignore" for c in worktree.glob(".aider.tags.cache.v*") for p in c.iterdir())

    wait_for(cache_written, timeout=60)
    cli.ok("session", "stop", "aid")
    assert (worktree / ".aider.chat.history.md").read_text() == "an earlier chat of the user's\n"
    assert not (worktree / ".gitignore").exists()  # aider was not let add `.aider*` to it
    (worktree / ".aider.chat.history.md").unlink()  # the user's own file, moved by the user
    assert cli.json("worktree", "status", "aid")["dirty_files"] == []
    assert [(r["worktree"], r["result"]) for r in cli.json("train", "aid")] == [("aid", "merged")]
