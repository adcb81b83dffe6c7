"""Reconcile after crashes: corrupt index, orphan worktrees, hand-deleted dirs, kill -9 during create/remove."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CLI, git


def assert_agreement(repo: Path) -> None:
    """Tasks, index, git worktrees, branches and ports all agree."""
    index = json.loads((repo / ".worktrees" / "index.json").read_text())["worktrees"]
    live = {e["name"]: e for e in index if e["status"] in ("active", "kept")}
    git_paths = {line.split(" ", 1)[1] for line in git(repo, "worktree", "list", "--porcelain").splitlines()
                 if line.startswith("worktree ")}
    for entry in live.values():
        assert entry["path"] in git_paths, entry
        assert Path(entry["path"]).is_dir()
        assert entry["branch"] in git(repo, "branch", "--list", entry["branch"])
    ours = {p for p in git_paths if Path(p).parent == repo / ".worktrees"}
    assert ours == {e["path"] for e in live.values()}
    ports = [p for e in live.values() for p in e["ports"]]
    assert len(ports) == len(set(ports))
    assert all(e["ports"] for e in live.values())
    for f in (repo / ".tasks").glob("task_*.json"):
        task = json.loads(f.read_text())
        if task["worktree"]:
            assert task["worktree"] in live, task
            assert live[task["worktree"]]["task_id"] == task["id"]
    for entry in live.values():
        if entry["task_id"] is not None:
            task = json.loads((repo / ".tasks" / f"task_{entry['task_id']}.json").read_text())
            assert task["worktree"] == entry["name"]
    journal = repo / ".worktrees" / ".journal"
    assert not journal.exists() or not list(journal.glob("*.json"))
    assert ".merge-" not in git(repo, "worktree", "list")


def test_doctor_clean_repo_reports_nothing(cli: CLI) -> None:
    cli.ok("worktree", "create", "fine")
    proc = cli("doctor")
    assert proc.returncode == 0 and "consistent" in proc.stdout


def test_corrupt_index_recovered_from_backup(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "a")
    cli.ok("worktree", "create", "b")
    (repo / ".worktrees" / "index.json").write_text('{"worktrees": [{"na')
    proc = cli("worktree", "list", "--json")
    assert proc.returncode == 0 and "recovered" in proc.stderr
    assert sorted(e["name"] for e in json.loads(proc.stdout)) == ["a", "b"]
    assert cli("doctor").returncode == 1
    cli.ok("doctor", "--fix")
    assert json.loads((repo / ".worktrees" / "index.json").read_text())["worktrees"]
    assert cli("doctor").returncode == 0


def test_index_and_backup_lost_rebuilt_from_git(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "t")
    cli.ok("worktree", "create", "a", "--task", "1")
    (repo / ".worktrees" / "index.json").write_text("garbage")
    (repo / ".worktrees" / "index.json.bak").unlink()
    proc = cli("doctor", "--fix")
    assert proc.returncode == 0 and "rebuilt" in proc.stdout
    entries = cli.json("worktree", "list")
    assert [e["name"] for e in entries] == ["a"] and entries[0]["ports"]
    assert entries[0]["task_id"] == 1  # re-linked from the task that names it
    assert_agreement(repo)


def test_orphan_git_worktree_is_adopted(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "known")
    git(repo, "worktree", "add", "-q", "-b", "wt/orphan", str(repo / ".worktrees" / "orphan"))
    proc = cli("doctor")
    assert proc.returncode == 1 and "orphan" in proc.stdout
    cli.ok("doctor", "--fix")
    assert sorted(e["name"] for e in cli.json("worktree", "list")) == ["known", "orphan"]
    assert_agreement(repo)
    fixed = [json.loads(ln) for ln in (repo / ".worktrees" / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "reconcile.fixed" for e in fixed)


def test_a_git_worktree_on_a_branch_of_the_users_is_never_adopted(cli: CLI, repo: Path) -> None:
    # A sandboxed session could write its branch's ref folder: refs/heads/release/, the user's release branches.
    git(repo, "branch", "release/2.0")
    git(repo, "worktree", "add", "-q", str(repo / ".worktrees" / "rel"), "release/2.0")
    git(repo, "worktree", "add", "-q", "-b", "mine", str(repo / ".worktrees" / "other"))  # wt/other is ours
    cli.ok("doctor", "--fix")
    assert cli.json("worktree", "list") == []
    (repo / ".worktrees" / "index.json").write_text("{torn")  # rebuilt from git: the same rule
    (repo / ".worktrees" / "index.json.bak").unlink(missing_ok=True)
    assert cli.json("worktree", "list") == []
    assert cli("session", "start", "rel", "--agent", "shell").returncode == 2


def test_hand_deleted_dir_marked_removed_and_task_unbound(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "t")
    cli.ok("worktree", "create", "lost", "--task", "1")
    shutil.rmtree(repo / ".worktrees" / "lost")
    cli.ok("doctor", "--fix")
    assert cli.json("worktree", "list") == []
    task = cli.json("task", "show", "1")
    assert task["worktree"] == "" and task["status"] == "pending"
    assert_agreement(repo)
    cli.ok("worktree", "create", "again", "--task", "1")


KILL_SCRIPT = """
import os, sys, time, threading
from daintree_tui.core.project import Project
from daintree_tui.core.worktrees import WorktreeService
repo, op, name, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
threading.Timer(delay, lambda: os.kill(os.getpid(), 9)).start()
svc = WorktreeService(Project.discover(repo))
if op == "create":
    svc.create(name, task_id=int(sys.argv[5]) if len(sys.argv) > 5 else None)
elif op == "remove":
    svc.remove(name, force=True, complete_task=True)
elif op == "keep":
    svc.keep(name)
elif op == "merge":
    from daintree_tui.core.review import ReviewService
    ReviewService(svc).merge(name, strategy="squash", remove=True, complete_task=True)
time.sleep(5)
"""


# Two seeds by default; three more with `-m slow` (CI, when time allows): each seed is five kill -9s.
KILL_SEEDS = [0, 1, *(pytest.param(seed, marks=pytest.mark.slow) for seed in (2, 3, 4))]


@pytest.mark.stress
@pytest.mark.parametrize("seed", KILL_SEEDS)
def test_kill_9_at_random_points_then_doctor_fix(repo: Path, seed: int) -> None:
    """kill -9 during create, remove and keep at seeded random moments; doctor --fix restores agreement and no
    uncommitted file is ever lost."""
    rng = random.Random(seed)
    cli = CLI(repo)
    (repo / ".gitignore").write_text(".env\n")
    (repo / ".env").write_text("X=1\n")
    for i in range(6):
        cli.ok("task", "create", f"t{i}")
    precious: dict[Path, str] = {}
    for i in range(5):
        name = f"k{seed}-{i}"
        op = rng.choice(["create", "create", "remove", "keep", "merge"])
        delay = rng.uniform(0.0, 0.35)
        if op != "create":
            cli.ok("worktree", "create", name)
            wt = repo / ".worktrees" / name
            if op == "keep":
                (wt / "uncommitted.txt").write_text(f"work {i}\n")
                precious[wt / "uncommitted.txt"] = f"work {i}\n"
            if op == "merge":
                (wt / f"merged{i}.txt").write_text("m\n")
                git(wt, "add", "-A")
                git(wt, "commit", "-q", "-m", f"m{i}")
        args = [sys.executable, "-c", KILL_SCRIPT, str(repo), op, name, f"{delay:.3f}"]
        if op == "create" and i < 6:
            args.append(str(i + 1))
        proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert proc.returncode in (0, -signal.SIGKILL, 1), proc.stderr
        fix = cli("doctor", "--fix")
        assert fix.returncode == 0, fix.stderr
        assert_agreement(repo)
        assert cli("doctor").returncode == 0, cli("doctor").stdout
    for path, text in precious.items():
        assert path.read_text() == text


def test_sigkill_during_create_is_rolled_back_or_kept(repo: Path) -> None:
    """A create killed right after `git worktree add` leaves a journal; doctor --fix rolls it back cleanly."""
    cli = CLI(repo)
    cli.ok("task", "create", "t")
    code = ("import os, sys; from daintree_tui.core import deps;"
            "deps.copy_includes = lambda *a: os.kill(os.getpid(), 9);"
            "from daintree_tui.core.project import Project; from daintree_tui.core.worktrees import WorktreeService;"
            "WorktreeService(Project.discover(sys.argv[1])).create('half', task_id=1)")
    proc = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert (repo / ".worktrees" / ".journal" / "half.json").exists()
    assert cli("doctor").returncode == 1
    cli.ok("doctor", "--fix")
    assert not (repo / ".worktrees" / "half").exists()
    assert "wt/half" not in git(repo, "branch", "--list")
    assert_agreement(repo)
    cli.ok("worktree", "create", "half", "--task", "1")  # and the name works again
    assert os.path.isdir(repo / ".worktrees" / "half")
