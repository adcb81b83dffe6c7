"""The merge train on real repositories: order, strategies, the gate in the candidate, the agent told in its real
tmux session, a kill -9 mid-train repaired by `doctor --fix`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.sandbox import BwrapSandbox
from tests.conftest import CLI, events, git, trusted_config, wait_for
from tests.conftest import commit_file as commit
from tests.helpers.agents import RECORDER

_OK, _WHY = BwrapSandbox().available()
needs_bwrap = pytest.mark.skipif(not _OK, reason=f"bubblewrap cannot run here: {_WHY}")


def lines(middle: str) -> str:
    return f"one\n{middle}\nthree\n"


def tip(repo: Path, ref: str = "main") -> str:
    return git(repo, "rev-parse", ref).strip()


def files_at(repo: Path, ref: str = "main") -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", ref).split())


def results(proc: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {r["worktree"]: r for r in json.loads(proc.stdout)}


def test_fewest_conflicts_first_then_oldest_target_moves_only_to_tested_commits(cli: CLI, repo: Path) -> None:
    commit(repo, "app.py", lines("two"), "app")
    for name in ("x", "y", "z"):
        cli.ok("task", "create", f"Task {name}")
        cli.ok("worktree", "create", name, "--task", str(["x", "y", "z"].index(name) + 1))
    wts = repo / ".worktrees"
    commit(wts / "x", "app.py", lines("X"))
    commit(wts / "y", "app.py", lines("Y"))  # x and y conflict: z (no conflict) goes first, then x (older)
    commit(wts / "z", "z.py", "z\n")
    proc = cli("train", "--json")
    assert proc.returncode == 1, proc.stderr  # not all merged
    out = json.loads(proc.stdout)
    assert [(r["worktree"], r["result"]) for r in out] == [("z", "merged"), ("x", "merged"), ("y", "conflict")]
    assert out[2]["files"] == ["app.py"] and "commit" not in out[2]
    # Squash (the default): one commit per worktree, its task's subject; main is the last tested commit.
    assert git(repo, "log", "--format=%s", "-3", "main").splitlines() == ["Task x (#1)", "Task z (#3)", "app"]
    assert tip(repo) == out[1]["commit"]
    assert (repo / "z.py").is_file() and (repo / "app.py").read_text() == lines("X")  # the primary followed
    kinds = [e["event"] for e in events(repo) if e["event"].startswith("train.")]
    assert kinds == ["train.merged", "train.merged", "train.conflict"]
    assert not any((repo / ".worktrees" / ".train").iterdir())  # the temporary worktrees are gone
    assert ".train" not in git(repo, "worktree", "list")
    # Again: what landed has nothing left to land, the conflict is still one.
    again = results(cli("train", "--json", "x", "y", "z"))
    assert {n: r["result"] for n, r in again.items()} == {"x": "skipped", "y": "conflict", "z": "skipped"}


@pytest.mark.parametrize("strategy", ["rebase", "merge"])
def test_rebase_and_merge_strategies(cli: CLI, repo: Path, strategy: str) -> None:
    cli.ok("worktree", "create", "a")
    cli.ok("worktree", "create", "b")
    wts = repo / ".worktrees"
    commit(wts / "a", "a1.py", "1\n", "a one")
    commit(wts / "a", "a2.py", "2\n", "a two")
    commit(wts / "b", "b.py", "b\n", "b one")
    proc = cli("train", "a", "b", "--strategy", strategy, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {r["result"] for r in json.loads(proc.stdout)} == {"merged"}
    subjects = git(repo, "log", "--format=%s", "main").splitlines()
    if strategy == "rebase":
        assert subjects[:3] == ["b one", "a two", "a one"]  # linear, the agents' own commits
        assert tip(repo, "wt/b") == tip(repo)  # the agent's branch follows its rebased commits
        assert git(wts / "b", "status", "--porcelain") == ""
    else:
        assert subjects[0] == "Merge wt/b" and len(git(repo, "log", "-1", "--format=%P").split()) == 2
    assert {"a1.py", "a2.py", "b.py"} <= files_at(repo)


def test_the_gate_runs_in_the_candidate_and_a_failure_leaves_the_target(cli: CLI, repo: Path) -> None:
    trusted_config(repo, '[hooks]\npre_merge = ["test -f from_main.txt && echo checked >> gate.log"]\n')
    git(repo, "add", ".daintree.toml")
    git(repo, "commit", "-q", "-m", "config")
    cli.ok("worktree", "create", "ok")
    cli.ok("worktree", "create", "bad")
    wts = repo / ".worktrees"
    commit(wts / "ok", "ok.py", "ok\n")
    commit(wts / "bad", "broken.flag", "x\n")
    commit(repo, "from_main.txt", "main moved on\n")  # in the candidates, not in the worktrees
    before = tip(repo)
    test = 'if [ -f broken.flag ]; then echo "3 tests FAILED: see broken.flag"; exit 3; fi'
    proc = cli("train", "bad", "ok", "--test", test, "--json")
    assert proc.returncode == 1
    out = results(proc)
    assert out["bad"]["result"] == "failed" and "exited 3" in out["bad"]["reason"], out
    assert out["ok"]["result"] == "merged"
    assert git(repo, "rev-parse", "main~1").strip() == before and "broken.flag" not in files_at(repo)
    assert not (wts / "ok" / "gate.log").exists()  # the checks ran in the candidate, not the agent's worktree
    failed = [e for e in events(repo) if e["event"] == "train.failed"]
    assert len(failed) == 1 and "3 tests FAILED" in failed[0]["output"]
    assert git(wts / "bad", "status", "--porcelain") == ""  # nothing of the agent's changed


@pytest.mark.usefixtures("tmux_socket")
def test_the_agent_is_told_in_its_live_session_as_one_bracketed_paste(cli: CLI, repo: Path, tmp_path: Path) -> None:
    recorder = tmp_path / "recorder.py"
    recorder.write_text(RECORDER)
    trusted_config(repo, f'[agents.rec]\ncommand = "{sys.executable} {recorder} {tmp_path}"\n'
                         'prompt_mode = "type"\nsandbox = "off"\n')
    commit(repo, "app.py", lines("two"), "app")
    for name in ("clash", "fails", "fine"):
        cli.ok("worktree", "create", name, "--agent", "rec")
        wait_for(lambda name=name: "ready" in cli("session", "capture", name).stdout)
    wts = repo / ".worktrees"
    commit(wts / "clash", "app.py", lines("mine"))
    commit(wts / "fails", "broken.flag", "x\n")
    commit(wts / "fine", "fine.py", "ok\n")
    commit(repo, "app.py", lines("main's"))
    test = 'if [ -f broken.flag ]; then printf "\\033]52;c;cHduZWQ=\\007boom: broken.flag is there\\n"; exit 1; fi'
    proc = cli("train", "clash", "fails", "fine", "--test", test, "--json")
    out = results(proc)
    assert {n: r["result"] for n, r in out.items()} == {"clash": "conflict", "fails": "failed", "fine": "merged"}
    assert "its agent was told" in out["clash"]["reason"] and "its agent was told" in out["fails"]["reason"]

    def pasted(name: str) -> bytes:
        got = tmp_path / f"got-{name}"
        return wait_for(lambda: got.is_file() and b"\x1b[201~\r" in got.read_bytes() and got.read_bytes())

    clash = pasted("clash")
    body = clash[clash.index(b"\x1b[200~") + 6:clash.index(b"\x1b[201~")]
    assert b"conflicts with main" in body and b"- app.py" in body and body.count(b"\x1b") == 0
    fails = pasted("fails")
    body = fails[fails.index(b"\x1b[200~") + 6:fails.index(b"\x1b[201~")]
    assert b"boom: broken.flag is there" in body and b"exited 1" in body
    # The output's terminal controls (an OSC clipboard write) never reach the agent: its text alone, fenced.
    assert b"```\rboom: broken.flag is there\r```" in body and b"\x07" not in body
    assert not (tmp_path / "got-fine").exists() or b"daintree train" not in (tmp_path / "got-fine").read_bytes()


@pytest.mark.usefixtures("tmux_socket")
def test_an_agent_at_a_dialog_gets_the_paste_but_never_the_enter(cli: CLI, repo: Path, tmp_path: Path) -> None:
    """A "waiting" agent may wait at a question (gemini's trust dialog in the trial): Enter there answers it with
    what is selected. The train presses Enter only once its paste shows on the screen."""
    recorder = tmp_path / "recorder.py"
    recorder.write_text(RECORDER)
    trusted_config(repo, f'[agents.dialog]\ncommand = "{sys.executable} {recorder} {tmp_path} dialog"\n'
                         'prompt_mode = "type"\nsandbox = "off"\n')
    commit(repo, "app.py", lines("two"), "app")
    cli.ok("worktree", "create", "asks", "--agent", "dialog")
    wait_for(lambda: "2. No" in cli("session", "capture", "asks").stdout)
    commit(repo / ".worktrees" / "asks", "app.py", lines("mine"))
    commit(repo, "app.py", lines("main's"))
    out = results(cli("train", "asks", "--json"))["asks"]
    assert out["result"] == "conflict" and "not entered" in out["reason"] and "was told" not in out["reason"], out
    got = (tmp_path / "got-asks").read_bytes()
    assert b"conflicts with main" in got and got.endswith(b"\x1b[201~"), got[-80:]  # the paste, and no Enter
    assert any(line.split()[1:] == ["train.conflict", "asks", "in", "app.py"]
               for line in cli("worktree", "events").stdout.splitlines())


def test_primary_checked_out_dirty_is_skipped_and_kept(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "a")
    commit(repo / ".worktrees" / "a", "a.py", "a\n")
    (repo / "README.md").write_text("my edit\n")
    before = tip(repo)
    proc = cli("train", "a", "--json")
    assert proc.returncode == 1
    out = results(proc)["a"]
    assert out["result"] == "skipped" and "uncommitted changes (README.md)" in out["reason"]
    assert tip(repo) == before and (repo / "README.md").read_text() == "my edit\n"


def test_remove_and_complete_task_only_for_those_merged(cli: CLI, repo: Path) -> None:
    commit(repo, "app.py", lines("two"), "app")
    cli.ok("task", "create", "Lands")
    cli.ok("task", "create", "Clashes")
    cli.ok("worktree", "create", "lands", "--task", "1")
    cli.ok("worktree", "create", "clashes", "--task", "2")
    commit(repo / ".worktrees" / "lands", "l.py", "l\n")
    commit(repo / ".worktrees" / "clashes", "app.py", lines("C"))
    commit(repo, "app.py", lines("M"))
    proc = cli("train", "lands", "clashes", "--remove", "--complete-task", "--json")
    assert proc.returncode == 1
    listed = {e["name"]: e["status"] for e in cli.json("worktree", "list", "--all")}
    assert listed == {"lands": "removed", "clashes": "active"}
    assert [t["status"] for t in cli.json("task", "list")] == ["completed", "in_progress"]


@pytest.mark.usefixtures("tmux_socket")
def test_without_names_only_finished_worktrees_with_work_ride(cli: CLI, repo: Path) -> None:
    trusted_config(repo, "[agents.busy]\ncommand = \"sh -c 'while :; do echo busy $(date +%N); sleep 0.2; done'\"\n")
    for name in ("done", "busy", "idle"):
        cli.ok("worktree", "create", name)
    wts = repo / ".worktrees"
    commit(wts / "done", "d.py", "d\n")
    commit(wts / "busy", "b.py", "b\n")  # committed, but its agent is still at it
    cli.ok("session", "start", "busy", "--agent", "busy")
    wait_for(lambda: any(s["name"] == "busy" and s["status"] == "running" for s in cli.json("session", "list")))
    out = cli.json("train")  # idle has no commits: nothing to land
    assert [(r["worktree"], r["result"]) for r in out] == [("done", "merged")]
    empty = cli("train")
    assert empty.returncode == 0 and "nothing to land" in empty.stdout


def test_bad_input_and_refusals(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "a")
    commit(repo / ".worktrees" / "a", "a.py", "a\n")
    assert cli("train", "nope").returncode == 2
    assert cli("train", "a", "--strategy", "ff").returncode == 2
    assert cli("train", "a", "--into", "no-such-branch").returncode == 2
    inside = cli("train", "a", env={"DAINTREE_WORKTREE": "a"})
    assert inside.returncode == 1 and "refused from inside a session" in inside.stderr
    (repo / ".daintree.toml").write_text('[hooks]\npre_merge = ["true"]\n')  # the repository's, not trusted
    untrusted = cli("train", "a")
    assert untrusted.returncode == 1 and "daintree trust" in untrusted.stderr
    (repo / ".daintree.toml").unlink()
    from daintree_tui.core.project import Project

    with Project.discover(repo).train_lock.hold():
        busy = cli("train", "a")
    assert busy.returncode == 1 and "another merge train is running" in busy.stderr
    assert tip(repo) != tip(repo, "wt/a") and cli("train", "a").returncode == 0


@needs_bwrap
def test_the_gate_is_confined_to_the_worktrees_sandbox(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "a")
    commit(repo / ".worktrees" / "a", "a.py", "a\n")
    outside = repo / "pwned"
    test = (f"echo gate > built.txt && cat built.txt; (echo 'gitdir: /elsewhere' > .git) 2>/dev/null || "
            f"echo git-file-kept; echo pwned > {outside}")
    out = results(cli("train", "a", "--test", test, "--json"))["a"]
    assert out["result"] == "failed" and not outside.exists(), out  # the primary is not the checks' to write
    output = next(e for e in events(repo) if e["event"] == "train.failed")["output"]
    assert "gate" in output and "git-file-kept" in output, output  # the candidate is; its `.git` file is not


def train_process(repo: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "daintree_tui", "train", *args], cwd=repo, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


@pytest.mark.stress
def test_kill_9_mid_train_leaves_only_tested_commits_and_doctor_fix_cleans_up(cli: CLI, repo: Path) -> None:
    commit(repo, ".gitignore", "*.local\n", "ignore")
    cli.ok("worktree", "create", "first")
    cli.ok("worktree", "create", "second")
    wts = repo / ".worktrees"
    commit(wts / "first", "first.py", "1\n")
    second_tip = commit(wts / "second", "slow.flag", "x\n")
    (wts / "second" / "notes.local").write_text("the agent's own notes, ignored\n")
    (repo / "scratch.txt").write_text("mine\n")  # the user's untracked file in the primary
    gate = 'if [ -f slow.flag ]; then touch gate-started; sleep 60; fi'
    train = train_process(repo, "first", "second", "--test", gate)
    try:
        started = wait_for(lambda: next((p for p in (wts / ".train").glob("second-*/gate-started")), None)
                           if (wts / ".train").is_dir() else None, timeout=60)
        os.kill(train.pid, signal.SIGKILL)
    finally:
        train.kill()
        train.wait()
    assert started.exists()
    # main holds first's tested commit and nothing of second's; second's branch and files are as they were.
    assert "first.py" in files_at(repo) and "slow.flag" not in files_at(repo)
    assert tip(repo, "wt/second") == second_tip
    assert (wts / "second" / "notes.local").read_text() == "the agent's own notes, ignored\n"
    assert (repo / "scratch.txt").read_text() == "mine\n" and git(repo, "status", "--porcelain") == "?? scratch.txt\n"
    report = cli("doctor")
    assert report.returncode == 1 and "interrupted merge train" in report.stdout
    cli.ok("doctor", "--fix")
    assert not any((wts / ".train").iterdir())
    assert ".train" not in git(repo, "worktree", "list")
    assert cli("doctor").returncode == 0
    # The next train lands it (tested again: the target moved since).
    done = results(cli("train", "second", "--json"))
    assert done["second"]["result"] == "merged" and "slow.flag" in files_at(repo)


def test_doctor_leaves_a_running_trains_worktrees(cli: CLI, repo: Path) -> None:
    from daintree_tui.core.project import Project

    project = Project.discover(repo)
    cli.ok("worktree", "create", "a")
    (project.train_root / "a-12345678").mkdir(parents=True)
    with project.train_lock.hold():
        cli.ok("doctor", "--fix")
        assert (project.train_root / "a-12345678").is_dir()
    cli.ok("doctor", "--fix")
    assert not (project.train_root / "a-12345678").exists()


def test_help_names_the_train_and_the_radar(cli: CLI) -> None:
    top = cli("--help").stdout
    assert "train" in top and "land worktrees one by one" in top
    assert "conflicts" in cli("worktree", "--help").stdout
    train = cli("train", "--help").stdout
    for option in ("--into", "--strategy", "--test", "--remove", "--complete-task", "--json"):
        assert option in train
