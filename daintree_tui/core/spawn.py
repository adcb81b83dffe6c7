"""How daintree starts git: its argv and environment, and the git processes started ahead of their readers.

A short command spends most of its time importing, and the git calls its first steps make (where the repository
is, what git tracks in the state dir) depend on none of it. The console script starts them first thing
(`start_ahead`), then imports; the first caller asking the same question in the same directory takes the answer
(`take_ahead`). This module imports only what starting git needs, so that git starts before the rest loads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from daintree_tui.core.errors import InputError, OperationError

# GIT_OPTIONAL_LOCKS=0: our looks (`status` above all) never write a refreshed index back under index.lock while
# an agent works in that worktree; its `git add` or `git commit` would fail on the lock.
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
# Never start git inside a submodule's folder of an agent's worktree: a repository the agent made there
# (`sub/.git/config` with `core.fsmonitor` or a clean filter) and staged as a gitlink would run its commands in
# the `git status`, `diff` or `commit` we run outside the sandbox. `dirty` still compares the submodule's HEAD
# with the gitlink (read in-process); its uncommitted files are what `populated_submodules` stands for.
_NO_SUBMODULE_PROCESSES = ("-c", "diff.ignoreSubmodules=dirty")

NO_GIT = "git is not installed or not on PATH"

# Discovery's question (`Project.discover`): the common dir, the top level and the hooks path, then HEAD's commit.
DISCOVERY = ("rev-parse", "--path-format=absolute", "--git-common-dir", "--show-toplevel", "--git-path", "hooks",
             "--verify", "--quiet", "HEAD^{commit}")
# What git tracks under the state dir (`state_files.tracked_state_files`), asked in the primary worktree's root.
TRACKED_STATE = ("ls-files", "-z", "--", ":(literal).worktrees/")

# Started ahead: (directory, arguments) -> (what the answer depends on, the process, when it was started).
_AHEAD: dict[tuple[str, tuple[str, ...]], tuple[object, subprocess.Popen[str], float]] = {}
_AHEAD_LOCK = threading.Lock()  # the dashboard's workers ask from several threads


def absolute_path(path: str) -> str:
    """`path` (a PATH) without its relative entries: `.`, an empty one (the same), `node_modules/.bin`. Such an
    entry is searched in the current folder, which may be an agent's worktree: a `git` or `bwrap` the agent wrote
    there ran outside its sandbox as the user (docs/design.md 2a, rule 9)."""
    return os.pathsep.join(entry for entry in path.split(os.pathsep) if os.path.isabs(entry))


def safe_path() -> str:
    """This process's PATH without relative entries (`absolute_path`), else the system's default."""
    return absolute_path(os.environ.get("PATH", os.defpath)) or os.defpath


def drop_relative_path() -> None:
    """This process's PATH and PYTHONPATH, and so those of every program it starts and every agent's environment,
    without relative entries (`absolute_path`). A PATH left with none is the system's default, never empty: an
    empty PATH is searched in the current folder too."""
    path = os.environ.get("PATH")
    if path is not None and absolute_path(path) != path:
        os.environ["PATH"] = safe_path()
    python_path = os.environ.get("PYTHONPATH")
    if python_path is not None and absolute_path(python_path) != python_path:
        os.environ["PYTHONPATH"] = absolute_path(python_path)


def python_module(module: str, python: str = sys.executable) -> list[str]:
    """The argv that runs one of daintree's modules (`python -P -m module`) as its own process. `-P`: the folder
    it starts in is not on its import path. Many start in a worktree (the allow-list's proxy, the limits runner,
    a session's MCP server and hooks), where `-m` looked first: an agent's `daintree_tui/__init__.py` or
    `ipaddress.py` there ran as the user."""
    return [python, "-P", "-m", module]


def command(cwd: object, *args: str) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of `git -C cwd args...` as daintree runs it (`core.git.git`, or a caller that runs
    it its own way, e.g. inside a worktree's sandbox).

    Raises:
        InputError: an argument holds a NUL byte.
    """
    if any("\0" in arg for arg in args):
        raise InputError("invalid input: it contains a NUL byte")
    env = {**os.environ, **_GIT_ENV, "PATH": safe_path()}
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    return ["git", *_NO_SUBMODULE_PROCESSES, "-C", str(cwd), *args], env


def start(cwd: object, *args: str) -> subprocess.Popen[str]:
    """`git -C cwd args...` started, its output piped as text, for the caller to read when it needs it.

    Raises:
        OperationError: git is not installed.
    """
    argv, env = command(cwd, *args)
    try:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise OperationError(NO_GIT) from None


def start_ahead(cwd: str, args: tuple[str, ...], depends_on: object = None) -> None:
    """Start `git -C cwd args...` for a later `take_ahead` with the same directory, arguments and `depends_on`
    (what the answer is a function of, e.g. the index's identity); nothing when one is started already, or git
    is missing (the reader's own call says so)."""
    with _AHEAD_LOCK:
        if (cwd, args) not in _AHEAD:
            try:  # noqa: SIM105 (contextlib and what it imports would load before git starts)
                _AHEAD[(cwd, args)] = (depends_on, start(cwd, *args), time.monotonic())
            except (InputError, OperationError, OSError):  # OSError: no fork now (a process limit); the same
                pass


def take_ahead(cwd: str, args: tuple[str, ...],
               depends_on: object = None) -> tuple[subprocess.Popen[str], float] | None:
    """The process `start_ahead` started for this question and when (`time.monotonic()`: the moment its answer
    is of), if any and if what it depends on is unchanged; one started for what has changed since (the index was
    written) is killed, and the caller asks git itself."""
    with _AHEAD_LOCK:
        started = _AHEAD.pop((cwd, args), None)
    if started is None:
        return None
    started_for, proc, started_at = started
    if started_for != depends_on:
        proc.kill()
        proc.communicate()
        return None
    return proc, started_at


def file_identity(path: str) -> tuple[int, int, int] | None:
    """What tells one version of a file from another without reading it: mtime, size, inode (the index's, for
    what git tracks); None when it cannot be read."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size, info.st_ino
