"""What of an agent's own folders a sandboxed agent may write: its data, never what the user's agent obeys.

An agent's state folder (~/.claude, ~/.codex, ...) is bound writable into its sandbox, because the agent keeps its
login, history and databases there, and some of them (claude's `.claude.json`) are saved by writing a temporary
file beside the old one and renaming it over: the folder itself must stay writable. But the same folder holds what
the user's own, unconfined agent obeys at its next start: settings with hooks, a status line and MCP servers,
plugins, the scripts those name, and instructions (CLAUDE.md, commands, skills, subagents, AGENTS.md, prompts).

The rule is an allow-list, not a list of dangers: in each folder only the entries named in AGENT_DATA (the data
the agent itself writes) stay writable; every other entry that exists when the sandbox starts is bound read-only,
whatever it is and whatever calls it. What does not exist yet could still be created, so the names the agent obeys
(AGENT_OBEYED), and every path inside the folder that the read-only settings name (or a script they name names,
and so on), are made first (empty) and bound read-only too.

What the real CLIs write, observed unsandboxed with strace (openat for writing, mkdir, rename, unlink) in a fresh
home, at start, after one Enter and after a second (trust prompt, sign-in choice, sign-in URL), without network:

=========  ========  =================================================================================
agent      version   paths written under ~ (how)
=========  ========  =================================================================================
claude     2.1.197   ~/.claude.json (tmp + rename, .lock dir), ~/.claude/backups/; exits 1 without network
                     (sandboxed: the same in ~/.claude/ through CLAUDE_CONFIG_DIR)
codex      0.171.0   ~/.codex/: config.toml (tmp + rename, once: `[tui] screen_reader_detection_done`),
                     {state_5,logs_2,goals_1,memories_1,queue_1}.sqlite(-wal,-shm,-journal), installation_id,
                     .tmp/ (plugin sync staging), skills/.system/ (its bundled skills), packages/ (a 424 MB
                     copy of its app-server daemon, then run from there), app-server-daemon/ and
                     app-server-control/ (pid, lock, log files, socket links into /tmp); nothing more at
                     either Enter (sign-in URL)
gemini     0.61.0    ~/.gemini/: projects.json (tmp + rename, .lock dir), state.json, installation_id,
                     tmp/<project>/ (.project_root, logs.json, chats/), history/<project>/.project_root;
                     Enter 1 (trust): trustedFolders.json (tmp + rename; sandboxed: its own copy through
                     GEMINI_CLI_TRUSTED_FOLDERS_PATH); Enter 2 (sign-in choice): google_accounts.json and
                     settings.json (both in place, O_TRUNC; sandboxed: settings.json is a copy of the
                     sandbox's own, see sessions/sandbox.py AGENT_PRIVATE_FILES)
opencode   1.18.33   ~/.local/share/opencode/: opencode.db(-wal,-shm,-journal) (O_RDWR at every start),
                     log/, repos/; ~/.local/state/opencode/locks/; ~/.config/opencode/: opencode.jsonc and
                     .gitignore (when missing), package.json, package-lock.json, node_modules/ (npm install
                     of its plugin SDK, through ~/.npm); ~/.cache/opencode/
aider      0.86.2    ~/.aider/: analytics.json, installs.json, caches/; .gitignore in the worktree
=========  ========  =================================================================================

Re-check after a CLI update: tests/test_real_agents.py runs each CLI outside and inside the sandbox, and fails on
a path the CLI wrote outside that its sandbox binds read-only and READ_ONLY_BY_DESIGN does not explain.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from daintree_tui.core.errors import OperationError
from daintree_tui.core.log import suppressed
from daintree_tui.core.store import create_new
from daintree_tui.sessions.agents.base import read_agent_file
from daintree_tui.sessions.agents.claude import SLUG_LIMIT, project_slug

# Per state folder: the entries (glob patterns on the top-level name) the agent writes as data. Anything else
# in the folder is read-only inside the sandbox. Temporary and lock names are here because the agents save
# their files by rename (`.claude.json.tmp.<pid>.<hex>`, `.claude.json.lock/`).
_CLAUDE_DATA = (".credentials.json", ".claude.json", ".claude.json.*", "*.tmp.*", "*.lock", "backups", "projects",
                "todos", "shell-snapshots", "statsig", "session-env", "file-history", "debug", "ide", "plans",
                "history.jsonl", "telemetry", "paste-cache", "cache", "stats-cache.json")
AGENT_DATA: dict[str, tuple[str, ...]] = {
    "~/.claude/": _CLAUDE_DATA,
    "~/.config/claude/": _CLAUDE_DATA,
    "~/.codex/": ("auth.json", "sessions", "archived_sessions", "log", "history.jsonl", "*.sqlite", "*.sqlite-*",
                  ".sqlite-maintenance.lock", "installation_id", "version.json", "tmp", "models_cache.json",
                  "internal_storage.json", "cache", "shell_snapshots", "sandbox-state", "*.tmp*", "*.lock"),
    # gemini 0.61 renames a temporary file over projects.json (its registry of project folders) at every start:
    # bound read-only, the rename failed (EBUSY) and it died at once.
    "~/.gemini/": ("oauth_creds.json", "google_accounts.json", "installation_id", "user_id", "tmp", "history",
                   "mcp-oauth-tokens.json", "projects.json", "state.json", "trustedFolders.sandbox.json", "*.tmp*",
                   "*.lock"),
    "~/.config/opencode/": (),
    # opencode 1.18 keeps its sessions in a SQLite database (opened O_RDWR at every start, with its -wal, -shm and
    # -journal beside it): read-only, it drew a blank screen and hung.
    "~/.local/share/opencode/": ("auth.json", "storage", "log", "snapshot", "project", "repos", "tool-output",
                                 "opencode.db", "opencode.db-*", "*.tmp*", "*.lock"),
    "~/.local/state/opencode/": ("*",),  # its recent models and prompt history: nothing there runs
    "~/.aider/": ("caches", "analytics.json", "installs.json", "*.tmp*", "*.lock"),
}

# What an agent writes outside the sandbox that its sandbox keeps read-only, on purpose: (path from the home
# folder, a glob whose * spans folders) -> why. tests/test_real_agents.py probes every path the real CLI wrote
# unsandboxed and fails on a read-only one not named here.
READ_ONLY_BY_DESIGN: dict[str, dict[str, str]] = {
    "claude": {".claude.json": "the user's claude starts its mcpServers unconfined; sandboxed claude keeps its "
                               "own copy in ~/.claude/ (CLAUDE_CONFIG_DIR)",
               ".claude.json.*": "its temporary and lock files, beside ~/.claude.json"},
    "gemini": {".gemini/trustedFolders.json": "the user's gemini loads a trusted folder's own settings (hooks, "
                                              "MCP servers); sandboxed gemini keeps its answers in its own copy, "
                                              "trustedFolders.sandbox.json (GEMINI_CLI_TRUSTED_FOLDERS_PATH)"},
    "codex": {".codex/config.toml": "settings the user's codex obeys (MCP servers, notify commands); codex "
                                    "writes it once, for a screen-reader check it repeats when it cannot",
              ".codex/skills*": "instructions the user's codex loads (it copies its bundled skills there)",
              ".codex/packages*": "the app-server daemon the user's codex runs from there",
              # Measured in CI (chromium installed, no display): Enter on "Sign in with ChatGPT" runs xdg-open,
              # and chromium writes its crash folders before it fails to start.
              ".config/chromium/*": "the user's browser profile: a sandboxed agent does not drive the user's "
                                    "browser; codex prints the sign-in link it would have opened"},
    "aider": {".aider/oauth-keys.env": "loaded as the user's aider's environment (AIDER_* options run commands); "
                                       "an OpenRouter sign-in inside the sandbox cannot save its key"},
    "opencode": {".config/opencode/package.json": "the dependencies of the plugins the user's opencode loads",
                 ".config/opencode/package-lock.json": "likewise",
                 ".config/opencode/node_modules*": "code the user's opencode plugins import",
                 ".config/opencode/opencode.jsonc": "its settings (plugins, MCP servers)",
                 ".config/opencode/.gitignore": "written with its settings, when missing"},
}


def read_only_by_design(agent: str, path: str) -> str | None:
    """Why `path` (relative to the home folder), written by `agent` outside its sandbox, is read-only inside."""
    for pattern, reason in READ_ONLY_BY_DESIGN.get(agent, {}).items():
        if fnmatch.fnmatchcase(path, pattern):
            return reason
    return None


# What the agent obeys when it starts, sandboxed or not (the user's own agent outside daintree): settings (hooks,
# a status line, MCP servers), plugins, and instructions that reach it as the user's own (CLAUDE.md, commands,
# skills, subagents, AGENTS.md, prompts). One that is missing is made first, empty (`{}`, an empty file or
# folder), so that the agent cannot add it. Each group names one thing, in the forms the agent reads (the first is
# the one made); a trailing / is a folder.
AGENT_OBEYED: dict[str, tuple[tuple[str, ...], ...]] = {
    "claude": (("~/.claude/settings.json",), ("~/.claude/settings.local.json",), ("~/.claude/plugins/",),
               ("~/.claude/hooks/",), ("~/.config/claude/settings.json",), ("~/.claude/CLAUDE.md",),
               ("~/.claude/commands/",), ("~/.claude/skills/",), ("~/.claude/agents/",),
               ("~/.claude/output-styles/",), ("~/.claude/rules/",)),
    # codex's rules/ let commands run without asking; gemini's trustedFolders.json makes a folder's own
    # .gemini/settings.json (its hooks and MCP servers) count: both loosen what the user's own agent does.
    # packages/ holds the app-server daemon codex 0.171 downloads at its first start and then runs from there
    # (`packages/app-server-daemon/current/bin/codex app-server`), the user's own codex too; plugins/ what its
    # plugin sync installs.
    "codex": (("~/.codex/config.toml",), ("~/.codex/AGENTS.md",), ("~/.codex/AGENTS.override.md",),
              ("~/.codex/prompts/",), ("~/.codex/skills/",), ("~/.codex/rules/",), ("~/.codex/packages/",),
              ("~/.codex/plugins/",)),
    # trusted_hooks.json lets a project's hooks run without asking; skills/ and agents/ are instructions.
    "gemini": (("~/.gemini/settings.json",), ("~/.gemini/extensions/",), ("~/.gemini/GEMINI.md",),
               ("~/.gemini/commands/",), ("~/.gemini/trustedFolders.json",), ("~/.gemini/policies/",),
               ("~/.gemini/trusted_hooks.json",), ("~/.gemini/skills/",), ("~/.gemini/agents/",)),
    "opencode": (("~/.config/opencode/opencode.json", "~/.config/opencode/opencode.jsonc",
                  "~/.config/opencode/config.json"), ("~/.config/opencode/plugin/",),
                 ("~/.config/opencode/plugins/",), ("~/.config/opencode/AGENTS.md",),
                 ("~/.config/opencode/agent/",), ("~/.config/opencode/agents/",),
                 ("~/.config/opencode/command/",), ("~/.config/opencode/commands/",),
                 ("~/.config/opencode/tool/",), ("~/.config/opencode/tools/",),
                 # the programs it downloads (ripgrep) and then runs, the user's own opencode too
                 ("~/.local/share/opencode/bin/",)),
    # aider 0.86 loads oauth-keys.env (its OpenRouter key, saved after sign-in) as environment before it reads its
    # options, and AIDER_* variables are options (--test-cmd, --lint-cmd: commands it runs).
    "aider": (("~/.aider/oauth-keys.env",),),
}

# Inside a data folder, what is instructions again: Claude's auto memory (`projects/<project>/memory/MEMORY.md`,
# loaded into every conversation in that project, the user's own included). Existing ones are bound read-only;
# `project_memory` names the ones of the session's repository, made first.
DATA_OBEYED: dict[str, tuple[str, ...]] = {"~/.claude/": ("projects/*/memory",),
                                           "~/.config/claude/": ("projects/*/memory",)}


def project_memory(preset_folders: Sequence[str], projects: Sequence[Path]) -> list[tuple[str, ...]]:
    """Claude's auto-memory folders of `projects` (the repository's root and the worktree), as obeyed groups:
    Claude names a project's folder after its path, every character but letters and digits made `-`."""
    groups: list[tuple[str, ...]] = []
    for raw in preset_folders:
        if "projects/*/memory" in DATA_OBEYED.get(raw, ()):
            groups += [(f"{raw}projects/{re.sub('[^A-Za-z0-9]', '-', str(p))}/memory/",) for p in projects]
    return groups


# A data folder holding one folder per project, of which the session may write only its own (its worktree's):
# claude's `projects/` (transcripts, and the auto memory that DATA_OBEYED names) and gemini's `history/` (a shadow
# git repository per project for its checkpoints, run with that folder as HOME: its `.gitconfig`, `.git/config` and
# hooks are what git runs). Writable whole, they let an agent make a memory folder for any other project of the
# user's, or a hook in another project's shadow repository, which the user's own agent loads or runs there. The
# folder is bound read-only; the session's own project's folder, made first, writable.
PER_PROJECT: dict[str, tuple[str, str]] = {"~/.claude/": ("projects", "claude"),
                                           "~/.config/claude/": ("projects", "claude"),
                                           "~/.gemini/": ("history", "gemini")}


def _project_folder_name(naming: str, project: Path) -> str | None:
    """The name the agent gives `project`'s folder; None when it cannot be known beforehand."""
    if naming == "gemini":
        return hashlib.sha256(str(project).encode()).hexdigest()
    slug = project_slug(str(project))
    return slug if len(slug) <= SLUG_LIMIT else None  # a longer one ends in a hash of claude's own


def per_project_data(preset_folders: Sequence[str], projects: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """(read-only, writable inside them): each PER_PROJECT folder of the preset's state folders, and in it the
    folders of `projects` (the session's worktree), named as the agent names them, made when missing.

    Raises:
        OperationError: one of those is a symbolic link (bound writable, its target would be).
    """
    read_only: list[Path] = []
    writable: list[Path] = []
    for raw in preset_folders:
        if raw not in PER_PROJECT:
            continue
        name, naming = PER_PROJECT[raw]
        root = Path(raw).expanduser()
        names = [_project_folder_name(naming, p) for p in projects]
        if root.is_symlink() or not root.is_dir() or None in names:
            continue
        folder = root / name
        if folder.is_symlink():
            continue  # bwrap cannot mount on a link; what it points to is the user's to keep
        own = [folder / n for n in names if n is not None]
        for path, project in zip(own, projects, strict=True):
            if path.is_symlink():
                raise OperationError(f"sandbox: {path} is a symbolic link (to {os.readlink(path)}): the session "
                                     "keeps its data there, so its target would be writable inside; replace the link "
                                     "with a folder")
            with suppressed(OSError):
                path.mkdir(mode=0o700, parents=True, exist_ok=True)
            if naming == "gemini" and path.is_dir():
                read_only += _owner_marker(path, project)
        read_only.append(folder)
        writable += [path for path in own if path.is_dir()]
    return read_only, writable


GEMINI_OWNER = ".project_root"
"""gemini's ownership marker in each of a project's folders (tmp/, history/): the project's path. gemini finds a
project's folder through ~/.gemini/projects.json (writable in the sandbox: it renames a file over it), checked
against this marker: one the agent could write in its own writable folder, naming another project of the user's
(mapped there in projects.json), handed that folder to the user's own gemini there as its checkpoint repository,
whose `.git/config` and hooks git runs unconfined."""


def _owner_marker(folder: Path, project: Path) -> list[Path]:
    """Write `folder`'s ownership marker naming `project` (replacing whatever is there) and return it, to be bound
    read-only; nothing when it cannot be written (the folder stays writable, as before)."""
    marker = folder / GEMINI_OWNER
    try:
        if marker.is_symlink() or (marker.exists() and not marker.is_file()):
            if marker.is_dir() and not marker.is_symlink():
                shutil.rmtree(marker)
            else:
                marker.unlink()
        if not marker.exists() or marker.read_text(errors="replace") != str(project):
            tmp = folder / f"{GEMINI_OWNER}.daintree-tmp"
            tmp.unlink(missing_ok=True)
            tmp.write_text(str(project))
            os.replace(tmp, marker)
    except OSError:
        return []
    return [marker]


SETTINGS_LIMIT = 1024 * 1024  # a settings file or script read for the paths it names (a larger one is not read)
FOLLOWED_LIMIT = 200  # files read while following what names what


def is_data(folder_raw: str, name: str) -> bool:
    """Whether entry `name` at the top of state folder `folder_raw` ("~/.claude/") is the agent's data."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in AGENT_DATA.get(folder_raw, ()))


def read_only_paths(folders: Sequence[str], obeyed: Iterable[tuple[str, ...]]) -> list[Path]:
    """Everything of the agent's state `folders` (raw, "~/.claude/") to bind read-only in its sandbox: every
    existing entry that is not its data, what it obeys (made empty when missing), and whatever those name inside
    the folders (made empty when missing, see `named_paths`)."""
    roots = {raw: Path(raw).expanduser() for raw in folders if raw.endswith("/")}
    paths: dict[Path, None] = {}
    obeyed_paths: list[Path] = []
    for group in obeyed:
        forms = [Path(raw).expanduser() for raw in group]
        present = [path for path in forms if os.path.lexists(path)]
        if not present:
            with suppressed(OSError):  # a project's memory folder: its project folder first
                if not os.path.lexists(forms[0].parent) and forms[0].parent.parent.is_dir() \
                        and not forms[0].parent.parent.is_symlink():
                    forms[0].parent.mkdir(mode=0o700)
            if _make_empty(forms[0], folder=group[0].endswith("/")):
                present = [forms[0]]
        obeyed_paths += present
    for raw, root in roots.items():
        for pattern in DATA_OBEYED.get(raw, ()):
            obeyed_paths += [p for p in root.glob(pattern) if not p.is_symlink()]
    for raw, root in roots.items():
        if root.is_symlink() or not root.is_dir():
            continue
        with suppressed(OSError):
            for entry in sorted(os.listdir(root)):
                if not is_data(raw, entry):
                    paths[root / entry] = None
    obeyed_paths += named_paths(obeyed_paths, roots)
    for path in obeyed_paths:
        link = _link_on_the_way(path, roots)
        if link is not None:
            raise OperationError(
                f"sandbox: {link} is a symbolic link (to {os.readlink(link)}): what the agent obeys must be a real "
                "file or folder in its own folder, or it could replace the link with its own inside the sandbox "
                "(bubblewrap cannot make a link read-only); replace the link with a copy of what it points to")
    # Any other link there is skipped: binding it fails the sandbox's start (bwrap cannot mount on a link), and an
    # agent that left one would stop every later session of its kind from starting.
    paths = {path: None for path in paths if _link_on_the_way(path, roots) is None}
    paths.update(dict.fromkeys(obeyed_paths))
    return list(paths)


def _link_on_the_way(path: Path, roots: Mapping[str, Path]) -> Path | None:
    """The first symbolic link from the state folder holding `path` down to `path` itself, if any."""
    for root in roots.values():
        if path.is_relative_to(root):
            current = root
            for part in path.relative_to(root).parts:
                current = current / part
                if current.is_symlink():
                    return current
            return None
    return path if path.is_symlink() else None


def named_paths(starts: Sequence[Path], roots: Mapping[str, Path]) -> list[Path]:
    """The paths inside the state folders `roots` that `starts` (settings, and the scripts they name) name.

    A read-only settings file still runs what it names: Claude's `/statusline` writes `~/.claude/statusline.sh`
    and names it in settings.json, and the user's own claude runs it unconfined at every start; that script may
    call another. Every word of every file reached this way (settings as JSON or TOML strings, scripts as text)
    that, with `~` and `$HOME` expanded, is an absolute path is followed; those inside a state folder are
    returned, and one that is missing is made first: an empty file at the top of a folder, or, deeper, its top
    entry as an empty folder (a data folder gets the empty file itself), so the agent cannot create it.
    """
    found: dict[Path, None] = {}
    seen: set[Path] = set()
    pending = [path for path in starts if path.is_file()]
    while pending and len(seen) < FOLLOWED_LIMIT:
        path = pending.pop()
        with suppressed(OSError):
            path = path.resolve()
        if path in seen:
            continue
        seen.add(path)
        for word in _words(path):
            candidate = Path(os.path.expanduser(word))
            if not candidate.is_absolute() or ".." in candidate.parts:
                continue
            target = _inside(candidate, roots)
            if target is None:
                if candidate.is_file():
                    pending.append(candidate)  # a script outside may call one inside
                continue
            bound = target if os.path.lexists(target) else _placeholder(target, roots)
            if bound is not None:
                found[bound] = None
                if target.is_file():
                    pending.append(target)
    return list(found)


def _inside(candidate: Path, roots: Mapping[str, Path]) -> Path | None:
    """`candidate` when it lies inside one of the state folders (through their real paths too), else None."""
    for root in roots.values():
        for base in dict.fromkeys((root, root.resolve())):
            if candidate != base and candidate.is_relative_to(base):
                return root / candidate.relative_to(base)
    return None


def _placeholder(target: Path, roots: Mapping[str, Path]) -> Path | None:
    """Make a missing named `target` (or its top folder) so that it can be bound read-only: see `named_paths`.
    Returns what to bind, None when nothing could be made."""
    for raw, root in roots.items():
        if not target.is_relative_to(root):
            continue
        top = root / target.relative_to(root).parts[0]
        if top == target:  # a data entry that settings name is bound read-only only when it exists
            return target if not is_data(raw, top.name) and _make_empty(target, folder=False) else None
        if not is_data(raw, top.name):
            return top if top.is_dir() or _make_empty(top, folder=True) else None
        parent = target.parent
        with suppressed(OSError):
            if not any(p.is_symlink() for p in (parent, *parent.parents) if p.is_relative_to(root)):
                parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return target if _make_empty(target, folder=False) else None
    return None


_HOME_FORMS = re.compile(r"\$\{HOME\}|\$HOME(?![A-Za-z0-9_])")
_SEPARATORS = re.compile(r"[\s;|&()<>`'\"=,]+")


def _words(path: Path) -> list[str]:
    """The words of a settings file's strings (JSON or TOML), or of any other text file (a script)."""
    try:
        raw = read_agent_file(path, SETTINGS_LIMIT).decode()
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    texts: list[str] = [raw]
    with suppressed(ValueError, RecursionError):
        loaded: object = tomllib.loads(raw) if path.suffix == ".toml" else json.loads(raw)
        texts = []
        pending = [loaded]
        while pending:
            item = pending.pop()
            if isinstance(item, dict):
                pending += [*item.keys(), *item.values()]
            elif isinstance(item, list):
                pending += item
            elif isinstance(item, str):
                texts.append(item)
    words: list[str] = []
    for text in texts:
        words += [w for w in _SEPARATORS.split(_HOME_FORMS.sub("~", text)) if w]
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
