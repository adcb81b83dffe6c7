"""Review and integrate on real repositories: diff, commit, merge strategies, PR, hooks with trust, context."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, events, git, trusted_config, wait_for


def agent_commit(wt: Path, name: str, text: str, message: str) -> None:
    (wt / name).write_text(text)
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", message)


def test_diff_includes_committed_uncommitted_and_untracked(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "d")
    wt = repo / ".worktrees" / "d"
    agent_commit(wt, "committed.py", "a = 1\n", "c")
    (wt / "app.py").write_text("print('changed')\n")
    (wt / "new_untracked.txt").write_text("fresh\n")
    diff = cli.json("worktree", "diff", "d")["diff"]
    assert "committed.py" in diff and "print('changed')" in diff and "new_untracked.txt" in diff
    stat_out = cli.ok("worktree", "diff", "d", "--stat").stdout
    assert "committed.py" in stat_out and "new_untracked.txt" in stat_out


def test_commit_all_and_nothing_to_commit(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "c")
    wt = repo / ".worktrees" / "c"
    (wt / "feature.py").write_text("x = 1\n")
    assert cli("worktree", "commit", "c", "-m", "feat").returncode == 1  # nothing staged without --all
    out = cli.json("worktree", "commit", "c", "-m", "Add feature", "--all")
    assert out["files"] == ["feature.py"]
    assert git(wt, "log", "-1", "--format=%s").strip() == "Add feature"
    assert git(wt, "status", "--short") == ""
    assert cli("worktree", "commit", "c", "-m", "", "--all").returncode == 2


@pytest.mark.parametrize("strategy", ["ff", "squash", "rebase"])
def test_merge_strategies_never_touch_primary_uncommitted_work(cli: CLI, repo: Path, strategy: str) -> None:
    cli.ok("task", "create", "Feature")
    cli.ok("worktree", "create", "feat", "--task", "1")
    wt = repo / ".worktrees" / "feat"
    agent_commit(wt, "feature.py", "x = 1\n", "feature one")
    agent_commit(wt, "feature2.py", "y = 2\n", "feature two")
    if strategy != "ff":
        agent_commit(repo, "other.py", "z = 3\n", "main moved on")  # the target diverged
    (repo / "README.md").write_text("# my uncommitted edit\n")  # untouched by the merge
    (repo / "scratch.txt").write_text("mine\n")
    result = cli("worktree", "merge", "feat", "--strategy", strategy, "--json")
    if strategy != "ff":
        assert result.returncode == 1 and "uncommitted" in result.stderr  # main is checked out dirty: refused
        git(repo, "stash", "push", "-q", "--", "README.md")
        result = cli("worktree", "merge", "feat", "--strategy", strategy, "--json")
        assert result.returncode == 0, result.stderr
        git(repo, "stash", "pop", "-q")
    else:
        assert result.returncode == 1 and "uncommitted" in result.stderr
        git(repo, "stash", "push", "-q", "--", "README.md")
        cli.ok("worktree", "merge", "feat", "--strategy", strategy)
        git(repo, "stash", "pop", "-q")
    assert (repo / "feature.py").read_text() == "x = 1\n" and (repo / "feature2.py").exists()
    assert (repo / "README.md").read_text() == "# my uncommitted edit\n"
    assert (repo / "scratch.txt").read_text() == "mine\n"
    log = git(repo, "log", "--format=%s", "main").splitlines()
    if strategy == "squash":
        assert log[0] == "Feature (#1)" and "feature one" not in log
    else:
        assert "feature one" in log and "feature two" in log
    assert any(e["event"] == "worktree.merge.after" for e in events(repo))


def test_ff_refused_when_target_diverged(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "div")
    agent_commit(repo / ".worktrees" / "div", "a.py", "1\n", "a")
    agent_commit(repo, "b.py", "2\n", "b")
    proc = cli("worktree", "merge", "div")
    assert proc.returncode == 1 and "diverged" in proc.stderr


def test_conflict_leaves_everything_as_it_was_and_names_files(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "clash")
    wt = repo / ".worktrees" / "clash"
    agent_commit(wt, "app.py", "print('agent')\n", "agent edit")
    agent_commit(repo, "app.py", "print('main')\n", "main edit")
    main_before = git(repo, "rev-parse", "main").strip()
    branch_before = git(repo, "rev-parse", "wt/clash").strip()
    for strategy in ("squash", "rebase"):
        proc = cli("worktree", "merge", "clash", "--strategy", strategy)
        assert proc.returncode == 1 and "conflicts in: app.py" in proc.stderr, proc.stderr
        assert git(repo, "rev-parse", "main").strip() == main_before
        assert git(repo, "rev-parse", "wt/clash").strip() == branch_before
        assert git(repo, "status", "--short") == "" and git(wt, "status", "--short") == ""
        assert (repo / "app.py").read_text() == "print('main')\n"
    listed = git(repo, "worktree", "list")
    assert ".merge-" not in listed


def test_merge_remove_and_complete_task(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "t")
    cli.ok("worktree", "create", "done", "--task", "1")
    agent_commit(repo / ".worktrees" / "done", "f.py", "1\n", "f")
    out = cli.json("worktree", "merge", "done", "--remove", "--complete-task")
    assert out["removed"] is True
    assert cli.json("task", "show", "1")["status"] == "completed"
    assert "wt/done" not in git(repo, "branch", "--list")  # merged, so deleted


def test_merge_refuses_dirty_worktree(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "wip")
    (repo / ".worktrees" / "wip" / "x.py").write_text("x\n")
    proc = cli("worktree", "merge", "wip")
    assert proc.returncode == 1 and "x.py" in proc.stderr
    assert cli("worktree", "merge", "wip", "--strategy", "octopus").returncode == 2


def test_pre_merge_hook_failure_refuses_and_trust_is_required(cli: CLI, repo: Path) -> None:
    (repo / ".daintree.toml").write_text('[hooks]\npre_merge = ["test -f tests_pass"]\n')
    cli.ok("worktree", "create", "hooked")
    wt = repo / ".worktrees" / "hooked"
    agent_commit(wt, "f.py", "1\n", "f")
    before = git(repo, "rev-parse", "main")
    # untrusted: the hook does not run (warned), so it cannot refuse either
    cli.ok("trust")
    proc = cli("worktree", "merge", "hooked")
    assert proc.returncode == 1 and "pre_merge" in proc.stderr
    assert git(repo, "rev-parse", "main") == before
    failed = [e for e in events(repo) if e["event"] == "hook.failed"]
    assert failed and failed[-1]["hook"] == "pre_merge"
    agent_commit(wt, "tests_pass", "", "tests pass now")
    cli.ok("worktree", "merge", "hooked")


def test_hooks_run_only_when_trusted_and_again_after_change(cli: CLI, repo: Path) -> None:
    # The hook writes in its worktree: where the sandbox works, that is all it can write.
    (repo / ".daintree.toml").write_text('[hooks]\npost_create = ["echo $DAINTREE_WORKTREE >> hook-ran"]\n')
    proc = cli("worktree", "create", "one")
    assert proc.returncode == 0 and "not trusted" in proc.stderr
    assert not (repo / ".worktrees" / "one" / "hook-ran").exists()
    cli.ok("trust")
    cli.ok("worktree", "create", "two")
    assert (repo / ".worktrees" / "two" / "hook-ran").read_text() == "two\n"
    (repo / ".daintree.toml").write_text('[hooks]\npost_create = ["echo changed >> hook-ran"]\n')
    proc = cli("worktree", "create", "three")
    assert "changed since you trusted it" in proc.stderr  # not a bare "not trusted": it was, before the edit
    assert not (repo / ".worktrees" / "three" / "hook-ran").exists()
    trust_file = Path(os.environ["XDG_DATA_HOME"]) / "daintree" / "trust.json"
    assert str(repo) in trust_file.read_text() and not (repo / ".daintree").exists()


def test_user_hooks_need_no_trust_and_failing_post_create_rolls_back(cli: CLI, repo: Path) -> None:
    cfg = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[hooks]\npost_create = ["exit 3"]\n')
    proc = cli("worktree", "create", "bad")
    assert proc.returncode == 1 and "rolled back" in proc.stderr
    assert not (repo / ".worktrees" / "bad").exists() and "wt/bad" not in git(repo, "branch", "--list")
    cfg.write_text('[hooks]\npost_create = [{command = "exit 3", optional = true}]\n')
    cli.ok("worktree", "create", "optional")


def test_hook_timeout(cli: CLI, repo: Path) -> None:
    cfg = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[hooks]\npost_create = [{command = "sleep 30", timeout = 1}]\n')
    proc = cli("worktree", "create", "slow")
    assert proc.returncode == 1 and "timed out" in proc.stderr


def fake_gh(bin_dir: Path, record: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    gh = bin_dir / "gh"
    gh.write_text(f"#!/bin/sh\necho \"$@\" >> {record}\n"
                  "if [ \"$1\" = pr ]; then echo https://example.invalid/pr/1; fi\nexit 0\n")
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)


def test_pr_without_gh_says_how(cli: CLI, repo: Path, tmp_path: Path) -> None:
    cli.ok("worktree", "create", "nogh")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    proc = cli("worktree", "pr", "nogh", env=env)
    assert proc.returncode == 1 and "git push -u origin wt/nogh" in proc.stderr


def test_pr_with_fake_gh_records_arguments(cli: CLI, repo: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    cli.ok("task", "create", "Add search", "--description", "Full-text search over products")
    cli.ok("worktree", "create", "search", "--task", "1")
    agent_commit(repo / ".worktrees" / "search", "s.py", "1\n", "search")
    record = tmp_path / "gh-args"
    fake_gh(tmp_path / "bin", record)
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    proc = cli("worktree", "pr", "search", "--draft", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["url"] == "https://example.invalid/pr/1"
    args = record.read_text()
    assert "auth status" in args
    assert "pr create --head wt/search --base main --title Add search --body Full-text search" in args
    assert "--draft" in args
    assert "wt/search" in git(remote, "branch", "--list")


@pytest.mark.usefixtures("tmux_socket")
def test_context_injection_reaches_a_real_session(cli: CLI, repo: Path) -> None:
    trusted_config(repo,
        "[agents.cat]\ncommand = \"sh -c 'stty -echo; cat'\"\n")
    cli.ok("task", "create", "Explain the parser", "--description", "focus on tabs")
    cli.ok("worktree", "create", "ctx", "--task", "1", "--agent", "cat")
    (repo / ".worktrees" / "ctx" / "notes.md").write_text("line one\n")
    cli.ok("session", "send", "ctx", "--task", "--file", "notes.md")
    log = repo / ".worktrees" / ".logs" / "ctx.log"
    text = wait_for(lambda: log.exists() and "line one" in log.read_text() and log.read_text())
    assert "Task #1: Explain the parser" in text and "focus on tabs" in text
    assert "notes.md:" in text and "```" in text
    assert cli("session", "send", "ctx", "--file", "missing.txt").returncode == 2
    # A shell takes no context: pasted there, the task's text would run as commands at the next Enter.
    cli.ok("task", "create", "rm -rf build")
    cli.ok("worktree", "create", "sh1", "--task", "2", "--agent", "shell")
    refused = cli("session", "send", "sh1", "--task")
    assert refused.returncode == 2 and "takes no task or context text" in refused.stderr
    assert "rm -rf" not in cli.ok("session", "capture", "sh1").stdout
