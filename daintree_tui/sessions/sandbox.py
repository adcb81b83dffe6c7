"""The sandbox of an agent session: core's mount table plus the agent program's own state folders.

The backends (`Sandbox`, `BwrapSandbox`, `NoSandbox`) and the mount table live in `core.sandbox`, because hooks
and `worktree run` (core) are confined by the same rules and core cannot import this package. What only a session
has is here: the preset's state folders, the role that decides the mode, the record the status column shows.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from daintree_tui.core.errors import OperationError
from daintree_tui.core.fs_safe import private_dir
from daintree_tui.core.log import suppressed
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
    probe_argv,
    program_dirs,
    sandboxed_caller,
    spec_for,
    writable_paths,
)
from daintree_tui.core.sandbox.containment import Containment, contain, effective
from daintree_tui.core.store import create_new
from daintree_tui.core.tasks import TaskService
from daintree_tui.sessions.agent_folders import AGENT_OBEYED, per_project_data, project_memory, read_only_paths
from daintree_tui.sessions.presets import Preset

__all__ = ["INBOX_ENV", "INBOX_MOUNT", "BwrapSandbox", "NoSandbox", "Sandbox", "SandboxSpec", "SessionSandbox",
           "agent_state_paths", "private_home", "session_sandbox"]

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


# What of an agent's data folders the user's own agent, running at the same time outside, reads and runs: claude's
# shell snapshots (sourced before every Bash command of the session that made them) and its session-env files
# (sourced likewise), and codex's shell snapshots. Shared, a sandboxed agent rewrote the snapshot of the user's
# running claude, and its next command ran the agent's code unconfined. And claude's ide/ lock files: each names
# the port and auth token of an editor's MCP server (the VS Code extension's runs code in a notebook's kernel,
# saves files), reachable over the shared network. Inside, each is a folder of the sandbox's own, kept with its
# caches.
# And what codex and gemini write about their conversations: codex's rollouts (sessions/, archived_sessions/) and
# its thread index (the SQLite databases, moved into sandbox-state/ by CODEX_SQLITE_HOME), gemini's per-project
# temp folders (tmp/<project>/chats/ ...). Shared, they were writable whole: an agent wrote a rollout naming another
# worktree's path and that session was charged for it (usage is matched to a session by the files the outside
# chose, see agents/codex.py), and a conversation planted there is what another session's `resume --last`, or the
# user's own codex, loads. Inside, each session sees only its own conversations. And codex 0.171's app-server
# folders: the pid, lock and log files of the daemon it starts, and the links to its socket that the user's own
# codex follows to reach its daemon (a link the agent wrote would hand the user's codex to a server of the agent's).
AGENT_PRIVATE: dict[str, tuple[str, ...]] = {"claude": ("~/.claude/shell-snapshots/", "~/.claude/session-env/",
                                                        "~/.claude/ide/"),
                                             "codex": ("~/.codex/shell_snapshots/", "~/.codex/sessions/",
                                                       "~/.codex/archived_sessions/", "~/.codex/sandbox-state/",
                                                       "~/.codex/app-server-daemon/", "~/.codex/app-server-control/"),
                                             "gemini": ("~/.gemini/tmp/",)}
PRIVATE_HOME = "agent"
"""The folder of a worktree's sandbox home that stands for ~ in AGENT_PRIVATE: `<sandbox home>/agent/.codex/sessions`
is what its sandbox shows at ~/.codex/sessions, and the only place the outside reads that session's records."""


def private_home(sandbox_home: Path) -> Path:
    """Where a sandbox whose home is `sandbox_home` keeps its AGENT_PRIVATE folders (mirroring ~)."""
    return sandbox_home / PRIVATE_HOME


# Files the agent saves whole that the user's own agent obeys: inside, each is a copy of the sandbox's own (made
# from the user's file the first time), so that a save succeeds and lands where only this worktree's sandboxed
# agent reads it. gemini 0.61 writes ~/.gemini/settings.json in place (open O_TRUNC) when the user picks a sign-in
# method ("How would you like to authenticate"); read-only, the save failed (`Failed to save settings: Read-only
# file system`), Enter did nothing and no sign-in URL came. The user's own settings.json (its hooks, MCP servers)
# stays read-only; the copy's hooks run only inside this sandbox.
AGENT_PRIVATE_FILES: dict[str, tuple[str, ...]] = {"gemini": ("~/.gemini/settings.json",)}

T = TypeVar("T")


def _of_agent(table: Mapping[str, tuple[T, ...]], preset: Preset) -> tuple[T, ...]:
    """`preset`'s entries in `table`, by its name, else by its program's (a preset `cc` running `claude`)."""
    return table.get(preset.name, table.get(Path(preset.argv()[0]).name, ()))


def agent_read_only_paths(preset: Preset, projects: Sequence[Path] = ()) -> list[Path]:
    """What of the preset's state folders its sandbox binds read-only: all but its data (see agent_folders).
    `projects`: the repository and worktree paths, whose auto memory is instructions too."""
    folders = _of_agent(AGENT_STATE, preset)
    return read_only_paths(folders, [*_of_agent(AGENT_OBEYED, preset), *project_memory(folders, projects)])


def agent_project_paths(preset: Preset, projects: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Of the preset's per-project data folders (claude's projects/, gemini's history/): the folders bound
    read-only, and this session's own project's folder inside them, bound writable again (see
    agent_folders.per_project_data)."""
    return per_project_data(_of_agent(AGENT_STATE, preset), projects)


def agent_private_overlays(preset: Preset, sandbox_home: Path) -> list[tuple[Path, Path]]:
    """(the sandbox's own folder, the agent folder it stands for) for the preset's AGENT_PRIVATE folders, both made;
    and (the sandbox's own copy, the file it stands for) for its AGENT_PRIVATE_FILES.

    Raises:
        OperationError: such a folder is a symbolic link (bwrap cannot mount on one, and the agent could replace it).
    """
    overlays: list[tuple[Path, Path]] = []
    home = Path.home()
    for raw in _of_agent(AGENT_PRIVATE, preset):
        shown_at = Path(raw).expanduser()
        if shown_at.is_symlink():
            raise OperationError(f"sandbox: {shown_at} is a symbolic link (to {os.readlink(shown_at)}): a sandboxed "
                                 "agent gets a folder of its own there; replace the link with a folder")
        if shown_at.parent.is_symlink() or not shown_at.parent.is_dir() or not shown_at.is_relative_to(home):
            continue
        source = private_home(sandbox_home) / shown_at.relative_to(home)
        try:
            shown_at.mkdir(mode=0o700, exist_ok=True)
            source.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:  # never the shared folder instead: refuse
            raise OperationError(f"sandbox: cannot make the session's own {shown_at}: {exc.strerror or exc}") from None
        overlays.append((source, shown_at))
    for raw in _of_agent(AGENT_PRIVATE_FILES, preset):
        shown_at = Path(raw).expanduser()
        # the obeyed file itself is made (empty) by agent_read_only_paths; a link or a folder there gets no copy
        if shown_at.is_symlink() or not shown_at.is_file() or not shown_at.is_relative_to(home):
            continue
        source = private_home(sandbox_home) / shown_at.relative_to(home)
        with suppressed(OSError):
            source.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not source.is_file() or source.is_symlink():
                source.unlink(missing_ok=True)
                shutil.copyfile(shown_at, source)  # the user's settings, a regular file (checked above)
                source.chmod(0o600)
            overlays.append((source, shown_at))
    return overlays


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
    containment: Containment | None = None  # its limits and network rule (None: not sandboxed)
    worktree: str = ""
    events: Path | None = None  # where the proxy logs denied hosts and the limits runner a limit's stop
    reason_file: Path | None = None  # where the limits runner says why a limit stopped the session
    contained: dict[str, object] = field(default_factory=dict)  # what `wrap` applied, for the record

    def wrap(self, argv: list[str], env: dict[str, str]) -> list[str]:
        """The pane's command; adds the inbox hint to `env` (a hint: identity is the mounted inbox), and the proxy
        with an allow-list. Raises OperationError when limits are asked, mode is `on` and no cgroup works here."""
        if self.spec is None:
            return argv
        env.update(self.agent_env)
        env[INBOX_ENV] = str(INBOX_MOUNT)
        spec = replace(self.spec, readable=program_dirs(argv, env))
        if self.containment is None:
            return self.choice.backend.wrap(argv, spec)
        if self.reason_file is not None and self.containment.limits.any:
            private_dir(self.reason_file.parent)
            self.reason_file.unlink(missing_ok=True)  # a previous run's
        done = contain(self.choice.backend.wrap, argv, spec, env, self.containment, worktree=self.worktree,
                       kind="session", mode=self.choice.mode, events=self.events, reason_file=self.reason_file)
        self.contained.clear()
        self.contained.update(done.record)
        return done.argv

    def record(self) -> dict[str, object]:
        return {**self.choice.to_dict(), **self.contained}

    def start_check(self, argv: Sequence[str], env: Mapping[str, str]) -> dict[str, object] | None:
        """What the pane's launcher needs to find, just before the agent starts, that bubblewrap cannot start now
        (user namespaces used up after this process probed): the probe, whether the sandbox is required (mode
        `on`, or started for a sandboxed caller), and the unconfined `argv` and `env` an `auto` session then runs.
        None when nothing confines the session, or the backend has no probe."""
        binary = getattr(self.choice.backend, "binary", None)
        if self.spec is None or not isinstance(self.choice.backend, BwrapSandbox) or not binary:
            return None
        return {"probe": probe_argv(binary), "required": self.choice.mode == "on" or sandboxed_caller() is not None,
                "mode": self.choice.mode, "argv": list(argv), "env": dict(env)}


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
    projects = [project.root.resolve(), Path(entry.path).resolve()]
    read_only = agent_read_only_paths(preset, projects)
    per_project, own = agent_project_paths(preset, projects[1:])  # its own project: the worktree
    spec = spec_for(project, entry, writable=writable, read_only=[*per_project, *read_only], interactive=True)
    overlays = agent_private_overlays(preset, project.sandbox_home_for(entry.name))
    spec = replace(spec, writable_inside=tuple(own), private_overlays=tuple(overlays))
    containment = effective(project.config, agent=preset.name, role=role, api_hosts=preset.api_hosts)
    return SessionSandbox(choice, spec, agent_environment(preset), containment, entry.name, project.events.path,
                          limit_reason_file(project, entry.name))


def limit_reason_file(project: Project, name: str) -> Path:
    """Where the limits runner of worktree `name`'s session says why a limit stopped it: a folder no sandbox sees
    (each is shown an empty .run/), so the reason is the kernel's word, never the agent's."""
    return project.state_dir / ".run" / "limits" / f"{name}.session.json"


# Claude Code saves ~/.claude.json by writing a temporary file beside it and renaming that over it: with $HOME
# read-only in the sandbox the write fails (EROFS), and nothing it keeps there (onboarding, folder trust, settings,
# the account) outlives the session. CLAUDE_CONFIG_DIR moves that file into ~/.claude/, which the sandbox binds
# writable; it starts as a copy of ~/.claude.json (made empty first when missing), so what the user had comes along.
CLAUDE_CONFIG_ENV = "CLAUDE_CONFIG_DIR"
# Gemini CLI asks whether to trust each new folder and saves the answer in ~/.gemini/trustedFolders.json, which the
# user's own gemini obeys (read-only in the sandbox): the answer failed to save and gemini exited (52) at once.
# Sandboxed, it keeps its answers in a copy of its own, the same way as claude's ~/.claude.json.
GEMINI_TRUST_ENV = "GEMINI_CLI_TRUSTED_FOLDERS_PATH"
GEMINI_SANDBOX_TRUST = "trustedFolders.sandbox.json"


# Codex keeps its thread index (each conversation's cwd and rollout path, what `resume --last` picks from) in SQLite
# databases beside its login; sandboxed, they live in a private folder (AGENT_PRIVATE), so that a row planted by
# one agent never points another session's codex, or the user's own, at a conversation it wrote.
CODEX_SQLITE_ENV = "CODEX_SQLITE_HOME"  # honoured by codex-cli 0.171.0 (checked 2026-12-01)
CODEX_SANDBOX_STATE = "sandbox-state"


def agent_environment(preset: Preset) -> dict[str, str]:
    """What a sandboxed session of `preset` adds to its environment so that its agent can keep its state."""
    programs = (preset.name, Path(preset.argv()[0]).name)
    if "codex" in programs:
        return {CODEX_SQLITE_ENV: str(Path.home() / ".codex" / CODEX_SANDBOX_STATE)}
    if "gemini" in programs and not os.environ.get(GEMINI_TRUST_ENV):
        gemini = Path.home() / ".gemini"
        gemini.mkdir(parents=True, exist_ok=True)
        _seed(gemini / "trustedFolders.json", gemini / GEMINI_SANDBOX_TRUST)
        return {GEMINI_TRUST_ENV: str(gemini / GEMINI_SANDBOX_TRUST)}
    if "claude" not in programs or os.environ.get(CLAUDE_CONFIG_ENV):
        return {}  # not claude, or the user chose the folder
    folder = Path.home() / ".claude"
    folder.mkdir(parents=True, exist_ok=True)
    users = Path.home() / ".claude.json"
    if not os.path.lexists(users):
        # Sandboxed claude backs its copy up in ~/.claude/backups/, where the user's own claude looks too: with no
        # ~/.claude.json beside it, that claude began with "configuration file not found ... a backup file exists"
        # (three times). An empty one is what claude reads as nothing yet.
        with suppressed(OSError):
            create_new(users, "{}\n")
    _seed(users, folder / ".claude.json")
    return {CLAUDE_CONFIG_ENV: str(folder)}


def _seed(source: Path, target: Path) -> None:
    """`target` as a copy of `source`, unless it exists: never over a file or through a link the agent left in its
    writable folder."""
    if os.path.lexists(target) or source.is_symlink() or not source.is_file():
        return
    with suppressed(OSError):
        create_new(target, source.read_bytes())
