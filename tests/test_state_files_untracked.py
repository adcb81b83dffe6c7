"""Daintree's state files that came through git and are no longer tracked: the user undid the merge that
brought them with `git reset HEAD~1` (mixed, git's default), or followed the warning's `git rm --cached` first.
git leaves the file on disk, untracked and ignored, and its content was the agent's."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import CLI, git
from tests.helpers.state_files import merge_a_planted_approval, merge_state_files_from_a_branch


def test_an_index_merged_then_reset_is_still_not_daintrees(repo: Path) -> None:
    cli = CLI(repo)
    merge_state_files_from_a_branch(repo, cli)
    git(repo, "reset", "-q", "HEAD~1")  # undo the merge, keep the files: .worktrees/ is ignored, now untracked
    assert "release" in (repo / ".worktrees" / "index.json").read_text()
    listed = cli("worktree", "list", "--json")
    branches = {w["name"]: w["branch"] for w in json.loads(listed.stdout)}
    assert branches == {"a1": "wt/a1", "b1": "wt/b1"}, branches
    assert "came with the repository's history" in listed.stderr
    cli("doctor", "--fix")
    assert (repo / ".worktrees" / "b1" / ".git").is_file(), "a journal that came through git removed worktree b1"


def test_an_approval_untracked_with_git_rm_cached_is_still_nobodys(repo: Path) -> None:
    cli = CLI(repo)
    # CRLF line ends (a .gitattributes `eol=crlf` checks it out so): the file is not byte for byte the blob.
    merge_a_planted_approval(repo, cli, attributes=".worktrees/approvals.json text eol=crlf\n")
    assert b"\r\n" in (repo / ".worktrees" / "approvals.json").read_bytes()
    git(repo, "rm", "-q", "--cached", ".worktrees/approvals.json")  # the warning's advice, its second half first
    listed = cli("approvals", "--json")
    assert json.loads(listed.stdout) == [], listed.stdout
    assert cli("approve", "1").returncode != 0
    assert (repo / ".worktrees" / "b1" / "notes.txt").read_text() == "uncommitted work\n"


def test_a_blob_made_of_daintrees_own_index_later_does_not_disown_it(repo: Path) -> None:
    """A sandboxed agent writes loose objects: one made of the index it read (after daintree wrote it) would have
    daintree ignore its own index, and rebuild it from git without its tasks and ports."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "b1")
    index = repo / ".worktrees" / "index.json"
    git(repo, "hash-object", "-w", str(index))
    listed = cli("worktree", "list", "--json")
    assert "history" not in listed.stderr, listed.stderr
    assert json.loads(listed.stdout)[0]["ports"], listed.stdout
