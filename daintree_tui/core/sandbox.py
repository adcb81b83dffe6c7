"""The sandbox every session, hook and `worktree run` runs in (DESIGN.md 2a point 8).

Where bubblewrap works, a command sees the whole filesystem read-only except what it was given: its worktree,
what git needs to commit on its own branch, its TMPDIR (also at /tmp), its agent's own state folders and its
session inbox. This module is pure policy and argv building (core: hooks and `run` need it and cannot import
sessions); the session-specific parts (agent folders, the inbox) are added by `sessions.sandbox`.

Why these bwrap options, and what each one closes (tested as an attacker in tests/test_sandbox.py):
- `--unshare-user --cap-drop ALL`: we often run as root (CI). bwrap run by root keeps every capability inside,
  and root with CAP_SYS_ADMIN simply remounts `/` read-write (verified). A user namespace plus dropping all
  capabilities leaves the same uid but no power to mount, unmount, or override file permissions.
- `--unshare-pid` and a fresh `/proc`: with the host's pids visible, `/proc/<pid>/root` of any process of the
  same user is the host's writable filesystem, and its `/proc/<pid>/mem` is code injection.
- `/` is rebuilt from its top-level entries (read-only) rather than one `--ro-bind / /`, so that the mount
  points we add (the inbox at /run/daintree/inbox) can be created, and so that /run is rebuilt without the
  sockets that run commands outside the sandbox (the user's systemd and D-Bus session in /run/user, docker,
  podman, containerd): connecting to a unix socket works on a read-only mount.
- Kernel knobs that check only the uid (/proc/sys, /proc/sysrq-trigger, ...: KERNEL_READ_ONLY) are bound
  read-only over the fresh /proc: as root, `kernel.core_pattern = |script` ran the agent's script as root
  outside (tests/test_sandbox_kernel.py).
- /tmp is the worktree's TMPDIR, which also hides tmux's sockets (/tmp/tmux-UID): a process that reaches our
  tmux server can open a window outside the sandbox.
- The environment is inherited, never passed on bwrap's argv (no `--setenv`): argv is visible in `ps`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from daintree_tui.core import agent_git
from daintree_tui.core.admin_dirs import admin_dir_of
from daintree_tui.core.agent_git import AgentGit
from daintree_tui.core.config import Config, user_data_dir
from daintree_tui.core.errors import OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.log import warn
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.mounts import INBOX_MOUNT, SHARED_OBJECTS_MOUNT
from daintree_tui.core.project import Project
from daintree_tui.core.sandbox_probe import probe_failure
from daintree_tui.core.store import read_state_file
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.trust import private_dir, read_own_state

SSH_CONTROL_DIR_ENV = "DAINTREE_SSH_CONTROL_DIR"
INBOX_ENV = "DAINTREE_INBOX"  # a hint only: identity is the mounted inbox, never this variable

# Entries of /run that let a process start commands outside the sandbox: the user's systemd and D-Bus session
# (/run/user), the system bus and systemd's own sockets (a root agent talks to PID 1 as root there), and the
# container daemons. /run/systemd/resolve alone comes back: /etc/resolv.conf often points into it.
_RUN_HIDDEN = frozenset({"user", "dbus", "systemd", "docker.sock", "docker", "podman", "containerd", "crio",
                         "libvirt", "lxd", "snapd.socket", "snapd-snap.socket"})
_RUN_KEPT = ("systemd/resolve",)
_TOP_SKIPPED = frozenset({"proc", "dev", "tmp", "run"})

# Kernel knobs that check the uid alone, never a capability: a root agent's user namespace maps 0 to the host's 0,
# so in a fresh /proc they are root's to write, for the whole machine. `kernel.core_pattern = |script` made the
# kernel run the agent's script as root outside at its next crash; modprobe, hotplug, sysrq and the like are the
# same. bwrap makes /proc/irq and /proc/bus read-only itself (listed here all the same: that is its choice, not
# ours) but skips /proc/sys (a sysctl folder answers access(W_OK) with EACCES for everyone, so bwrap takes it
# for read-only already) and covers nothing else. These are runc's (docker's) read-only paths. /proc/mtrr and
# /proc/pressure stay as they are: the first checks CAP_SYS_ADMIN of the host, the second is a per-open trigger
# every user may set. /sys is bound read-only whole (cgroupfs, securityfs, debugfs, efivarfs and /sys/power
# below it included), and /dev is bwrap's minimal one.
# Bound from the host's /proc (bwrap binds only from outside): a sysctl is looked up in the namespaces of the
# process that opens it, so /proc/sys/net still shows the sandbox's own network.
KERNEL_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
# What the kernel reads out of itself for root and no one needs inside (runc's masked paths): a file is shown as
# /dev/null (on a nodev mount: unreadable), a folder as an empty read-only tmpfs.
KERNEL_MASKED = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
                 "/proc/latency_stats", "/proc/acpi", "/proc/asound", "/proc/scsi", "/sys/firmware",
                 "/sys/devices/virtual/powercap")


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


class NoSandbox:
    """No confinement: the command runs as it is (sandbox = "off", or nothing works here)."""

    name = "none"

    def __init__(self, reason: str = "sandbox is off") -> None:
        self.reason = reason

    def available(self) -> tuple[bool, str]:
        return True, self.reason

    def wrap(self, argv: Sequence[str], spec: SandboxSpec, prepared: bool = False) -> list[str]:
        return list(argv)


def probe_argv(binary: str) -> list[str]:
    """The exact confinement we use, around `true`: whether bubblewrap can start here, now. A session's launcher
    runs it again just before its agent (sessions/launch.py): user namespaces can run out after this process
    probed (ENOSPC, other jobs holding them all), and an `auto` session then starts without the sandbox."""
    return [binary, *_isolation(True), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true"]


_WORKED: set[str] = set()  # the binaries whose probe passed in this process


def _probe(binary: str) -> tuple[bool, str]:
    """Run the probe, so `auto` knows whether bubblewrap works (user namespaces may be off or used up). A pass is
    remembered for the process; a failure is not: namespaces used up by other jobs come back, and a dashboard that
    started in that moment ran every later session unconfined."""
    if binary not in _WORKED:
        why = probe_failure(probe_argv(binary))
        if why is not None:
            return False, why if why.startswith("bubblewrap cannot start") else \
                f"bubblewrap cannot create a sandbox here: {why}"
        _WORKED.add(binary)
    return True, f"bubblewrap ({binary}) with a user namespace"


def _isolation(network: bool, background: bool = False) -> list[str]:
    args = ["--unshare-user", "--cap-drop", "ALL", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try"]
    if not background:
        # A timeout kills bwrap; this takes the whole sandbox (its pid namespace) with it.
        args.append("--die-with-parent")
    if not network:
        args.append("--unshare-net")
    return args


class BwrapSandbox:
    """Linux: bubblewrap, unprivileged, no daemon."""

    name = "bwrap"

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or shutil.which("bwrap") or ""

    def available(self) -> tuple[bool, str]:
        if not self.binary:
            return False, "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
        return _probe(self.binary)

    def wrap(self, argv: Sequence[str], spec: SandboxSpec, prepared: bool = False) -> list[str]:
        if not prepared:
            prepare(spec)
        args = [self.binary, *_isolation(spec.network, spec.background)]
        if not spec.interactive:
            args.append("--new-session")  # no controlling terminal: TIOCSTI cannot type into the caller's
        args += _root_mounts(spec)
        args += _writable_mounts(spec)
        for path in spec.hidden:
            if path.is_dir():
                args += ["--tmpfs", str(path)]
        for path in spec.hidden_files:
            if path.is_file():
                args += ["--ro-bind", "/dev/null", str(path)]
        args += ["--remount-ro", "/run"]
        args += ["--chdir", str(spec.cwd or spec.worktree), "--", *argv]
        return args


def _root_mounts(spec: SandboxSpec) -> list[str]:
    """The host's / read-only, entry by entry; /run without the sockets that escape; /tmp is TMPDIR."""
    args: list[str] = []
    for name in sorted(os.listdir("/")):
        path = Path("/") / name
        if name in _TOP_SKIPPED:
            continue  # /proc, /dev and /run are made below; /tmp by _tmp_mounts
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.exists():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--dev", "/dev", "--proc", "/proc", *_kernel_mounts(), "--tmpfs", "/run"]
    run = Path("/run")
    if run.is_dir():
        for name in sorted(os.listdir(run)):
            child = run / name
            if name in _RUN_HIDDEN or name == "daintree":
                continue
            if child.is_symlink():
                args += ["--symlink", os.readlink(child), str(child)]
            else:
                args += ["--ro-bind", str(child), str(child)]
        for kept in _RUN_KEPT:
            if (run / kept).is_dir():
                args += ["--ro-bind", str(run / kept), str(run / kept)]
    args += _tmp_mounts(spec)
    return args


def _kernel_mounts() -> list[str]:
    """KERNEL_READ_ONLY bound read-only over the fresh /proc, KERNEL_MASKED hidden (what this kernel has of them)."""
    args: list[str] = []
    for knob in KERNEL_READ_ONLY:
        args += ["--ro-bind-try", knob, knob]
    for path in map(Path, KERNEL_MASKED):
        if path.is_symlink():
            continue
        if path.is_dir():
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        elif path.exists():
            args += ["--ro-bind", "/dev/null", str(path)]
    return args


def _under_tmp(path: Path) -> bool:
    return path == Path("/tmp") or Path("/tmp") in path.parents


def _tmp_mounts(spec: SandboxSpec) -> list[str]:
    """/tmp is the worktree's TMPDIR, which also hides tmux's sockets (/tmp/tmux-UID).

    When the repository itself lives under /tmp (throwaway clones, test runs), binding TMPDIR over /tmp would
    hide it, and bwrap would create the mount points of our binds inside the real TMPDIR; there /tmp is an empty
    private tmpfs instead, with the repository bound read-only at its own path (TMPDIR stays writable at its).
    """
    needed = [p for p in (spec.project_root, spec.git_common_dir, spec.worktree.parent, Path.home(),
                          *spec.readable) if p is not None]
    if not any(_under_tmp(p) for p in needed):
        return ["--bind", str(spec.tmpdir), "/tmp"]
    args = ["--tmpfs", "/tmp"]
    for path in dict.fromkeys(needed):
        if _under_tmp(path) and path.exists():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _private_mounts(spec: SandboxSpec) -> list[str]:
    """Other sessions' TMPDIRs (their builds' files, an MCP wiring), sandbox homes, inboxes and launch files are
    theirs: each folder that holds them is an empty tmpfs here, its own TMPDIR bound back, then made read-only."""
    roots = [root for root in spec.private_roots if root.is_dir() and not root.is_symlink()
             and not spec.worktree.is_relative_to(root)]
    args: list[str] = []
    for root in roots:
        args += ["--tmpfs", str(root)]
    args += ["--bind", str(spec.tmpdir), str(spec.tmpdir)]
    for root in roots:
        args += ["--remount-ro", str(root)]
    return args


def _writable_mounts(spec: SandboxSpec) -> list[str]:
    args = ["--bind", str(spec.worktree), str(spec.worktree),
            "--bind", str(spec.git_admin_dir), str(spec.git_admin_dir),
            *_private_mounts(spec)]
    args += _agent_git_mounts(spec)
    args += _git_pointer_mounts(spec)
    if spec.home_caches is not None:  # before the agent's folders: one of them may live under ~/.cache
        for name in PRIVATE_CACHES:
            if (Path.home() / name).is_dir():
                args += ["--bind", str(spec.home_caches / name), str(Path.home() / name)]
    for path in spec.writable:
        if path.exists():
            args += ["--bind", str(path), str(path)]
    for source, shown_at in spec.private_overlays:
        if source.is_dir() and not source.is_symlink() and shown_at.is_dir() and not shown_at.is_symlink():
            args += ["--bind", str(source), str(shown_at)]
    for path in spec.read_only:  # after the folders that hold them
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    for source, shown_at in spec.private_overlays:  # a file's copy: over the read-only file it stands for
        if source.is_file() and not source.is_symlink() and shown_at.is_file() and not shown_at.is_symlink():
            args += ["--bind", str(source), str(shown_at)]
    for folder in spec.writable_inside:
        if folder.is_dir() and not folder.is_symlink():
            args += ["--bind", str(folder), str(folder)]
            for path in spec.read_only:
                if path != folder and path.is_relative_to(folder) and path.exists():
                    args += ["--ro-bind", str(path), str(path)]
    if spec.inbox is not None:
        args += ["--bind", str(spec.inbox), str(INBOX_MOUNT)]
    return args


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


def _git_pointer_mounts(spec: SandboxSpec) -> list[str]:
    args: list[str] = []
    for path in (spec.worktree / ".git", *(spec.git_admin_dir / name for name in GIT_POINTER_FILES)):
        if path.is_file() and not path.is_symlink():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _agent_git_mounts(spec: SandboxSpec) -> list[str]:
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
            with contextlib.suppress(OSError):
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


def git_admin_dir(common_dir: Path, worktree: Path) -> Path:
    """The worktree's `.git/worktrees/<id>/`: the one its `.git` file names when that record's `gitdir` names the
    worktree back (both are read-only in every sandbox), else the record whose `gitdir` names it, found from the
    common dir's side (a `.git` file rewritten by an unsandboxed agent may point at the common dir itself)."""
    admin_root = common_dir / "worktrees"
    want = str(worktree / ".git")
    named = admin_dir_of(common_dir, worktree)
    candidates = [named] if named is not None else []
    candidates += [admin_root / worktree.name]
    if admin_root.is_dir():
        candidates += sorted(p for p in admin_root.iterdir() if p.name != worktree.name)
    for admin in candidates:
        try:
            # A regular file only: the admin dir is the agent's to write, and `gitdir -> /dev/zero` never ends.
            if read_state_file(admin / "gitdir").decode(errors="replace").strip() == want \
                    and admin.parent == admin_root:
                return admin
        except OSError:
            continue
    raise OperationError(f"cannot find git's admin dir for worktree {worktree} under {admin_root}")


# -- choosing a backend for one command ------------------------------------------------------------------------

# What builds and test runs (hooks, `run`) write besides the worktree. Each worktree's sandbox gets its own, in
# `.worktrees/.sandbox-home/<name>/`: the user's own tools run what these hold (pre-commit's hook environments in
# ~/.cache/pre-commit, npx's packages in ~/.npm/_npx, uvx, pip's wheels), so an agent that could write the user's
# would run code outside its sandbox the next time the user commits.
PRIVATE_CACHES = (".cache", ".npm")


@dataclass(frozen=True)
class Choice:
    """The sandbox one command gets: the backend, whether it confines, and why (one line, for people)."""

    backend: Sandbox
    mode: str  # the effective config mode: auto, on or off
    reason: str

    @property
    def active(self) -> bool:
        return not isinstance(self.backend, NoSandbox)

    def to_dict(self) -> dict[str, object]:
        return {"backend": self.backend.name, "mode": self.mode, "active": self.active, "reason": self.reason}


def _repo_trusted(cfg_path: Path | None) -> bool:
    from daintree_tui.core.hooks import is_trusted  # function-level: hooks imports this module

    return cfg_path is not None and is_trusted(cfg_path)


def effective_mode(cfg: Config, agent: str | None = None, role: str | None = None) -> tuple[str, str]:
    """The mode that applies (role over agent over top level) and the key it came from.

    A repository's `.daintree.toml` is data until trusted: it may turn the sandbox on, never off.
    """
    levels: list[tuple[str, str | None]] = []
    if role is not None and role in cfg.roles:
        levels.append((f"roles.{role}.sandbox", cfg.roles[role].sandbox))
    if agent is not None and agent in cfg.agents:
        levels.append((f"agents.{agent}.sandbox", cfg.agents[agent].sandbox))
    levels.append(("sandbox.mode", cfg.sandbox_mode if "sandbox.mode" in cfg.sandbox_repo_keys
                   or cfg.sandbox_mode != "auto" else None))
    for key, value in levels:
        if value is None:
            continue
        if value == "off" and key in cfg.sandbox_repo_keys and not _repo_trusted(cfg.repo_config_path):
            warn(f"config: {key} = \"off\" in .daintree.toml ignored: the repo config is not trusted "
                 "(run `daintree trust`)")
            continue
        return value, key
    return "auto", "default"


def writable_paths(cfg: Config, extra: Sequence[str] = ()) -> tuple[Path, ...]:
    """The caller's extra folders (an agent's own state) and `sandbox.writable` (the latter only from a trusted
    repo config when the repo set it)."""
    configured = list(cfg.sandbox_writable)
    if configured and "sandbox.writable" in cfg.sandbox_repo_keys and not _repo_trusted(cfg.repo_config_path):
        warn("config: sandbox.writable in .daintree.toml ignored: the repo config is not trusted "
             "(run `daintree trust`)")
        configured = []
    out: dict[Path, None] = {}
    for raw in (*extra, *configured):
        path = Path(raw).expanduser()
        if raw.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)  # a folder the user named: bind it even if new
        out[path] = None
    return tuple(out)


# Set while a request from a sandboxed session's inbox is applied: whatever it starts (a session, a bake-off, a
# `worktree run`, a hook) must be confined too, or a sandboxed lead escapes by delegating to an agent or a role
# that the user runs unsandboxed.
_SANDBOXED_CALLER: ContextVar[str | None] = ContextVar("daintree_sandboxed_caller", default=None)


@contextlib.contextmanager
def on_behalf_of_sandboxed(worktree: str) -> Iterator[None]:
    """Within the block, `choose` refuses (fails closed) every command that would run unconfined."""
    token = _SANDBOXED_CALLER.set(worktree)
    try:
        yield
    finally:
        _SANDBOXED_CALLER.reset(token)


def sandboxed_caller() -> str | None:
    """The worktree of the sandboxed session whose inbox request is being applied, if any (on_behalf_of_sandboxed)."""
    return _SANDBOXED_CALLER.get()


def choose(cfg: Config, agent: str | None = None, role: str | None = None,
           backend: Sandbox | None = None) -> Choice:
    """The sandbox for a command, by config: `off` never confines, `on` fails closed, `auto` confines where the
    backend works and says so plainly where it does not.

    Raises:
        OperationError: mode `on` and the backend cannot work here (one line naming why).
    """
    mode, key = effective_mode(cfg, agent, role)
    caller = _SANDBOXED_CALLER.get()
    if mode == "off":
        if caller is not None:
            raise OperationError(f"refused: {caller} runs in a sandbox and may not start what runs without one "
                                 f"({key} is \"off\")")
        return Choice(NoSandbox(f"not sandboxed: {key} is \"off\""), mode, f"off ({key})")
    sandbox = backend if backend is not None else BwrapSandbox()
    ok, why = sandbox.available()
    if ok:
        return Choice(sandbox, mode, f"sandboxed: {why}")
    if mode == "on" or caller is not None:
        raise OperationError(f"sandbox is {'on (' + key + ')' if mode == 'on' else 'required'} but cannot work "
                             f"here: {why}")
    return Choice(NoSandbox(f"not sandboxed: {why}"), mode, f"not sandboxed: {why}")


def worktree_role(project: Project, name: str) -> str | None:
    """The role a worktree's commands run under: its task's, else its session's agent's, else `default_role`.

    The one rule for roles: services.policy.role_of uses it too (it lives in core because hooks and `run` need
    it to pick the sandbox mode, and core cannot import sessions or services).
    """
    cfg = project.config
    entry = find(Index(project).load(), name)
    if entry is not None and entry.task_id is not None:
        tasks = TaskService(project)
        task = tasks.find(entry.task_id)
        role = tasks.role(task) if task is not None else None
        if role is not None:
            return role
    record = read_own_state(project, project.state_dir / ".sessions" / f"{name}.json", "session record")
    if isinstance(record, dict) and isinstance(record.get("role"), str):
        return str(record["role"])  # the role its session was started with
    agent = record.get("agent") if isinstance(record, dict) else None
    if isinstance(agent, str) and agent in cfg.agents and cfg.agents[agent].role:
        return cfg.agents[agent].role
    return cfg.default_role


def ssh_control_dir() -> Path:
    """Where `daintree --host` keeps its ssh master sockets (services.remote creates it): DAINTREE_SSH_CONTROL_DIR,
    else $XDG_RUNTIME_DIR/daintree-ssh, else $TMPDIR/daintree-ssh-<uid>. Defined here because the sandbox must
    hide it: a live master runs any command on its host, this machine included, with no key asked."""
    override = os.environ.get(SSH_CONTROL_DIR_ENV)
    if override:
        return Path(override)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "daintree-ssh"
    return Path(tempfile.gettempdir()) / f"daintree-ssh-{os.getuid()}"


def _escape_hatches(project_root: Path, worktree: Path) -> list[Path]:
    """Folders of sockets that run commands outside the sandbox and that the rebuilt /run and /tmp may not
    cover: tmux's (TMUX_TMPDIR) and our ssh masters'. Never one that holds the worktree or the repository."""
    candidates = [ssh_control_dir()]
    tmux_dir = os.environ.get("TMUX_TMPDIR")
    if tmux_dir:
        candidates.append(Path(tmux_dir) / f"tmux-{os.getuid()}")
    return [p for p in candidates if not _under_tmp(p) and not project_root.is_relative_to(p)
            and not worktree.is_relative_to(p)]


# The user's credentials: an agent confined to its worktree could still read these (the filesystem stays
# readable) and, with the network on, push or ssh as the user, a role without `push` included. Hidden by default;
# a folder named in `sandbox.writable` is the user's explicit choice and stays (writable) instead.
CREDENTIAL_DIRS = (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".config/gh", ".config/hub", ".docker",
                   ".kube", ".password-store")
CREDENTIAL_FILES = (".git-credentials", ".netrc", ".pgpass", ".npmrc", ".pypirc", ".config/git/credentials",
                    # The X server's cookie: with the network shared, its abstract socket (@/tmp/.X11-unix/X0)
                    # stays reachable, and a client holding the cookie types into the user's terminal windows.
                    ".Xauthority", ".ICEauthority")


def _credentials(project_root: Path, worktree: Path, writable: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Credential folders and files to hide, and the folder of an ssh-agent socket that /tmp and /run do not
    already cover (e.g. ~/.1password/agent.sock); never one that holds the repository or a writable folder."""
    home = Path.home()
    kept = {Path(p) for p in writable}
    dirs = [home / d for d in CREDENTIAL_DIRS]
    agent = os.environ.get("SSH_AUTH_SOCK")
    if agent:
        folder = Path(agent).parent
        if not _under_tmp(folder) and folder != Path("/run") and Path("/run") not in folder.parents \
                and folder not in (home, Path("/")):
            dirs.append(folder)
    safe = [d for d in dirs if d not in kept and not project_root.is_relative_to(d) and not worktree.is_relative_to(d)
            and not any(k.is_relative_to(d) for k in kept)]
    files = [home / f for f in CREDENTIAL_FILES if home / f not in kept]
    xauthority = os.environ.get("XAUTHORITY")
    if xauthority and Path(xauthority).is_absolute() and Path(xauthority) not in kept:
        files.append(Path(xauthority))  # wherever it is: under /tmp it may be bound back with the repository
    return safe, files


def secrets_dir() -> Path:
    """daintree's own secrets (the token of `daintree mcp --http`), 0700 in the user's data dir. Created before
    every sandbox starts, so that it is always hidden there, also when a secret is written into it later."""
    path = user_data_dir() / "secrets"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


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
    hidden = _escape_hatches(project.root, worktree)
    secret_dirs, secret_files = _credentials(project.root, worktree, writable)
    # Every session's terminal log holds what was typed and shown there (a key pasted into a shell session): an
    # agent reads none of them, its own included. Made first, so that one a later session creates is hidden too.
    hidden += [*secret_dirs, secrets_dir(), private_dir(project.logs_dir), private_dir(project.locks_dir)]
    # The state lock is a file anyone who can read it can flock: an agent that held it stopped every state
    # operation outside (each waited its 60 s, then failed). Inside it is /dev/null, whose lock nobody takes.
    secret_files.append(project.state_dir / ".lock")
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


OWN_SOURCE = Path(__file__).resolve().parents[1]
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
    return tuple(dict.fromkeys(p for p in candidates if p.is_absolute() and _under_tmp(p) and p.is_dir()))


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
                 cwd: Path | None = None, background: bool = False) -> list[str]:
    """Hooks and `worktree run`: `argv` confined to the worktree per config (role of the worktree applies).

    Adds the inbox hint to `env` when sandboxed. Raises OperationError when the mode is `on` and the sandbox
    cannot work here.
    """
    choice = choose(project.config, role=worktree_role(project, entry.name))
    if not choice.active:
        return list(argv)
    spec = spec_for(project, entry, writable=writable_paths(project.config), cwd=cwd, background=background)
    spec = replace(spec, readable=program_dirs(argv, env))
    env[INBOX_ENV] = str(INBOX_MOUNT)
    return choice.backend.wrap(argv, spec)
