"""Fault injection: concurrent writers, failing writes, a dead tmux server, fuzzed inputs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daintree_tui import cli as cli_module
from daintree_tui.core.errors import OperationError
from daintree_tui.core.project import Project
from daintree_tui.core.worktrees import WorktreeService
from tests.conftest import CLI, git, make_repo


def state(repo: Path) -> tuple[object, dict[str, str], str, str]:
    """Everything that must not change when an operation fails (the event log may gain a `failed` record)."""
    path = repo / ".worktrees" / "index.json"
    index = json.loads(path.read_text())["worktrees"] if path.exists() else []
    tasks = {p.name: p.read_text() for p in sorted((repo / ".tasks").glob("task_*.json"))}
    return index, tasks, git(repo, "worktree", "list"), git(repo, "branch", "--list")


WORKER = """
import sys, random
from daintree_tui.core.project import Project
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.worktrees import WorktreeService
repo, me = sys.argv[1], sys.argv[2]
project = Project.discover(repo)
tasks, worktrees = TaskService(project), WorktreeService(project)
rng = random.Random(me)
mine = []
for i in range(8):
    task = tasks.create(f"{me}-task-{i}")
    name = f"{me}-{i}"
    worktrees.create(name, task_id=task.id)
    mine.append(name)
    if rng.random() < 0.5:
        worktrees.remove(mine.pop(0), complete_task=True)
print(",".join(mine))
"""


@pytest.mark.stress
def test_three_processes_creating_and_removing_at_once(repo: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(repo), name], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for name in ("a", "b", "c")]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    survivors = {n for out, _ in outs for n in out.strip().split(",") if n}
    index = json.loads((repo / ".worktrees" / "index.json").read_text())["worktrees"]
    live = {e["name"]: e for e in index if e["status"] == "active"}
    assert set(live) == survivors
    assert len(index) == 24  # nothing lost: every create is recorded, removed or not
    ports = [p for e in live.values() for p in e["ports"]]
    assert len(ports) == len(set(ports))
    ids = [json.loads(p.read_text())["id"] for p in (repo / ".tasks").glob("task_*.json")]
    assert sorted(ids) == list(range(1, 25))
    assert CLI(repo)("doctor").returncode == 0


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make a directory unwritable, for root too (chattr +i), else by mode bits."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode != 0:
            pytest.skip("cannot make a directory read-only for root here")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)])
    else:
        mode = path.stat().st_mode
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(mode)


def test_read_only_tasks_dir_is_a_clear_error_and_changes_nothing(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "first")
    before = state(repo)
    with read_only(repo / ".tasks"):
        proc = cli("task", "create", "second")
        assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "cannot write" in proc.stderr and "Traceback" not in proc.stderr
        proc = cli("task", "update", "1", "--status", "completed")
        assert proc.returncode == 1
    assert state(repo) == before


def test_read_only_worktrees_dir_rolls_back_create(cli: CLI, repo: Path) -> None:
    cli.ok("task", "create", "t")
    cli.ok("worktree", "create", "first")
    before = state(repo)
    with read_only(repo / ".worktrees"):
        proc = cli("worktree", "create", "second", "--task", "1")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) <= 2  # the error, and at most one rollback warning
    assert state(repo) == before


def test_oserror_injected_into_the_index_write_rolls_back(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from daintree_tui.core import index as index_module

    project = Project.discover(repo)
    service = WorktreeService(project)
    service.tasks.create("t")
    service.create("kept-one")
    before = state(repo)
    real = index_module.write_json

    def disk_full(path: Path, data: object) -> None:
        raise OperationError(f"cannot write {path}: No space left on device")

    monkeypatch.setattr(index_module, "write_json", disk_full)
    with pytest.raises(OperationError, match="No space left"):
        service.create("doomed", task_id=1)
    monkeypatch.setattr(index_module, "write_json", real)
    assert state(repo) == before
    assert not (repo / ".worktrees" / "doomed").exists()
    assert CLI(repo)("doctor").returncode == 0


def test_oserror_in_the_task_write_rolls_back_worktree(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from daintree_tui.core import tasks as tasks_module

    project = Project.discover(repo)
    service = WorktreeService(project)
    service.tasks.create("t")
    before = state(repo)

    def broken(path: Path, data: object) -> None:
        raise OperationError(f"cannot write {path}: Input/output error")

    monkeypatch.setattr(tasks_module, "write_json", broken)
    with pytest.raises(OperationError):
        service.create("bound", task_id=1)
    monkeypatch.undo()
    assert state(repo) == before


# -- fuzzing through the real CLI entry point (in-process for speed) ---------------------------------------------


@pytest.fixture(scope="module")
def fuzz_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = make_repo(tmp_path_factory.mktemp("fuzz") / "repo")
    (repo / ".daintree.toml").write_text("[ports]\nrange = [40000, 49999]\n")
    return repo


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli_module.main(list(args))
    err = capsys.readouterr().err
    return code, err


def check(code: int, err: str) -> None:
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err
    if code == 2:
        errors = [ln for ln in err.strip().splitlines() if not ln.startswith("warning:")]
        assert len(errors) == 1, err


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.stress
@FUZZ
@given(name=st.text(min_size=0, max_size=70))
def test_fuzz_worktree_names(fuzz_repo: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    if name.startswith("-"):
        name = "x" + name  # argparse would read it as an option: that path is the usage error, tested elsewhere
    code, err = run_cli(capsys, "worktree", "create", name, "--repo", str(fuzz_repo))
    check(code, err)
    if code == 0:
        assert (fuzz_repo / ".worktrees" / name).is_dir()
        check(*run_cli(capsys, "worktree", "remove", name, "--repo", str(fuzz_repo), "--delete-branch"))


@pytest.mark.stress
@FUZZ
@given(ref=st.text(min_size=1, max_size=40).filter(lambda r: not r.startswith("-")))
def test_fuzz_base_refs(fuzz_repo: Path, capsys: pytest.CaptureFixture[str], ref: str) -> None:
    code, err = run_cli(capsys, "worktree", "create", "fuzzref", "--base", ref, "--repo", str(fuzz_repo))
    check(code, err)
    if code == 0:
        check(*run_cli(capsys, "worktree", "remove", "fuzzref", "--repo", str(fuzz_repo), "--delete-branch"))


@pytest.mark.stress
@FUZZ
@given(status=st.text(max_size=20).filter(lambda r: not r.startswith("-")),
       task_id=st.text(max_size=6).filter(lambda r: not r.startswith("-")))
def test_fuzz_task_status_and_ids(fuzz_repo: Path, capsys: pytest.CaptureFixture[str], status: str,
                                  task_id: str) -> None:
    run_cli(capsys, "task", "create", "fuzz target", "--repo", str(fuzz_repo))
    check(*run_cli(capsys, "task", "update", task_id or "1", "--status", status, "--repo", str(fuzz_repo)))
    check(*run_cli(capsys, "task", "list", "--status", status, "--repo", str(fuzz_repo)))


TOML_VALUES = st.one_of(st.integers(-5, 70000), st.text(max_size=12), st.booleans(),
                        st.lists(st.integers(-5, 70000), max_size=3), st.lists(st.text(max_size=5), max_size=3))
CONFIG_KEYS = ["worktree_dir", "branch_prefix", "base", "deps.include", "deps.link", "ports.range",
               "ports.per_worktree", "hooks.post_create", "hooks.timeout", "default_agent", "max_sessions",
               "notifications.bell", "notifications.quiet_hours", "sessions.waiting_debounce", "agents.x.command",
               "keys.keep", "bogus"]


@pytest.mark.stress
@FUZZ
@given(key=st.sampled_from(CONFIG_KEYS), value=TOML_VALUES)
def test_fuzz_config_values(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
                            key: str, value: object) -> None:
    repo = make_repo(tmp_path_factory.mktemp("cfg") / "repo")
    *section, leaf = key.split(".")
    header = f"[{'.'.join(section)}]\n" if section else ""
    (repo / ".daintree.toml").write_text(f"{header}{leaf} = {json.dumps(value)}\n")
    code, err = run_cli(capsys, "worktree", "create", "cfgtest", "--repo", str(repo))
    assert code in (0, 1, 2) and "Traceback" not in err, err  # 1: a valid config whose hook legitimately fails
    if code == 2:
        assert len([ln for ln in err.strip().splitlines() if not ln.startswith("warning:")]) == 1, err


def test_an_error_naming_a_config_value_with_a_newline_is_one_line(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # Found by test_fuzz_config_values: the branch name in the error carried the prefix's newline onto a
    # second line, and a script reading the one-line error got half of it.
    repo = make_repo(tmp_path / "repo")
    (repo / ".daintree.toml").write_text('branch_prefix = "wt/\\nx"\n')
    assert run_cli(capsys, "trust", "--repo", str(repo))[0] == 0  # untrusted, the repo's prefix is not used
    code, err = run_cli(capsys, "worktree", "create", "cfgtest", "--repo", str(repo))
    assert code == 2
    assert err.strip().splitlines() == ["daintree: invalid worktree name 'cfgtest': wt/\\nxcfgtest is not a valid "
                                        "branch name"]
