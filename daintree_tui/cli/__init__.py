"""The `daintree` command line: every operation, for people, scripts and the agents themselves.

Exit codes: 0 ok (no-ops included), 1 the operation failed or was refused, 2 bad input. Errors are one line on
stderr. With `--json`, stdout carries exactly one JSON document (a list for listings, an object otherwise).
Importing this package does not import textual: the dashboard is imported only when it opens. One module per
command group (task, worktree, session, orchestrate, system); `dispatch` parses a command and runs it, `output`
prints, `common` builds the services a command runs on.

This module is the console script's first import, and it stays small: before anything else loads, `run` starts
the git calls the command's first steps will make (`start_ahead`), so that git answers while Python imports.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from daintree_tui.core import spawn

__all__ = ["changes_state", "command_path", "command_word", "command_words", "main", "resume_collector", "run",
           "start_ahead", "top_option"]

_TOP_OPTIONS = ("--repo", "--host", "--json", "--help", "--version", "--verbose")
_TOP_OPTIONS_WITH_VALUE = ("--repo", "--host")
_ALIASES = {"wt": "worktree", "rm": "remove"}

# The commands that change state (tasks, worktrees, sessions): each first recovers a torn index from its `.bak`,
# and so first asks what git tracks in the state dir. Reads only report a torn index (and `doctor` reports it,
# then `doctor --fix` repairs it).
_STATE_CHANGING = frozenset({
    ("task", "create"), ("task", "update"),
    ("worktree", "create"), ("worktree", "keep"), ("worktree", "remove"), ("worktree", "run"),
    ("worktree", "commit"), ("worktree", "merge"), ("worktree", "pr"),
    ("session", "start"), ("session", "send"), ("session", "keys"), ("session", "stop"), ("session", "signal"),
    ("bakeoff", "create"), ("bakeoff", "score"), ("bakeoff", "pick"), ("queue", "run"),
    ("approve",), ("reject",), ("gc",), ("train",), ("review",), ("checkpoint", "create"),
    ("checkpoint", "restore"),
})
# The commands that work on the repository here (the dashboard too, with no command), whose git calls start ahead.
_REPOSITORY_COMMANDS = frozenset({
    "task", "worktree", "wt", "session", "bakeoff", "queue", "policy", "approvals", "approve", "reject", "gc",
    "doctor", "trust", "train", "review", "checkpoint",
})


def command_words(argv: Sequence[str]) -> list[str]:
    """The words of `argv` that are not our options or their values, up to `--` (`worktree`, `run`, `x`)."""
    words: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--":
            break
        elif "=" not in arg and top_option(arg) in _TOP_OPTIONS_WITH_VALUE:  # (`--repo=PATH` is one word)
            skip = True
        elif not arg.startswith("-"):
            words.append(arg)
    return words


def top_option(arg: str) -> str | None:
    """The top-level option `arg` names as argparse reads it: whole, or a prefix of one option only (`--rep` is
    `--repo`), without its `=VALUE`."""
    name = arg.partition("=")[0]
    if not name.startswith("--") or len(name) < 3:
        return None
    named = [option for option in _TOP_OPTIONS if option.startswith(name)]
    return named[0] if len(named) == 1 else None


def command_word(argv: Sequence[str]) -> str | None:
    """The top-level command in `argv`, if any."""
    words = command_words(argv)
    return words[0] if words else None


def command_path(argv: Sequence[str]) -> tuple[str, ...]:
    """The command and its action, aliases spelled out (`wt rm x` -> `("worktree", "remove")`)."""
    return tuple(_ALIASES.get(word, word) for word in command_words(argv)[:2])


def changes_state(argv: Sequence[str]) -> bool:
    """Whether the command in `argv` is one that changes tasks, worktrees or sessions."""
    path = command_path(argv)
    return path in _STATE_CHANGING or path[:1] in _STATE_CHANGING


def _repo_option(argv: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if top_option(arg) == "--repo":
            if "=" in arg:
                return arg.partition("=")[2]
            if i + 1 < len(argv):
                return argv[i + 1]
    return None


def start_ahead(argv: Sequence[str]) -> None:
    """Start the git calls the command in `argv` will make first, in the directory it will make them in:
    discovery's (`Project.discover`), and for a command that changes state, what git tracks in the state dir
    (`state_files.tracked_state_files`, in the primary's root only). Each answer is taken by the first caller asking
    the same question there, and only while the index is the one it was asked of; one nobody asks for ends
    with this process. A remote command (`--host`) and help start nothing."""
    if "-h" in argv or {"--host", "--help", "--version"} & {top_option(arg) for arg in argv}:
        return
    word = command_word(argv)
    if word is not None and word not in _REPOSITORY_COMMANDS:
        return
    try:
        root = os.path.realpath(os.path.expanduser(_repo_option(argv) or os.getcwd()))
    except (OSError, RuntimeError):  # the folder here was deleted, `~nobody`: discovery's own error says so
        return
    spawn.start_ahead(root, spawn.DISCOVERY)
    if changes_state(argv):
        identity = spawn.file_identity(os.path.join(root, ".git", "index"))
        if identity is not None:
            spawn.start_ahead(root, spawn.TRACKED_STATE, identity)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (default: this process's arguments) and return its exit code."""
    from daintree_tui.cli.dispatch import main as dispatch

    spawn.drop_relative_path()
    return dispatch(argv)


def run() -> NoReturn:
    """The `daintree` console script: `main`, then the process ends.

    When no other thread is left, it ends with `os._exit` once its output is flushed: the interpreter's own
    teardown (clearing each module, collecting each object) frees nothing the kernel would not, and took 10-15 ms
    of every command on the 2-core target (a tenth of what `worktree create` adds to git's own time, bench 1).
    Every file this process writes is closed by then (state files are written whole, then renamed).

    The cyclic garbage collector is off while the command's modules load: they allocate hundreds of thousands of
    objects that live as long as the process, and collecting them again and again cost several ms of each
    command's start. It is back on (`resume_collector`) before the command runs, or, for the dashboard, once
    Textual has loaded."""
    gc.disable()
    spawn.drop_relative_path()  # before the first git starts
    start_ahead(sys.argv[1:])
    try:
        code = main()
    except KeyboardInterrupt:  # Ctrl-C while the command's modules load, before `dispatch` can take it: one line
        sys.stderr.write("daintree: interrupted\n")
        code = 130
    if threading_idle():
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (BrokenPipeError, ValueError):  # `daintree ... | head` closed the pipe; main reported what it could
            pass
        if "logging" in sys.modules:
            sys.modules["logging"].shutdown()
        os._exit(code)
    raise SystemExit(code)


def resume_collector() -> None:
    """The collector on again, after `run` turned it off while the modules loaded: what has loaded lives as long
    as the process, so it is frozen (never scanned again), and what the command allocates is collected. A caller
    of `main` with the collector on is left as it is."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def threading_idle() -> bool:
    """Whether this thread is the only one (a non-daemon thread left running would be cut short by `_exit`)."""
    threading = sys.modules.get("threading")
    return threading is None or all(t.daemon or t is threading.main_thread() for t in threading.enumerate())
