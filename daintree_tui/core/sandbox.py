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
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from daintree_tui.core.config import Config, user_data_dir
from daintree_tui.core.errors import OperationError
from daintree_tui.core.git import last_line
from daintree_tui.core.index import Index, find
from daintree_tui.core.log import warn
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.mounts import INBOX_MOUNT
from daintree_tui.core.project import Project
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
    project_root: Path | None = None  # the primary worktree: readable (read-only) also when it lives in /tmp
    writable: tuple[Path, ...] = ()  # agent state folders, sandbox.writable
    read_only: tuple[Path, ...] = ()  # inside those: what would run code outside the sandbox later (agent hooks)
    # Inside those read-only ones: the data of this session alone (claude's transcripts of its own project), bound
    # writable again, with whatever of `read_only` lies inside read-only again (that project's memory).
    writable_inside: tuple[Path, ...] = ()
    # (this sandbox's own folder, the agent folder it is shown at): what the agent's other runs read from there
    # and run (claude's shell snapshots, sourced before every command) is the sandbox's own, never the user's.
    private_overlays: tuple[tuple[Path, Path], ...] = ()
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

    def wrap(self, argv: Sequence[str], spec: SandboxSpec) -> list[str]:
        """The command line that runs `argv` inside the sandbox described by `spec`."""
        ...


class NoSandbox:
    """No confinement: the command runs as it is (sandbox = "off", or nothing works here)."""

    name = "none"

    def __init__(self, reason: str = "sandbox is off") -> None:
        self.reason = reason

    def available(self) -> tuple[bool, str]:
        return True, self.reason

    def wrap(self, argv: Sequence[str], spec: SandboxSpec) -> list[str]:
        return list(argv)


@functools.cache
def _probe(binary: str) -> tuple[bool, str]:
    """Run the exact confinement we use once, so `auto` knows whether it works (user namespaces may be off)."""
    argv = [binary, *_isolation(True), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bubblewrap cannot start: {exc}"
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return False, f"bubblewrap cannot create a sandbox here: {why}"
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

    def wrap(self, argv: Sequence[str], spec: SandboxSpec) -> list[str]:
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
    git = spec.git_common_dir
    args = ["--bind", str(spec.worktree), str(spec.worktree),
            "--bind", str(spec.git_admin_dir), str(spec.git_admin_dir),
            *_private_mounts(spec)]
    # The object store takes new loose objects; existing packs and objects/info (alternates) stay read-only.
    objects = git / "objects"
    args += ["--bind", str(objects), str(objects)]
    for sub in ("pack", "info"):
        if (objects / sub).is_dir():
            args += ["--ro-bind", str(objects / sub), str(objects / sub)]
    args += _branch_mounts(spec)
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
# `gitdir` (where git thinks the worktree is) stays writable: an agent that deletes its admin dir's files must
# leave something git ignores (no `gitdir`: not a worktree), not a worktree whose HEAD is gone, which `git fsck`
# reports as an error of the whole repository.
GIT_POINTER_FILES = ("commondir", "config.worktree")


def _git_pointer_mounts(spec: SandboxSpec) -> list[str]:
    args: list[str] = []
    for path in (spec.worktree / ".git", *(spec.git_admin_dir / name for name in GIT_POINTER_FILES)):
        if path.is_file() and not path.is_symlink():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _branch_mounts(spec: SandboxSpec) -> list[str]:
    """The agent's own branch ref writable, every other ref read-only.

    git updates a ref by creating `<ref>.lock` beside it and renaming it over the ref, so binding the ref FILE
    alone fails (rename onto a mount point is EBUSY). The ref's directory (refs/heads/wt/) is therefore bound
    writable, and every other entry in it (other agents' branches, made loose first by `prepare`) is bound
    read-only on top: writing one is EROFS, renaming over or deleting one is EBUSY. The reflog is appended in
    place, so its file alone is bound. Everything else under refs/ (main included) stays read-only.
    """
    ref_dir = spec.ref_file.parent
    args = ["--bind", str(ref_dir), str(ref_dir)]
    for entry in sorted(ref_dir.iterdir()):
        if entry.name != spec.ref_file.name:
            args += ["--ro-bind", str(entry), str(entry)]
    args += ["--bind", str(spec.reflog_file), str(spec.reflog_file)]
    return args


def prepare(spec: SandboxSpec) -> None:
    """Create what the mount table binds, before the sandbox starts.

    Other branches that live only in packed-refs get a loose file with the same value: otherwise the agent could
    create that loose file itself in the writable ref directory and so move another agent's branch.
    """
    if spec.ref_file.parent == spec.git_common_dir / "refs" / "heads":
        raise OperationError("the sandbox needs a branch_prefix (like the default wt/): with branches directly "
                             "under refs/heads an agent could write main")
    # bwrap follows a symlinked source: a worktree, TMPDIR or inbox swapped for a link (by anything that ran
    # unconfined) would bind its target writable. Every writable source must be what it says it is.
    caches = spec.home_caches
    for path in (spec.worktree, spec.git_admin_dir, spec.tmpdir, spec.tmpdir.parent, spec.ref_file.parent,
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
    spec.ref_file.parent.mkdir(parents=True, exist_ok=True)
    drop_planted_refs(spec.ref_file.parent)
    for sub in ("pack", "info"):  # bound read-only: missing, the agent could make info/alternates (its own objects)
        (spec.git_common_dir / "objects" / sub).mkdir(parents=True, exist_ok=True)
    spec.reflog_file.parent.mkdir(parents=True, exist_ok=True)
    spec.reflog_file.touch(exist_ok=True)
    # Exists (empty) so that it is bound read-only: otherwise the agent could create it in its admin dir.
    (spec.git_admin_dir / "config.worktree").touch(exist_ok=True)
    if spec.inbox is not None:
        for folder in (spec.inbox.parent, spec.inbox):  # 0700: the requests are the agent's, the replies ours
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(folder, 0o700)
    pack_loose_objects(spec.git_common_dir, spec.project_root)
    prefix = "refs/heads/" + str(Path(spec.branch).parent) + "/"
    for ref, value in packed_refs(spec.git_common_dir).items():
        if not ref.startswith(prefix) or ref == f"refs/heads/{spec.branch}":
            continue
        loose = spec.git_common_dir / ref
        if not os.path.lexists(loose) and loose.parent == spec.ref_file.parent:
            # This folder is writable by running sandboxes: a fixed temporary name could be a link an agent left
            # there (to ~/.bashrc), written through; a fresh one (O_EXCL, a random name) cannot.
            fd, tmp = tempfile.mkstemp(prefix=f".{loose.name}.", suffix=".daintree-tmp", dir=loose.parent)
            with os.fdopen(fd, "w") as out:
                out.write(value + "\n")
            os.replace(tmp, loose)


def drop_planted_refs(ref_dir: Path) -> list[str]:
    """Delete (with a warning) what no git writes in the branches' folder, which every running agent can write: a
    link (bwrap cannot bind a dangling one, so every other sandbox's start failed) or a FIFO, socket or device
    (every git that lists the branches, the user's `git branch` and our `git repack`, waited on it forever)."""
    dropped: list[str] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(ref_dir):
            if entry.is_symlink() or not (entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False)):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    dropped.append(entry.name)
    if dropped:
        warn(f"sandbox: removed {', '.join(sorted(dropped))} from {ref_dir}: not a branch (a link, FIFO or socket "
             "a sandboxed agent left there, which stopped other sandboxes from starting or hung git)")
    return dropped


def _has_loose_objects(objects: Path) -> bool:
    try:
        fanout = [e for e in os.scandir(objects) if len(e.name) == 2 and e.is_dir(follow_symlinks=False)]
    except OSError:
        return False
    return any(next(os.scandir(e.path), None) is not None for e in fanout)


def pack_loose_objects(common_dir: Path, root: Path | None = None) -> None:
    """Move loose objects into a pack, which the sandbox mounts read-only.

    git must be able to add objects, so the object store is writable; but `rm -rf` inside it would delete the
    loose objects that existing commits (main's included) are made of. Packing them first leaves nothing of
    the repository's history deletable. Objects that others write while the session runs are loose until the
    next start packs them: see the README's sandbox limits.
    """
    if not _has_loose_objects(common_dir / "objects"):
        return
    drop_forged_loose_objects(common_dir, root)
    # repack walks every worktree's HEAD: while another daintree (a second queue runner, the dashboard) is in the
    # middle of `git worktree add`, that HEAD or its commondir is not written yet ("bad object worktrees/x/HEAD").
    # The add takes a moment, so a failure is tried again before the session is refused.
    for delay in (0.2, 0.5, 1.0, None):
        proc = subprocess.run(["git", "--git-dir", str(common_dir), "repack", "-d", "-q", "--no-write-bitmap-index"],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode == 0:
            return
        if delay is not None:
            time.sleep(delay)
    raise OperationError(f"sandbox: could not pack loose objects: {last_line(proc.stderr) or proc.returncode}")


FORGERY_CHECK_LIMIT = 256 * 1024 * 1024  # bytes of loose objects checked per start (a larger backlog: the rest)


def drop_forged_loose_objects(common_dir: Path, root: Path | None = None) -> list[str]:
    """Delete (with a warning) every loose object whose content does not hash to its name; returns their ids.

    The object store is writable inside a sandbox, and git never rewrites an object it finds: an agent that plants
    `objects/c6/a8fd...` holding its own content, named after the hash of a file the user has changed but not yet
    committed (the primary's working tree is readable), has the user's next `git add` keep the agent's content.
    Packing such an object would make it permanent; so every loose one is checked first, up to a budget of bytes.
    Those named after the uncommitted files of the primary `root` are checked first, whatever the budget: an agent
    that wrote enough genuine objects to spend it had its forged one, later in name order, left unchecked.
    """
    import hashlib

    objects = common_dir / "objects"
    proc = subprocess.run(["git", "--git-dir", str(common_dir), "rev-parse", "--show-object-format"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    algorithm = proc.stdout.strip() or "sha1"
    if algorithm not in ("sha1", "sha256"):
        return []
    forged: list[str] = []

    def check(oid: str, limit: int, exact: bool = False) -> int:
        loose = objects / oid[:2] / oid[2:]
        matches, size = _loose_object_matches(loose, oid, algorithm, limit, exact)
        if matches is False:
            with contextlib.suppress(OSError):
                loose.unlink()
            forged.append(oid)
        return size

    for oid, size in _uncommitted_blobs(root, algorithm).items() if root is not None else ():
        check(oid, size, exact=True)  # its genuine content is the user's file: anything longer is not
    budget = FORGERY_CHECK_LIMIT
    name_length = hashlib.new(algorithm).digest_size * 2 - 2
    for fanout in sorted(objects.iterdir()):
        if len(fanout.name) != 2 or fanout.is_symlink() or not fanout.is_dir():
            continue
        for loose in sorted(fanout.iterdir()):
            if budget <= 0:
                break
            if len(loose.name) != name_length or not all(c in "0123456789abcdef" for c in loose.name):
                continue  # git's own temporary files (tmp_obj_*): an object being written right now
            budget -= check(fanout.name + loose.name, FORGERY_CHECK_LIMIT)
    if forged:
        warn(f"sandbox: deleted {len(forged)} loose object(s) whose content is not what their name says "
             f"({', '.join(forged[:3])}{', ...' if len(forged) > 3 else ''}): planted by a sandboxed agent to "
             "stand for content you had not committed yet; `git fsck` checks the rest")
    return forged


def _loose_object_matches(loose: Path, oid: str, algorithm: str, limit: int,
                          exact: bool) -> tuple[bool | None, int]:
    """Whether the loose object file's content hashes to `oid` (None: absent, unreadable or over `limit` bytes
    inflated, not ours to judge: git reports what it must), and the bytes read. `exact`: the genuine object is
    `limit` bytes, so more is not it."""
    import hashlib
    import zlib

    digest = hashlib.new(algorithm)
    try:
        data = read_state_file(loose)
    except OSError:
        return None, 0
    try:
        inflate = zlib.decompressobj()
        chunk, expanded = inflate.decompress(data, 1 << 20), 0
        while chunk:  # in steps: a small file may inflate to gigabytes
            digest.update(chunk)
            expanded += len(chunk)
            if expanded > limit:
                return (False if exact else None), len(data)
            chunk = inflate.decompress(inflate.unconsumed_tail, 1 << 20)
    except zlib.error:
        return None, len(data)
    return digest.hexdigest() == oid, len(data)


UNCOMMITTED_CHECK_FILES = 2000  # uncommitted files of the primary whose would-be objects are checked first
UNCOMMITTED_CHECK_BYTES = 256 * 1024 * 1024


def _uncommitted_blobs(root: Path, algorithm: str) -> dict[str, int]:
    """The object ids (and their inflated sizes) that the primary's changed and untracked files would get from a
    `git add` (no filters: a filtered file's object is not its bytes), a bounded number of regular files."""
    import hashlib

    proc = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "-m", "-o", "--exclude-standard"],
                          capture_output=True, stdin=subprocess.DEVNULL)
    out: dict[str, int] = {}
    total = 0
    for name in list(dict.fromkeys(proc.stdout.split(b"\0")))[:UNCOMMITTED_CHECK_FILES]:
        if not name:
            continue
        try:
            body = read_state_file(root / os.fsdecode(name))
        except OSError:
            continue  # gone, a link, not a regular file, or larger than a state file
        total += len(body)
        if total > UNCOMMITTED_CHECK_BYTES:
            break
        header = b"blob %d\0" % len(body)
        out[hashlib.new(algorithm, header + body).hexdigest()] = len(header) + len(body)
    return out


def packed_refs(common_dir: Path) -> dict[str, str]:
    refs: dict[str, str] = {}
    try:
        lines = (common_dir / "packed-refs").read_text().splitlines()
    except OSError:
        return refs
    for line in lines:
        if line.startswith(("#", "^")) or " " not in line:
            continue
        value, ref = line.split(" ", 1)
        refs[ref.strip()] = value.strip()
    return refs


def git_admin_dir(common_dir: Path, worktree: Path) -> Path:
    """The worktree's `.git/worktrees/<id>/`, found from the common dir's side (never from the worktree's own
    `.git` file, which the agent can rewrite to point at the common dir)."""
    admin_root = common_dir / "worktrees"
    want = str(worktree / ".git")
    candidates = [admin_root / worktree.name]
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
        branch=entry.branch, tmpdir=project.tmpdir_for(entry.name), project_root=project.root,
        writable=tuple(writable), read_only=tuple(read_only), home_caches=project.sandbox_home_for(entry.name),
        inbox=inbox_dir(project, entry.name),
        network=project.config.sandbox_network if network is None else network, interactive=interactive,
        cwd=cwd, hidden=tuple(hidden), hidden_files=tuple(secret_files), background=background,
        private_roots=(project.tmp_root, project.sandbox_homes, project.state_dir / ".inbox",
                       project.state_dir / ".run"),
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
