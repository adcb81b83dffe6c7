"""The sandbox of an agent session: core's mount table plus the agent program's own state folders.

The backends (`Sandbox`, `BwrapSandbox`, `NoSandbox`) and the mount table live in `core.sandbox`, because hooks
and `worktree run` (core) are confined by the same rules and core cannot import this package. What only a session
has is here: the preset's state folders, the role that decides the mode, the record the status column shows.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.sandbox import (
    INBOX_ENV,
    INBOX_MOUNT,
    BwrapSandbox,
    Choice,
    NoSandbox,
    Sandbox,
    SandboxSpec,
    choose,
    program_dirs,
    spec_for,
    writable_paths,
)
from daintree_tui.core.store import create_new
from daintree_tui.core.tasks import TaskService
from daintree_tui.sessions.presets import Preset

__all__ = ["INBOX_ENV", "INBOX_MOUNT", "BwrapSandbox", "NoSandbox", "Sandbox", "SandboxSpec", "SessionSandbox",
           "agent_state_paths", "session_sandbox"]

# Where each agent program keeps its login, settings, history and caches. Folders are created when missing (so
# a first login inside the sandbox persists); files are bound only when they exist.
# Not ~/.claude.json: sandboxed claude keeps its own copy in ~/.claude/ (CLAUDE_CONFIG_DIR, see agent_environment),
# and the user's own `claude` starts the `mcpServers` of ~/.claude.json unconfined: writable, it took an agent's.
AGENT_STATE: dict[str, tuple[str, ...]] = {
    "claude": ("~/.claude/", "~/.config/claude/"),
    "codex": ("~/.codex/",),
    "gemini": ("~/.gemini/",),
    "opencode": ("~/.config/opencode/", "~/.local/share/opencode/", "~/.local/state/opencode/"),
    "aider": ("~/.aider/",),
}


# What in those folders makes the agent run a program when it next starts, sandboxed or not (the user's own
# `claude` outside daintree): settings with hooks, a status line or MCP servers, plugins and extensions. A sandboxed
# agent keeps its login, history and caches, never a way to run code outside the sandbox later: these are bound
# read-only. One that is missing is made first, empty (`{}`, an empty file or folder), so that the agent cannot
# add it either. Each group names one thing, in the forms the agent reads (the first is the one made).
AGENT_AUTORUN: dict[str, tuple[tuple[str, ...], ...]] = {
    "claude": (("~/.claude/settings.json",), ("~/.claude/settings.local.json",), ("~/.claude/plugins/",),
               ("~/.claude/hooks/",), ("~/.config/claude/settings.json",)),
    "codex": (("~/.codex/config.toml",),),
    "gemini": (("~/.gemini/settings.json",), ("~/.gemini/extensions/",)),
    "opencode": (("~/.config/opencode/opencode.json", "~/.config/opencode/opencode.jsonc",
                  "~/.config/opencode/config.json"), ("~/.config/opencode/plugin/",),
                 ("~/.config/opencode/plugins/",)),
}


T = TypeVar("T")


def _of_agent(table: Mapping[str, tuple[T, ...]], preset: Preset) -> tuple[T, ...]:
    """`preset`'s entries in `table`, by its name, else by its program's (a preset `cc` running `claude`)."""
    return table.get(preset.name, table.get(Path(preset.argv()[0]).name, ()))


def agent_autorun_paths(preset: Preset) -> list[Path]:
    """The preset's settings, plugins and hooks folders to bind read-only (made empty when missing)."""
    paths: list[Path] = []
    for group in _of_agent(AGENT_AUTORUN, preset):
        forms = [Path(raw).expanduser() for raw in group]
        present = [path for path in forms if os.path.lexists(path)]
        if not present and _make_empty(forms[0], folder=group[0].endswith("/")):
            present = [forms[0]]
        paths += present
    return paths


SETTINGS_LIMIT = 1024 * 1024  # a settings file read for the programs it names (a larger one is not the user's)


def named_programs(settings: Sequence[Path], folders: Sequence[Path]) -> list[Path]:
    """The files in the agent's writable `folders` that its (read-only) `settings` name, to bind read-only too.

    A read-only settings file still runs what it names: Claude's `/statusline` writes `~/.claude/statusline.sh`
    and names it in settings.json, and the user's own claude runs it unconfined at every start. A script the
    agent could rewrite there is as good as a hook it could add. Every word of every string of the settings
    (JSON or TOML) that, with `~` and `$HOME` expanded, is a file inside those folders counts.
    """
    found: dict[Path, None] = {}
    roots = [folder.resolve() for folder in folders if folder.is_dir()]
    for path in settings:
        for word in _settings_words(path):
            candidate = Path(os.path.expanduser(word.replace("${HOME}", "~").replace("$HOME", "~")))
            if not candidate.is_absolute():
                continue
            with contextlib.suppress(OSError):
                real = candidate.resolve()
                if real.is_file() and any(real.is_relative_to(root) for root in roots):
                    found[real] = None
    return list(found)


def _settings_words(path: Path) -> list[str]:
    """The words of every string in a JSON or TOML settings file (nothing when it is not one)."""
    import json
    import tomllib

    from daintree_tui.sessions.agents.base import read_agent_file  # only when a sandboxed session starts

    try:
        data = read_agent_file(path, SETTINGS_LIMIT).decode()
        loaded: object = tomllib.loads(data) if path.suffix == ".toml" else json.loads(data)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return []
    words: list[str] = []
    pending = [loaded]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending += item.values()
        elif isinstance(item, list):
            pending += item
        elif isinstance(item, str):
            words += [w.strip("'\"") for w in item.split()]
    return words


def _make_empty(path: Path, folder: bool) -> bool:
    """An empty `path` (a folder, or a file that reads as empty settings), made where the agent's state folder
    is; never through a link (the parent must be a real folder)."""
    parent = path.parent
    if parent.is_symlink() or not parent.is_dir():
        return False
    try:
        if folder:
            path.mkdir(mode=0o700)
        else:
            create_new(path, "{}\n" if path.suffix in (".json", ".jsonc") else "")
    except OSError:
        return False
    return True


def agent_state_paths(preset: Preset) -> list[Path]:
    """The preset's state folders (created when missing) and files (when they exist)."""
    paths = []
    for raw in _of_agent(AGENT_STATE, preset):
        path = Path(raw).expanduser()
        if raw.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            paths.append(path)
        elif path.exists():
            paths.append(path)
    return paths


@dataclass(frozen=True)
class SessionSandbox:
    """How one session is confined: the choice (backend, mode, reason) and, when confined, its spec."""

    choice: Choice
    spec: SandboxSpec | None
    agent_env: dict[str, str] = field(default_factory=dict)  # what its agent needs to keep its state inside

    def wrap(self, argv: list[str], env: dict[str, str]) -> list[str]:
        """The pane's command; adds the inbox hint to `env` (a hint: identity is the mounted inbox)."""
        if self.spec is None:
            return argv
        env.update(self.agent_env)
        env[INBOX_ENV] = str(INBOX_MOUNT)
        spec = replace(self.spec, readable=program_dirs(argv, env))
        return self.choice.backend.wrap(argv, spec)

    def record(self) -> dict[str, object]:
        return self.choice.to_dict()


def session_role(project: Project, entry: WorktreeEntry, preset: Preset) -> str | None:
    """The role the session will run under: its task's, else its agent's, else `default_role`."""
    if entry.task_id is not None:
        tasks = TaskService(project)
        task = tasks.find(entry.task_id)
        role = tasks.role(task) if task is not None else None
        if role is not None:
            return role
    return preset.role or project.config.default_role


def session_sandbox(project: Project, entry: WorktreeEntry, preset: Preset, backend: Sandbox | None = None,
                    role: str | None = None) -> SessionSandbox:
    """Choose and describe the sandbox of a session of `preset` in `entry`.

    Raises:
        OperationError: the mode is `on` and the sandbox cannot work here.
    """
    role = role if role is not None else session_role(project, entry, preset)
    choice = choose(project.config, agent=preset.name, role=role, backend=backend)
    if not choice.active:
        return SessionSandbox(choice, None)
    state = agent_state_paths(preset)
    writable = writable_paths(project.config, [str(p) for p in state])
    read_only = agent_autorun_paths(preset)
    read_only += named_programs(read_only, state)
    return SessionSandbox(choice, spec_for(project, entry, writable=writable, read_only=read_only, interactive=True),
                          agent_environment(preset))


# Claude Code saves ~/.claude.json by writing a temporary file beside it and renaming that over it: with $HOME
# read-only in the sandbox the write fails (EROFS), and nothing it keeps there (onboarding, folder trust, settings,
# the account) outlives the session. CLAUDE_CONFIG_DIR moves that file into ~/.claude/, which the sandbox binds
# writable; it starts as a copy of ~/.claude.json, so what the user had comes along.
CLAUDE_CONFIG_ENV = "CLAUDE_CONFIG_DIR"


def agent_environment(preset: Preset) -> dict[str, str]:
    """What a sandboxed session of `preset` adds to its environment so that its agent can keep its state."""
    if "claude" not in (preset.name, Path(preset.argv()[0]).name) or os.environ.get(CLAUDE_CONFIG_ENV):
        return {}  # not claude, or the user chose the folder
    folder = Path.home() / ".claude"
    folder.mkdir(parents=True, exist_ok=True)
    _seed(Path.home() / ".claude.json", folder / ".claude.json")
    return {CLAUDE_CONFIG_ENV: str(folder)}


def _seed(source: Path, target: Path) -> None:
    """`target` as a copy of `source`, unless it exists: never over a file or through a link the agent left in its
    writable folder."""
    if os.path.lexists(target) or source.is_symlink() or not source.is_file():
        return
    with contextlib.suppress(OSError):
        create_new(target, source.read_bytes())
