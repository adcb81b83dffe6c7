"""Checkpoints for every agent (issue 30, item 4): taken at real status transitions of real tmux sessions with no
dashboard open, restored exactly (untracked files included, ignored ones untouched) and undoably, gone with their
worktree, and out of every sandbox's reach."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import CLI, events, git, wait_for
from tests.helpers.checkpoints import TURNS, listed, open_timeline
from tests.helpers.config import write_user_config
from tests.helpers.sandbox import needs_bwrap

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

REF = "refs/daintree/checkpoints/"


# Two turns: it writes, asks, waits for a line; writes again and exits.
TWO_TURNS = """
[checkpoints]
auto = true
[sessions]
waiting_debounce = 1
[agents.two]
command = "sh -c 'echo one > one.txt; printf \\"go? \\"; read a; echo two > two.txt; exit 0'"
prompt_mode = "none"
"""


def tree_files(repo: Path, commit: str) -> dict[str, str]:
    names = [n for n in git(repo, "ls-tree", "-r", "--name-only", "-z", commit).split("\0") if n]
    return {n: git(repo, "cat-file", "-p", f"{commit}:{n}") for n in names}


def index_digest(repo: Path, name: str) -> str:
    return hashlib.sha256((repo / ".git" / "worktrees" / name / "index").read_bytes()).hexdigest()


def watcher_pid(repo: Path) -> int | None:
    from daintree_tui.core.project import Project
    from daintree_tui.services import watcher

    return watcher.watcher_pid(Project.discover(repo))


@needs_tmux
def test_each_turn_end_takes_a_checkpoint_of_the_whole_tree(repo: Path, tmux_socket: str, watcher: None) -> None:
    write_user_config(TURNS)
    cli = CLI(repo)
    cli.ok("worktree", "create", "w", "--agent", "turns")
    wt = repo / ".worktrees" / "w"
    head = git(wt, "rev-parse", "HEAD").strip()
    first = wait_for(lambda: listed(cli, "w"), timeout=30)
    assert [c["reason"] for c in first] == ["waiting"] and first[0]["files"] == 1
    assert tree_files(repo, first[0]["commit"])["one.txt"] == "one\n"  # untracked, yet in the tree
    assert git(repo, "rev-parse", f"{REF}w").strip() == first[0]["commit"]
    assert set(first[0]) >= {"id", "ts", "commit", "files"} and first[0]["id"] == 1
    before = index_digest(repo, "w")

    cli.ok("session", "send", "w", "go on")
    second = wait_for(lambda: (found := listed(cli, "w")) and len(found) == 2 and found, timeout=30)
    assert second[1]["reason"] == "waiting" and second[1]["prompt"] == "go on"
    assert second[1]["files"] == 2  # one.txt gone, two.txt new
    files = tree_files(repo, second[1]["commit"])
    assert "one.txt" not in files and files["two.txt"] == "two\n"
    parent = git(repo, "rev-parse", f"{second[1]['commit']}^").strip()
    assert parent == second[0]["commit"]  # a chain, each on the one before

    cli.ok("session", "send", "w", "finish")
    third = wait_for(lambda: (found := listed(cli, "w")) and len(found) == 3 and found, timeout=30)
    assert third[2]["reason"] == "exited" and third[2]["prompt"] == "finish"
    # Nothing of the worktree's own git moved: HEAD, its index, its branch.
    assert git(wt, "rev-parse", "HEAD").strip() == head == git(repo, "rev-parse", "wt/w").strip()
    assert index_digest(repo, "w") == before
    assert git(wt, "status", "--porcelain").split("\n")[0].startswith("??")
    made = [e for e in events(repo) if e["event"] == "checkpoint.created"]
    assert [e["checkpoint"] for e in made] == [1, 2, 3] and made[0]["worktree"]["name"] == "w"


@needs_tmux
def test_the_watcher_a_session_start_brings_up_takes_them_with_nothing_else_running(
        repo: Path, tmux_socket: str) -> None:
    """No dashboard, no `session watch`, no `[notify]` channel: the watcher the session start brought up records
    the turn ends (so takes their checkpoints), and ends after the last session."""
    write_user_config(TWO_TURNS)
    cli = CLI(repo)  # in this process: nothing of it observes once the command returns
    cli.ok("worktree", "create", "w", "--agent", "two")
    pid = wait_for(lambda: watcher_pid(repo), timeout=15)
    first = wait_for(lambda: listed(cli, "w"), timeout=30)
    assert [c["reason"] for c in first] == ["waiting"] and set(tree_files(repo, first[0]["commit"])) >= {"one.txt"}
    status = cli.json("notify", "status")
    assert status["running"] is True and status["pid"] == pid and status["channels"] == []
    assert status["auto_checkpoints"] is True
    assert "recording transitions and checkpoints; no channel" in cli.ok("notify", "status").stdout
    cli.ok("session", "send", "w", "go on")
    both = wait_for(lambda: (found := listed(cli, "w")) and len(found) == 2 and found, timeout=30)
    assert both[1]["reason"] == "exited" and both[1]["prompt"] == "go on"
    assert tree_files(repo, both[1]["commit"])["two.txt"] == "two\n"
    assert watcher_pid(repo) == pid  # the one watcher took both
    log = (repo / ".worktrees" / ".logs" / "notify.log").read_text()
    assert f"(pid {pid}): no [notify] channel: recording transitions" in log
    cli.ok("session", "stop", "w")
    wait_for(lambda: watcher_pid(repo) is None, timeout=20)  # the last session gone, it ends
    assert log.count("watching ") == 1 and len(listed(cli, "w")) == 2


@needs_tmux
def test_auto_false_in_your_config_takes_none_and_starts_no_watcher(repo: Path, tmux_socket: str) -> None:
    from daintree_tui.core.project import Project
    from daintree_tui.services import Services
    from daintree_tui.sessions.status import SessionStatus

    write_user_config(TWO_TURNS.replace("auto = true", "auto = false"))
    cli = CLI(repo)
    cli.ok("worktree", "create", "w", "--agent", "two")
    services = Services(Project.discover(repo))  # an observer as the dashboard's poll is one
    seen: list[SessionStatus] = []
    wait_for(lambda: seen.extend(t.status for t in services.observer.poll().transitions)
             or SessionStatus.WAITING in seen, timeout=30)
    assert services.observer.wait_for_hooks(30)  # what follows the turn's end has run
    assert listed(cli, "w") == [] and watcher_pid(repo) is None
    assert not (repo / ".worktrees" / ".logs" / "notify.log").exists()  # none was ever started
    status = cli.json("notify", "status")
    assert status["auto_checkpoints"] is False and status["running"] is False
    text = cli.ok("notify", "status").stdout
    assert "checkpoints: by hand only" in text and "no watcher running\n" in text  # and none is promised
    services.observer.close()


def test_a_repository_cannot_turn_them_off_and_a_bad_value_keeps_them_on(
        repo: Path, cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    from daintree_tui.core.user_config import auto_checkpoints_or_on

    write_user_config("[checkpoints]\nauto = true\n")
    (repo / ".daintree.toml").write_text("[checkpoints]\nauto = false\n")
    proc = cli.ok("worktree", "create", "x")
    assert "[checkpoints] in" in proc.stderr and "ignored: it belongs in your own config" in proc.stderr
    assert cli.json("notify", "status")["auto_checkpoints"] is True
    write_user_config("[checkpoints]\nauto = \"no\"\nevery = 3\n")
    assert auto_checkpoints_or_on() is True
    proc = cli.ok("notify", "status")
    assert "checkpoints.auto must be true or false" in proc.stderr and "checkpoints.every" in proc.stderr
    monkeypatch.delenv("DAINTREE_TEST_AUTO_CHECKPOINTS_DEFAULT")  # what the suite sets: without it,
    write_user_config("")
    assert auto_checkpoints_or_on() is True  # the default a person gets


def _worktree_with_two_checkpoints(cli: CLI, repo: Path) -> Path:
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore logs")
    cli.ok("worktree", "create", "w")
    wt = repo / ".worktrees" / "w"
    (wt / "app.py").write_text("print('step one')\n")  # tracked, changed
    (wt / "notes").mkdir()
    (wt / "notes" / "plan.md").write_text("plan\n")  # untracked
    (wt / "run.log").write_text("log one\n")  # ignored
    assert json.loads(cli.ok("checkpoint", "create", "w", "--json").stdout)["checkpoint"]["id"] == 1
    (wt / "README.md").unlink()  # tracked, deleted
    (wt / "app.py").write_text("print('step two')\n")
    (wt / "notes" / "later.md").write_text("later\n")  # untracked, new in step two
    (wt / "run.log").write_text("log two\n")
    os.symlink("/etc/passwd", wt / "link")  # a link is data: recorded as a link, never followed
    assert json.loads(cli.ok("checkpoint", "create", "w", "--json").stdout)["checkpoint"]["id"] == 2
    return wt


def test_restore_is_exact_keeps_ignored_files_and_is_undone_by_restoring(repo: Path, cli: CLI) -> None:
    wt = _worktree_with_two_checkpoints(cli, repo)
    head, index = git(wt, "rev-parse", "HEAD"), index_digest(repo, "w")
    assert tree_files(repo, listed(cli, "w")[1]["commit"])["link"] == "/etc/passwd"
    out = cli.json("checkpoint", "restore", "w", "1")
    assert out["restored"] == 1 and out["exact"] is True and out["before"] == 2  # the state before was checkpoint 2
    assert sorted(out["files"]) == ["README.md", "app.py", "link", "notes/later.md"]
    assert (wt / "app.py").read_text() == "print('step one')\n" and (wt / "README.md").read_text() == "# demo\n"
    assert not (wt / "notes" / "later.md").exists() and not os.path.lexists(wt / "link")
    assert (wt / "notes" / "plan.md").read_text() == "plan\n"
    assert (wt / "run.log").read_text() == "log two\n"  # ignored: never touched
    assert git(wt, "rev-parse", "HEAD") == head and index_digest(repo, "w") == index
    assert cli.json("checkpoint", "diff", "w", "1")["files"] == []  # the files now are checkpoint 1's

    undo = cli.json("checkpoint", "restore", "w", "2")  # the files before (checkpoint 1's) are checkpoint 3
    assert undo["exact"] is True and undo["before"] == 3
    assert not (wt / "README.md").exists() and (wt / "notes" / "later.md").read_text() == "later\n"
    assert os.readlink(wt / "link") == "/etc/passwd"
    timeline = listed(cli, "w")
    assert [c["reason"] for c in timeline] == ["manual", "manual", "restore"]
    assert tree_files(repo, timeline[2]["commit"]) == tree_files(repo, timeline[0]["commit"])
    assert cli.json("checkpoint", "diff", "w", "2")["files"] == []


def test_restore_refuses_to_overwrite_an_ignored_file_and_a_changed_file_makes_a_checkpoint(
        repo: Path, cli: CLI) -> None:
    wt = _worktree_with_two_checkpoints(cli, repo)
    (wt / "notes" / "plan.md").unlink()
    (wt / "plan.log").write_text("mine\n")
    (repo / ".git" / "info" / "exclude").write_text("notes/\n")  # notes/ now ignored, plan.md in it is user's
    (wt / "notes" / "plan.md").write_text("my own, ignored now\n")
    proc = cli("checkpoint", "restore", "w", "1")
    assert proc.returncode == 1 and "ignored files" in proc.stderr and "nothing" in proc.stderr
    assert "which no checkpoint holds): notes/plan.md" in proc.stderr
    assert (wt / "notes" / "plan.md").read_text() == "my own, ignored now\n"
    assert (wt / "app.py").read_text() == "print('step two')\n"  # nothing restored
    # The state before was recorded all the same (README gone, plan.md out of the tree).
    third = listed(cli, "w")[2]
    assert third["reason"] == "restore" and "notes/plan.md" not in tree_files(repo, third["commit"])


def test_step_diffs_bad_ids_and_what_a_session_may_not_do(repo: Path, cli: CLI) -> None:
    _worktree_with_two_checkpoints(cli, repo)
    step = cli.json("checkpoint", "diff", "w", "2", "--step")
    assert (step["from"], step["to"]) == ("1", "2") and "README.md" in step["files"]
    assert "-print('step one')" in step["patch"] and "+print('step two')" in step["patch"]
    first = cli.json("checkpoint", "diff", "w", "1", "--step")
    assert first["from"] == "base" and sorted(first["files"]) == ["app.py", "notes/plan.md"]
    commit = listed(cli, "w")[0]["commit"]
    assert cli.json("checkpoint", "diff", "w", commit[:8], "2")["to"] == "2"
    for bad in (["diff", "w", "7"], ["diff", "w", "zz"], ["restore", "w", "0"], ["list", "nope"],
                ["restore", "../x", "1"]):
        proc = cli("checkpoint", *bad)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (bad, proc.stderr)
    inside = {"DAINTREE_WORKTREE": "w"}
    for action in (["create", "w"], ["restore", "w", "1"]):
        proc = cli("checkpoint", *action, env=inside)
        assert proc.returncode == 1 and "refused from inside a session" in proc.stderr
    assert len(listed(cli, "w")) == 2
    assert cli("checkpoint", "create", "w").stdout.startswith("w: nothing changed since checkpoint 2")


def test_checkpoints_go_with_the_worktree_on_remove_and_gc(repo: Path, cli: CLI) -> None:
    _worktree_with_two_checkpoints(cli, repo)
    cli.ok("worktree", "remove", "w", "--force")
    assert git(repo, "for-each-ref", REF) == ""
    assert listed(cli, "w") == []
    # One left behind (a worktree removed by an older daintree, or by hand): gc deletes it.
    git(repo, "update-ref", f"{REF}gone", "HEAD")
    report = cli.json("gc")
    assert "delete the checkpoints of gone" in report["actions"]
    assert git(repo, "for-each-ref", REF) == ""


def test_the_mcp_tool_lists_them_scoped_to_a_workers_own_worktree(repo: Path, cli: CLI) -> None:
    from daintree_tui.core.errors import OperationError
    from daintree_tui.core.project import Project
    from daintree_tui.mcp.access import Access
    from daintree_tui.mcp.tools import DaintreeTools
    from daintree_tui.services import Services

    _worktree_with_two_checkpoints(cli, repo)
    cli.ok("worktree", "create", "other")
    services = Services(Project.discover(repo))
    lead = DaintreeTools(services, Access("lead"))
    assert lead.call("checkpoint_list", {"name": "w"}) == listed(cli, "w")
    worker = DaintreeTools(services, Access("worker", worktree="other"))
    assert worker.call("checkpoint_list", {"name": "other"}) == []
    with pytest.raises(OperationError):
        worker.call("checkpoint_list", {"name": "w"})


@needs_bwrap
@needs_tmux
def test_no_sandbox_writes_or_moves_a_checkpoint_ref(repo: Path, tmux_socket: str) -> None:
    cli = CLI(repo)
    cli.ok("worktree", "create", "w")
    (repo / ".worktrees" / "w" / "x.txt").write_text("x\n")
    commit = json.loads(cli.ok("checkpoint", "create", "w", "--json").stdout)["checkpoint"]["commit"]
    common = '"$(git rev-parse --path-format=absolute --git-common-dir)"'
    script = (f"git update-ref {REF}w HEAD 2>/dev/null && echo moved; "
              f"git update-ref {REF}planted HEAD 2>/dev/null && echo planted; "
              f"git update-ref -d {REF}w 2>/dev/null && echo deleted; "
              f"mkdir -p {common}/refs/daintree/checkpoints/x 2>/dev/null && echo folder; "
              f"echo \"$(git rev-parse HEAD) {REF}w\" >> {common}/packed-refs 2>/dev/null && echo packed; "
              f"rm -rf {common}/refs/daintree 2>/dev/null; git rev-parse {REF}w; true")
    proc = cli("worktree", "run", "w", "--", "sh", "-c", script)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout.split()
    assert not {"moved", "planted", "deleted", "folder", "packed"} & set(said), proc.stdout
    assert commit in said  # it reads them (they are the agent's own files), it cannot write them
    assert git(repo, "for-each-ref", "--format=%(refname) %(objectname)", REF).split() == [f"{REF}w", commit]


async def test_the_dashboard_timeline_shows_each_step_and_restores_after_asking(repo: Path, cli: CLI) -> None:
    from daintree_tui.core.project import Project
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.screens.checkpoints import CheckpointsScreen
    from daintree_tui.tui.screens.confirm import ConfirmScreen
    from daintree_tui.tui.screens.main import MainScreen
    from daintree_tui.tui.widgets.diff_view import DiffView
    from tests.helpers.dashboard import configure, until

    wt = _worktree_with_two_checkpoints(cli, repo)
    configure(repo)
    app = make_app(Project.discover(repo))

    def shown() -> str:
        return "\n".join(str(line.text) for line in app.screen.query_one(DiffView).lines)

    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        timeline = await open_timeline(pilot, "w")
        await until(pilot, lambda: timeline.row_count == 2 and timeline.selected is not None)
        assert timeline.selected is not None and timeline.selected.id == 2  # the newest first under the cursor
        await until(pilot, lambda: "checkpoint 2 (since checkpoint 1)" in shown() and "step two" in shown())
        await pilot.press("up")
        await until(pilot, lambda: "checkpoint 1 (since its base)" in shown() and "plan.md" in shown())
        assert "later.md" not in shown()
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted)
        assert "Restore checkpoint 1 of w?" in app.screen.question
        await pilot.press("escape")  # no: nothing happens
        await until(pilot, lambda: isinstance(app.screen, CheckpointsScreen))
        assert (wt / "notes" / "later.md").exists()
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted)
        await pilot.click("#yes")
        await until(pilot, lambda: any("restored checkpoint 1" in str(t.render())
                                                   for t in app.screen.query("Toast")))
        assert not (wt / "notes" / "later.md").exists() and (wt / "app.py").read_text() == "print('step one')\n"
        assert (wt / "run.log").read_text() == "log two\n" and timeline.row_count == 2
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))


def test_a_huge_file_is_left_out_and_left_alone(repo: Path, cli: CLI) -> None:
    """Over 64 MiB (a sparse file costs no disk, but hashing it costs the outside a core): no checkpoint holds it,
    and a restore neither deletes nor overwrites it."""
    cli.ok("worktree", "create", "w")
    wt = repo / ".worktrees" / "w"
    (wt / "small.txt").write_text("small\n")
    with open(wt / "big.bin", "wb") as out:
        out.truncate(65 << 20)
    first = json.loads(cli.ok("checkpoint", "create", "w", "--json").stdout)["checkpoint"]
    assert sorted(tree_files(repo, first["commit"])) == ["README.md", "app.py", "small.txt"]
    (wt / "small.txt").write_text("changed\n")
    cli.ok("checkpoint", "restore", "w", "1")
    assert (wt / "small.txt").read_text() == "small\n" and (wt / "big.bin").stat().st_size == 65 << 20


