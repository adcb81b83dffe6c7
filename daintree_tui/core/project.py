"""The repository a command works on, and where its state lives.

All state lives under the *primary* worktree's root, also when a command runs from inside an agent's worktree.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from daintree_tui.core import config as config_mod
from daintree_tui.core import spawn
from daintree_tui.core.errors import ConfigError, InputError, OperationError
from daintree_tui.core.event_log import EventLog
from daintree_tui.core.git import add_exclude, pinned_hooks
from daintree_tui.core.log import suppressed, warn
from daintree_tui.core.store import StateLock
from daintree_tui.core.validate import check_name

STATE_EXCLUDES = ("/.tasks/", "/.worktrees/")
HEAD_FRESH_SECONDS = 1.0
STATE_ENTRIES = (".trash", ".tmp", ".journal", ".logs", ".sessions", ".run", ".cache", ".lock", ".locks", ".reviews",
                 ".sandbox-home", ".inbox", "events.jsonl", "events.jsonl.1", "index.json", "index.json.bak")


def _checked(name: str) -> str:
    """A worktree name about to become part of a path: never `..`, a slash, or anything else a name cannot be."""
    check_name(name, new=False)
    return name


@dataclass
class Project:
    """One repository (or, for task commands, any directory) and the paths of its state."""

    root: Path
    common_dir: Path | None  # the shared .git directory; None outside a git repository
    # The hooks folder git runs here (`--git-path hooks`), when discovery already asked (see `pinned_hooks`).
    hooks_path: Path | None = field(default=None, compare=False)
    # The primary's HEAD commit as discovery saw it (same fork), when it ran in the primary and HEAD names one,
    # and when git was asked (`time.monotonic()`; the console script may have asked before its imports): see
    # `fresh_head`.
    head_commit: str | None = field(default=None, compare=False)
    discovered_at: float = field(default_factory=time.monotonic, compare=False)
    _config: config_mod.Config | None = field(default=None, init=False, repr=False, compare=False)
    _config_signature: tuple[object, ...] = field(default=(), init=False, repr=False, compare=False)
    _config_refused: str = field(default="", init=False, repr=False, compare=False)
    # The dashboard's workers read the config beside its event loop: one reader at a time re-reads a changed file
    # (two both found it bad and warned twice).
    _config_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @classmethod
    def discover(cls, start: Path | str | None = None) -> Project:
        """Find the primary worktree root from `start` (default: the current directory)."""
        try:
            path = Path(start or os.getcwd()).expanduser()
        except FileNotFoundError:
            raise InputError("the current directory no longer exists") from None
        except RuntimeError:  # `~name` of no user
            raise InputError(f"no such directory: {start}") from None
        if not path.is_dir():
            raise InputError(f"{'not a directory' if path.exists() else 'no such directory'}: {path}")
        path = path.resolve()
        # The hooks path and HEAD's commit come in the same fork: a create needs both, and a fork is a few ms of its
        # start-up. Git prints the paths, then the commit; without one (a repository with no commit yet) it exits 1
        # after the paths. The console script asked already, before its imports (`spawn.start_ahead`).
        ahead = spawn.take_ahead(str(path), spawn.DISCOVERY)
        if ahead is None:
            asked_at = time.monotonic()
            proc = spawn.start(path, *spawn.DISCOVERY)
        else:
            proc, asked_at = ahead
        stdout, _ = proc.communicate()
        lines = stdout.split("\n")
        if proc.returncode not in (0, 1) or len(lines) < 3 or not lines[0] or not lines[1]:
            return cls(path, None, discovered_at=asked_at)
        common, toplevel = Path(lines[0]), Path(lines[1])
        # The primary worktree is the one whose .git *is* the common dir; from inside a linked worktree
        # --show-toplevel names the linked one, so derive the primary from the common dir instead.
        root = (common.parent if common.name == ".git" else toplevel).resolve()
        # A relative core.hooksPath is resolved against the worktree git runs in: only the primary's answer is
        # the primary's hooks (a linked worktree's would name a folder its agent wrote).
        primary = toplevel.resolve() == root
        hooks = Path(lines[2]) if lines[2] and primary else None
        head = lines[3] if proc.returncode == 0 and primary and len(lines) > 3 and len(lines[3]) in (40, 64) else None
        return cls(root, common, hooks, head, discovered_at=asked_at)

    def fresh_head(self) -> str | None:
        """HEAD's commit as discovery saw it, while that is the moment the command started (a second): a command
        that creates a worktree first thing takes its base from there; a dashboard or a server hours later asks
        git again."""
        return self.head_commit if time.monotonic() - self.discovered_at < HEAD_FRESH_SECONDS else None

    def pinned_hooks(self) -> list[str]:
        """Options that make git run the hooks the primary worktree would run (`git.pinned_hooks`), without a
        fork when discovery asked already."""
        if self.hooks_path is not None:
            return ["-c", f"core.hooksPath={self.hooks_path}"]
        return pinned_hooks(self.root)

    @property
    def is_git(self) -> bool:
        return self.common_dir is not None

    def require_git(self) -> None:
        if not self.is_git:
            raise InputError(f"not a git repository: {self.root}")

    @property
    def config(self) -> config_mod.Config:
        """The effective configuration, read again once one of its files changed (`config.signature`): a
        dashboard that runs for days applies a role's approval gate, a budget or a preset added meanwhile (it
        merged unapproved work while it kept the config it started with). A file that no longer reads keeps the
        last good configuration, with one warning."""
        with self._config_lock:
            return self._read_config()

    def _read_config(self) -> config_mod.Config:
        signature = config_mod.signature(self.root)
        if self._config is None:
            self._config = config_mod.load(self.root)  # at first, a bad file is the command's error
        elif signature != self._config_signature:
            try:
                self._config = config_mod.load(self.root)
            except ConfigError as exc:
                # Once per bad file: the signature also covers the trust records, which may change meanwhile.
                if str(exc) != self._config_refused:
                    warn(f"{exc} (kept the configuration read before)")
                self._config_refused = str(exc)
                return self._config
            self._config_refused = ""
        self._config_signature = signature
        return self._config

    @property
    def tasks_dir(self) -> Path:
        return self.root / ".tasks"

    @property
    def state_dir(self) -> Path:
        return self.root / ".worktrees"

    @property
    def index_path(self) -> Path:
        return self.state_dir / "index.json"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / ".logs"

    @property
    def locks_dir(self) -> Path:
        """Lock files that no sandbox sees: a flock needs only read access, and an agent that held one of ours
        stopped what waited for it outside."""
        return self.state_dir / ".locks"

    @property
    def tmp_root(self) -> Path:
        return self.state_dir / ".tmp"

    @property
    def train_root(self) -> Path:
        """The merge train's temporary worktrees (services/train.py): what a killed train left, `doctor --fix`
        removes."""
        return self.state_dir / ".train"

    @property
    def train_lock(self) -> StateLock:
        """Held while a merge train runs: one train at a time, and `doctor --fix` leaves a running one's worktrees
        alone. Taken without waiting (an error says it is held)."""
        return StateLock(self.locks_dir / "train.lock", timeout=0.0)

    @property
    def journal_dir(self) -> Path:
        return self.state_dir / ".journal"

    @property
    def trash_dir(self) -> Path:
        return self.state_dir / ".trash"

    @cached_property
    def worktrees_root(self) -> Path:
        """Where worktree directories go (`worktree_dir`, default `.worktrees/`), checked by the trust rules: the
        repository's file may only point inside itself, the user's own config never at or above the primary."""
        cfg = self.config
        return check_worktree_dir(self.root, cfg.worktree_dir, cfg.worktree_dir_source, self.common_dir)

    def branch_for(self, name: str) -> str:
        """The branch of worktree `name`: `branch_prefix` (default `wt/`) and the name."""
        return f"{self.config.branch_prefix}{name}"

    def worktree_path(self, name: str) -> Path:
        return self.worktrees_root / _checked(name)

    def tmpdir_for(self, name: str) -> Path:
        return self.tmp_root / _checked(name)

    @property
    def sandbox_homes(self) -> Path:
        return self.state_dir / ".sandbox-home"

    def sandbox_home_for(self, name: str) -> Path:
        """The folders a sandbox of worktree `name` sees in place of ~/.cache and ~/.npm (see core/sandbox)."""
        return self.sandbox_homes / _checked(name)

    def inbox_for(self, name: str) -> Path:
        """The session inbox of worktree `name`: how its sandboxed `daintree` calls reach the outside."""
        return self.state_dir / ".inbox" / _checked(name)

    def log_path(self, name: str) -> Path:
        return self.logs_dir / f"{_checked(name)}.log"

    def state_dir_problem(self) -> str | None:
        """A committed `.worktrees` or `.tasks` that is a symbolic link would take every state write elsewhere:
        refused. A symbolic link where one of our own folders goes (`.worktrees/.trash -> ~`, whose contents the
        next cleanup deletes; `events.jsonl -> ~/.bashrc`) is never ours: it is removed (only the link), with a
        warning."""
        for path in (self.state_dir, self.tasks_dir):
            if path.is_symlink():
                return f"{path} is a symbolic link; daintree keeps its state only in a real directory"
        for name in STATE_ENTRIES:
            path = self.state_dir / name
            if path.is_symlink():
                warn(f"removed the symbolic link {path} (-> {os.readlink(path)}): daintree keeps its state in real "
                     "files and folders")
                with suppressed(OSError):
                    path.unlink()
        return None

    @cached_property
    def lock(self) -> StateLock:
        problem = self.state_dir_problem()
        if problem:
            raise OperationError(problem)
        return StateLock(self.state_dir / ".lock")

    @cached_property
    def events(self) -> EventLog:
        try:
            max_mb = self.config.events_max_mb
        except ConfigError:
            max_mb = config_mod.Config.events_max_mb
        return EventLog(self.state_dir / "events.jsonl", max_bytes=int(max_mb * 1024 * 1024))

    def ensure_excluded(self) -> None:
        """Keep the primary's `git status` clean: exclude our state dirs in `.git/info/exclude`."""
        if self.common_dir is None:
            return
        patterns = list(STATE_EXCLUDES)
        try:
            inside = self.worktrees_root.relative_to(self.root.resolve())
        except (ValueError, ConfigError):
            inside = None  # beside the repository (the user's `../wt`), or a config error said elsewhere
        if inside is not None and not inside.is_relative_to(".worktrees"):
            # A `worktree_dir` of the repository's own (say `trees`): its worktrees would show as untracked.
            patterns.append(f"/{inside.as_posix()}/")
        add_exclude(self.common_dir, patterns)


def check_worktree_dir(root: Path, value: str, source: str, common_dir: Path | None) -> Path:
    """Resolve `worktree_dir`. The repository's file may put it only inside the repository (not the root itself,
    not `.git`); the user's own config may put it beside (`../wt`), never at or above the primary."""
    resolved = (root / value).resolve()
    root = root.resolve()
    git_dir = (common_dir or root / ".git").resolve()
    if resolved == root or root.is_relative_to(resolved):
        raise ConfigError(f"config: worktree_dir = {value!r} is the repository or one of its parents; it must be "
                          "a directory of its own")
    if resolved.is_relative_to(git_dir) or resolved.is_relative_to(root / ".git"):
        raise ConfigError(f"config: worktree_dir = {value!r} is inside .git")
    if source == "repo" and not resolved.is_relative_to(root):
        raise ConfigError(f"config: worktree_dir = {value!r} in {config_mod.REPO_CONFIG_NAME} points outside the "
                          "repository; only your own config (~/.config/daintree/config.toml) may put worktrees "
                          "elsewhere")
    return resolved
