"""The shape every agent integration has, and the per-session signal script they all call."""

from __future__ import annotations

import errno
import fnmatch
import itertools
import json
import os
import shlex
import stat
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from daintree_tui.core.spawn import python_module
from daintree_tui.sessions.usage_tail import MAX_LINE, open_record

SIGNAL_SCRIPT = "signal"


@dataclass(frozen=True)
class SessionContext:
    """What an integration needs to wire one session: all paths absolute."""

    name: str  # the worktree (session) name
    root: Path  # the primary worktree: `daintree --repo`
    worktree: Path  # the agent's cwd
    session_dir: Path  # `.worktrees/.sessions/<name>/`, 0700, ours
    env: Mapping[str, str]  # the session's environment (read only here)
    tmpdir: Path | None = None  # the session's TMPDIR: writable inside a sandbox, where our session dir is not
    python: str = sys.executable
    # A sandboxed session's own folder standing for ~ for what its agent writes about its conversations (codex's
    # rollouts, gemini's chats: sessions/sandbox.py AGENT_PRIVATE), chosen by the outside; the only place its usage
    # records are read from. None: not sandboxed (the agent's folders in the real home).
    private_home: Path | None = None

    @property
    def signal_script(self) -> Path:
        return self.session_dir / SIGNAL_SCRIPT

    def signal_command(self, state: str, background: bool = False) -> str:
        """A shell command line that reports `state`; quiet, never failing the agent's hook."""
        cmd = f"{shlex.quote(str(self.signal_script))} {state}"
        return f"{cmd} >/dev/null 2>&1 &" if background else f"{cmd} >/dev/null 2>&1 || true"

    def home(self) -> Path:
        return Path(self.env.get("HOME") or os.path.expanduser("~"))


@dataclass(frozen=True)
class Wiring:
    """How a session's command line and environment change so the agent reports to daintree."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def write_private(path: Path, text: str, executable: bool = False) -> None:
    """Write a file of ours in the session dir (0600, or 0700 for a script), never through a symlink."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    mode = 0o700 if executable else 0o600
    fd = os.open(path, flags, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(path, mode | (stat.S_IXUSR if executable else 0))


def write_signal_script(ctx: SessionContext, chain: Sequence[str] | None = None) -> Path:
    """The per-session script every hook calls: `signal running|waiting [agent's own args...]`.

    It runs `daintree session signal` with the time the hook fired (so a late-starting signal never overrides a
    newer one), prints nothing (Gemini reads a hook's stdout as JSON), and always exits 0. With `chain`, it then
    runs the user's own program with the agent's arguments (Codex's `notify` the user had configured).
    """
    daintree = " ".join(shlex.quote(p) for p in python_module("daintree_tui", ctx.python))
    lines = [
        "#!/bin/sh",
        f"# Written by daintree for session {ctx.name}: reports the agent's state to `daintree session signal`.",
        'state="$1"; shift',
        'at=$(date +%s.%N 2>/dev/null)',
        'case "$at" in *N*|"") at="";; esac',
        f"{daintree} session signal --repo {shlex.quote(str(ctx.root))} ${{at:+--at \"$at\"}} "
        f"{shlex.quote(ctx.name)} \"$state\" </dev/null >/dev/null 2>&1",
    ]
    if chain:
        lines.append(f'exec {" ".join(shlex.quote(p) for p in chain)} "$@" </dev/null >/dev/null 2>&1')
    lines.append("exit 0")
    path = ctx.signal_script
    write_private(path, "\n".join(lines) + "\n", executable=True)
    return path


RECORD_LOOKBACK_DAYS = 30  # records older than this are not linked to a session (nor resumed into)


def read_agent_file(path: Path, limit: int, first_line: bool = False, root: Path | None = None) -> bytes:
    """At most `limit` bytes of `path` (of its first line with `first_line`), a regular file (links followed,
    unless `root`: then none from `root` down, see usage_tail.open_record).

    The agent writes the folders its records and config live in (they are writable in its sandbox): a FIFO named
    like a record blocked our open for good (no writer ever comes), stalling every status poll, and a line that
    never ends was read whole.

    Raises:
        OSError: no such file, or not a regular file.
    """
    fd = open_record(path, root) if root is not None else os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return fh.readline(limit) if first_line else fh.read(limit)


def recent_records(paths: Iterable[Path], root: Path | None = None) -> Iterator[tuple[Path, object]]:
    """Each recent record file with its first JSON line (what names the session's folder); unreadable ones skipped.
    With `root`, no link is followed from there down."""
    horizon = time.time() - RECORD_LOOKBACK_DAYS * 86400
    for path in paths:
        try:
            if path.lstat().st_mtime < horizon:
                continue
            first = json.loads(read_agent_file(path, MAX_LINE, first_line=True, root=root) or b"{}")
        except (OSError, ValueError, RecursionError):
            continue
        yield path, first


def names_worktree(recorded: str, worktree: Path) -> bool:
    """Whether a path an agent recorded (its cwd) is `worktree` or a folder in it; `..` never counts as in it."""
    path = Path(recorded)
    return path.is_absolute() and ".." not in path.parts and path.is_relative_to(worktree)


MAX_RECORD_FILES = 500  # record files one run follows: the agent makes them, each is looked at every few seconds
# Files listed in the folder an unsandboxed agent shares with the user's own (~/.codex/sessions of months of use):
# no limit of the agent's making, only a bound on one look.
SHARED_SCAN_LIMIT = 20000
FOLDER_SCAN_LIMIT = 50000  # names looked at in one folder


def scan_limit(ctx: SessionContext) -> int:
    """How many files one look lists in the session's record folder: its own (sandboxed), or the shared one."""
    return MAX_RECORD_FILES if ctx.private_home is not None else SHARED_SCAN_LIMIT
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def own_files(root: Path, patterns: Sequence[str], limit: int = MAX_RECORD_FILES,
              newest_first: bool = False) -> list[Path]:
    """The regular files under `root` whose path below it matches `patterns` level by level (fnmatch on each name),
    at most `limit`, in name order (reversed with `newest_first`: codex's YYYY/MM/DD folders, so the limit drops
    the oldest). Never through a link: every folder is opened relative to the one above it without following
    links, so a folder the agent swaps for a link (to another session's records, or the user's) is skipped; `glob`
    followed them."""
    found: list[Path] = []

    def walk(fd: int, here: Path, depth: int) -> None:
        with os.scandir(fd) as it:  # a folder of a million names the agent made is not listed whole
            listed = itertools.islice(it, FOLDER_SCAN_LIMIT)
            entries = sorted((e for e in listed if fnmatch.fnmatchcase(e.name, patterns[depth])),
                             key=lambda e: e.name, reverse=newest_first)
        for entry in entries:
            if len(found) >= limit:
                return
            if depth == len(patterns) - 1:
                if entry.is_file(follow_symlinks=False):
                    found.append(here / entry.name)
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                sub = os.open(entry.name, _DIRECTORY, dir_fd=fd)
            except OSError:
                continue
            try:
                walk(sub, here / entry.name, depth + 1)
            finally:
                os.close(sub)

    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the outside's choice (see open_record)
    except OSError:
        return []
    try:
        walk(top, root, 0)
    except OSError:
        pass
    finally:
        os.close(top)
    return found


class AgentIntegration:
    """One agent CLI's integration. Subclasses fill in what their agent supports."""

    program = ""
    status_source = "hooks"
    hook_mechanism = ""  # for `daintree agents` and the README: how the hooks are wired
    usage_source = ""  # where its usage records are read from
    usage_kind = "none"  # the parser in sessions/usage.py
    resume_args: tuple[str, ...] = ()  # appended after the program (and our wiring) to resume
    interrupt_keys: tuple[str, ...] = ("C-c",)  # tmux key names that stop the current turn
    rescan_every = 1.0  # seconds between searches for new record files (a search that reads many files: more)

    def wire(self, ctx: SessionContext, argv: list[str]) -> Wiring:
        """Return the command line and extra environment that make the agent call our signal script."""
        return Wiring(argv)

    def record_files(self, ctx: SessionContext) -> list[Path]:
        """Every usage record file that could belong to a session of this agent in `ctx.worktree`."""
        return []

    def records_root(self, ctx: SessionContext) -> Path | None:
        """The folder all of `record_files` lie in: nothing from there down is read through a link."""
        return None

    def resume_argv(self, argv: list[str]) -> list[str]:
        """`argv` (the program and its own options, no prompt) continuing the last conversation here."""
        return [*argv, *self.resume_args]
