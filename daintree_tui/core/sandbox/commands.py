"""One worktree's command confined: the mount table of its session, hook or `worktree run`, and the argv that
runs it there (hooks and `run` come through `wrap_command`; sessions add their agent's folders in
`sessions.sandbox`)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from daintree_tui.core.admin_dirs import git_admin_dir
from daintree_tui.core.errors import OperationError
from daintree_tui.core.fs_safe import private_dir
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.mounts import INBOX_MOUNT
from daintree_tui.core.project import Project
from daintree_tui.core.roles import worktree_role
from daintree_tui.core.sandbox.containment import contain, effective
from daintree_tui.core.sandbox.git_guards import AGENT_GIT_DIR, agent_git_of
from daintree_tui.core.sandbox.hidden import credentials, escape_hatches, secrets_dir, user_locks
from daintree_tui.core.sandbox.policy import choose, writable_paths
from daintree_tui.core.sandbox.spec import SandboxSpec, under_tmp

INBOX_ENV = "DAINTREE_INBOX"  # a hint only: identity is the mounted inbox, never this variable


def inbox_dir(project: Project, name: str) -> Path:
    """The session inbox of worktree `name` (0700): the only way its sandboxed `daintree` calls reach us."""
    return project.inbox_for(name)


def spec_for(project: Project, entry: WorktreeEntry, *, writable: Sequence[Path] = (), read_only: Sequence[Path] = (),
             interactive: bool = False, network: bool | None = None, cwd: Path | None = None,
             background: bool = False) -> SandboxSpec:
    """The mount table of one worktree's commands (session, hook, `run`)."""
    common = project.common_dir
    if common is None:
        raise OperationError(f"not a git repository: {project.root}")
    worktree = Path(entry.path)
    hidden = escape_hatches(project.root, worktree)
    secret_dirs, secret_files = credentials(project.root, worktree, writable)
    # Every session's terminal log holds what was typed and shown there (a key pasted into a shell session): an
    # agent reads none of them, its own included. Made first, so that one a later session creates is hidden too.
    hidden += [*secret_dirs, secrets_dir(), private_dir(project.logs_dir), private_dir(project.locks_dir)]
    # The state lock is a file anyone who can read it can flock: an agent that held it stopped every state
    # operation outside (each waited its 60 s, then failed). Inside it is /dev/null, whose lock nobody takes.
    secret_files += [project.state_dir / ".lock", *user_locks()]
    return SandboxSpec(
        worktree=worktree, git_common_dir=common, git_admin_dir=git_admin_dir(common, worktree),
        branch=entry.branch, tmpdir=project.tmpdir_for(entry.name), agent_git=agent_git_of(project, entry.name),
        project_root=project.root,
        writable=tuple(writable), read_only=tuple(read_only), home_caches=project.sandbox_home_for(entry.name),
        inbox=inbox_dir(project, entry.name),
        network=project.config.sandbox_network if network is None else network, interactive=interactive,
        cwd=cwd, hidden=tuple(hidden), hidden_files=tuple(secret_files), background=background,
        private_roots=(project.tmp_root, project.sandbox_homes, project.state_dir / ".inbox",
                       project.state_dir / ".run", project.state_dir / AGENT_GIT_DIR),
    )


OWN_SOURCE = Path(__file__).resolve().parents[2]
"""The daintree_tui package folder (in the source tree when installed editable)."""


def program_dirs(argv: Sequence[str], env: Mapping[str, str]) -> tuple[Path, ...]:
    """The PATH folders (and the program's own folder) that live under /tmp: /tmp inside is another folder, so
    these are bound back read-only, or a program installed there (a test's fake agent, a throwaway venv, a clone
    under /tmp running `make run`) would not be found or would not find its modules."""
    candidates = [Path(p) for p in env.get("PATH", "").split(os.pathsep) if p]
    if argv and os.sep in argv[0]:
        candidates.append(Path(argv[0]).parent)
    candidates += _installed_package_dirs(argv, env)
    # daintree itself runs inside every sandbox: an agent's hooks call `daintree session signal`, the demo agent
    # and `daintree mcp` are its code, and its own calls go through the inbox. Its environment and (installed
    # editable) its source folder stay readable wherever the program is.
    candidates += [Path(sys.prefix), OWN_SOURCE]
    # A Python virtual environment's program without its pyvenv.cfg falls back to the system's site-packages:
    # bind the whole environment.
    candidates += [p.parent for p in candidates if (p.parent / "pyvenv.cfg").is_file()]
    return tuple(dict.fromkeys(p for p in candidates if p.is_absolute() and under_tmp(p) and p.is_dir()))


def _installed_package_dirs(argv: Sequence[str], env: Mapping[str, str]) -> list[Path]:
    """Where the program really lives: npm's node_modules/.bin/claude is a symlink into its package, which runs
    a binary from a sibling package (@anthropic-ai/claude-code-linux-x64). Binding only the PATH folder left the
    symlink dangling inside; the whole node_modules folder is what the program reads."""
    found = shutil.which(argv[0], path=env.get("PATH")) if argv else None
    if found is None:
        return []
    real = Path(found).resolve()
    parts = real.parts
    if "node_modules" in parts:
        return [Path(*parts[:parts.index("node_modules") + 1])]
    return [real.parent]


def wrap_command(project: Project, entry: WorktreeEntry, argv: Sequence[str], env: dict[str, str], *,
                 cwd: Path | None = None, background: bool = False, kind: str | None = "run",
                 writable: Sequence[Path] = (), read_only: Sequence[Path] = ()) -> list[str]:
    """Hooks and `worktree run`: `argv` confined to the worktree per config (role of the worktree applies), in
    the limits and network rule of `[sandbox]` (`kind`: "hook" or "run"; None: git's own confined commit, which
    needs neither).

    `writable` (inside those, `read_only`): folders of daintree's own the command may write besides the worktree,
    such as the merge train's candidate checkout of it. Adds the inbox hint (and with an allow-list, the proxy) to
    `env` when sandboxed. Raises OperationError when the mode is `on` and the sandbox (or its limits) cannot work
    here.
    """
    role = worktree_role(project, entry.name)
    choice = choose(project.config, role=role)
    if not choice.active:
        return list(argv)
    spec = spec_for(project, entry, writable=(*writable_paths(project.config), *writable), read_only=read_only,
                    cwd=cwd, background=background)
    spec = replace(spec, readable=program_dirs(argv, env))
    env[INBOX_ENV] = str(INBOX_MOUNT)
    if kind is None:
        return choice.backend.wrap(argv, spec)
    # No agent here: "agent" is `network_extra` alone.
    containment = effective(project.config, role=role)
    return contain(choice.backend.wrap, argv, spec, env, containment, worktree=entry.name, kind=kind,
                   mode=choice.mode, events=project.events.path).argv
