"""Bake-offs, the queue, roles and approvals, gc: real repositories, real tmux, small shell agents."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CLI, events, git, trusted_config, wait_for

pytestmark = pytest.mark.usefixtures("tmux_socket")

PY = sys.executable


def write_config(repo: Path, text: str) -> None:
    trusted_config(repo, text)


def test_bakeoff_three_candidates_scored_picked_losers_removed_dirty_one_kept(cli: CLI, repo: Path) -> None:
    write_config(repo, (
        "[agents.a]\ncommand = \"sh -c 'echo 3 > answer.txt; exec cat'\"\n"
        "[agents.b]\ncommand = \"sh -c 'echo 7 > answer.txt; exec cat'\"\n"
        "[agents.c]\ncommand = \"sh -c 'echo 5 > answer.txt; exec cat'\"\n"
        "[bakeoff]\nscore = \"echo noise; echo SCORE: 1; echo SCORE: $(cat answer.txt)\"\n"))
    cli.ok("task", "create", "Find the answer", "--description", "compute it")
    record = cli.json("bakeoff", "create", "1", "--agents", "a,b,c")
    names = record["candidates"]
    assert names == ["find-the-answer-a", "find-the-answer-b", "find-the-answer-c"]
    entries = {e["name"]: e for e in cli.json("worktree", "list")}
    assert {entries[n]["base_commit"] for n in names} == {record["base_commit"]}
    assert all(entries[n]["bakeoff"] == record["id"] for n in names)
    ports = [p for n in names for p in entries[n]["ports"]]
    assert len(ports) == len(set(ports))
    task = cli.json("task", "show", "1")
    assert task["candidates"] == names and task["bakeoff"] == record["id"]
    for n in names:
        wait_for(lambda n=n: (repo / ".worktrees" / n / "answer.txt").exists())
    scores = cli.json("bakeoff", "score", record["id"])
    assert [s["name"] for s in scores] == ["find-the-answer-b", "find-the-answer-c", "find-the-answer-a"]
    assert [s["score"] for s in scores] == [7.0, 5.0, 3.0]
    lowest = cli.json("bakeoff", "score", record["id"], "--minimize")
    assert lowest[0]["name"] == "find-the-answer-a"
    for n in ("find-the-answer-b", "find-the-answer-c"):
        cli.ok("worktree", "commit", n, "-m", f"answer from {n}", "--all")
    # a stays dirty: its uncommitted answer must survive the pick
    out = cli.json("bakeoff", "pick", record["id"], "find-the-answer-b", "--strategy", "squash")
    assert out["winner"] == "find-the-answer-b"
    assert out["removed"] == ["find-the-answer-c"] and out["kept"] == ["find-the-answer-a"]
    assert (repo / "answer.txt").read_text() == "7\n"
    assert (repo / ".worktrees" / "find-the-answer-a" / "answer.txt").read_text() == "3\n"
    assert "wt/find-the-answer-c" in git(repo, "branch", "--list")  # branches stay without --delete-branches
    assert cli.json("task", "show", "1")["status"] == "completed"
    kinds = [e["event"] for e in events(repo)]
    assert "bakeoff.created" in kinds and "bakeoff.scored" in kinds and "bakeoff.picked" in kinds
    assert cli.json("bakeoff", "show", record["id"])["picked"] == "find-the-answer-b"


def test_bakeoff_failing_candidates_rank_last_and_bad_input(cli: CLI, repo: Path) -> None:
    write_config(repo, "[agents.ok]\ncommand = \"sh -c 'exec cat'\"\n")
    cli.ok("task", "create", "t")
    record = cli.json("bakeoff", "create", "1", "--agents", "ok,ok", "--score",
                      "test \"$DAINTREE_WORKTREE\" = t-ok && exit 1; sleep 0.2")
    scores = cli.json("bakeoff", "score", record["id"])
    assert scores[-1]["name"] == "t-ok" and scores[-1]["exit_code"] == 1
    assert scores[0]["name"] == "t-ok-2" and scores[0]["score"] is None
    assert cli("bakeoff", "create", "1", "--agents", "nope").returncode == 2
    assert cli("bakeoff", "create", "9", "--agents", "ok").returncode == 2
    assert cli("bakeoff", "score", "b99").returncode == 2
    assert cli("bakeoff", "pick", record["id"], "stranger").returncode == 2
    cli.ok("task", "create", "done already")
    cli.ok("task", "update", "2", "--status", "completed")
    done = cli("bakeoff", "create", "2", "--agents", "ok")
    assert done.returncode == 2 and "task 2 is completed" in done.stderr


def queue_config(repo: Path, max_sessions: int) -> None:
    write_config(repo, (
        f"max_sessions = {max_sessions}\n"
        f"[agents.job]\ncommand = \"{PY} -c 'import time, os; open(\\\"done.txt\\\", \\\"w\\\").write(os.environ[\\\"DAINTREE_WORKTREE\\\"]); time.sleep(1.5)'\"\n"  # noqa: E501
        "[ports]\nrange = [5000, 5999]\n"))


def test_queue_respects_max_sessions_and_dependencies(cli: CLI, repo: Path) -> None:
    queue_config(repo, 2)
    cli.ok("task", "create", "first", "--agent", "job")
    cli.ok("task", "create", "second", "--agent", "job", "--blocked-by", "1")
    cli.ok("task", "create", "third", "--agent", "job")
    cli.ok("task", "create", "fourth", "--agent", "job")
    cli.ok("task", "create", "no agent")
    proc = cli("queue", "run", "--interval", "0.3", timeout=120)
    assert proc.returncode == 0, proc.stderr
    tasks = {t["id"]: t for t in cli.json("task", "list")}
    assert all(tasks[i]["status"] == "completed" for i in (1, 2, 3, 4)), (tasks, proc.stdout)
    assert tasks[5]["status"] == "pending" and tasks[5]["worktree"] == ""
    started = [e for e in events(repo) if e["event"] == "session.started"]
    completed = [e for e in events(repo) if e["event"] == "task.completed"]
    assert len(started) == 4
    t_done_first = next(e["ts"] for e in completed if e["task"]["id"] == 1)
    t_start_second = next(e["ts"] for e in started if e["worktree"]["name"] == "second")
    assert t_start_second >= t_done_first  # the dependency ran first
    # never more than two at once: replay session starts and exits in time order
    exited = [e for e in events(repo) if e["event"] == "session.exited"]
    assert len(exited) == 4 and all(e["exit_code"] == 0 for e in exited)
    timeline = sorted([(e["ts"], 1) for e in started] + [(e["ts"], -1) for e in exited])
    running = peak = 0
    for _, delta in timeline:
        running += delta
        peak = max(peak, running)
    assert peak == 2


def test_one_queue_pass_counts_what_it_started_as_running(cli: CLI, repo: Path) -> None:
    """`queue run --once --json` said `"running": 0` beside the sessions it had just started: the count was taken
    before the pass started them."""
    queue_config(repo, 3)
    for subject in ("first", "second"):
        cli.ok("task", "create", subject, "--agent", "job")
    report = cli.json("queue", "run", "--once")
    assert len(report["started"]) == 2 and report["running"] == 2, report
    assert report["waiting_tasks"] == 0


def test_queue_run_says_each_start_and_completion_as_it_happens_and_sums_up_the_whole_run(
        cli: CLI, repo: Path) -> None:
    """Tried for real, `queue run` printed nothing for a minute, then `started: -` after starting two tasks: the
    summary was its last pass's alone. One slot, two tasks: the second starts in a later pass than the first."""
    import subprocess

    from tests.conftest import Lines

    queue_config(repo, 1)
    cli.ok("task", "create", "first", "--agent", "job")
    cli.ok("task", "create", "second", "--agent", "job")
    runner = subprocess.Popen([PY, "-m", "daintree_tui", "queue", "run", "--interval", "0.2"], cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = Lines(runner.stdout)
        assert lines.until(lambda line: line.startswith("started task 1 ")) == \
            "started task 1 in first (agent job)\n"
        assert runner.poll() is None  # said while the run goes on, not at its end
        assert lines.until(lambda line: line.startswith("completed task 1 ")).startswith("completed task 1 (first")
        lines.until(lambda line: line.startswith("started task 2 in second"))
        lines.until(lambda line: line.startswith("completed task 2 "))
        summary = lines.until(lambda line: line.startswith("started: "), timeout=60)
        runner.wait(timeout=30)  # it ends by itself once nothing is left to start or running
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(timeout=30)
    assert runner.returncode == 0
    assert summary.startswith("started: task 1 (first), task 2 (second); completed: task 1 (first), task 2 "
                              "(second); running: 0"), summary
    cli.ok("task", "create", "third", "--agent", "job")
    cli.ok("task", "create", "fourth", "--agent", "job")
    json_run = cli("queue", "run", "--interval", "0.2", "--json", timeout=120)
    report = json.loads(json_run.stdout)  # stdout stays one JSON document; the lines go to stderr
    assert report["started"] == ["third", "fourth"] and report["completed"] == [3, 4], report
    assert "started task 3 in third (agent job)" in json_run.stderr, json_run.stderr


def test_queue_run_ends_and_says_so_when_what_is_left_waits_on_a_failed_task(cli: CLI, repo: Path) -> None:
    """Task 2 waits on task 1, whose agent exits 3 (`queue-failed:3`): nothing will start task 2 by itself, so the
    run ends (it waited forever, silently) and says what waits on what, and prints the failure as it happens."""
    write_config(repo, "max_sessions = 2\n[agents.fails]\ncommand = \"sh -c 'exit 3'\"\n"
                       "[agents.never]\ncommand = \"sh -c 'exec cat'\"\n")
    first = cli.json("task", "create", "breaks", "--agent", "fails")["id"]
    cli.ok("task", "create", "after it", "--agent", "never", "--blocked-by", str(first))
    proc = cli("queue", "run", "--interval", "0.2", timeout=90)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "failed task 1: breaks exited 3" in lines, lines
    assert "failed: task 1 (breaks)" in proc.stdout
    assert any(ln.startswith("waiting on failed tasks (nothing starts them by itself): task 2 on task 1")
               for ln in lines), lines
    report = cli.json("queue", "run", "--once")
    assert report["stuck"] == {"2": 1} and report["started"] == []


def test_queue_run_says_once_what_waits_on_a_task_it_does_not_start_and_again_when_that_changes(
        cli: CLI, repo: Path) -> None:
    """Tasks blocked by a person's task in progress, or by one with no agent, waited in silence: the run says
    which waits on which once, again only for what changed, and goes on once the person's tasks complete."""
    import subprocess

    from tests.conftest import Lines

    write_config(repo, "max_sessions = 2\n[agents.quick]\ncommand = \"sh -c 'exit 0'\"\n")
    cli.ok("task", "create", "by hand")  # 1: a person's, in progress
    cli.ok("task", "update", "1", "--owner", "alice", "--status", "in_progress")
    cli.ok("task", "create", "after it", "--agent", "quick", "--blocked-by", "1")  # 2
    cli.ok("task", "create", "last", "--agent", "quick", "--blocked-by", "2")  # 3: through 2
    cli.ok("task", "create", "no agent")  # 4: the queue never starts it
    cli.ok("task", "create", "after that", "--agent", "quick", "--blocked-by", "4")  # 5
    runner = subprocess.Popen([PY, "-m", "daintree_tui", "queue", "run", "--interval", "0.2"], cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = Lines(runner.stdout)
        said = [lines.until(lambda line: line.startswith("waiting: ")) for _ in range(3)]
        assert said == ["waiting: task 2 waits on task 1 (in progress, owned by alice)\n",
                        "waiting: task 3 waits on task 1 (in progress, owned by alice)\n",
                        "waiting: task 5 waits on task 4 (pending, with no agent: the queue starts only tasks "
                        "given one (task create --agent))\n"], said
        cli.ok("task", "update", "4", "--owner", "bob")
        assert lines.until(lambda line: line.startswith("waiting: ")) == \
            "waiting: task 5 waits on task 4 (pending, owned by bob)\n"  # only what changed
        assert runner.poll() is None  # it waits: a person may finish them
        cli.ok("task", "update", "1", "--status", "completed")
        cli.ok("task", "update", "4", "--status", "completed")
        lines.until(lambda line: line.startswith("completed task 3 "), timeout=60)
        summary = lines.until(lambda line: line.startswith("started: "), timeout=60)
        runner.wait(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(timeout=30)
    assert runner.returncode == 0
    assert [ln for ln in lines.seen if ln.startswith("waiting: ")] == [*said, "waiting: task 5 waits on task 4 "
                                                                       "(pending, owned by bob)\n"]
    assert "completed: " in summary and "task 5" in summary.split("completed: ")[1], summary
    cli.ok("task", "create", "hers")  # 6
    cli.ok("task", "update", "6", "--owner", "carol")
    cli.ok("task", "create", "after hers", "--agent", "quick", "--blocked-by", "6")  # 7
    once = cli("queue", "run", "--once", "--json")
    assert json.loads(once.stdout)["waiting_on"] == {"7": {"task": 6, "why": "pending, owned by carol"}}
    assert "waiting: task 7 waits on task 6 (pending, owned by carol)" in once.stderr, once.stderr


def test_session_stop_frees_its_task_and_doctor_frees_what_a_dead_queue_or_a_stopped_session_left(
        cli: CLI, repo: Path) -> None:
    """`session stop` left a queue's task in_progress owned by `queue:<pid>` and `doctor` said "all consistent"."""
    import os
    import subprocess

    write_config(repo, "[agents.long]\ncommand = \"sh -c 'exec cat'\"\n")
    first = cli.json("task", "create", "long job", "--agent", "long")["id"]
    assert cli.json("queue", "run", "--once")["started"] == ["long-job"]
    assert cli.json("task", "show", str(first))["owner"].startswith("queue:")
    cli.ok("session", "stop", "long-job")
    freed = cli.json("task", "show", str(first))
    assert (freed["status"], freed["owner"], freed["worktree"]) == ("pending", "", "long-job"), freed
    assert cli.json("queue", "run", "--once")["started"] == []  # bound to its worktree: not started twice

    # A queue that died (its pid is gone) with a task in progress; a task whose session was stopped behind the
    # back of the live queue that owns it (tmux's own kill-session).
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = cli.json("task", "create", "orphan", "--agent", "long")["id"]
    cli.ok("task", "update", str(dead), "--status", "in_progress", "--owner", f"queue:{gone.pid}")
    second = cli.json("task", "create", "stopped behind", "--agent", "long")["id"]
    made = cli.json("worktree", "create", "behind", "--task", str(second), "--agent", "long")
    cli.ok("task", "update", str(second), "--status", "in_progress", "--owner", f"queue:{os.getpid()}")
    subprocess.run(["tmux", "-L", made["session"]["socket"], "kill-session", "-t", f"={made['session']['session']}"],
                   check=True)
    found = cli("doctor")
    assert found.returncode == 1
    assert f"found: task {dead} is owned by queue:{gone.pid}, a queue that no longer runs" in found.stdout, found.stdout
    assert f"found: task {second} is in progress in behind, whose session was stopped" in found.stdout, found.stdout
    fixed = cli("doctor", "--fix")
    assert fixed.returncode == 0 and "back to pending" in fixed.stdout, fixed.stdout
    tasks = {t["id"]: t for t in cli.json("task", "list")}
    assert [(tasks[i]["status"], tasks[i]["owner"]) for i in (dead, second)] == [("pending", ""), ("pending", "")]
    assert "all consistent" in cli.ok("doctor").stdout


def test_doctor_fix_never_frees_the_task_a_live_queue_is_still_starting(cli: CLI, repo: Path) -> None:
    """A live queue bound its task to the new worktree (in_progress, `queue:<its pid>`) and was still running the
    worktree's post_create hooks (an `npm install`: minutes) when a person ran `doctor --fix`: no session there yet
    read as "its session was stopped", the task went back to pending under the live queue, and when its agent
    exited 0 the queue no longer knew the task as its own: never completed. A worktree whose session never started
    has nothing stopped."""
    import subprocess

    go = repo / ".go"
    write_config(repo, "[agents.quick]\ncommand = \"sh -c 'exit 0'\"\n"
                       f"[hooks]\npost_create = [\"while [ ! -e {go} ]; do sleep 0.05; done\"]\n")
    task = cli.json("task", "create", "slow setup", "--agent", "quick")["id"]
    runner = subprocess.Popen([sys.executable, "-m", "daintree_tui", "queue", "run", "--interval", "0.2"], cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: cli.json("task", "show", str(task))["worktree"] == "slow-setup")
        assert cli.json("task", "show", str(task))["owner"] == f"queue:{runner.pid}"
        cli("doctor", "--fix")
        assert cli.json("task", "show", str(task))["owner"] == f"queue:{runner.pid}", "a live queue's task was freed"
        go.touch()
        out, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait(timeout=30)
    assert runner.returncode == 0, out + err
    assert cli.json("task", "show", str(task))["status"] == "completed", out + err


def test_two_queue_runners_never_start_a_task_twice(cli: CLI, repo: Path) -> None:
    import subprocess

    queue_config(repo, 4)
    for i in range(6):
        cli.ok("task", "create", f"job {i}", "--agent", "job")
    runners = [subprocess.Popen([PY, "-m", "daintree_tui", "queue", "run", "--interval", "0.2"], cwd=repo,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [runner.communicate(timeout=120) for runner in runners]
    started = [e["worktree"]["name"] for e in events(repo) if e["event"] == "session.started"]
    assert len(started) == len(set(started)) == 6, (
        [(e["event"], (e.get("worktree") or {}).get("name"), e.get("error")) for e in events(repo)], outputs)
    worktrees = [e["name"] for e in cli.json("worktree", "list", "--all")]
    assert len(worktrees) == 6


def test_queue_run_ends_on_ctrl_c_between_passes_and_leaves_its_sessions_running(cli: CLI, repo: Path) -> None:
    import signal
    import subprocess

    write_config(repo, "[agents.long]\ncommand = \"sh -c 'exec cat'\"\n")
    cli.ok("task", "create", "long job", "--agent", "long")
    runner = subprocess.Popen([PY, "-m", "daintree_tui", "queue", "run", "--interval", "0.2"], cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: any(e["event"] == "session.started" for e in events(repo)), timeout=30)
    finally:
        runner.send_signal(signal.SIGINT)
        out, err = runner.communicate(timeout=30)
    assert runner.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == "daintree: interrupted" and "Traceback" not in err, err
    assert "started: task 1 (long-job)" in out, out  # the whole run's summary, on Ctrl-C too
    assert [s["status"] for s in cli.json("session", "list")] in (["starting"], ["running"], ["waiting"])


def test_role_denial_from_inside_a_real_session(cli: CLI, repo: Path) -> None:
    write_config(repo, (
        'default_role = "worker"\n[roles.worker]\nallow = ["commit"]\napproval = "none"\n'
        f"[agents.rogue]\ncommand = \"sh -c '{PY} -m daintree_tui worktree remove $DAINTREE_WORKTREE --force; "
        "echo rc=$? > $TMPDIR/rogue-rc; exec cat'\"\n"))  # TMPDIR: the session is sandboxed
    cli.ok("worktree", "create", "victim", "--agent", "rogue")
    rc_file = repo / ".worktrees" / ".tmp" / "victim" / "rogue-rc"
    assert wait_for(lambda: rc_file.exists() and rc_file.read_text().strip()) == "rc=1"
    assert (repo / ".worktrees" / "victim").is_dir()
    cli.ok("session", "list")  # outside: applies the session inbox, where the sandboxed CLI sent its request
    denied = [e for e in events(repo) if e["event"] == "policy.denied"]
    assert denied and denied[0]["action"] == "remove" and denied[0]["role"] == "worker"
    log = (repo / ".worktrees" / ".logs" / "victim.log").read_text()
    assert "does not allow remove" in log
    shown = cli.json("policy", "show")
    assert shown == [{"role": "worker", "default": True, "approval": "none", "commit": True, "merge": False,
                      "pr": False, "remove": False, "push": False}]


def test_human_approval_requested_inside_approved_outside(cli: CLI, repo: Path) -> None:
    write_config(repo, ('[roles.careful]\nallow = ["commit", "merge", "remove"]\napproval = "human"\n'))
    cli.ok("task", "create", "Ship it", "--role", "careful")
    cli.ok("worktree", "create", "ship", "--task", "1")
    wt = repo / ".worktrees" / "ship"
    (wt / "shipped.txt").write_text("yes\n")
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", "ship")
    inside = {"DAINTREE_WORKTREE": "ship"}
    proc = cli("worktree", "merge", "ship", "--json", env=inside)
    assert proc.returncode == 0 and json.loads(proc.stdout)["queued"] is True
    assert not (repo / "shipped.txt").exists()
    pending = cli.json("approvals")
    assert [(r["id"], r["action"], r["worktree"]) for r in pending] == [(1, "merge", "ship")]
    assert cli("approve", "1", env=inside).returncode == 1  # not from inside a session
    cli.ok("approve", "1")
    assert (repo / "shipped.txt").read_text() == "yes\n"
    assert cli.json("approvals") == []
    proc = cli("worktree", "remove", "ship", "--json", env=inside)
    assert json.loads(proc.stdout)["request"] == 2
    cli.ok("reject", "2")
    assert (repo / ".worktrees" / "ship").is_dir()
    kinds = [e["event"] for e in events(repo)]
    assert kinds.count("policy.requested") == 2 and "policy.approved" in kinds and "policy.rejected" in kinds


def test_a_request_for_approval_with_double_dash_is_refused_not_queued_unapprovable(cli: CLI, repo: Path) -> None:
    # `--` now keeps its usual meaning, so `worktree commit -m msg -- ship` parses; queued for approval, it was
    # then skipped as malformed by every reader (its NAME is not right after the action), so `approve` said
    # "no approval request with id 1" while the agent had been told it was queued.
    write_config(repo, '[roles.careful]\nallow = ["commit"]\napproval = "human"\n')
    cli.ok("task", "create", "Ship it", "--role", "careful")
    cli.ok("worktree", "create", "ship", "--task", "1")
    proc = cli("worktree", "commit", "--json", "--all", "-m", "ship it", "--", "ship",
               env={"DAINTREE_WORKTREE": "ship"})
    assert proc.returncode == 2 and "takes no `--`" in proc.stderr, proc.stdout + proc.stderr
    assert cli.json("approvals", "--all") == []
    proc = cli("worktree", "commit", "ship", "--json", "--all", "-m", "ship it", env={"DAINTREE_WORKTREE": "ship"})
    assert proc.returncode == 0 and json.loads(proc.stdout)["queued"] is True, proc.stderr


def test_checks_approval_runs_pre_merge_hooks(cli: CLI, repo: Path) -> None:
    write_config(repo, ('default_role = "ci"\n[roles.ci]\nallow = ["commit", "merge"]\napproval = "checks"\n'
                        '[hooks]\npre_merge = ["test -f ok"]\n'))
    cli.ok("trust")
    cli.ok("worktree", "create", "w")
    (repo / ".worktrees" / "w" / "f.txt").write_text("f\n")
    proc = cli("worktree", "commit", "w", "-m", "f", "--all", env={"DAINTREE_WORKTREE": "w"})
    assert proc.returncode == 1 and "checks failed" in proc.stderr
    (repo / ".worktrees" / "w" / "ok").write_text("")
    cli.ok("worktree", "commit", "w", "-m", "f", "--all", env={"DAINTREE_WORKTREE": "w"})


def test_gc_dry_run_and_real_run_never_touch_dirty_work(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "gone")
    (repo / ".worktrees" / ".logs").mkdir(parents=True, exist_ok=True)
    (repo / ".worktrees" / ".logs" / "gone.log").write_text("x" * 5000)
    cli.ok("review", "gone", "--comment", "README.md:1", "a line")
    cli.ok("worktree", "remove", "gone")
    cli.ok("worktree", "create", "old-clean")
    cli.ok("worktree", "keep", "old-clean")
    cli.ok("worktree", "create", "old-dirty")
    (repo / ".worktrees" / "old-dirty" / "precious.txt").write_text("unsaved\n")
    cli.ok("worktree", "keep", "old-dirty")
    dry = cli.json("gc", "--older-than", "0", "--dry-run")
    assert dry["dry_run"] and any("gone.log" in a for a in dry["actions"])
    assert any("old-clean" in a for a in dry["actions"]) and dry["kept_dirty"] == ["old-dirty"]
    assert (repo / ".worktrees" / ".logs" / "gone.log").exists() and (repo / ".worktrees" / "old-clean").is_dir()
    real = cli.json("gc", "--older-than", "0")
    assert real["freed_bytes"] >= 5000
    assert not (repo / ".worktrees" / ".logs" / "gone.log").exists()
    assert not list((repo / ".worktrees" / ".reviews").iterdir())  # the removed worktree's review went too
    assert not (repo / ".worktrees" / "old-clean").exists()
    assert (repo / ".worktrees" / "old-dirty" / "precious.txt").read_text() == "unsaved\n"
    assert [e["name"] for e in cli.json("worktree", "list")] == ["old-dirty"]
    young = cli.json("gc", "--dry-run")  # default 14 days: nothing kept is old enough
    assert not any("remove kept" in a for a in young["actions"])


def test_worktree_list_shows_disk_use(cli: CLI, repo: Path) -> None:
    cli.ok("worktree", "create", "big")
    (repo / ".worktrees" / "big" / "blob.bin").write_bytes(b"\0" * 300_000)
    listed = cli.json("worktree", "list")
    assert listed[0]["disk_bytes"] >= 300_000
    cache = repo / ".worktrees" / ".cache" / "disk.json"
    written = cache.stat().st_mtime_ns, cache.stat().st_ino
    assert "DISK" in cli.ok("worktree", "list").stdout
    assert (cache.stat().st_mtime_ns, cache.stat().st_ino) == written  # served from the cache: nothing written


def test_wall_clock_limit_stops_an_overrunning_session(cli: CLI, repo: Path) -> None:
    write_config(repo, "[agents.slowpoke]\ncommand = \"sh -c 'sleep 60'\"\nmax_minutes = 0.02\n")
    cli.ok("task", "create", "too slow", "--agent", "slowpoke")
    start = time.monotonic()
    proc = cli("queue", "run", "--interval", "0.3", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - start < 30
    timeouts = [e for e in events(repo) if e["event"] == "session.timeout"]
    assert [e["worktree"]["name"] for e in timeouts] == ["too-slow"]
    task = cli.json("task", "show", "1")
    assert task["status"] == "in_progress" and task["owner"] == "queue-failed:timeout"  # stopped, not completed


def test_queue_run_reports_a_task_that_could_not_start(cli: CLI, repo: Path) -> None:
    write_config(repo, 'max_sessions = 2\n[agents.ghost]\ncommand = "no-such-agent-binary --flag"\n')
    cli.ok("task", "create", "haunted", "--agent", "ghost")
    proc = cli("queue", "run", "--once")
    assert proc.returncode == 1
    assert proc.stderr.startswith("daintree: task 1: ") and "no-such-agent-binary" in proc.stderr, proc.stderr
    failed = [e for e in events(repo) if e["event"] == "task.updated" and "could not start" in e.get("error", "")]
    assert failed and failed[0]["task"]["id"] == 1
