"""Review and integrate on real repositories: diff, commit, merge strategies, PR, hooks with trust, context."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, events, git, trusted_config, wait_for
from tests.helpers.agents import RECORDER  # the recording agent the train's tests use


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


# -- the review loop (issue 30): comments sent to the agent, approvals that gate the merge, CI back to the agent -----


def lines_file(wt: Path, name: str = "app.py") -> None:
    agent_commit(wt, name, "def main():\n    print('hello')\n    return 0\n", "app")


def test_comments_name_file_and_new_side_line_and_go_outdated(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "w")
    wt = repo / ".worktrees" / "w"
    lines_file(wt)
    view = cli.json("review", "w", "--comment", "app.py:2", "use logging", "--comment", "app.py:3", "exit code?")
    assert view["state"] == "open" and view["head"] == git(repo, "rev-parse", "wt/w").strip()
    first, second = view["comments"]
    assert (first["path"], first["line"], first["text"], first["sent"], first["outdated"]) == \
        ("app.py", 2, "use logging", False, False)
    assert first["quote"] == "    print('hello')" and first["by"] and first["at"] > 0 and second["line"] == 3
    # A batch with one bad comment keeps none of it (a rejected input changes nothing).
    for bad in (["app.py:9", "no such line"], ["app.py:x", "t"], ["../etc/passwd:1", "t"], ["app.py:1", " "]):
        proc = cli("review", "w", "--comment", "app.py:1", "fine", "--comment", *bad)
        assert proc.returncode == 2, (bad, proc.stderr)
    assert cli("review", "w", "-m", "why").returncode == 2  # -m belongs to a verdict
    assert cli("review", "nope").returncode == 2
    assert len(cli.json("review", "w")["comments"]) == 2
    # The agent changes line 2: that comment stays, marked outdated; the other still reads as it did.
    (wt / "app.py").write_text("def main():\n    log.info('hello')\n    return 0\n")
    first, second = cli.json("review", "w")["comments"]
    assert first["outdated"] is True and second["outdated"] is False
    path = repo / ".worktrees" / ".reviews" / "w.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [e["event"] for e in events(repo)].count("review.comment") == 2


def test_a_link_or_a_committed_record_is_nobodys_review(cli: CLI, repo: Path, tmp_path: Path) -> None:
    trusted_config(repo, 'default_role = "r"\n[roles.r]\napproval = "review"\n')
    cli.ok("worktree", "create", "w")
    lines_file(repo / ".worktrees" / "w")
    head = git(repo, "rev-parse", "wt/w").strip()
    reviews = repo / ".worktrees" / ".reviews"
    reviews.mkdir(mode=0o700)
    forged = {"worktree": "w", "comments": [], "verdicts": [{"kind": "approve", "head": head, "by": "x", "at": 1}]}
    elsewhere = tmp_path / "forged.json"
    elsewhere.write_text(json.dumps(forged))
    (reviews / "w.json").symlink_to(elsewhere)
    proc = cli("review", "w", "--json")
    assert proc.returncode == 1 and "symbolic link" in proc.stderr
    assert cli("review", "w", "--approve").returncode == 1 and elsewhere.read_text() == json.dumps(forged)
    assert cli("worktree", "merge", "w").returncode == 1
    # Committed into the repository (an agent's branch merged, then checked out): it came with history, ignored.
    (reviews / "w.json").unlink()
    (reviews / "w.json").write_text(json.dumps(forged))
    git(repo, "add", "-f", ".worktrees/.reviews/w.json")
    git(repo, "commit", "-q", "-m", "an approval, from history")
    proc = cli("worktree", "merge", "w")
    assert proc.returncode == 1 and "nobody approved" in proc.stderr, proc.stderr


@pytest.mark.parametrize("approval", ["none", "human", "checks", "review", "checks+review"])
def test_the_approval_gate_of_each_value(cli: CLI, repo: Path, approval: str) -> None:
    trusted_config(repo, f'default_role = "r"\n[roles.r]\napproval = "{approval}"\n')
    cli.ok("worktree", "create", "w")
    wt = repo / ".worktrees" / "w"
    lines_file(wt)
    main_before = git(repo, "rev-parse", "main").strip()
    wants_review, wants_checks = "review" in approval, "checks" in approval
    skipped = cli("worktree", "merge", "w", "--no-verify")
    if wants_review or wants_checks:
        assert skipped.returncode == 1 and len(skipped.stderr.strip().splitlines()) == 1
        assert ("checks: the pre_merge checks would be skipped" in skipped.stderr) == wants_checks
        assert ("review: nobody approved head" in skipped.stderr) == wants_review, skipped.stderr
        assert git(repo, "rev-parse", "main").strip() == main_before
        assert bool(cli.json("review", "w")["missing"]) == wants_review  # a merge with its checks is fine
    else:
        assert skipped.returncode == 0, skipped.stderr
        return
    if wants_review:
        plain = cli("worktree", "merge", "w")
        assert plain.returncode == 1 and "review: nobody approved" in plain.stderr
        approved = cli.json("review", "w", "--approve", "-m", "looks right")
        assert approved["state"] == "approved" and approved["approved_by"] and approved["missing"] == []
        assert approved["verdicts"][-1]["message"] == "looks right"
        # A new commit after the approval asks again.
        agent_commit(wt, "more.py", "x = 1\n", "more")
        again = cli("worktree", "merge", "w")
        assert again.returncode == 1 and "a new commit asks again" in again.stderr, again.stderr
        assert cli.json("review", "w")["state"] == "open"
        changes = cli.json("review", "w", "--request-changes", "-m", "not yet")
        assert changes["state"] == "changes-requested"
        refused = cli("worktree", "merge", "w")
        assert refused.returncode == 1 and "requested changes" in refused.stderr
        cli.ok("review", "w", "--approve")
    cli.ok("worktree", "merge", "w")
    assert git(repo, "rev-parse", "main").strip() == git(repo, "rev-parse", "wt/w").strip()


def test_the_train_asks_the_same_approval(cli: CLI, repo: Path) -> None:
    trusted_config(repo, 'default_role = "r"\n[roles.r]\napproval = "checks+review"\n')
    cli.ok("worktree", "create", "w")
    lines_file(repo / ".worktrees" / "w")
    proc = cli("train", "w", "--json")
    result = json.loads(proc.stdout)[0]
    assert proc.returncode == 1 and result["result"] == "skipped" and "nobody approved" in result["reason"]
    cli.ok("review", "w", "--approve")
    proc = cli("train", "w", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)[0]["result"] == "merged", proc.stdout


def test_an_agent_cannot_approve_its_own_work(cli: CLI, repo: Path) -> None:
    trusted_config(repo, 'default_role = "r"\n[roles.r]\napproval = "review"\n')
    cli.ok("worktree", "create", "w")
    wt = repo / ".worktrees" / "w"
    lines_file(wt)
    for where, env in ((repo, {"DAINTREE_WORKTREE": "w"}), (wt, {})):  # its environment, or its folder
        for verdict in ("--approve", "--request-changes"):
            proc = cli("review", "w", verdict, cwd=where, env=env)
            assert proc.returncode == 1 and "refused from inside a session" in proc.stderr, proc.stderr
        proc = cli("review", "w", "--comment", "app.py:1", "mine", cwd=where, env=env)
        assert proc.returncode == 1 and "refused from inside a session" in proc.stderr
        assert cli("review", "w", "--json", cwd=where, env=env).returncode == 0  # reading is fine
    assert not (repo / ".worktrees" / ".reviews" / "w.json").exists()
    merge = cli("worktree", "merge", "w", env={"DAINTREE_WORKTREE": "w"})
    assert merge.returncode == 1 and "nobody approved" in merge.stderr


def recording_agent(repo: Path, tmp_path: Path, before: str = "") -> None:
    recorder = tmp_path / "recorder.py"
    recorder.write_text(RECORDER)
    trusted_config(repo, before + f'[agents.rec]\ncommand = "{sys.executable} {recorder} {tmp_path}"\n'
                         'prompt_mode = "type"\nsandbox = "off"\n')


def pasted(tmp_path: Path, name: str, marker: bytes) -> bytes:
    """The body of the first bracketed paste the recording agent of `name` got that holds `marker`."""
    got = tmp_path / f"got-{name}"

    def body() -> bytes | None:
        data = got.read_bytes() if got.is_file() else b""
        for chunk in data.split(b"\x1b[200~")[1:]:
            if b"\x1b[201~" in chunk and marker in chunk:
                return chunk[:chunk.index(b"\x1b[201~")]
        return None

    return wait_for(body)


@pytest.mark.usefixtures("tmux_socket")
def test_send_pastes_every_comment_as_one_prompt_into_the_live_session(cli: CLI, repo: Path,
                                                                      tmp_path: Path) -> None:
    recording_agent(repo, tmp_path)
    cli.ok("worktree", "create", "w", "--agent", "rec")
    wait_for(lambda: "ready" in cli("session", "capture", "w").stdout)
    lines_file(repo / ".worktrees" / "w")
    cli.ok("review", "w", "--comment", "app.py:2", "use logging", "--comment", "app.py:3", "return 1 on error")
    out = cli.json("review", "w", "--send")
    assert out["send"]["how"] == "pasted" and out["send"]["sent"] == [1, 2]
    assert all(c["sent"] and c["sent_at"] for c in out["comments"])
    body = pasted(tmp_path, "w", b"daintree review")
    assert body.count(b"app.py:") == 2 and b"app.py:2\r   >     print('hello')\r   use logging" in body, body
    assert b"app.py:3" in body and b"return 1 on error" in body and b"\x1b" not in body
    got = (tmp_path / "got-w").read_bytes()
    assert got.count(b"\x1b[200~") == 1 and b"\x1b[201~\r" in got  # one paste, then Enter
    assert cli("review", "w", "--send").returncode == 2  # nothing unsent is left
    cli.ok("review", "w", "--comment", "app.py:1", "name it run", "--send")
    later = pasted(tmp_path, "w", b"name it run")
    assert b"use logging" not in later and b"app.py:1" in later


@pytest.mark.usefixtures("tmux_socket")
def test_send_to_an_agent_at_a_dialog_pastes_but_never_presses_enter(cli: CLI, repo: Path, tmp_path: Path) -> None:
    """Found in a trial: `review --send` into gemini at its "Do you trust this folder?" dialog pressed Enter, which
    answered "Trust folder" for the person. Enter comes only once the paste shows; else nothing is marked sent."""
    recorder = tmp_path / "recorder.py"
    recorder.write_text(RECORDER)
    trusted_config(repo, f'[agents.dialog]\ncommand = "{sys.executable} {recorder} {tmp_path} dialog"\n'
                         'prompt_mode = "type"\nsandbox = "off"\n')
    cli.ok("worktree", "create", "asks", "--agent", "dialog")
    wait_for(lambda: "2. No" in cli("session", "capture", "asks").stdout)
    lines_file(repo / ".worktrees" / "asks")
    cli.ok("review", "asks", "--comment", "app.py:2", "use logging")
    result = cli("review", "asks", "--send")
    assert result.returncode == 1 and "not entered" in result.stderr and "nothing is marked sent" in result.stderr
    got = (tmp_path / "got-asks").read_bytes()
    assert b"use logging" in got and got.endswith(b"\x1b[201~"), got[-80:]  # the paste, and no Enter
    assert not any(c["sent"] for c in cli.json("review", "asks")["comments"])


@pytest.mark.usefixtures("tmux_socket")
def test_send_starts_the_agent_with_the_review_when_none_runs(cli: CLI, repo: Path, tmp_path: Path) -> None:
    recording_agent(repo, tmp_path)
    cli.ok("worktree", "create", "w", "--agent", "rec")
    wait_for(lambda: "ready" in cli("session", "capture", "w").stdout)
    lines_file(repo / ".worktrees" / "w")
    cli.ok("session", "stop", "w")
    cli.ok("review", "w", "--comment", "app.py:2", "use logging")
    out = cli.json("review", "w", "--send")
    assert out["send"]["how"] == "started"
    body = pasted(tmp_path, "w", b"use logging")
    assert b"app.py:2" in body and b"print('hello')" in body


CHECKS = [{"name": "lint", "state": "FAILURE", "bucket": "fail",
           "link": "https://github.com/o/r/actions/runs/11/job/22"},
          {"name": "tests", "state": "SUCCESS", "bucket": "pass", "link": "https://github.com/o/r/actions/runs/11/job/23"}]


def ci_gh(bin_dir: Path, record: Path, checks: Path) -> dict[str, str]:
    """A stand-in `gh` on PATH: logged in, opens PR 7, reports `checks` (exiting 1 as gh does on a failure) and a
    failed job's log with a terminal control in it. Returns the environment that finds it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    gh = bin_dir / "gh"
    gh.write_text(f"#!/bin/sh\necho \"$@\" >> {record}\ncase \"$1 $2\" in\n"
                  "'auth status') exit 0;;\n'pr create') echo https://github.com/o/r/pull/7; exit 0;;\n"
                  f"'pr checks') cat {checks}; exit 1;;\n"
                  "'run view') printf 'lint\\tRun ruff\\t\\033[31mapp.py:2: E501 line too long\\033[0m\\n"
                  "lint\\tRun ruff\\tError: Process completed with exit code 1.\\n'; exit 0;;\nesac\nexit 1\n")
    gh.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.usefixtures("tmux_socket")
def test_ci_checks_show_gate_checks_and_go_back_to_the_agent(cli: CLI, repo: Path, tmp_path: Path) -> None:
    recording_agent(repo, tmp_path, 'default_role = "r"\n[roles.r]\napproval = "checks"\n')
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    cli.ok("worktree", "create", "w", "--agent", "rec")
    wait_for(lambda: "ready" in cli("session", "capture", "w").stdout)
    lines_file(repo / ".worktrees" / "w")
    # Without gh (or before a PR): nothing shows, nothing fails.
    assert cli.json("worktree", "status", "w")["checks"] is None
    cli.ok("worktree", "merge", "w", "--strategy", "squash")
    agent_commit(repo / ".worktrees" / "w", "more.py", "x = 1\n", "more")
    checks = tmp_path / "checks.json"
    checks.write_text(json.dumps(CHECKS))
    record = tmp_path / "gh-args"
    env = ci_gh(tmp_path / "bin", record, checks)
    assert cli("worktree", "status", "w", "--json", env=env).returncode == 0
    assert json.loads(cli("worktree", "status", "w", "--json", env=env).stdout)["checks"] is None  # no PR yet
    cli.ok("worktree", "pr", "w", env=env)
    status = json.loads(cli("worktree", "status", "w", "--json", env=env).stdout)["checks"]
    assert status["pr"] == "https://github.com/o/r/pull/7" and status["state"] == "fail"
    assert status["failed"] == ["lint"] and [c["bucket"] for c in status["checks"]] == ["fail", "pass"]
    assert "checks:  fail (lint)" in cli("worktree", "status", "w", env=env).stdout
    refused = cli("worktree", "merge", "w", "--strategy", "squash", env=env)
    assert refused.returncode == 1 and "checks: CI failed (lint)" in refused.stderr, refused.stderr
    sent = json.loads(cli("review", "w", "--send-ci", "--json", env=env).stdout)
    assert sent["send_ci"]["failed"] == ["lint"] and sent["send_ci"]["how"] == "pasted"
    body = pasted(tmp_path, "w", b"CI failed")
    assert b"lint (FAILURE)" in body and b"E501 line too long" in body and b"\x1b" not in body
    assert "run view --job 22 --log-failed" in record.read_text()
    checks.write_text(json.dumps([{**c, "bucket": "pass", "state": "SUCCESS"} for c in CHECKS]))
    assert cli("review", "w", "--send-ci", env=env).returncode == 1  # nothing failed: nothing to send
    cli.ok("worktree", "merge", "w", "--strategy", "squash", env=env)


def test_a_failed_check_past_the_first_hundred_still_refuses_the_merge(cli: CLI, repo: Path, tmp_path: Path) -> None:
    """The agent's branch holds the CI config: a matrix of 150 quick jobs that pass, listed before its real `test`
    job, which fails. Only the first 100 checks were read, so CI read as passed and `approval = "checks"` merged
    the failing work. Every check counts; what is kept to show is capped, failures first."""
    trusted_config(repo, 'default_role = "r"\n[roles.r]\napproval = "checks"\n')
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    cli.ok("worktree", "create", "w")
    lines_file(repo / ".worktrees" / "w")
    checks = tmp_path / "checks.json"
    padding = [{"name": f"a-matrix-{i:03}", "state": "SUCCESS", "bucket": "pass",
                "link": f"https://github.com/o/r/actions/runs/1/job/{i}"} for i in range(150)]
    checks.write_text(json.dumps([*padding, {"name": "test", "state": "FAILURE", "bucket": "fail",
                                             "link": "https://github.com/o/r/actions/runs/1/job/999"}]))
    env = ci_gh(tmp_path / "bin", tmp_path / "gh-args", checks)
    cli.ok("worktree", "pr", "w", env=env)
    main_before = git(repo, "rev-parse", "main").strip()
    refused = cli("worktree", "merge", "w", env=env)
    assert refused.returncode == 1 and "checks: CI failed (test)" in refused.stderr, refused.stdout + refused.stderr
    assert git(repo, "rev-parse", "main").strip() == main_before
    shown = json.loads(cli("review", "w", "--json", env=env).stdout)["checks"]
    assert shown["state"] == "fail" and shown["failed"] == ["test"] and len(shown["checks"]) <= 100


def test_an_untrusted_repo_config_may_ask_for_more_review_never_less(cli: CLI, repo: Path) -> None:
    from daintree_tui.core.config import stricter_approval
    from daintree_tui.core.project import Project

    assert stricter_approval("checks", "review") == "checks+review"
    assert stricter_approval("checks+review", "none") == "checks+review"
    assert stricter_approval("review", "human") == "human" and stricter_approval("none", "none") == "none"
    user_config = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text('[roles.worker]\napproval = "checks"\n')
    (repo / ".daintree.toml").write_text('[roles.worker]\napproval = "review"\n')  # not trusted
    assert Project.discover(repo).config.roles["worker"].approval == "checks+review"
    (repo / ".daintree.toml").write_text('[roles.worker]\napproval = "none"\n')
    assert Project.discover(repo).config.roles["worker"].approval == "checks"
    (repo / ".daintree.toml").write_text('[roles.worker]\napproval = "reviewed"\n')
    bad = cli("policy", "show")
    assert bad.returncode == 2 and "checks+review" in bad.stderr, bad.stderr


async def test_mcp_review_get_reads_the_review_and_approves_nothing(repo: Path, cli: CLI) -> None:
    from tests.helpers.mcp_client import call, fails, mcp_client, tool_names

    cli.ok("worktree", "create", "mine")
    cli.ok("worktree", "create", "theirs")
    lines_file(repo / ".worktrees" / "mine")
    cli.ok("review", "mine", "--comment", "app.py:2", "use logging")
    async with mcp_client(repo) as mcp:  # a person's own server: a lead
        names = await tool_names(mcp)
        assert "review_get" in names and not any("approve" in n for n in names)
        review = await call(mcp, "review_get", name="mine")
        assert review == cli.json("review", "mine")
        assert "no worktree named" in await fails(mcp, "review_get", name="nope")
    async with mcp_client(repo, env={"DAINTREE_WORKTREE": "mine"}) as mcp:  # its worker: its own review only
        assert (await call(mcp, "review_get", name="mine"))["comments"][0]["text"] == "use logging"
        assert "not this session's worktree" in await fails(mcp, "review_get", name="theirs")
    assert cli.json("review", "mine")["state"] == "open"


@pytest.mark.usefixtures("tmux_socket")
async def test_a_comment_added_in_the_diff_view_reaches_the_agent_as_one_paste(repo: Path, cli: CLI,
                                                                             tmp_path: Path) -> None:
    from daintree_tui.core.project import Project
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.widgets.diff_view import DiffView
    from tests.helpers.dashboard import main_screen, on_screen, select, until

    recording_agent(repo, tmp_path, "[notifications]\nbell = false\n")
    cli.ok("worktree", "create", "w", "--agent", "rec")
    wait_for(lambda: "ready" in cli("session", "capture", "w").stdout)
    lines_file(repo / ".worktrees" / "w")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        def toasts() -> str:
            return " ".join(str(t.render()) for t in app.screen.query("Toast"))

        screen = main_screen(app)
        await until(pilot, lambda: screen.entries)
        await select(pilot, screen, "w")
        await pilot.press("r")  # no diff on show: said, nothing asked
        await until(pilot, lambda: "Open w's diff (d)" in toasts())
        await pilot.press("D")
        diff = screen.query_one(DiffView)
        await until(pilot, lambda: diff.worktree == "w" and diff.has_focus and diff.place() is not None)
        assert diff.place() == ("app.py", 1, "def main():")
        await pilot.press("up", "r")  # the hunk's header: the diff is open, so it says where a comment goes
        await until(pilot, lambda: "not a removed one or a header" in toasts())
        await pilot.press("down")
        await pilot.press("down")
        assert diff.place() == ("app.py", 2, "    print('hello')")
        await pilot.press("r")
        await on_screen(pilot, app, "ReviewCommentScreen")
        await pilot.press(*"use logging", "enter")
        review = repo / ".worktrees" / ".reviews" / "w.json"
        await until(pilot, lambda: review.exists() and "use logging" in review.read_text())
        await pilot.press("R")
        body = await until(pilot, lambda: (tmp_path / "got-w").is_file()
                           and b"use logging" in (tmp_path / "got-w").read_bytes()
                           and b"\x1b[201~" in (tmp_path / "got-w").read_bytes())
        assert body
    got = pasted(tmp_path, "w", b"use logging")
    assert b"app.py:2\r   >     print('hello')\r   use logging" in got
    assert (tmp_path / "got-w").read_bytes().count(b"\x1b[200~") == 1
    assert cli.json("review", "w")["comments"][0]["sent"] is True


def test_a_review_goes_with_its_worktree_on_remove_and_gc(cli: CLI, repo: Path, tmp_path: Path) -> None:
    reviews = repo / ".worktrees" / ".reviews"
    cli.ok("worktree", "create", "w")
    lines_file(repo / ".worktrees" / "w")
    cli.ok("review", "w", "--comment", "app.py:2", "use logging")
    cli.ok("review", "w", "--approve")  # a second write: the record has its .bak
    assert (reviews / "w.json").is_file() and (reviews / "w.json.bak").is_file()
    cli.ok("worktree", "create", "other")
    lines_file(repo / ".worktrees" / "other")
    cli.ok("review", "other", "--comment", "app.py:1", "keep me")
    cli.ok("worktree", "remove", "w", "--force")
    assert not (reviews / "w.json").exists() and not (reviews / "w.json.bak").exists()
    assert (reviews / "other.json").is_file()  # another worktree's review stays
    # A link where a record goes is never followed: the link is left, its target untouched.
    cli.ok("worktree", "create", "v")
    target = tmp_path / "precious.json"
    target.write_text("{}")
    (reviews / "v.json").symlink_to(target)
    proc = cli("worktree", "remove", "v")
    assert proc.returncode == 0 and "left" in proc.stderr and "symbolic link" in proc.stderr, proc.stderr
    assert target.read_text() == "{}" and (reviews / "v.json").is_symlink()
    (reviews / "v.json").unlink()
    # gc deletes a review a removed worktree left behind (one removed before reviews went with it); a dry run says so.
    cli.ok("worktree", "create", "g")
    cli.ok("worktree", "remove", "g")
    (reviews / "g.json").write_text('{"worktree": "g", "comments": []}')
    dry = cli.json("gc", "--dry-run")
    assert any(a.startswith("delete .reviews/g.json") for a in dry["actions"]), dry
    assert (reviews / "g.json").is_file()
    cli.ok("gc")
    assert not (reviews / "g.json").exists() and (reviews / "other.json").is_file()
    # The reviews folder itself a link: nothing through it is deleted.
    cli.ok("worktree", "create", "g")
    cli.ok("worktree", "remove", "g")
    elsewhere = tmp_path / "elsewhere"
    reviews.rename(elsewhere)
    (elsewhere / "g.json").write_text("{}")
    reviews.symlink_to(elsewhere)
    cli.ok("gc")
    assert (elsewhere / "g.json").read_text() == "{}"


def slow_ci_gh(bin_dir: Path, checks: Path, slow: Path) -> dict[str, str]:
    """A stand-in `gh` whose `pr checks` takes 30 s while `slow` exists (its sleep a child of the script: the
    timeout must kill the whole group, not wait for the child's pipe)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    gh = bin_dir / "gh"
    gh.write_text(f"#!/bin/sh\ncase \"$1 $2\" in\n'auth status') exit 0;;\n"
                  "'pr create') echo https://github.com/o/r/pull/7; exit 0;;\n"
                  f"'pr checks') if [ -e {slow} ]; then sleep 30; fi; cat {checks}; exit 1;;\nesac\nexit 1\n")
    gh.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def with_pr(cli: CLI, repo: Path, tmp_path: Path, env: dict[str, str], name: str = "w") -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    cli.ok("worktree", "create", name)
    lines_file(repo / ".worktrees" / name)
    cli.ok("worktree", "pr", name, env=env)


async def test_mcp_review_get_answers_within_seconds_when_gh_is_slow(repo: Path, cli: CLI, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from daintree_tui.services.ci import QUICK_TIMEOUT, ChecksCache
    from tests.helpers.mcp_client import call, mcp_client

    checks, slow = tmp_path / "checks.json", tmp_path / "slow"
    checks.write_text(json.dumps(CHECKS))
    env = slow_ci_gh(tmp_path / "bin", checks, slow)
    with_pr(cli, repo, tmp_path, env)
    async with mcp_client(repo, env=env) as mcp:
        first = (await call(mcp, "review_get", name="w"))["checks"]
        assert first["state"] == "fail" and first["stale"] is False and first["age"] < 30
        slow.touch()
        started = time.monotonic()
        again = await call(mcp, "review_get", name="w")  # read a moment ago: answered as it is, gh not asked
        assert time.monotonic() - started < 2 and again["checks"]["checked_at"] == first["checked_at"]
        status = await call(mcp, "worktree_status", name="w")
        assert status["checks"]["state"] == "fail"
    async with mcp_client(repo, env=env) as mcp:  # nothing read yet in this server, gh slow: bounded, none
        started = time.monotonic()
        cold = await call(mcp, "review_get", name="w")
        took = time.monotonic() - started
        assert cold["checks"] is None and QUICK_TIMEOUT - 0.5 < took < QUICK_TIMEOUT + 8, took
    # Older than a minute and gh slow: the last checks, marked stale, with their age.
    monkeypatch.setenv("PATH", env["PATH"])
    cache, url = ChecksCache(), "https://github.com/o/r/pull/7"
    slow.unlink()
    fresh = cache.read(repo, url, timeout=5)
    assert fresh is not None and not fresh.stale
    slow.touch()
    started = time.monotonic()
    stale = cache.read(repo, url, timeout=1, max_age=0)
    assert time.monotonic() - started < 5 and stale is not None and stale.stale
    assert stale.to_dict()["failed"] == ["lint"] and stale.checked_at == fresh.checked_at


@pytest.mark.usefixtures("tmux_socket")
async def test_the_dashboard_shows_ci_checks_and_p_sends_the_failures(repo: Path, cli: CLI, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from daintree_tui.core.project import Project
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.widgets.checks_bar import ChecksBar
    from tests.helpers.dashboard import main_screen, on_screen, select, until

    recording_agent(repo, tmp_path, "[notifications]\nbell = false\n")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    cli.ok("worktree", "create", "w", "--agent", "rec")
    wait_for(lambda: "ready" in cli("session", "capture", "w").stdout)
    lines_file(repo / ".worktrees" / "w")
    cli.ok("worktree", "create", "v")
    lines_file(repo / ".worktrees" / "v")
    checks = tmp_path / "checks.json"
    checks.write_text(json.dumps(CHECKS))
    env = ci_gh(tmp_path / "bin", tmp_path / "gh-args", checks)
    cli.ok("worktree", "pr", "w", env=env)
    got = tmp_path / "got-w"
    app = make_app(Project.discover(repo))  # gh not on PATH: no CI column, no bar, gh never asked
    async with app.run_test(size=(200, 50), notifications=True) as pilot:
        screen = main_screen(app)
        watch, table, bar = screen.checks_watch, screen.sidebar.worktree_table, screen.query_one(ChecksBar)
        watch.tick = 600.0  # every read below is one asked for, not a tick's
        await until(pilot, lambda: watch.passes >= 1)
        assert screen.checks == {} and "ci" not in table.column_keys and watch.reads == 0
        await select(pilot, screen, "w")
        assert not bar.has_class("-checks")
        monkeypatch.setenv("PATH", env["PATH"])
        watch.read_now()
        await until(pilot, lambda: "w" in screen.checks)
        assert screen.checks["w"].state == "fail" and "v" not in screen.checks  # v has no pull request
        await until(pilot, lambda: table.cell_text("w", "ci") == "✗1")
        assert table.cell_text("v", "ci") == ""
        await until(pilot, lambda: bar.has_class("-checks"))
        shown = str(bar.render())
        assert "failed: lint" in shown and "P sends them to the agent" in shown and "pull/7" in shown, shown
        # Read less than a minute ago: a pass asks gh nothing.
        reads, passes = watch.reads, watch.passes
        watch.read_now()
        await until(pilot, lambda: watch.passes > passes)
        assert watch.reads == reads
        await pilot.press("P")  # the failed checks and their log tails, into the agent's session
        await until(pilot, lambda: got.is_file() and b"CI failed" in got.read_bytes()
                    and b"\x1b[201~" in got.read_bytes())
        # p opens v's pull request from the dashboard: its checks are read right away (no tick comes).
        checks.write_text(json.dumps([{**c, "bucket": "pass", "state": "SUCCESS"} for c in CHECKS]))
        await select(pilot, screen, "v")
        await pilot.press("p")
        await on_screen(pilot, app, "ConfirmScreen")
        await pilot.click("#yes")
        await until(pilot, lambda: "v" in screen.checks)
        assert screen.checks["v"].state == "pass" and screen.checks["w"].state == "fail"
        await until(pilot, lambda: table.cell_text("v", "ci") == "✓")
        await pilot.press("P")  # nothing failed: said, nothing sent
        await until(pilot, lambda: any("Nothing failed on v" in str(t.render()) for t in app.screen.query("Toast")))
    body = pasted(tmp_path, "w", b"CI failed")
    assert b"lint (FAILURE)" in body and b"E501 line too long" in body and b"\x1b" not in body
    assert got.read_bytes().count(b"\x1b[200~") == 1
    assert cli.json("review", "v")["pr"] == "https://github.com/o/r/pull/7"


def test_a_role_added_while_the_dashboard_runs_gates_its_merge(cli: CLI, repo: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Found in a trial: `[roles.X] approval = "review"` added to your config while the dashboard ran, its `m`
    merged unapproved work (and removed the worktree), because the process kept the config it started with. One
    Services for the whole run, as the dashboard holds: the config is read again once its file changed."""
    from daintree_tui.core.errors import OperationError
    from daintree_tui.core.project import Project
    from daintree_tui.services import Services

    services = Services(Project.discover(repo))
    cli.ok("worktree", "create", "w")
    lines_file(repo / ".worktrees" / "w")
    agent_commit(repo / ".worktrees" / "w", "more.py", "x = 1\n", "work")
    assert services.ops.review.approval_of("w") == (None, "none")
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('default_role = "worker"\n[roles.worker]\nallow = ["commit", "merge"]\napproval = "review"\n')
    with pytest.raises(OperationError, match="nobody approved"):
        services.ops.landing.merge("w")
    user.write_text('default_role = "worker"\n[roles.worker\n')  # half-saved: the last good config stays
    assert services.ops.review.approval_of("w") == ("worker", "review")
    # Said at the first read (on stderr; an earlier test in the same worker may have added a log handler that
    # says it again), and not again at the next ones: one warning, not one a call.
    assert "kept the configuration read before" in capsys.readouterr().err
    assert services.ops.review.approval_of("w") == ("worker", "review")
    assert services.ops.review.approval_of("w") == ("worker", "review")
    assert "kept the configuration read before" not in capsys.readouterr().err
    user.write_text('default_role = "worker"\n[roles.worker]\napproval = "none"\n')
    assert services.ops.review.approval_of("w") == ("worker", "none")
    user.write_text('default_role = "worker"\n[roles.worker]\napproval = "review"\n')
    cli.ok("review", "w", "--approve")
    services.ops.landing.merge("w")
    assert git(repo, "rev-parse", "main").strip() == git(repo, "rev-parse", "wt/w").strip()
