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

import pytest

from daintree_tui.core.project import Project
from tests.conftest import CLI
from tests.test_adv7 import _agent_sandbox_of_me, _run_inside, needs_bwrap
from tests.test_agents import fake_bin  # noqa: F401 (a fixture)
from tests.test_sandbox import _write_user_config, sandbox_env  # noqa: F401 (a fixture)

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


def _attacker(path: Path, victim: Path, victim_home: Path) -> Path:
    """A 'codex' that forges a rollout naming `victim`'s worktree in its own ~/.codex/sessions (the only one it
    can reach), tries the victim's own folder directly, records a little spend of its own, and deletes that record
    once the outside has counted it (when `.go` appears in its worktree)."""
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
def test_a_gemini_chat_naming_another_project_stays_in_the_agents_own_folder(repo: Path,
                                                                             sandbox_env: Path) -> None:  # noqa: F811
    """~/.gemini/tmp/<project>/chats/ was shared and writable whole: a chat recording with another worktree's
    `projectHash` was charged to that worktree, and loaded by its `--resume latest`. Inside, tmp/ is the
    sandbox's own."""
    sandbox, env = _agent_sandbox_of_me(repo, "gemini")
    CLI(repo).ok("worktree", "create", "other")
    other = (repo / ".worktrees" / "other").resolve()
    want = hashlib.sha256(str(other).encode()).hexdigest()
    record = json.dumps({"sessionId": "s", "projectHash": want}) + "\n" + json.dumps(
        {"id": "m1", "type": "gemini", "model": "gemini-2.5-pro",
         "tokens": {"input": FORGED, "output": FORGED, "cached": 0}}) + "\n"
    proc = _run_inside(sandbox, env, f"mkdir -p ~/.gemini/tmp/other/chats && printf '%s' '{record}' >"
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
def test_codex_keeps_its_thread_index_in_the_sandboxs_own_folder(repo: Path, sandbox_env: Path) -> None:  # noqa: F811
    """Codex 0.171 indexes its conversations (cwd and rollout path, what `resume --last` picks) in SQLite databases
    beside its login: shared, a row planted by one agent points another session's codex, or the user's own, at a
    conversation it wrote anywhere writable. Sandboxed, CODEX_SQLITE_HOME names a folder of the sandbox's own."""
    sandbox, env = _agent_sandbox_of_me(repo, "codex")
    proc = _run_inside(sandbox, env, 'echo row > "$CODEX_SQLITE_HOME/state_5.sqlite" && echo "at $CODEX_SQLITE_HOME";'
                       " ls ~/.codex/sessions; true")
    assert "at " in proc.stdout, proc.stderr
    codex_home = sandbox_env / ".codex"
    assert not list(codex_home.rglob("state_5.sqlite"))
    own = Project.discover(repo).sandbox_home_for("me") / "agent" / ".codex" / "sandbox-state" / "state_5.sqlite"
    assert own.read_text() == "row\n"
