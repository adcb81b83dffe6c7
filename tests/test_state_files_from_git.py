"""The ninth adversary: daintree's own state files arriving through git (a clone, a pull, the user's own `git merge`
of an agent's branch: git writes over ignored files). Each was reproduced with the real CLI and git first."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import CLI
from tests.helpers.state_files import merge_a_planted_approval, merge_state_files_from_a_branch


def test_a_tracked_index_is_not_daintrees(repo: Path) -> None:
    cli = CLI(repo)
    merge_state_files_from_a_branch(repo, cli)
    listed = cli("worktree", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    branches = {w["name"]: w["branch"] for w in json.loads(listed.stdout)}
    assert branches == {"a1": "wt/a1", "b1": "wt/b1"}, branches
    assert "git tracks it" in listed.stderr
    status = cli("worktree", "status", "b1", "--json")
    assert json.loads(status.stdout)["branch"] == "wt/b1"


def test_a_tracked_journal_never_removes_a_worktree(repo: Path) -> None:
    cli = CLI(repo)
    merge_state_files_from_a_branch(repo, cli)
    cli("doctor", "--fix")
    assert (repo / ".worktrees" / "b1" / ".git").is_file(), "a journal that came through git removed worktree b1"
    listed = json.loads(cli("worktree", "list", "--json").stdout)
    assert {w["name"] for w in listed} == {"a1", "b1"}


def test_a_tracked_approval_request_is_nobodys(repo: Path) -> None:
    """`.worktrees/approvals.json` holds what agents asked a person to approve; approving runs it. One that came
    through git (here the user's own merge of a1) listed a pending `worktree remove b1 --force` as if an agent had
    asked, and `daintree approve 1` deleted b1 with its uncommitted work."""
    cli = CLI(repo)
    merge_a_planted_approval(repo, cli)
    listed = cli("approvals", "--json")
    assert json.loads(listed.stdout) == [], listed.stdout
    assert "git tracks it" in listed.stderr
    assert cli("approve", "1").returncode != 0
    assert (repo / ".worktrees" / "b1" / "notes.txt").read_text() == "uncommitted work\n"
