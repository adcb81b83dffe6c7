"""The worktree lifecycle, through the real CLI over real git repositories (DESIGN.md section 3)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CLI, Lines, events, git


def test_seed_walkthrough(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "Refactor auth")
    cli.ok("task", "create", "Login UI")
    auth = cli.json("worktree", "create", "auth-refactor", "--task", "1")
    assert auth["branch"] == "wt/auth-refactor" and auth["task_id"] == 1 and auth["status"] == "active"
    assert Path(auth["path"]) == repo / ".worktrees" / "auth-refactor"
    assert len(auth["ports"]) == 3
    ui = cli.json("wt", "create", "ui-login", "--task", "2")
    assert not set(ui["ports"]) & set(auth["ports"])
    assert cli.json("task", "show", "1")["status"] == "in_progress"
    assert cli.json("task", "show", "1")["worktree"] == "auth-refactor"
    run = cli("worktree", "run", "ui-login", "--", "git", "status", "--short")
    assert run.returncode == 0 and run.stdout == ""
    assert cli.json("worktree", "keep", "ui-login")["status"] == "kept"
    removed = cli.json("worktree", "remove", "auth-refactor", "--complete-task")
    assert removed["removed"] is True
    assert not (repo / ".worktrees" / "auth-refactor").exists()
    assert cli.json("task", "show", "1")["status"] == "completed"
    assert cli.json("task", "show", "1")["worktree"] == ""
    names = [e["name"] for e in cli.json("worktree", "list")]
    assert names == ["ui-login"]
    assert {e["name"] for e in cli.json("worktree", "list", "--all")} == {"ui-login", "auth-refactor"}
    seq = [(e["event"], e["worktree"].get("name")) for e in events(repo)
           if e["event"].startswith("worktree.") or e["event"] == "task.completed"]
    assert seq == [
        ("worktree.create.before", "auth-refactor"), ("worktree.create.after", "auth-refactor"),
        ("worktree.create.before", "ui-login"), ("worktree.create.after", "ui-login"),
        ("worktree.keep", "ui-login"),
        ("worktree.remove.before", "auth-refactor"), ("task.completed", "auth-refactor"),
        ("worktree.remove.after", "auth-refactor"),
    ]
    assert git(repo, "status", "--short") == ""
    index = json.loads((repo / ".worktrees" / "index.json").read_text())
    entry = next(e for e in index["worktrees"] if e["name"] == "auth-refactor")
    assert entry["status"] == "removed" and entry["ports"] == [] and "removed_at" in entry


@pytest.mark.parametrize("name", ["-bad", "a..b", "x.lock", "end.", "sp ace", "a" * 64, "ü", "a/b", ""])
def test_invalid_names_rejected_without_side_effects(cli: CLI, repo: Path, name: str) -> None:
    proc = cli("worktree", "create", name)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (repo / ".worktrees" / "events.jsonl").exists()


def test_rejections_exit_2_and_emit_nothing(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "t")
    cli.ok("worktree", "create", "one", "--task", "1")
    before = len(events(repo))
    git(repo, "branch", "wt/taken")
    (repo / ".worktrees" / "full").mkdir()
    (repo / ".worktrees" / "full" / "x").write_text("x")
    cases = [
        ["worktree", "create", "one"],                      # name already live
        ["worktree", "create", "two", "--task", "9"],       # missing task
        ["worktree", "create", "two", "--task", "1"],       # task bound to a live worktree
        ["worktree", "create", "two", "--base", "nope"],    # bad base ref
        ["worktree", "create", "taken"],                    # existing branch
        ["worktree", "create", "full"],                     # non-empty target dir
        ["worktree", "keep", "ghost"],                      # unknown worktree
        ["worktree", "remove", "ghost"],
        ["worktree", "status", "ghost"],
        ["worktree", "run", "ghost", "--", "true"],
    ]
    for args in cases:
        proc = cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
    assert len(events(repo)) == before
    assert not (repo / ".worktrees" / "two").exists()


def test_keep_only_from_active(cli: CLI) -> None:
    cli.ok("worktree", "create", "k")
    cli.ok("worktree", "keep", "k")
    assert cli("worktree", "keep", "k").returncode == 2
    cli.ok("worktree", "remove", "k")
    assert cli("worktree", "keep", "k").returncode == 2


def test_remove_refuses_dirty_work_and_names_files(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "t")
    cli.ok("worktree", "create", "dirty", "--task", "1")
    wt = repo / ".worktrees" / "dirty"
    (wt / "app.py").write_text("changed\n")
    (wt / "notes.md").write_text("untracked\n")
    proc = cli("worktree", "remove", "dirty")
    assert proc.returncode == 1
    assert "app.py" in proc.stderr and "notes.md" in proc.stderr
    assert (wt / "notes.md").read_text() == "untracked\n"
    assert cli.json("worktree", "status", "dirty")["facts"]["dirty"] == 2
    cli.ok("worktree", "remove", "dirty", "--force")
    assert not wt.exists()
    assert cli.json("task", "show", "1")["status"] == "pending"  # can be picked up again


def test_remove_already_removed_is_a_noop(cli: CLI) -> None:
    cli.ok("worktree", "create", "gone")
    cli.ok("worktree", "remove", "gone")
    proc = cli("worktree", "remove", "gone")
    assert proc.returncode == 0 and "already removed" in proc.stdout


def test_dir_deleted_by_hand_is_not_an_error(cli: CLI, repo: Path) -> None:
    import shutil

    cli.ok("worktree", "create", "manual")
    shutil.rmtree(repo / ".worktrees" / "manual")
    proc = cli("worktree", "remove", "manual")
    assert proc.returncode == 0, proc.stderr
    assert "manual" not in git(repo, "worktree", "list")


def test_delete_branch_only_when_merged_unless_forced(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "merged")
    cli.ok("worktree", "remove", "merged", "--delete-branch")
    assert "wt/merged" not in git(repo, "branch", "--list")
    cli.ok("worktree", "create", "work")
    wt = repo / ".worktrees" / "work"
    (wt / "feature.py").write_text("x = 1\n")
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", "feature")
    proc = cli("worktree", "remove", "work", "--delete-branch")
    assert proc.returncode == 0
    assert "not merged" in proc.stderr
    assert "wt/work" in git(repo, "branch", "--list")
    cli.ok("worktree", "create", "work2")
    wt2 = repo / ".worktrees" / "work2"
    (wt2 / "f.py").write_text("y\n")
    git(wt2, "add", "-A")
    git(wt2, "commit", "-q", "-m", "f")
    cli.ok("worktree", "remove", "work2", "--delete-branch", "--force")
    assert "wt/work2" not in git(repo, "branch", "--list")


def test_removed_name_can_be_created_again(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "again")
    cli.ok("worktree", "remove", "again")
    entry = cli.json("worktree", "create", "again")
    assert entry["status"] == "active"
    index = json.loads((repo / ".worktrees" / "index.json").read_text())
    assert [e["name"] for e in index["worktrees"]].count("again") == 1
    # but not when the old branch carries unmerged commits: that work is never thrown away
    wt = repo / ".worktrees" / "again"
    (wt / "n.txt").write_text("n")
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", "n")
    cli.ok("worktree", "remove", "again")
    proc = cli("worktree", "create", "again")
    assert proc.returncode == 2 and "already exists" in proc.stderr


def test_deps_copy_ignored_includes_and_link_node_modules(cli: CLI, repo: Path) -> None:
    (repo / ".gitignore").write_text(".env\n.env.*\nnode_modules/\nsecret.txt\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore")
    (repo / ".env").write_text("TOKEN=1\n")
    (repo / ".env.local").write_text("LOCAL=1\n")
    (repo / "secret.txt").write_text("not included\n")
    (repo / "node_modules" / "left-pad").mkdir(parents=True)
    (repo / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1\n")
    cli.ok("worktree", "create", "deps")
    wt = repo / ".worktrees" / "deps"
    assert (wt / ".env").read_text() == "TOKEN=1\n" and not (wt / ".env").is_symlink()
    assert (wt / ".env.local").exists()
    assert not (wt / "secret.txt").exists()
    assert (wt / "node_modules").is_symlink()
    assert (wt / "node_modules").resolve() == (repo / "node_modules").resolve()
    (wt / ".env").write_text("TOKEN=changed\n")
    assert (repo / ".env").read_text() == "TOKEN=1\n"  # an agent's edit does not leak back
    assert git(wt, "status", "--short") == ""  # the link never shows as untracked
    linked = [e for e in events(repo) if e["event"] == "deps.linked"]
    assert linked and linked[0]["linked"] == [{"path": "node_modules", "mode": "symlink"}]
    cli.ok("worktree", "remove", "deps")  # nor blocks remove
    assert (repo / "node_modules" / "left-pad" / "index.js").exists()


def test_worktreeinclude_file_and_copy_mode(cli: CLI, repo: Path) -> None:
    (repo / ".gitignore").write_text("*.key\nvendor/\n")
    (repo / ".worktreeinclude").write_text("dev.key\n")
    (repo / ".daintree.toml").write_text('[deps]\nlink = [{path = "vendor", mode = "copy"}]\n')
    git(repo, "add", ".gitignore", ".worktreeinclude", ".daintree.toml")
    git(repo, "commit", "-q", "-m", "cfg")
    (repo / "dev.key").write_text("k")
    (repo / "other.key").write_text("o")
    (repo / "vendor").mkdir()
    (repo / "vendor" / "lib.txt").write_text("lib")
    cli.ok("worktree", "create", "inc")
    wt = repo / ".worktrees" / "inc"
    assert (wt / "dev.key").exists() and not (wt / "other.key").exists()
    assert (wt / "vendor" / "lib.txt").read_text() == "lib" and not (wt / "vendor").is_symlink()


def test_run_environment_exit_code_and_timeout(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "t")
    entry = cli.json("worktree", "create", "envy", "--task", "1")
    code = ("import os, json; print(json.dumps({k: os.environ.get(k) for k in "
            "['DAINTREE_TASK_ID','DAINTREE_WORKTREE','DAINTREE_WORKTREE_PATH','DAINTREE_BRANCH','DAINTREE_ROOT',"
            "'PORT','DAINTREE_PORT_0','DAINTREE_PORT_2','TMPDIR','CLAUDECODE']} | {'cwd': os.getcwd()}))")
    proc = cli("worktree", "run", "envy", "--", sys.executable, "-c", code, env={"CLAUDECODE": "1"})
    assert proc.returncode == 0, proc.stderr
    env = json.loads(proc.stdout)
    assert env["DAINTREE_TASK_ID"] == "1" and env["DAINTREE_WORKTREE"] == "envy"
    assert env["DAINTREE_BRANCH"] == "wt/envy" and env["DAINTREE_ROOT"] == str(repo)
    assert env["PORT"] == str(entry["ports"][0]) and env["DAINTREE_PORT_2"] == str(entry["ports"][2])
    assert env["TMPDIR"] == str(repo / ".worktrees" / ".tmp" / "envy")
    assert env["CLAUDECODE"] is None
    assert env["cwd"] == entry["path"]
    assert cli("worktree", "run", "envy", "--", "sh", "-c", "exit 7").returncode == 7
    for missing in ("no-such-program", "./no-such-script"):  # as a shell says it, sandboxed or not
        proc = cli("worktree", "run", "envy", "--", missing)
        assert (proc.returncode, proc.stderr) == (127, f"command not found: {missing}\n")
    start = time.monotonic()
    proc = cli("worktree", "run", "envy", "--timeout", "1", "--", "sleep", "30")
    assert proc.returncode == 124 and time.monotonic() - start < 10


def test_run_returns_while_background_child_holds_output(cli: CLI) -> None:
    cli.ok("worktree", "create", "bg")
    start = time.monotonic()
    proc = cli("worktree", "run", "bg", "--", "sh", "-c", "sleep 30 & echo started")
    assert proc.returncode == 0 and "started" in proc.stdout
    assert time.monotonic() - start < 10


def test_run_caps_output_and_marks_the_cut(cli: CLI) -> None:
    cli.ok("worktree", "create", "loud")
    proc = cli("worktree", "run", "loud", "--json", "--", sys.executable, "-c", "print('x' * 600000)")
    result = json.loads(proc.stdout)
    assert len(result["stdout"]) < 300 * 1024
    assert "[output truncated: " in result["stdout"]


def test_parallel_creates_get_unique_ports_and_entries(repo: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-m", "daintree_tui", "worktree", "create", f"p{i}", "--json"],
                              cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(3)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    ports = [port for out, _ in outs for port in json.loads(out)["ports"]]
    assert len(ports) == len(set(ports)) == 9
    index = json.loads((repo / ".worktrees" / "index.json").read_text())
    assert sorted(e["name"] for e in index["worktrees"]) == ["p0", "p1", "p2"]


def test_ports_skip_a_port_in_use(cli: CLI, repo: Path) -> None:
    import socket

    (repo / ".daintree.toml").write_text("[ports]\nrange = [3500, 3520]\nper_worktree = 2\n")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 3500))
        sock.listen()
        entry = cli.json("worktree", "create", "busy")
    assert 3500 not in entry["ports"] and entry["ports"] == [3501, 3502]


def test_failed_step_rolls_back_everything(cli: CLI, repo: Path) -> None:
    (repo / ".daintree.toml").write_text("[ports]\nrange = [3600, 3601]\nper_worktree = 2\n")
    cli.ok("worktree", "create", "first")
    proc = cli("worktree", "create", "second")  # no ports left: fails after git worktree add
    assert proc.returncode == 1 and "no block" in proc.stderr
    assert not (repo / ".worktrees" / "second").exists()
    assert "wt/second" not in git(repo, "branch", "--list")
    assert "second" not in git(repo, "worktree", "list")
    assert [e["name"] for e in cli.json("worktree", "list")] == ["first"]
    assert events(repo)[-1]["event"] == "worktree.create.failed"


def test_json_flag_before_or_after_subcommand(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "x")
    a = subprocess.run([sys.executable, "-m", "daintree_tui", "--json", "--repo", str(repo), "task", "list"],
                       capture_output=True, text=True, cwd="/")
    b = subprocess.run([sys.executable, "-m", "daintree_tui", "task", "list", "--repo", str(repo), "--json"],
                       capture_output=True, text=True, cwd="/")
    assert a.returncode == b.returncode == 0
    assert json.loads(a.stdout) == json.loads(b.stdout)


def test_commands_from_inside_a_worktree_use_the_primary(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "x")
    cli.ok("worktree", "create", "inner")
    tasks = cli.json("task", "list", cwd=repo / ".worktrees" / "inner")
    assert [t["id"] for t in tasks] == [1]
    assert not (repo / ".worktrees" / "inner" / ".tasks").exists()


def test_worktree_dir_elsewhere_keeps_state_under_dot_worktrees(cli: CLI, repo: Path, tmp_path: Path) -> None:
    # Only the user's own config may put worktrees outside the repository (the repo's file may not: trust).
    user_config = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text(f'worktree_dir = "{tmp_path / "trees"}"\n')
    entry = cli.json("worktree", "create", "far")
    assert Path(entry["path"]) == tmp_path / "trees" / "far"
    assert (repo / ".worktrees" / "index.json").exists()
    cli.ok("worktree", "remove", "far")
    assert not (tmp_path / "trees" / "far").exists()


def test_events_limit_and_json(cli: CLI) -> None:
    cli.ok("task", "create", "a")
    cli.ok("task", "create", "b")
    recs = cli.json("worktree", "events", "--limit", "1")
    assert len(recs) == 1 and recs[0]["event"] == "task.created" and recs[0]["task"]["id"] == 2


def test_events_follow_prints_new_events(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "a")
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", "worktree", "events", "--follow", "--json",
                             "--limit", "0"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = Lines(proc.stdout)
        # It prints only what happens after it started, which the test cannot see: add tasks until one shows.
        for attempt in range(60):
            cli.ok("task", "create", f"b{attempt}")
            with contextlib.suppress(AssertionError):
                first = json.loads(lines.until(lambda line: True, timeout=0.5))
                break
        assert first["task"]["subject"].startswith("b"), "the task created before it started was printed"
        cli.ok("task", "create", "c")
        assert json.loads(lines.until(lambda line: '"c"' in line))["event"] == "task.created"
        proc.send_signal(signal.SIGINT)  # Ctrl-C: it ends between two looks, as the other loops do
        assert proc.wait(timeout=30) == 130
        assert proc.stderr is not None and "interrupted" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_remove_is_fast_for_a_large_tree(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "big")
    wt = repo / ".worktrees" / "big"
    gen = wt / "gen"
    gen.mkdir()
    for i in range(20000):
        (gen / f"f{i}.txt").write_text("x")
    start = time.monotonic()
    proc = cli("worktree", "remove", "big", "--force")
    elapsed = time.monotonic() - start
    assert proc.returncode == 0
    assert not wt.exists()
    assert elapsed < 3.0, elapsed
    deadline = time.monotonic() + 30
    while any((repo / ".worktrees" / ".trash").iterdir()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any((repo / ".worktrees" / ".trash").iterdir())


def test_env_tmpdir_removed_with_worktree(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "tmpy")
    assert (repo / ".worktrees" / ".tmp" / "tmpy").is_dir()
    cli.ok("worktree", "remove", "tmpy")
    assert not (repo / ".worktrees" / ".tmp" / "tmpy").exists()


def test_non_git_repo_flag(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    proc = CLI(plain)("worktree", "create", "x")
    assert proc.returncode == 2 and proc.stderr.strip() == f"daintree: not a git repository: {plain}"
    assert os.listdir(plain) == []


def test_looking_at_a_worktree_never_rewrites_its_index(repo: Path, cli: CLI) -> None:
    """`git status` refreshes a stale index and writes it back under index.lock when it can. The dashboard looks
    at every worktree while its agent works there, and an agent's `git add` or `git commit` that meets that lock
    fails ("index.lock: File exists"): our looks take no optional lock."""
    from daintree_tui.core.git import dirty_files

    cli.ok("worktree", "create", "busy")
    tree = repo / ".worktrees" / "busy"
    index = Path(git(tree, "rev-parse", "--path-format=absolute", "--git-path", "index").strip())
    readme = tree / "README.md"
    later = time.time() + 5
    os.utime(readme, (later, later))  # same content, newer stat: the index entry no longer matches
    before = index.stat()
    assert dirty_files(tree) == []
    after = index.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    git(tree, "status", "--porcelain")  # git on its own does write it here: the check above can fail
    assert index.stat().st_ino != before.st_ino


# -- the create's git rounds: what discovery already knows is not asked again --------------------------------------


def test_a_create_runs_the_primarys_hooks_wherever_the_cli_runs(repo: Path, cli: CLI, tmp_path: Path) -> None:
    # Discovery asks for the hooks path in its own fork, and a create pins it. A relative core.hooksPath (husky)
    # resolves against the worktree git runs in: from inside an agent's worktree that is the agent's folder.
    (repo / ".githooks").mkdir()
    hook = repo / ".githooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {tmp_path}/user-hook-$(basename $PWD)\n")
    hook.chmod(0o755)
    git(repo, "add", ".githooks")
    git(repo, "commit", "-q", "-m", "hooks")
    git(repo, "config", "core.hooksPath", ".githooks")
    cli.ok("worktree", "create", "agent")
    agent_hook = repo / ".worktrees" / "agent" / ".githooks" / "post-checkout"
    agent_hook.write_text(f"#!/bin/sh\ntouch {tmp_path}/agent-hook-ran\n")
    agent_hook.chmod(0o755)
    (repo / "src").mkdir()
    for where in (repo / ".worktrees" / "agent", repo / "src"):  # an agent's worktree, a folder of the primary
        proc = cli("worktree", "create", f"from-{where.name}", cwd=where)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / f"user-hook-from-{where.name}").exists()
    assert not (tmp_path / "agent-hook-ran").exists()


def test_discovery_knows_the_hooks_path_only_in_the_primary(repo: Path) -> None:
    from daintree_tui.core import git as g
    from daintree_tui.core.project import Project

    git(repo, "config", "core.hooksPath", ".husky")
    (repo / "sub").mkdir()
    assert Project.discover(repo / "sub").hooks_path == repo / ".husky"
    git(repo, "worktree", "add", "-q", "-b", "side", str(repo.parent / "side"))
    linked = Project.discover(repo.parent / "side")
    assert linked.root == repo and linked.hooks_path is None  # its answer would be side/.husky
    assert linked.pinned_hooks() == g.pinned_hooks(repo) == ["-c", f"core.hooksPath={repo / '.husky'}"]


def test_a_branch_prefix_of_the_users_is_still_checked_by_git(repo: Path, cli: CLI) -> None:
    # Under the default `wt/` a valid name is a valid branch without asking git; another prefix is asked.
    (repo / ".daintree.toml").write_text('branch_prefix = "bad..prefix/"\n')
    cli.ok("trust")  # an untrusted repo config's prefix is not used at all
    proc = cli("worktree", "create", "w")
    assert proc.returncode == 2 and "is not a valid branch name" in proc.stderr, proc.stderr
    assert not (repo / ".worktrees" / "w").exists()


def test_an_untrusted_repo_config_cannot_choose_the_branch_prefix(repo: Path, cli: CLI) -> None:
    # A sandbox can write its prefix's ref folder: a clone's `release/` would hand running agents the user's next
    # release branches. Untrusted, the prefix is ours (with a warning); trusted, the repository's.
    (repo / ".daintree.toml").write_text('branch_prefix = "release/"\n')
    made = cli("worktree", "create", "a", "--json")
    assert made.returncode == 0 and json.loads(made.stdout)["branch"] == "wt/a"
    assert "branch_prefix = 'release/'" in made.stderr and "daintree trust" in made.stderr
    cli.ok("trust")
    assert cli.json("worktree", "create", "b")["branch"] == "release/b"


def test_git_while_runs_the_callers_work_beside_git_and_reports_both(repo: Path) -> None:
    from daintree_tui.core import git as g
    from daintree_tui.core.errors import OperationError

    assert g.git_while(repo, "rev-parse", "--verify", "HEAD", meanwhile=lambda: "meanwhile") == "meanwhile"

    def fail() -> None:
        raise RuntimeError("the caller's work failed")

    # The caller's failure is raised once git has ended: the branch git was making is there.
    with pytest.raises(RuntimeError, match="caller's work"):
        g.git_while(repo, "branch", "made-anyway", meanwhile=fail)
    assert git(repo, "rev-parse", "--verify", "--quiet", "refs/heads/made-anyway").strip()
    with pytest.raises(OperationError, match="git branch failed: fatal: a branch named 'made-anyway'"):
        g.git_while(repo, "branch", "made-anyway", meanwhile=lambda: None)


def test_the_quick_exit_keeps_the_exit_code_and_a_closed_pipe_quiet(repo: Path) -> None:
    """The console script ends with `os._exit` once its output is flushed: the exit code is main's, and a reader
    that went away (`| head`) costs no traceback."""
    bad = subprocess.run([sys.executable, "-m", "daintree_tui", "worktree", "create", "../x"], cwd=repo,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("daintree: invalid worktree name") and bad.stdout == ""
    listed = subprocess.run([sys.executable, "-m", "daintree_tui", "--help"], cwd=repo, capture_output=True,
                            text=True)
    assert listed.returncode == 0 and "worktree" in listed.stdout
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as a user's shell runs it
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", "--help"], cwd=repo, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=buffered)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # gone before the help is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err and "Exception ignored" not in err


def test_discovery_gives_heads_commit_only_while_fresh(repo: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from daintree_tui.core import project as project_mod
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService

    project = Project.discover(repo)
    assert project.fresh_head() == git(repo, "rev-parse", "HEAD").strip()
    # From inside a linked worktree, HEAD is that worktree's: not the primary's, so not given.
    inside = WorktreeService(project).create("inside")
    assert Project.discover(inside.path).head_commit is None and Project.discover(inside.path).root == repo
    # A long-lived project (the dashboard, the MCP server) asks git again: the create bases on HEAD as it is now.
    git(repo, "commit", "--allow-empty", "-m", "later")
    monkeypatch.setattr(project_mod, "HEAD_FRESH_SECONDS", 0.0)
    later = WorktreeService(project).create("later")
    assert later.base_commit == git(repo, "rev-parse", "HEAD").strip() != project.head_commit
    # A repository with no commit yet is still a repository.
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    unborn = Project.discover(empty)
    assert unborn.is_git and unborn.head_commit is None and unborn.hooks_path == empty / ".git" / "hooks"


def test_a_discovery_answered_ahead_is_as_fresh_as_the_moment_git_was_asked(repo: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """HEAD from the console script's early discovery is a create's base only within HEAD_FRESH_SECONDS of when
    git was asked, not of when the answer was read."""
    from daintree_tui.core import spawn
    from daintree_tui.core.project import HEAD_FRESH_SECONDS, Project

    monkeypatch.setattr(spawn, "_AHEAD", {})
    head = git(repo, "rev-parse", "HEAD").strip()
    spawn.start_ahead(str(repo), spawn.DISCOVERY)
    assert Project.discover(repo).fresh_head() == head
    spawn.start_ahead(str(repo), spawn.DISCOVERY)
    depends_on, proc, asked_at = spawn._AHEAD[(str(repo), spawn.DISCOVERY)]
    spawn._AHEAD[(str(repo), spawn.DISCOVERY)] = (depends_on, proc, asked_at - HEAD_FRESH_SECONDS - 1)  # asked long ago
    late = Project.discover(repo)
    assert late.head_commit == head and late.fresh_head() is None


def test_a_tracked_state_listing_started_ahead_is_not_read_for_a_newer_index(repo: Path) -> None:
    from daintree_tui.core import spawn, state_files
    from daintree_tui.core.project import Project

    project = Project.discover(repo)
    planted = repo / ".worktrees" / "index.json"
    planted.parent.mkdir(exist_ok=True)
    planted.write_text('{"worktrees": []}\n')
    state_files.start_tracked_state(project)  # lists the index as it is now: nothing tracked
    started = spawn._AHEAD[(str(repo), spawn.TRACKED_STATE)][1]
    started.wait(timeout=30)  # the listing has read the old index
    git(repo, "add", "-f", ".worktrees/index.json")  # a pull or merge could do this while a command starts
    assert planted in state_files.tracked_state_files(project)
    state_files.start_tracked_state(project)  # answered already for this index: nothing started, the answer stands
    assert planted in state_files.tracked_state_files(project)


def test_the_console_script_starts_the_first_git_calls_ahead_and_the_command_takes_them(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`daintree` starts discovery's git (and, for a command that changes state, the tracked-state listing)
    before its imports; the command takes each answer, wherever it was started from: none is left unread."""
    from daintree_tui import cli
    from daintree_tui.core import spawn, state_files

    monkeypatch.setattr(spawn, "_AHEAD", {})  # what other tests' commands left in this process
    sub = repo / "src"
    sub.mkdir()
    for cwd, argv in [
        (repo, ["worktree", "create", "ahead1"]),  # discovery and the listing, in the root
        (sub, ["wt", "rm", "ahead1"]),  # from a subfolder: discovery there, the listing once the root is known
        (tmp_path, ["--repo", str(repo), "task", "create", "x"]),  # --repo names where
        (tmp_path, [f"--repo={repo}", "worktree", "list"]),  # a read: discovery only
        (tmp_path, ["--rep", str(repo), "worktree", "create", "ahead2"]),  # argparse's prefix of --repo
    ]:
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(state_files, "_TRACKED_STATE", {})  # each command is a process of its own
        cli.start_ahead(argv)
        assert spawn._AHEAD, argv
        assert cli.main(argv) == 0, argv
        assert not spawn._AHEAD, (argv, list(spawn._AHEAD))
    # Help, a remote command and a command that needs no repository start nothing.
    for argv in (["worktree", "create", "-h"], ["--host", "box", "worktree", "list"], ["--ho", "box", "task", "list"],
                 ["agents"]):
        cli.start_ahead(argv)
        assert not spawn._AHEAD, argv


@pytest.mark.parametrize(("argv", "changes"), [
    (["worktree", "create", "x"], True), (["wt", "rm", "x"], True), (["--json", "worktree", "list"], False),
    (["approve", "3"], True), (["--repo", "approve", "gc"], True), (["task", "create", "--", "-v broke"], True),
    (["session", "log", "x"], False), (["task", "--json", "update", "1"], True), ([], False),
    # argparse takes a unique prefix of an option: `--rep PATH` is `--repo PATH`, and PATH is no command word.
    (["--rep", "/x", "worktree", "create", "a"], True), (["--ho=box", "wt", "rm", "x"], True),
    (["--rep", "/x", "worktree", "list"], False),
])
def test_which_commands_change_state(argv: list[str], changes: bool) -> None:
    from daintree_tui.cli import changes_state

    assert changes_state(argv) is changes


def test_worktrees_are_checked_out_in_parallel_unless_git_config_says_otherwise(
        repo: Path, cli: CLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`checkout.workers` one per core (git's parallel checkout, from 100 files); the user's own setting wins."""
    for i in range(150):
        (repo / f"f{i}.txt").write_text(f"{i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "many files")
    trace = tmp_path / "trace2.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))

    def workers_started() -> int:
        started = trace.read_text().count('"name":"checkout--worker"')
        trace.unlink()
        return started

    cli.ok("worktree", "create", "parallel")
    assert workers_started() >= 2
    assert (repo / ".worktrees" / "parallel" / "f149.txt").read_text() == "149\n"
    git(repo, "config", "checkout.workers", "1")
    cli.ok("worktree", "create", "sequential")
    assert workers_started() == 0
    assert (repo / ".worktrees" / "sequential" / "f149.txt").read_text() == "149\n"


def test_a_deleted_current_folder_or_an_unknown_home_is_one_line_and_exit_2(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.run(["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(gone),
                           sys.executable, "-m", "daintree_tui", "worktree", "create", "x"],
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (2, "daintree: the current directory no longer exists\n")
    proc = subprocess.run([sys.executable, "-m", "daintree_tui", "--repo", "~no-such-user-here/x", "worktree", "list"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (2, "daintree: no such directory: ~no-such-user-here/x\n")


def test_a_repo_path_that_is_a_file_says_so(repo: Path) -> None:
    """`--repo` naming a file said "no such directory: PATH" of a path the user could see was there."""
    (repo / "README.md").write_text("x\n")
    proc = subprocess.run([sys.executable, "-m", "daintree_tui", "--repo", str(repo / "README.md"), "worktree", "list"],
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (2, f"daintree: not a directory: {repo / 'README.md'}\n")


def test_an_empty_repo_option_is_bad_input_not_the_current_directory(repo: Path) -> None:
    """`--repo "$REPO"` with the variable unset acted on whatever repository the shell stood in (a remove too)."""
    CLI(repo).ok("worktree", "create", "w1")
    for argv in (["--repo", ""], ["--repo="]):
        proc = subprocess.run([sys.executable, "-m", "daintree_tui", *argv, "worktree", "remove", "w1"],
                              capture_output=True, text=True, timeout=60, cwd=repo)
        assert (proc.returncode, proc.stderr) == (2, "daintree: --repo is empty: give the repository's path\n")
    assert [w["name"] for w in CLI(repo).json("worktree", "list")] == ["w1"]


def test_the_collector_is_off_while_the_cli_loads_and_on_when_its_command_runs(repo: Path) -> None:
    """Off during the imports (a few ms of every command), on for the command itself: the dashboard and the
    MCP server run for hours. A caller of `main` with the collector on keeps it as it is, nothing frozen."""
    probe = ("import gc, sys\n"
             "from daintree_tui.cli import dispatch, run, task\n"
             "real = task.cmd_task_list\n"
             "def handler(*args):\n"
             "    print('collector', gc.isenabled(), 'frozen', gc.get_freeze_count() > 0, flush=True)\n"
             "    return real(*args)\n"
             "task.cmd_task_list = handler\n"
             "dispatch.main(['task', 'list'])\n"
             "sys.argv = ['daintree', 'task', 'list']\n"
             "run()\n")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=repo, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = [line for line in proc.stdout.splitlines() if line.startswith("collector")]
    assert seen == ["collector True frozen False", "collector True frozen True"]
    # The dashboard loads Textual with it still off, then turns it on before the app runs.
    dashboard = ("import gc, sys\n"
                 "from daintree_tui.tui import app\n"
                 "def opened(*args, **kwargs):\n"
                 "    print('collector', gc.isenabled(), 'frozen', gc.get_freeze_count() > 0, flush=True)\n"
                 "    return 0\n"
                 "app.run_dashboard = opened\n"
                 "sys.argv = ['daintree']\n"
                 "from daintree_tui.cli import run\n"
                 "run()\n")
    proc = subprocess.run([sys.executable, "-c", dashboard], cwd=repo, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, "collector True frozen True\n"), proc.stderr
