"""The mount table of one sandbox as bubblewrap arguments: what is read-only, hidden, writable and where.

- `/` is rebuilt from its top-level entries (read-only) rather than one `--ro-bind / /`, so that the mount
  points we add (the inbox at /run/daintree/inbox) can be created, and so that /run is rebuilt without the
  sockets that run commands outside the sandbox (the user's systemd and D-Bus session in /run/user, docker,
  podman, containerd): connecting to a unix socket works on a read-only mount, and so does writing a FIFO: every
  other socket and FIFO left in /run is left out inside (a network namespace covers no Unix socket).
- Kernel knobs that check only the uid (/proc/sys, /proc/sysrq-trigger, ...: KERNEL_READ_ONLY) are bound
  read-only over the fresh /proc: as root, `kernel.core_pattern = |script` ran the agent's script as root
  outside (tests/test_sandbox_kernel.py).
- /tmp is the worktree's TMPDIR, which also hides tmux's sockets (/tmp/tmux-UID): a process that reaches our
  tmux server can open a window outside the sandbox.
- What git reads to find its repository and config is bound read-only, and the shared object store and refs are
  read-only behind the agent's own quarantine (`git_guards`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from daintree_tui.core.log import suppressed
from daintree_tui.core.mounts import INBOX_MOUNT, PROXY_MOUNT
from daintree_tui.core.sandbox.git_guards import agent_git_mounts, git_pointer_mounts
from daintree_tui.core.sandbox.spec import PRIVATE_CACHES, SandboxSpec, under_tmp

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


def root_mounts(spec: SandboxSpec) -> list[str]:
    """The host's / read-only, entry by entry; /run without the sockets that escape; /tmp is TMPDIR."""
    args: list[str] = []
    for name in sorted(os.listdir("/")):
        path = Path("/") / name
        if name in _TOP_SKIPPED:
            continue  # /proc, /dev and /run are made below; /tmp by _tmp_mounts
        args += _mirrored(path)
    args += ["--dev", "/dev", "--proc", "/proc", *_kernel_mounts(), "--tmpfs", "/run"]
    run = Path("/run")
    if run.is_dir():
        for name in sorted(os.listdir(run)):
            if name in _RUN_HIDDEN or name == "daintree":
                continue
            args += _without_endpoints(run / name)
        for kept in _RUN_KEPT:
            args += _without_endpoints(run / kept)
    args += _tmp_mounts(spec)
    return args


def _mirrored(path: Path) -> list[str]:
    """`path` as it is outside, read-only: a link as the same link, anything else bound.

    Another process may remove the entry between the listing and bwrap's start (CI measured it: a job's folder in
    /run went away and the commit failed with "Can't find source path"): a link that is gone is left out, and a
    bind is `--ro-bind-try`, which bwrap skips when its source no longer exists.
    """
    if path.is_symlink():
        with suppressed(OSError):  # gone since the listing
            return ["--symlink", os.readlink(path), str(path)]
        return []
    return ["--ro-bind-try", str(path), str(path)]


def _without_endpoints(path: Path) -> list[str]:
    """`path` of /run as it is outside, read-only, but for its Unix sockets and FIFOs, which are left out: a
    read-only mount stops neither connect(2) nor a FIFO opened for writing, and the network namespace of an
    allow-list (or of `network = false`) covers no Unix socket. A daemon's socket there was a direct way out of the
    allow-list, and one that trusts its peer's uid (MySQL's root by `unix_socket`) or a supervisor's root-only
    control pipe took a root agent for root.

    A folder with no endpoint below it is bound whole; one with an endpoint is rebuilt in the sandbox's own /run
    tmpfs, child by child. Every step holds when another process changes /run before bwrap starts (CI's parallel
    jobs do): a folder made in the tmpfs always can be, and a bind is `--ro-bind-try`. Covering each endpoint with
    /dev/null instead failed the whole start when it went away first ("Can't create file at /run/...").
    """
    if path.is_symlink() or not path.is_dir():
        with suppressed(OSError):
            if _is_endpoint(path.lstat().st_mode):
                return []
        return _mirrored(path)
    if not _holds_endpoint(path):
        return _mirrored(path)
    try:
        mode, names = stat.S_IMODE(path.lstat().st_mode), sorted(os.listdir(path))
    except OSError:
        return []  # gone since the listing
    args = ["--perms", f"{mode:04o}", "--dir", str(path)]
    for name in names:
        args += _without_endpoints(path / name)
    return args


def _is_endpoint(mode: int) -> bool:
    return stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode)


def _holds_endpoint(folder: Path) -> bool:
    for parent, dirs, files in os.walk(folder):  # links are not followed (they resolve inside as they do here)
        for name in (*files, *dirs):
            with suppressed(OSError):
                if _is_endpoint((Path(parent) / name).lstat().st_mode):
                    return True
    return False


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


def _tmp_mounts(spec: SandboxSpec) -> list[str]:
    """/tmp is the worktree's TMPDIR, which also hides tmux's sockets (/tmp/tmux-UID).

    When the repository itself lives under /tmp (throwaway clones, test runs), binding TMPDIR over /tmp would
    hide it, and bwrap would create the mount points of our binds inside the real TMPDIR; there /tmp is an empty
    private tmpfs instead, with the repository bound read-only at its own path (TMPDIR stays writable at its).
    """
    needed = [p for p in (spec.project_root, spec.git_common_dir, spec.worktree.parent, Path.home(),
                          *spec.readable) if p is not None]
    if not any(under_tmp(p) for p in needed):
        return ["--bind", str(spec.tmpdir), "/tmp"]
    args = ["--tmpfs", "/tmp"]
    for path in dict.fromkeys(needed):
        if under_tmp(path) and path.exists():
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


def writable_mounts(spec: SandboxSpec) -> list[str]:
    args = ["--bind", str(spec.worktree), str(spec.worktree),
            "--bind", str(spec.git_admin_dir), str(spec.git_admin_dir),
            *_private_mounts(spec)]
    args += agent_git_mounts(spec)
    args += git_pointer_mounts(spec)
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
    if spec.proxy_socket is not None:  # made by the proxy just before bwrap starts
        args += ["--bind", str(spec.proxy_socket), str(PROXY_MOUNT)]
    return args
