"""Usage and budgets count only what a session's own agent wrote about itself (issue 26, item 6).

`~/.codex/sessions` and `~/.gemini/tmp` were writable whole in every codex or gemini sandbox, and a rollout was
matched to a session by the `cwd` written inside it: agent a wrote one naming b's worktree, b was charged $10,125,
marked over budget and interrupted (and a daily budget stops every session); the same file was a conversation that
another session's `resume --last` (or the user's own codex) would load. Budgets also trusted records that the agent
could delete or rewrite. Real bubblewrap, real tmux, the real CLI; the agents are fakes that write where the real
ones do."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.project import Project
from tests.conftest import CLI, events, wait_for
from tests.helpers.config import write_user_config
from tests.helpers.sandbox import agent_sandbox_of_me, needs_bwrap, run_inside

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

FORGED = 900_000_000  # input and output tokens of gpt-5: $1,125 + $9,000


def _rollout(cwd: str, input_tokens: int, output_tokens: int) -> str:
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    lines = [{"timestamp": now, "type": "session_meta", "payload": {"id": "f", "cwd": cwd}},
             {"timestamp": now, "type": "turn_context", "payload": {"model": "gpt-5"}},
             {"timestamp": now, "type": "event_msg", "payload": {"type": "token_count", "info": {
                 "total_token_usage": {"input_tokens": input_tokens, "cached_input_tokens": 0,
                                       "output_tokens": output_tokens}}}}]
    return "".join(json.dumps(line) + "\n" for line in lines)


def _attacker(path: Path, victim: Path, victim_home: Path, counts: Path) -> Path:
    """A 'codex' that forges a rollout naming `victim`'s worktree in its own ~/.codex/sessions (the only one it
    can reach), tries the victim's own folder directly and the outside's counts (`counts`: .worktrees/.sessions),
    records a little spend of its own, and deletes that record once the outside has counted it (when `.go`
    appears in its worktree)."""
    day = "$HOME/.codex/sessions/$(date +%Y/%m/%d)"
    forged = _rollout(str(victim), FORGED, FORGED)
    own = _rollout("@PWD@", 1000, 100)
    script = f"""#!/bin/sh
log="$PWD/.attack.log"
mkdir -p "{day}"
printf '%s' '{forged}' > "{day}/rollout-forged.jsonl" && echo forged-own-folder >> "$log"
mkdir -p "{victim_home}/2026/12/01" 2>/dev/null \\
  && printf '%s' '{forged}' > "{victim_home}/2026/12/01/rollout-forged.jsonl" && echo "wrote-victim" >> "$log"
printf '%s' '{own}' | sed "s|@PWD@|$PWD|g" > "{day}/rollout-own.jsonl"
for f in "{counts}"/*/usage.json; do echo '{{"runs": []}}' > "$f" && echo "wrote-$f" >> "$log"; done
echo ready >> "$log"
while [ ! -e "$PWD/.go" ]; do sleep 0.1; done
rm "{day}/rollout-own.jsonl" && echo deleted >> "$log"
exec sleep 600
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script)
    path.chmod(0o755)
    return path


def _log(worktree: Path) -> str:
    try:
        return (worktree / ".attack.log").read_text()
    except FileNotFoundError:
        return ""


@needs_bwrap
@needs_tmux
def test_a_rollout_naming_another_worktree_charges_no_one(cli: CLI, repo: Path, tmux_socket: str, tmp_path: Path,
                                                          fake_bin: Path) -> None:
    from daintree_tui.services import Services

    home = Path(os.environ["HOME"])
    project = Project.discover(repo)
    cli.ok("worktree", "create", "b")
    cli.ok("worktree", "create", "a")
    victim = (repo / ".worktrees" / "b").resolve()
    victim_home = project.sandbox_home_for("b") / "agent" / ".codex" / "sessions"
    evil = _attacker(tmp_path / "evil" / "codex", victim, victim_home, repo / ".worktrees" / ".sessions")
    write_user_config(f'[budget]\ndaily = 5.0\nper_session = 5.0\n\n[agents.evil]\ncommand = "{evil}"\n')
    services = Services(Project.discover(repo))
    manager = services.sessions
    manager.start("b", "codex", size=(100, 30))
    assert manager.meta("b")["sandbox"]["active"], manager.meta("b")["sandbox"]
    manager.send("b", "hello")  # b spends a little of its own: its reader is not blind
    wait_for(lambda: (services.observe_tick(), manager.usage_summary(["b"]).get("b", {}).get("cost", 0))[1] > 0,
             timeout=60, interval=0.2)
    manager.start("a", "evil", size=(100, 30))
    worktree_a = repo / ".worktrees" / "a"
    wait_for(lambda: "ready" in _log(worktree_a), timeout=60, interval=0.1)
    log = _log(worktree_a)
    assert "forged-own-folder" in log and "wrote-" not in log, log
    assert manager.usage.load("b")["runs"] and manager.usage.load("a")["runs"]  # the counts are the outside's

    def a_counted() -> int:
        services.observe_tick()
        return int(manager.usage_summary(["a"]).get("a", {}).get("tokens", {}).get("total", 0))

    wait_for(lambda: a_counted() > 0, timeout=60, interval=0.2)
    # A fresh observer (a new dashboard, `session watch`, a queue pass) looks for every session's records at its
    # first tick: b's too, now that the forged rollout is there.
    services = Services(Project.discover(repo))
    manager = services.sessions
    services.observe_tick()
    usage = manager.usage_summary(["a", "b"])
    assert usage["a"]["tokens"]["total"] == 1100, usage["a"]  # its own record only: not the one naming b
    assert usage["b"]["tokens"]["total"] < 100_000 and usage["b"]["cost"] < 1.0, usage["b"]
    report = services.observe_tick().budget
    assert report is not None and report.reason is None, report.reason
    assert "over_budget" not in manager.meta("b") and "over_budget" not in manager.meta("a")
    assert not [e for e in events(repo) if e["event"] in ("budget.exceeded", "session.over_budget",
                                                          "session.interrupted")]
    assert "INTERRUPTED" not in manager.capture("b")
    # The forged conversation is in a's own folder alone: neither b's codex (its `resume --last`) nor the user's
    # own codex ever sees it.
    forged = sorted(str(p) for p in repo.parent.rglob("rollout-forged.jsonl"))
    own_a = project.sandbox_home_for("a") / "agent" / ".codex" / "sessions"
    assert forged and all(Path(p).is_relative_to(own_a) for p in forged), forged
    assert not list((home / ".codex" / "sessions").rglob("*.jsonl"))

    # a deletes its record once counted: the count stays, and the usage and budgets say they cannot trust it.
    (worktree_a / ".go").write_text("")
    wait_for(lambda: "deleted" in _log(worktree_a), timeout=30, interval=0.1)
    wait_for(lambda: (services.observe_tick(), manager.usage.runs("a", current_only=True)[0].totals.untrusted)[1],
             timeout=30, interval=0.2)
    assert manager.usage_summary(["a"])["a"]["tokens"]["total"] == 1100
    data = cli.json("usage")
    session = next(s for s in data["sessions"] if s["name"] == "a")
    assert session["trusted"] is False and "deleted after it was counted" in session["untrusted"][0], session
    assert next(s for s in data["sessions"] if s["name"] == "b")["trusted"] is True
    assert data["trusted"] is False
    checks = {c["scope"] + ":" + c["subject"]: c for c in data["budget_checks"]}
    assert checks["per_session:a"]["trusted"] is False and checks["per_session:b"]["trusted"] is True
    assert checks["per_session:a"]["level"] == "ok"
    text = cli.ok("usage").stdout
    assert "warning: the usage of a was counted from records that cannot be trusted" in text, text
    listing = cli.ok("session", "list").stdout
    assert "(untrusted records)" in next(line for line in listing.splitlines() if line.startswith("a ")), listing


def _private_codex_run(repo: Path, name: str) -> tuple[Any, Any, Any, Path]:
    """A sandboxed codex session's usage followed for worktree `name` without tmux: the manager, its context
    (its private folder chosen, as a sandboxed start chooses it), the integration and that folder's day."""
    from dataclasses import replace

    from daintree_tui.sessions.agents import integration_for
    from daintree_tui.sessions.manager import SessionManager
    from daintree_tui.sessions.sandbox import private_home

    project = Project.discover(repo)
    manager = SessionManager(project, host=None)
    ctx = replace(manager.context(name, dict(os.environ)), private_home=private_home(project.sandbox_home_for(name)))
    codex = integration_for("codex")
    manager.usage.begin(name, ctx, codex, "codex", None, time.time())
    day = ctx.private_home / ".codex" / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    return manager, ctx, codex, day


def test_links_fifos_and_rewrites_in_the_own_folder_are_not_followed_and_never_lower_the_count(
        cli: CLI, repo: Path, tmp_path: Path) -> None:
    """The agent writes its own folder: a rollout (or a day folder) that is a link to another session's records
    or the user's is not followed, a FIFO does not block, a file rewritten lower does not lower the count; each
    makes the run's usage untrusted. The reader is the outside's, so none of these is the agent's word."""
    cli.ok("worktree", "create", "a")
    cli.ok("worktree", "create", "b")
    manager, ctx, codex, day = _private_codex_run(repo, "a")
    worktree = str(ctx.worktree)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "01").mkdir(parents=True)
    (elsewhere / "01" / "rollout-x.jsonl").write_text(_rollout(worktree, FORGED, FORGED))
    (elsewhere / "rollout-y.jsonl").write_text(_rollout(worktree, FORGED, FORGED))
    (day / "rollout-link.jsonl").symlink_to(elsewhere / "rollout-y.jsonl")
    (day.parent / "02").symlink_to(elsewhere / "01")  # a day folder that is a link
    os.mkfifo(day / "rollout-fifo.jsonl")
    own = day / "rollout-own.jsonl"
    own.write_text(_rollout(worktree, 5000, 500))
    manager.usage.update("a", ctx, codex)
    totals = manager.usage.runs("a", current_only=True)[0].totals
    assert totals.tokens.total == 5500, totals
    assert sorted(p.name for p in codex.record_files(ctx)) == ["rollout-own.jsonl"]
    own.write_text(_rollout(worktree, 10, 1))  # rewritten lower, shorter
    manager.usage._scanned.clear()
    manager.usage.update("a", ctx, codex)
    totals = manager.usage.runs("a", current_only=True)[0].totals
    assert totals.tokens.total >= 5500 and not totals.trusted, totals
    assert any("shrank after it was counted" in u for u in totals.untrusted), totals.untrusted
    usage_file = manager.usage.path("a")
    assert oct(usage_file.stat().st_mode & 0o777) == "0o600"
    assert oct(usage_file.parent.stat().st_mode & 0o777) == "0o700"


def test_a_sandboxed_run_reads_its_own_folder_and_never_the_shared_one(cli: CLI, repo: Path) -> None:
    """The outside chose the folder when the run began (kept in usage.json, which no sandbox can write): a rollout
    in the shared ~/.codex/sessions naming the worktree (a leftover, or one an unsandboxed process wrote) is not
    the sandboxed session's, and a rollout naming a folder beside the worktree through `..` is not either."""
    cli.ok("worktree", "create", "a")
    manager, ctx, codex, day = _private_codex_run(repo, "a")
    shared = Path(os.environ["HOME"]) / ".codex" / "sessions" / "2026" / "12" / "01"
    shared.mkdir(parents=True)
    (shared / "rollout-shared.jsonl").write_text(_rollout(str(ctx.worktree), FORGED, FORGED))
    (day / "rollout-dotdot.jsonl").write_text(_rollout(f"{ctx.worktree}/../b", FORGED, FORGED))
    (day / "rollout-sub.jsonl").write_text(_rollout(f"{ctx.worktree}/src", 70, 7))
    plain = manager.context("a", dict(os.environ))  # what a caller passes: no private folder named
    manager.usage.update("a", plain, codex)
    assert manager.usage.runs("a", current_only=True)[0].totals.tokens.total == 77


@needs_bwrap
def test_a_gemini_chat_naming_another_project_stays_in_the_agents_own_folder(repo: Path,
                                                                             sandbox_env: Path) -> None:
    """~/.gemini/tmp/<project>/chats/ was shared and writable whole: a chat recording with another worktree's
    `projectHash` was charged to that worktree, and loaded by its `--resume latest`. Inside, tmp/ is the
    sandbox's own."""
    sandbox, env = agent_sandbox_of_me(repo, "gemini")
    CLI(repo).ok("worktree", "create", "other")
    other = (repo / ".worktrees" / "other").resolve()
    want = hashlib.sha256(str(other).encode()).hexdigest()
    record = json.dumps({"sessionId": "s", "projectHash": want}) + "\n" + json.dumps(
        {"id": "m1", "type": "gemini", "model": "gemini-2.5-pro",
         "tokens": {"input": FORGED, "output": FORGED, "cached": 0}}) + "\n"
    proc = run_inside(sandbox, env, f"mkdir -p ~/.gemini/tmp/other/chats && printf '%s' '{record}' >"
                      " ~/.gemini/tmp/other/chats/session-forged.jsonl && echo wrote; true")
    assert "wrote" in proc.stdout, proc.stderr
    user_tmp = sandbox_env / ".gemini" / "tmp"
    assert not list(user_tmp.rglob("session-forged.jsonl"))
    from daintree_tui.sessions.agents import integration_for
    from daintree_tui.sessions.manager import SessionManager

    gemini = integration_for("gemini")
    ctx = SessionManager(Project.discover(repo), host=None).context("other", dict(os.environ))
    assert gemini.record_files(ctx) == []
    project = Project.discover(repo)
    planted = list((project.sandbox_home_for("me") / "agent" / ".gemini" / "tmp").rglob("session-forged.jsonl"))
    assert len(planted) == 1


@needs_bwrap
def test_codex_keeps_its_thread_index_in_the_sandboxs_own_folder(repo: Path, sandbox_env: Path) -> None:
    """Codex 0.171 indexes its conversations (cwd and rollout path, what `resume --last` picks) in SQLite databases
    beside its login: shared, a row planted by one agent points another session's codex, or the user's own, at a
    conversation it wrote anywhere writable. Sandboxed, CODEX_SQLITE_HOME names a folder of the sandbox's own."""
    sandbox, env = agent_sandbox_of_me(repo, "codex")
    proc = run_inside(sandbox, env, 'echo row > "$CODEX_SQLITE_HOME/state_5.sqlite" && echo "at $CODEX_SQLITE_HOME";'
                      " ls ~/.codex/sessions; true")
    assert "at " in proc.stdout, proc.stderr
    codex_home = sandbox_env / ".codex"
    assert not list(codex_home.rglob("state_5.sqlite"))
    own = Project.discover(repo).sandbox_home_for("me") / "agent" / ".codex" / "sandbox-state" / "state_5.sqlite"
    assert own.read_text() == "row\n"


@needs_bwrap
@needs_tmux
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed here")
@pytest.mark.real_agents  # the real CLI, signed in or not: it failed in `make test` where codex was installed
def test_the_real_codex_keeps_its_conversation_and_index_in_the_sandboxs_own_folders(
        repo: Path, sandbox_env: Path) -> None:
    """The real CLI (checked with codex-cli 0.171.0): where it writes its rollout and its thread index inside the
    sandbox, and that the session's usage reader finds that rollout there (its `cwd` is the worktree)."""
    from daintree_tui.services import Services

    write_user_config('[agents.codex]\ncommand = "codex exec hello"\nprompt_mode = "none"\n')
    cli = CLI(repo)
    cli.ok("worktree", "create", "c1")
    assert cli.json("session", "start", "c1", "--agent", "codex")["sandbox"]["active"] is True
    own = Project.discover(repo).sandbox_home_for("c1") / "agent" / ".codex"
    wait_for(lambda: list((own / "sessions").rglob("rollout-*.jsonl"))
             and (own / "sandbox-state" / "state_5.sqlite").exists(), timeout=60, interval=0.2)
    user = sandbox_env / ".codex"
    assert not list((user / "sessions").rglob("rollout-*.jsonl")) and not list(user.glob("state_*.sqlite"))
    services = Services(Project.discover(repo))

    def found() -> list[str]:
        # The rollout is the session's once its first line (`session_meta`, naming the worktree) is written: on a
        # loaded CI machine the reader looked before codex had written it, and found none.
        services.sessions.update_usage("c1")
        return list(services.sessions.usage.load("c1")["runs"][-1]["files"])

    files = wait_for(found, timeout=30, interval=0.2)
    assert all(Path(f).is_relative_to(own / "sessions") for f in files), files
    cli.ok("session", "stop", "c1")


def test_the_shared_folder_of_an_unsandboxed_codex_is_listed_newest_first(tmp_path: Path) -> None:
    """A bound on one look keeps today's rollouts, never months-old ones, in a folder of long use."""
    from daintree_tui.sessions.agents.base import own_files

    for day in ("2026/10/01", "2026/11/30", "2026/12/01"):
        (tmp_path / day).mkdir(parents=True)
        (tmp_path / day / "rollout-1.jsonl").write_text("{}\n")
    newest = own_files(tmp_path, ("*", "*", "*", "rollout-*.jsonl"), limit=2, newest_first=True)
    assert [str(p.relative_to(tmp_path)) for p in newest] == ["2026/12/01/rollout-1.jsonl",
                                                             "2026/11/30/rollout-1.jsonl"]


def test_a_record_that_counted_nothing_and_went_is_no_reason_for_distrust(cli: CLI, repo: Path) -> None:
    """Found by a new user's trial: gemini deletes its empty chat files while it signs in, and `session list` said
    "(untrusted records)" for a session of 0 tokens. A file that gave no usage cannot have been made to count less
    by going; one that counted something still can."""
    cli.ok("worktree", "create", "a")
    manager, ctx, codex, day = _private_codex_run(repo, "a")
    empty = day / "rollout-empty.jsonl"
    empty.write_text(_rollout(str(ctx.worktree), 0, 0).splitlines()[0] + "\n")  # its meta line alone
    counted = day / "rollout-counted.jsonl"
    counted.write_text(_rollout(str(ctx.worktree), 300, 30))
    manager.usage.update("a", ctx, codex)
    empty.unlink()
    manager.usage._scanned.clear()
    manager.usage.update("a", ctx, codex)
    totals = manager.usage.runs("a", current_only=True)[0].totals
    assert totals.trusted and totals.tokens.total == 330, totals
    counted.unlink()
    manager.usage.update("a", ctx, codex)
    totals = manager.usage.runs("a", current_only=True)[0].totals
    assert not totals.trusted and totals.tokens.total == 330, totals
