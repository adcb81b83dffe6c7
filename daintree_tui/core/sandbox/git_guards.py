"""What keeps an agent's git inside its sandbox, and what the outside does before and after one runs
(docs/design.md 2a, rule 9): the files that tell git which repository and config a worktree uses are read-only, the
shared object store and every ref are read-only behind the agent's own quarantine and ref folder
(core/agent_git.py), and what the agent wrote there is checked and brought in before the outside reads its branch.
These run git (bring_in, prepare); choosing a sandbox (`policy`) does not.
"""

from __future__ import annotations

import os
from pathlib import Path

from daintree_tui.core import agent_git
from daintree_tui.core.agent_git import AgentGit
from daintree_tui.core.errors import OperationError
from daintree_tui.core.fs_safe import private_dir
from daintree_tui.core.log import suppressed
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.mounts import SHARED_OBJECTS_MOUNT
from daintree_tui.core.project import Project
from daintree_tui.core.sandbox.spec import PRIVATE_CACHES, SandboxSpec

# The files that tell git which repository and which config a worktree uses. The agent may not rewrite them: a
# `.git` file or `commondir` pointing at a git dir the agent wrote, or a `config.worktree`, is a config with
# `core.fsmonitor` (or a filter, a diff driver, gpg.program) that the USER's git and daintree's own unconfined
# git calls in this worktree then run, outside the sandbox.
# `gitdir` (where git thinks the worktree is) too: git's own commands that prune, repair or list worktrees trust
# it (the user's `git gc` prunes), and a's naming b's worktree had `git worktree prune` delete b's admin dir as a
# duplicate. (It stayed writable once so that an agent emptying its admin dir left a record git ignores rather
# than one without HEAD, which `git fsck` calls an error of the whole repository; but HEAD is the agent's to
# write anyway, so that error was never out of its reach, and doctor puts a missing HEAD back from the index.)
# Nothing git runs inside a worktree writes `gitdir`: only `worktree move` and `repair`, which are the user's.
GIT_POINTER_FILES = ("commondir", "config.worktree", "gitdir")


def git_pointer_mounts(spec: SandboxSpec) -> list[str]:
    args: list[str] = []
    for path in (spec.worktree / ".git", *(spec.git_admin_dir / name for name in GIT_POINTER_FILES)):
        if path.is_file() and not path.is_symlink():
            args += ["--ro-bind", str(path), str(path)]
    return args


def agent_git_mounts(spec: SandboxSpec) -> list[str]:
    """The shared object store and every ref read-only; the agent's own quarantine, ref folder and reflog folder
    where git looks for them (core/agent_git.py says how the outside brings them in)."""
    git = spec.git_common_dir
    paths = spec.agent_git
    ref_dir, log_dir = spec.ref_file.parent, spec.reflog_file.parent
    return ["--ro-bind", str(git / "objects"), str(SHARED_OBJECTS_MOUNT),
            "--bind", str(paths.objects), str(git / "objects"),
            "--bind", str(paths.refs), str(ref_dir),
            "--bind", str(paths.logs), str(log_dir)]


def prepare(spec: SandboxSpec) -> None:
    """Create what the mount table binds, before the sandbox starts; bring in what an earlier sandbox of this
    worktree left in its quarantine and ref folder first (core/agent_git.py)."""
    if spec.ref_file.parent == spec.git_common_dir / "refs" / "heads":
        raise OperationError("the sandbox needs a branch_prefix (like the default wt/): with branches directly "
                             "under refs/heads an agent could write main")
    # bwrap follows a symlinked source: a worktree, TMPDIR or inbox swapped for a link (by anything that ran
    # unconfined) would bind its target writable. Every writable source must be what it says it is.
    caches = spec.home_caches
    agent = spec.agent_git
    for path in (spec.worktree, spec.git_admin_dir, spec.tmpdir, spec.tmpdir.parent, agent.root.parent, agent.root,
                 agent.objects, agent.refs, agent.logs,
                 *((spec.inbox, spec.inbox.parent) if spec.inbox is not None else ()),
                 *((caches.parent, caches, *(caches / name for name in PRIVATE_CACHES)) if caches else ())):
        if path.is_symlink():
            raise OperationError(f"sandbox: {path} is a symlink: refusing to bind it writable")
    dot_git = spec.worktree / ".git"
    if dot_git.is_symlink() or not dot_git.is_file():
        raise OperationError(f"sandbox: {dot_git} is not git's worktree file: refusing to start")
    spec.tmpdir.mkdir(parents=True, exist_ok=True)
    if caches is not None:
        for name in PRIVATE_CACHES:
            (caches / name).mkdir(parents=True, exist_ok=True)
            with suppressed(OSError):
                (Path.home() / name).mkdir(exist_ok=True)  # the mount point: inside, $HOME is read-only
    # The mount points of the agent's own ref folders (nothing is written in the real ones from inside).
    spec.ref_file.parent.mkdir(parents=True, exist_ok=True)
    spec.reflog_file.parent.mkdir(parents=True, exist_ok=True)
    private_dir(agent.root.parent)
    agent_git.prepare(spec.git_common_dir, spec.branch, agent, spec.worktree.name)
    # Exists (empty) so that it is bound read-only: otherwise the agent could create it in its admin dir.
    (spec.git_admin_dir / "config.worktree").touch(exist_ok=True)
    if spec.inbox is not None:
        for folder in (spec.inbox.parent, spec.inbox):  # 0700: the requests are the agent's, the replies ours
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(folder, 0o700)


AGENT_GIT_DIR = ".agent-git"


def agent_git_of(project: Project, name: str) -> AgentGit:
    """Worktree `name`'s quarantine and ref folders, in `.worktrees/.agent-git/<name>/`."""
    return AgentGit(project.tmpdir_for(name).parent.parent / AGENT_GIT_DIR / name)


def bring_in(project: Project, entry: WorktreeEntry, quick: bool = False) -> str | None:
    """What the worktree's sandboxed git wrote, checked and brought into the repository (core/agent_git.py):
    before the outside reads its branch. The branch's commit after, or None (`quick`: no git when nothing is
    new, for the dashboard's every poll)."""
    common = project.common_dir
    if common is None:
        return None
    return agent_git.bring_in(common, entry.branch, agent_git_of(project, entry.name), entry.name, quick)
