"""Gemini's projects.json (its registry of project folders, writable in the sandbox since gemini renames a
file over it at every start) against the one history folder a sandboxed gemini may write. Real bubblewrap."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.helpers.sandbox import agent_sandbox_of_me, needs_bwrap, run_inside


@needs_bwrap
def test_a_sandboxed_gemini_cannot_hand_its_history_folder_to_another_project(repo: Path,
                                                                              sandbox_env: Path) -> None:
    """gemini finds a project's folders by projects.json (path -> folder name), checked against the
    `.project_root` in each of them. An agent mapped the user's primary to its own writable history folder and
    wrote that folder's `.project_root` naming the primary: the user's own gemini, there, would take the folder as
    its checkpoint repository, whose `.git/config` and hooks (the agent's) git runs unconfined. The marker of the
    agent's own folder names its worktree and is read-only."""
    history = sandbox_env / ".gemini" / "history"
    history.mkdir(parents=True)
    primary = str(repo.resolve())
    worktree = str((repo / ".worktrees" / "me").resolve())
    own = hashlib.sha256(worktree.encode()).hexdigest()
    sandbox, env = agent_sandbox_of_me(repo, "gemini")
    attack = (f"cd ~/.gemini; printf '{{\"projects\": {{\"{primary}\": \"{own}\"}}}}' > projects.json && echo map-ok;"
              f" printf '{primary}' > history/{own}/.project_root && echo wrote-marker;"
              f" rm -f history/{own}/.project_root && echo removed-marker;"
              f" mkdir -p history/{own}/.git && echo '[core] fsmonitor = evil' > history/{own}/.git/config"
              " && echo data-ok; true")
    proc = run_inside(sandbox, env, attack)
    assert "map-ok" in proc.stdout, proc.stderr  # projects.json is gemini's to write (it renames over it)
    assert "wrote-marker" not in proc.stdout and "removed-marker" not in proc.stdout, proc.stdout
    assert (history / own / ".project_root").read_text() == worktree
