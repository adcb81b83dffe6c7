"""The conflict radar on real repositories: committed and uncommitted work, pairs and the base's tip, what it
leaves untouched, and what a pass costs when nothing changed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from daintree_tui.core.project import Project
from daintree_tui.core.radar import Radar
from daintree_tui.core.radar_merge import MergeAnswer, parse_merge_tree
from daintree_tui.core.worktrees import WorktreeService
from tests.conftest import CLI, git
from tests.conftest import commit_file as commit
from tests.helpers.radar import setup_repo, three_lines


def test_committed_uncommitted_and_base_conflicts_each_pair_once(cli: CLI, repo: Path) -> None:
    wts = setup_repo(repo, cli)
    commit(wts / "a", "app.py", three_lines("A"))
    commit(wts / "b", "app.py", three_lines("B"))
    (wts / "c" / "app.py").write_text(three_lines("C"))  # uncommitted: a merge of it would bring it too
    (wts / "c" / "new.txt").write_text("c's\n")  # untracked, not ignored
    (wts / "d" / "new.txt").write_text("d's\n")  # the same new file, other text: an add/add conflict
    commit(repo, "README.md", "# main moved on\n")
    commit(wts / "d", "README.md", "# d's readme\n")
    data = cli.json("worktree", "conflicts")
    pairs = {(c["worktree"], c["other"]): c["files"] for c in data}
    assert pairs == {("a", "b"): ["app.py"], ("a", "c"): ["app.py"], ("b", "c"): ["app.py"],
                     ("c", "d"): ["new.txt"], ("d", "main"): ["README.md"]}, data
    only_d = cli.json("worktree", "conflicts", "d")
    assert [(c["worktree"], c["other"]) for c in only_d] == [("c", "d"), ("d", "main")]
    text = cli.ok("worktree", "conflicts").stdout
    assert "a <> b: app.py" in text and "d <> main: README.md" in text
    listed = {e["name"]: e["conflicts"] for e in cli.json("worktree", "list")}
    assert listed == {"a": ["b", "c"], "b": ["a", "c"], "c": ["a", "b", "d"], "d": ["c", "main"]}
    # Reading the uncommitted work moved nothing of c's: its index, HEAD and files are as the agent left them.
    assert git(wts / "c", "status", "--porcelain") == " M app.py\n?? new.txt\n"
    assert (wts / "c" / "app.py").read_text() == three_lines("C")


def test_no_conflict_exits_0_and_unknown_name_exits_2(cli: CLI, repo: Path) -> None:
    wts = setup_repo(repo, cli)
    commit(wts / "a", "a.py", "a\n")
    commit(wts / "b", "b.py", "b\n")
    proc = cli("worktree", "conflicts")
    assert proc.returncode == 0 and "no predicted conflicts" in proc.stdout
    assert cli.json("worktree", "conflicts", "a") == []
    bad = cli("worktree", "conflicts", "nope")
    assert bad.returncode == 2 and "no worktree named 'nope'" in bad.stderr


def test_pairs_are_merged_only_when_they_share_a_path_and_an_unchanged_pass_merges_nothing(
        cli: CLI, repo: Path) -> None:
    wts = setup_repo(repo, cli)
    for name in ("a", "b", "c"):
        commit(wts / name, f"{name}.py", f"{name}\n")  # disjoint: no pair needs git's merge
    commit(wts / "d", "app.py", three_lines("D"))
    project = Project.discover(repo)
    radar = Radar(project, WorktreeService(project).entries)
    first = radar.scan()
    assert first.conflicts == () and first.merges == 0 and not first.unreadable
    (wts / "a" / "app.py").write_text(three_lines("A"))  # now a and d share app.py
    assert radar.scan(changed=()).conflicts == ()  # told nothing changed: a's files are as last read
    found = radar.scan(changed={"a"})
    assert [(c.worktree, c.other, c.files) for c in found.conflicts] == [("a", "d", ("app.py",))]
    assert found.merges == 1
    again = radar.scan(changed=())
    assert again.conflicts == found.conflicts and again.merges == 0
    # Branch tips are read every pass: the target moving on is seen without being told.
    commit(repo, "app.py", three_lines("M"))
    moved = radar.scan(changed=())
    assert {(c.worktree, c.other) for c in moved.conflicts} == {("a", "d"), ("a", "main"), ("d", "main")}
    git(wts / "a", "checkout", "-q", "--", "app.py")
    clean = radar.scan(changed={"a"}, dirty={"a": 0})  # the facts found a clean: its branch stands for it
    assert {(c.worktree, c.other) for c in clean.conflicts} == {("d", "main")}


def test_a_worktree_whose_index_is_a_fifo_is_read_all_the_same(cli: CLI, repo: Path) -> None:
    """The index is the agent's to replace: a FIFO there would hang a `cp` or a git reading it. The radar copies
    only a regular file (daintree's listing of worktrees drops such a file first), and without one reads every
    file as new."""
    wts = setup_repo(repo, cli)
    commit(wts / "b", "app.py", three_lines("B"))
    (wts / "a" / "app.py").write_text(three_lines("A"))
    admin = Path(git(wts / "a", "rev-parse", "--path-format=absolute", "--git-dir").strip())
    (admin / "index").unlink()
    os.mkfifo(admin / "index")
    data = cli.json("worktree", "conflicts", "a")
    assert [(c["worktree"], c["other"], c["files"]) for c in data] == [("a", "b", ["app.py"])]


def test_an_ignored_file_is_not_work(cli: CLI, repo: Path) -> None:
    commit(repo, ".gitignore", "build/\n", "ignore")
    wts = setup_repo(repo, cli)
    for name in ("a", "b"):
        (wts / name / "build").mkdir()
        (wts / name / "build" / "out.txt").write_text(f"{name}\n")
    assert cli.json("worktree", "conflicts") == []


def test_parse_merge_tree_reads_gits_answers() -> None:
    tree = "1" * 40
    out = "\0".join(["0", tree, "a.py", "b.py", "", "1", "a.py", "Auto-merging", "Auto-merging a.py\n",
                     "2", "a.py", "b.py", "CONFLICT (rename)", "x\n", "", "1", tree, "", ""])
    assert parse_merge_tree(out, 2) == [MergeAnswer(False, ("a.py", "b.py"), tree), MergeAnswer(True, (), tree)]
    assert parse_merge_tree("0\0" + tree, 2) == [None, None]


def test_removed_worktrees_leave_the_radar(cli: CLI, repo: Path) -> None:
    wts = setup_repo(repo, cli)
    commit(wts / "a", "app.py", three_lines("A"))
    commit(wts / "b", "app.py", three_lines("B"))
    assert len(cli.json("worktree", "conflicts")) == 1
    cli.ok("worktree", "remove", "b", "--force")
    shutil.rmtree(wts / "b", ignore_errors=True)
    assert cli.json("worktree", "conflicts") == []


def test_a_worktree_made_after_main_moved_on_does_not_inherit_mains_conflict(cli: CLI, repo: Path) -> None:
    """`late` forks after main changed README.md; `early` changed README.md before that: its conflict is with main,
    not with `late`, which carries main's change without having made it (both touch app.py, on other lines)."""
    lines = [f"line {i}" for i in range(1, 8)]
    commit(repo, "app.py", "\n".join(lines) + "\n", "app")
    cli.ok("worktree", "create", "early")
    early = repo / ".worktrees" / "early"
    commit(early, "README.md", "# early's readme\n")
    commit(early, "app.py", "\n".join(["LINE 1", *lines[1:]]) + "\n")
    commit(repo, "README.md", "# main's readme\n")
    cli.ok("worktree", "create", "late")
    commit(repo / ".worktrees" / "late", "app.py", "\n".join([*lines[:-1], "LINE 7"]) + "\n")
    data = cli.json("worktree", "conflicts")
    assert [(c["worktree"], c["other"], c["files"]) for c in data] == [("early", "main", ["README.md"])], data
    assert {e["name"]: e["conflicts"] for e in cli.json("worktree", "list")} == {"early": ["main"], "late": []}


def test_a_worktree_whose_work_landed_is_left_out(cli: CLI, repo: Path) -> None:
    """Squash-trained without --remove, a branch is never main's ancestor: it was predicted to conflict with every
    later worktree editing its lines, and with main once one of those landed. Its work is in main: it is left out
    (git's merge into main changes nothing, or the index says its tip landed there), until it commits again."""
    commit(repo, "app.py", three_lines("two"), "app")
    cli.ok("worktree", "create", "first")
    wts = repo / ".worktrees"
    commit(wts / "first", "app.py", three_lines("FIRST"))
    assert [r["result"] for r in cli.json("train", "first", "--strategy", "squash")] == ["merged"]
    listed = {e["name"]: e for e in cli.json("worktree", "list")}
    assert listed["first"]["landed"]["into"] == "main"
    assert listed["first"]["landed"]["commit"] == git(repo, "rev-parse", "main").strip()
    cli.ok("worktree", "create", "second")  # forks after the landing, and edits the same line
    commit(wts / "second", "app.py", three_lines("SECOND"))
    assert cli.json("worktree", "conflicts") == []
    # A person's own squash, with no record of it: git's merge into main changes nothing, so it is left out too.
    cli.ok("worktree", "create", "manual")
    commit(wts / "manual", "other.py", "manual\n")
    branch = next(e["branch"] for e in cli.json("worktree", "list") if e["name"] == "manual")
    git(repo, "merge", "-q", "--squash", branch)
    git(repo, "commit", "-q", "-m", "manual, squashed by hand")
    cli.ok("worktree", "create", "later")
    commit(wts / "later", "other.py", "later\n")
    assert cli.json("worktree", "conflicts") == []
    # second lands: main changes first's line again, and first's work is in main all the same (its record).
    assert [r["result"] for r in cli.json("train", "second")] == ["merged"]
    assert cli.json("worktree", "conflicts") == []
    assert {e["name"]: e["conflicts"] for e in cli.json("worktree", "list")} == {
        "first": [], "second": [], "manual": [], "later": []}
    # The train without names takes only what has work left to land.
    assert [(r["worktree"], r["result"]) for r in cli.json("train")] == [("later", "merged")]
    # New work on first's old branch is work again: its conflict with main is real.
    commit(wts / "first", "app.py", three_lines("FIRST AGAIN"))
    # (manual, squashed by hand, has no record: once later changed its file on main, git's merge alone speaks
    # for it, and that one conflicts.)
    found = [(c["worktree"], c["other"]) for c in cli.json("worktree", "conflicts")]
    assert [pair for pair in found if "manual" not in pair] == [("first", "main")], found
