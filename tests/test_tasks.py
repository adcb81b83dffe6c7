"""Tasks through the service and the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import CLI


def test_create_list_show_update(cli: CLI, repo: Path) -> None:
    t1 = cli.json("task", "create", "Refactor auth", "--description", "use jwt")
    assert t1["id"] == 1 and t1["status"] == "pending" and t1["worktree"] == "" and t1["blockedBy"] == []
    t2 = cli.json("task", "create", "UI login", "--blocked-by", "1")
    assert t2["id"] == 2 and t2["blockedBy"] == [1]
    stored = json.loads((repo / ".tasks" / "task_1.json").read_text())
    assert set(stored) >= {"id", "subject", "description", "status", "owner", "worktree", "blockedBy",
                           "created_at", "updated_at"}
    assert (repo / ".tasks" / "task_1.json").read_text().startswith('{\n  "id": 1')  # indent 2
    assert [t["id"] for t in cli.json("task", "list")] == [1, 2]
    upd = cli.json("task", "update", "1", "--status", "in_progress", "--owner", "alice")
    assert upd["status"] == "in_progress" and upd["owner"] == "alice"
    assert [t["id"] for t in cli.json("task", "list", "--status", "in_progress")] == [1]
    assert cli.json("task", "show", "2")["subject"] == "UI login"
    # the primary's git status stays clean
    assert subprocess.run(["git", "status", "--short"], cwd=repo, capture_output=True, text=True).stdout == ""


def test_a_subject_that_starts_with_a_dash_goes_after_double_dash(cli: CLI) -> None:
    assert cli("task", "create", "--", "-v is broken").returncode == 0
    assert cli.json("task", "show", "1")["subject"] == "-v is broken"
    assert cli("task", "create", "one", "--", "two").returncode == 2  # one subject, not two


def test_a_subject_that_looks_like_an_option_is_told_to_go_after_double_dash(repo: Path) -> None:
    """`daintree task create -v` said only "the following arguments are required: subject": nothing told the
    user that text starting with a dash goes after `--`. Still one line on stderr, exit 2, nothing created."""
    cli = CLI(repo, subprocess=True)
    for args, hint in ((["task", "create", "-v"], "daintree task create -- -v"),
                       (["task", "create", "x", "-y"], "daintree task create x -- -y"),
                       (["task", "create", "x", "--description", "-z"], "--description=-z"),
                       (["task", "create", "x", "--repo", "-r"], "--repo=-r")):  # a common option too
        proc = cli(*args)
        assert proc.returncode == 2, args
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert hint in proc.stderr, (args, proc.stderr)
    assert cli.json("task", "list") == []
    # an error with no such word carries no such hint, nor does a mistyped long option (an option, not text)
    assert "--" not in cli("task", "create").stderr.replace("--help", "")
    mistyped = cli("task", "create", "x", "--restart")
    assert mistyped.returncode == 2 and "goes after" not in mistyped.stderr, mistyped.stderr


def test_unknown_fields_are_kept(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "x")
    path = repo / ".tasks" / "task_1.json"
    data = json.loads(path.read_text())
    data["custom"] = {"keep": True}
    path.write_text(json.dumps(data))
    cli.ok("task", "update", "1", "--owner", "bob")
    assert json.loads(path.read_text())["custom"] == {"keep": True}


def test_bad_inputs_exit_2_with_one_line(repo: Path) -> None:
    """As the shell sees it: a real process, its exit status, one line on stderr."""
    cli = CLI(repo, subprocess=True)
    cli.ok("task", "create", "x")
    for args in (["task", "show", "99"], ["task", "show", "abc"], ["task", "update", "1", "--status", "done"],
                 ["task", "update", "0", "--status", "pending"], ["task", "create", "  "],
                 ["task", "create", "y", "--blocked-by", "7"], ["task", "update", "1"], ["task", "bogus"],
                 ["task"]):
        proc = cli(*args)
        assert proc.returncode == 2, args
        assert len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_junk_and_corrupt_task_files_are_skipped_with_warning(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "good")
    (repo / ".tasks" / "notes.txt").write_text("hello")
    (repo / ".tasks" / "task_7.json").write_text("{broken")
    proc = cli("task", "list", "--json")
    assert proc.returncode == 0
    assert [t["id"] for t in json.loads(proc.stdout)] == [1]
    assert "notes.txt" in proc.stderr and "task_7.json" in proc.stderr
    # the next id still never collides with the corrupt file's id
    assert cli.json("task", "create", "next")["id"] == 8


def test_corrupt_task_file_recovers_from_backup(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "precious")
    (repo / ".tasks" / "task_1.json").write_text('{"id": 1, "subj')
    tasks = cli.json("task", "list")
    assert tasks[0]["subject"] == "precious"


def test_three_processes_creating_never_share_an_id(repo: Path) -> None:
    code = ("import sys; from daintree_tui.core.project import Project; from daintree_tui.core.tasks import "
            "TaskService; s = TaskService(Project.discover(sys.argv[1]));"
            "[s.create(f'task {sys.argv[2]}-{i}') for i in range(15)]")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(repo), str(n)]) for n in range(3)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    files = sorted((repo / ".tasks").glob("task_*.json"))
    ids = sorted(json.loads(f.read_text())["id"] for f in files)
    assert ids == list(range(1, 46))


def test_tasks_work_outside_git(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    cli = CLI(plain)
    assert cli.json("task", "create", "no git here")["id"] == 1
    proc = cli("worktree", "list")
    assert proc.returncode == 2 and "not a git repository" in proc.stderr
    for command in (["doctor"], ["session", "list"], ["gc"], ["trust"], []):  # no half-working "all consistent"
        proc = cli(*command)
        assert (proc.returncode, proc.stderr.strip()) == (2, f"daintree: not a git repository: {plain}"), command


def test_stdout_carries_only_the_json_document(repo: Path) -> None:
    """In a real process (fd 1, where a stray git or hook output would land): --json prints exactly one document,
    for an operation that runs git and hooks as well as for a listing."""
    (repo / ".daintree.toml").write_text('[hooks]\npost_create = ["echo hook output"]\n')
    cli = CLI(repo, subprocess=True)
    cli.ok("trust")
    for args in (["worktree", "create", "pure"], ["worktree", "list"], ["task", "list"], ["doctor"]):
        proc = cli(*args, "--json")
        assert proc.returncode == 0, proc.stderr
        json.loads(proc.stdout)


def test_list_columns_stay_aligned_with_wide_characters(cli: CLI) -> None:
    from wcwidth import wcswidth

    cli.ok("task", "create", "Émoji 🚀 日本語")
    cli.ok("task", "create", "plain")
    lines = cli.ok("task", "list").stdout.splitlines()
    # The WORKTREE column starts at the same terminal cell on every line (CJK and emoji take two cells).
    starts = {wcswidth(line[:line.index(" - ") + 1 if " - " in line else line.index("WORKTREE")]) for line in lines}
    assert len(starts) == 1, lines


def test_list_rows_cannot_be_forged_by_a_newline_or_tab_in_a_subject(cli: CLI) -> None:
    # Task text is data (a hostile repo's .tasks/, an agent's task_create): a newline in a subject printed raw
    # started a line of its own under the table, a forged row (`99  open ...`); a tab pushed the columns after it.
    cli.ok("task", "create", "fix\n99  open  forged row")
    cli.ok("task", "create", "tab\there")
    lines = cli.ok("task", "list").stdout.splitlines()
    assert len(lines) == 3, lines  # the header and one line per task
    assert not any(line.startswith("99") for line in lines), lines
    assert "\t" not in "".join(lines), lines
    assert "fix\\n99" in lines[1] and "tab\\there" in lines[2], lines
    starts = {line.index(" - ") for line in lines[1:]}  # WORKTREE starts at one column on every row
    assert len(starts) == 1, lines


def test_list_cells_show_bidi_marks_escaped(cli: CLI) -> None:
    # A right-to-left mark in a subject reorders the neutral characters of its whole row (the ids and dashes of
    # the other cells) on the user's terminal: in a one-line cell it is shown, never obeyed.
    cli.ok("task", "create", "fix \u200f- 42 \u200e\u061c")
    proc = cli.ok("task", "list")
    assert not any(mark in proc.stdout for mark in "\u200e\u200f\u061c"), proc.stdout
    assert "fix \\u200f- 42 \\u200e\\u061c" in proc.stdout
    bad = cli("task", "show", "7\u200f")
    assert bad.returncode == 2 and "\u200f" not in bad.stderr and "\\u200f" in bad.stderr
