"""What the `daintree` command says about itself: its version, its shell completion, and `--verbose` /
`DAINTREE_LOG`, which log what the code swallows on purpose (`core.log.suppressed`)."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import CLI

ROOT = Path(__file__).resolve().parents[1]


def daintree(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The console script as a shell runs it (its own process: a log file, the exit status, stderr)."""
    return subprocess.run([sys.executable, "-m", "daintree_tui", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, check=False)


def test_the_version_is_written_once_and_every_face_says_it(tmp_path: Path) -> None:
    import daintree_tui

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "daintree_tui/__init__.py"
    proc = daintree("--version", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == f"daintree {daintree_tui.__version__}\n", proc
    assert importlib.metadata.version("daintree-tui") == daintree_tui.__version__  # what the installer recorded


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_script_of_each_shell(shell: str, tmp_path: Path) -> None:
    proc = daintree("completion", shell, cwd=tmp_path)  # outside any repository
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout
    for command in ("task", "worktree", "session", "bakeoff", "doctor", "completion"):
        assert command in script, f"{shell}: {command} is not completed"
    assert "verbose" in script and "complete-task" in script  # options of the top and of a command (fish: -l NAME)
    if shell == "zsh":
        assert script.startswith("#compdef daintree")
        if shutil.which("zsh"):  # .ci/run installs it
            check = subprocess.run(["zsh", "-n"], input=script, capture_output=True, text=True, check=False)
            assert check.returncode == 0, check.stderr
            (tmp_path / "functions").mkdir()
            (tmp_path / "functions" / "_daintree").write_text(script)
            probe = ("fpath=(functions $fpath); autoload -U compinit; compinit -u -d zcompdump; "
                     "print ${_comps[daintree]}")
            loaded = subprocess.run(["zsh", "-f", "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                                    check=False)
            assert loaded.stdout.strip() == "_daintree", loaded  # compinit found it and bound it to daintree


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_a_command_and_its_options(tmp_path: Path) -> None:
    (tmp_path / "daintree.bash").write_text(daintree("completion", "bash", cwd=tmp_path).stdout)
    probe = """source ./daintree.bash
COMP_WORDS=(daintree work); COMP_CWORD=1; _shtab_daintree; echo "${COMPREPLY[@]}"
COMP_WORDS=(daintree worktree remove --); COMP_CWORD=3; _shtab_daintree; echo "${COMPREPLY[@]}"
"""
    out = subprocess.run(["bash", "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    first, second = out.splitlines()
    assert first.split() == ["worktree"]
    assert {"--force", "--complete-task", "--delete-branch"} <= set(second.split())


@pytest.mark.skipif(shutil.which("fish") is None, reason="no fish")
def test_fish_completes_a_command(tmp_path: Path) -> None:
    (tmp_path / "daintree.fish").write_text(daintree("completion", "fish", cwd=tmp_path).stdout)
    out = subprocess.run(["fish", "--no-config", "-c", "source ./daintree.fish; complete -C 'daintree wor'"],
                         cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert [line.split("\t")[0] for line in out.splitlines()] == ["worktree"]


def test_completion_of_an_unknown_shell_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = daintree("completion", "tcsh", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "tcsh" in proc.stderr


def test_verbose_logs_what_is_swallowed_into_DAINTREE_LOG(repo: Path, cli: CLI, tmp_path: Path) -> None:
    """A fresh repository has no `objects/info/alternates`, no disk-use cache, ...: a listing swallows such
    misses on purpose. With --verbose and DAINTREE_LOG each is a debug record naming its site, with the
    traceback; the file is the user's only; nothing of it reaches stderr. Without either, no record is made."""
    cli.ok("worktree", "create", "a")
    log = tmp_path / "logs" / "daintree.log"
    proc = daintree("--verbose", "worktree", "list", cwd=repo, env={"DAINTREE_LOG": str(log)})
    assert proc.returncode == 0, proc.stderr
    assert "suppressed" not in proc.stderr
    text = log.read_text()
    records = [line for line in text.splitlines() if " DEBUG daintree.debug: suppressed " in line]
    assert records, text
    assert all(" at daintree_tui/" in line and ".py:" in line for line in records), records
    assert "Traceback (most recent call last)" in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600

    size = log.stat().st_size
    assert daintree("worktree", "list", cwd=repo, env={"DAINTREE_LOG": ""}).returncode == 0
    assert log.stat().st_size == size  # no --verbose, no DAINTREE_LOG: nothing logged

    proc = daintree("worktree", "list", "--verbose", cwd=repo, env={"DAINTREE_LOG": ""})  # after the command too
    assert proc.returncode == 0 and " DEBUG daintree.debug: suppressed " in proc.stderr


def test_a_debug_log_that_cannot_be_written_is_a_warning(repo: Path, tmp_path: Path) -> None:
    """DAINTREE_LOG reaches the daintree an agent runs in its sandbox too, where the file may be read-only."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = daintree("worktree", "list", cwd=repo, env={"DAINTREE_LOG": str(blocker / "log")})
    assert proc.returncode == 0
    assert proc.stderr.startswith("warning: cannot write the debug log ") and len(proc.stderr.splitlines()) == 1


def test_suppressed_names_the_site_of_its_with() -> None:
    from daintree_tui.core.log import set_debug, suppressed

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("daintree.debug")
    saved = (logger.handlers, logger.level)
    logger.handlers, logger.level = [Keep()], logging.DEBUG
    try:
        with suppressed(KeyError):
            _ = {}["quiet"]  # debugging off: swallowed without a trace
        assert records == []
        set_debug(True)
        with suppressed(KeyError, ValueError):
            int("x")
        line = sys._getframe().f_lineno - 1
        with pytest.raises(ZeroDivisionError), suppressed(KeyError):  # what it does not name goes through
            _ = 1 / 0
    finally:
        set_debug(False)
        logger.handlers, logger.level = saved
    assert len(records) == 1
    message = records[0].getMessage()
    assert message.startswith("suppressed ValueError at ") and f"test_cli_surface.py:{line} in " in message
    assert records[0].exc_info is not None


# Run by path inside a sandbox with the standard library alone (its docstring says why): nothing of ours to log to.
STDLIB_ONLY = {"daintree_tui/core/net_bridge.py"}


def test_every_swallow_in_the_package_leaves_a_trace() -> None:
    """`contextlib.suppress` hides what it swallows even from --verbose: the package uses `core.log.suppressed`."""
    package = ROOT / "daintree_tui"
    bare = [f"{path.relative_to(ROOT)}:{n}" for path in sorted(package.rglob("*.py"))
            if str(path.relative_to(ROOT)) not in STDLIB_ONLY
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if re.search(r"\bsuppress\(", line) and not line.lstrip().startswith("#")]
    assert bare == [], "use daintree_tui.core.log.suppressed: " + ", ".join(bare)


def test_json_with_no_command_is_bad_input_not_the_dashboard(repo: Path) -> None:
    """`daintree --json` (a script that forgot its command) opened the dashboard, wrote its escape codes on the
    stdout the script reads as JSON, and hung; so did `daintree demo --json`."""
    for argv in (["--json"], ["demo", "--json"]):
        proc = daintree(*argv, cwd=repo)
        assert (proc.returncode, proc.stdout) == (2, ""), argv
        assert proc.stderr == "daintree: the dashboard has no --json: give a command (see daintree --help)\n", argv


def test_ctrl_c_while_the_command_loads_is_one_line_and_exit_130(repo: Path) -> None:
    """Ctrl-C in the first tenth of a second of a command (its modules still loading, before the dispatcher could
    take it) printed a Python traceback. The SIGINT here arrives at the very start of `main`."""
    # SIGINT as a terminal's foreground command has it: a job a script started in the background inherits it
    # ignored (CI run under nohup saw the command carry on and exit 0).
    script = ("import os, signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
              "from daintree_tui import cli\nreal = cli.main\n"
              "cli.main = lambda *a: (os.kill(os.getpid(), signal.SIGINT), real(*a))[1]\ncli.run()\n")
    proc = subprocess.run([sys.executable, "-c", script, "worktree", "list"], cwd=repo, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 130 and proc.stderr == "daintree: interrupted\n", proc.stderr
