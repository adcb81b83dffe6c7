"""The seams of review and approval (issue 30), attacked as a sandboxed agent would: what it commits or writes is
data for the gate, never a way past it. Real bubblewrap, real git, the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.sandbox import BwrapSandbox
from tests.conftest import CLI, git, trusted_config, wait_for

_OK, _WHY = BwrapSandbox().available()
pytestmark = pytest.mark.skipif(not _OK, reason=f"bubblewrap cannot run here: {_WHY}")

ADMIN = '"$(git rev-parse --absolute-git-dir)"'


@pytest.mark.parametrize("when", ["before the merge", "between the gate and the merge"])
def test_a_commit_made_after_the_approval_and_not_yet_brought_in_is_never_merged(
        repo: Path, sandbox_env: Path, monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """The agent commits in its sandbox after a person approved its head: the commit waits in its own ref folder
    and quarantine until the outside brings it in. The gate read the branch before that (still the approved head)
    and the merge brought it in after, so the commit nobody approved was merged. Now the gate is asked of the
    commit the merge takes, and that commit is what is merged."""
    from daintree_tui.core.review import ReviewService

    trusted_config(repo, 'default_role = "r"\n[roles.r]\napproval = "review"\n')
    cli = CLI(repo)
    cli.ok("worktree", "create", "w")
    cli.ok("worktree", "run", "w", "--", "sh", "-c", "echo fine > app.py && git commit -qam 'reviewed'")
    approved = git(repo, "rev-parse", "wt/w").strip()
    cli.ok("review", "w", "--approve")
    admin = repo / ".git" / "worktrees" / "w"
    wait = "" if when == "before the merge" else f"while [ ! -e {ADMIN}/go ]; do sleep 0.05; done; "
    # The agent, still running in its sandbox: its commit is brought in by the next look from outside.
    agent = subprocess.Popen(
        [sys.executable, "-m", "daintree_tui", "worktree", "run", "w", "--", "sh", "-c",
         f"{wait}echo 'evil()' > app.py && git commit -qam 'after the approval' && touch {ADMIN}/done && sleep 60"],
        cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if when != "before the merge":
            real = ReviewService.merge

            def commit_meanwhile(self: ReviewService, *args: Any, **kwargs: Any) -> Any:
                (admin / "go").touch()  # the first gate passed: the agent commits now
                wait_for(lambda: (admin / "done").exists())
                return real(self, *args, **kwargs)

            monkeypatch.setattr(ReviewService, "merge", commit_meanwhile)
        else:
            wait_for(lambda: (admin / "done").exists())
        proc = cli("worktree", "merge", "w")
        assert (repo / "app.py").read_text() != "evil()\n", "the commit nobody approved was merged"
        assert proc.returncode == 1 and "a new commit asks again" in proc.stderr, proc.stdout + proc.stderr
        assert git(repo, "rev-parse", "main").strip() != approved  # nothing merged
        assert git(repo, "log", "-1", "--format=%s", "wt/w").strip() == "after the approval"
    finally:
        agent.kill()
        agent.wait()
