"""What one sandboxed command may write (its mount table, as data), and what a backend must do with it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from daintree_tui.core.agent_git import AgentGit
from daintree_tui.core.limits import Limits

# What builds and test runs (hooks, `run`) write besides the worktree. Each worktree's sandbox gets its own, in
# `.worktrees/.sandbox-home/<name>/`: the user's own tools run what these hold (pre-commit's hook environments in
# ~/.cache/pre-commit, npx's packages in ~/.npm/_npx, uvx, pip's wheels), so an agent that could write the user's
# would run code outside its sandbox the next time the user commits.
PRIVATE_CACHES = (".cache", ".npm")


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandboxed command may write. Everything else is read-only (or hidden)."""

    worktree: Path
    git_common_dir: Path
    git_admin_dir: Path  # .git/worktrees/<name>/
    branch: str  # e.g. wt/name
    tmpdir: Path
    agent_git: AgentGit  # its quarantine and ref folders (core/agent_git.py)
    project_root: Path | None = None  # the primary worktree: readable (read-only) also when it lives in /tmp
    writable: tuple[Path, ...] = ()  # agent state folders, sandbox.writable
    read_only: tuple[Path, ...] = ()  # inside those: what would run code outside the sandbox later (agent hooks)
    # Inside those read-only ones: the data of this session alone (claude's transcripts of its own project), bound
    # writable again, with whatever of `read_only` lies inside read-only again (that project's memory).
    writable_inside: tuple[Path, ...] = ()
    # (this sandbox's own folder, the agent folder it is shown at): what the agent's other runs read from there
    # and run (claude's shell snapshots, sourced before every command) is the sandbox's own, never the user's.
    private_overlays: tuple[tuple[Path, Path], ...] = ()  # (own folder or file, the one it is shown as)
    home_caches: Path | None = None  # this worktree's own ~/.cache and ~/.npm (see PRIVATE_CACHES)
    inbox: Path | None = None
    network: bool = True
    interactive: bool = False  # runs in a terminal pane: keep the controlling terminal
    background: bool = False  # outlives its starter (background hooks): no --die-with-parent
    cwd: Path | None = None
    hidden: tuple[Path, ...] = field(default=())  # extra paths to hide (tmux socket dirs outside /tmp)
    hidden_files: tuple[Path, ...] = ()  # files to show empty (the user's credentials)
    readable: tuple[Path, ...] = ()  # programs' folders under /tmp (PATH entries) that must stay visible
    # Folders of every worktree's private state (TMPDIRs, sandbox homes, inboxes, launch files): each is shown
    # empty and read-only, with only this worktree's own entry bound back (its TMPDIR, at its own path).
    private_roots: tuple[Path, ...] = ()
    # Containment (core/sandbox/containment.py): the cgroup limits of the command, and with an allow-list the
    # hosts it may reach and the proxy's socket, bound at PROXY_MOUNT (the network is then the namespace's own).
    limits: Limits = field(default_factory=Limits)
    allow: tuple[str, ...] | None = None
    proxy_socket: Path | None = None

    @property
    def ref_file(self) -> Path:
        return self.git_common_dir / "refs" / "heads" / self.branch

    @property
    def reflog_file(self) -> Path:
        return self.git_common_dir / "logs" / "refs" / "heads" / self.branch


class Sandbox(Protocol):
    """A way to confine a command. A macOS (sandbox-exec) or container backend implements the same three."""

    name: str

    def available(self) -> tuple[bool, str]:
        """Whether it works on this machine, and a one-line reason when it does not."""
        ...

    def wrap(self, argv: Sequence[str], spec: SandboxSpec, prepared: bool = False) -> list[str]:
        """The command line that runs `argv` inside the sandbox described by `spec`; `prepared`: its folders were
        made (and what it left brought in) by an earlier `wrap` of the same spec moments ago."""
        ...


def under_tmp(path: Path) -> bool:
    """Whether `path` is /tmp or below it: inside a sandbox /tmp is another folder (the worktree's TMPDIR)."""
    return path == Path("/tmp") or Path("/tmp") in path.parents
