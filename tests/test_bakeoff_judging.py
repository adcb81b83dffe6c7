"""Bake-offs judged on more than one score: the score command, the gate, diff size and cost; `pick --best`."""

from __future__ import annotations

from pathlib import Path

import pytest

from daintree_tui.services.bakeoff import Score, rank
from tests.conftest import CLI, git, trusted_config, wait_for

pytestmark = pytest.mark.usefixtures("tmux_socket")


def agent(latency: int, extra: str = "") -> str:
    """An agent that writes its solution, commits it and waits."""
    return (f"[agents.l{latency}]\ncommand = \"sh -c 'echo {latency} > latency.txt; {extra}"
            "git add -A; git commit -qm solution; exec cat'\"\n")


def test_the_best_latency_is_kept_and_the_other_two_deleted(cli: CLI, repo: Path) -> None:
    """The seed: three solutions, the one with the best latency is kept, the other two are deleted. The fastest
    breaks the tests (the gate), so it is out; of the two left the lower latency wins."""
    trusted_config(repo, agent(12, "touch broken; ") + agent(20) + agent(35)
                   + '[hooks]\npre_merge = ["test ! -f broken"]\n')
    git(repo, "add", ".daintree.toml")
    git(repo, "commit", "-q", "-m", "config")
    cli.ok("task", "create", "Make it fast")
    record = cli.json("bakeoff", "create", "1", "--agents", "l12,l20,l35", "--score",
                      "echo SCORE: $(cat latency.txt)")
    names = record["candidates"]
    for name in names:  # each agent's commit reaches its branch when daintree next looks (`status` does)
        wait_for(lambda name=name: cli.json("worktree", "status", name)["facts"]["ahead"] == 1, timeout=60)
    scores = cli.json("bakeoff", "score", record["id"], "--minimize")
    by_name = {s["name"]: s for s in scores}
    assert [s["name"] for s in scores] == ["make-it-fast-l20", "make-it-fast-l35", "make-it-fast-l12"]
    assert by_name["make-it-fast-l12"]["gate"] == "fail" and by_name["make-it-fast-l12"]["score"] == 12.0
    assert by_name["make-it-fast-l20"]["gate"] == "pass"
    assert by_name["make-it-fast-l20"]["diff_lines"] == 1 and by_name["make-it-fast-l12"]["diff_lines"] == 1
    assert {"tokens", "cost"} <= set(by_name["make-it-fast-l20"])  # the shell agents report no usage: None
    table = cli.ok("bakeoff", "score", record["id"], "--minimize").stdout
    assert table.splitlines()[0].split() == ["RANK", "CANDIDATE", "EXIT", "WALL", "SCORE", "GATE", "DIFF",
                                             "TOKENS", "COST"]
    assert cli("bakeoff", "pick", record["id"]).returncode == 2  # a name or --best
    assert cli("bakeoff", "pick", record["id"], "make-it-fast-l20", "--best").returncode == 2
    out = cli.json("bakeoff", "pick", record["id"], "--best", "--delete-branches")
    assert out["winner"] == "make-it-fast-l20"
    assert sorted(out["removed"]) == ["make-it-fast-l12", "make-it-fast-l35"] and out["kept"] == []
    assert (repo / "latency.txt").read_text() == "20\n"
    branches = git(repo, "branch", "--list")
    assert "wt/make-it-fast-l12" not in branches and "wt/make-it-fast-l35" not in branches
    assert cli.json("task", "show", "1")["status"] == "completed"


def test_pick_best_needs_a_scoring_with_someone_still_in(cli: CLI, repo: Path) -> None:
    trusted_config(repo, agent(5))
    cli.ok("task", "create", "t")
    record = cli.json("bakeoff", "create", "1", "--agents", "l5", "--score", "exit 1")
    unscored = cli("bakeoff", "pick", record["id"], "--best")
    assert unscored.returncode == 1 and "not been scored" in unscored.stderr
    cli.json("bakeoff", "score", record["id"])
    out = cli("bakeoff", "pick", record["id"], "--best")
    assert out.returncode == 1 and "every candidate is out" in out.stderr


def test_rank_breaks_a_tie_on_diff_size_then_cost() -> None:
    scores = [Score("big", 0, 1.0, 9.0, "pass", None, 400, 10, 0.5),
              Score("small-dear", 0, 1.0, 9.0, "pass", None, 40, 10, 2.0),
              Score("small-cheap", 0, 1.0, 9.0, None, None, 40, 10, 0.1),
              Score("failed-tests", 0, 0.1, 99.0, "fail", "pre_merge hook 'make test' exited 2", 1, 1, 0.0),
              Score("no-score", 0, 0.5, None)]
    assert [s.name for s in rank(scores)] == ["small-cheap", "small-dear", "big", "no-score", "failed-tests"]
    saved = Score.from_dict({**scores[0].to_dict(), "diff_lines": "many", "gate": "maybe"})
    assert saved is not None and saved.diff_lines is None and saved.gate is None
    assert Score.from_dict({"name": "x", "exit_code": True, "wall": 1}) is None
