"""The ways to confine a command: bubblewrap on Linux, or none. A macOS (sandbox-exec) or container backend would
implement the same `Sandbox` protocol (`spec`).

Why these bwrap options, and what each one closes (tested as an attacker in tests/test_sandbox.py):
- `--unshare-user --cap-drop ALL`: we often run as root (CI). bwrap run by root keeps every capability inside,
  and root with CAP_SYS_ADMIN simply remounts `/` read-write (verified). A user namespace plus dropping all
  capabilities leaves the same uid but no power to mount, unmount, or override file permissions.
- `--unshare-pid` and a fresh `/proc`: with the host's pids visible, `/proc/<pid>/root` of any process of the
  same user is the host's writable filesystem, and its `/proc/<pid>/mem` is code injection.
- `--new-session` (no controlling terminal) unless the command runs in a pane: TIOCSTI cannot type into the
  caller's terminal. In a pane, bwrap ignores the terminal's Ctrl-C and Ctrl-\\ and the command has them (see
  `_TERMINAL_SIGNALS`).
- The environment is inherited, never passed on bwrap's argv (no `--setenv`): argv is visible in `ps`.
The mount table itself is `mount_table`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Sequence

from daintree_tui.core.sandbox.git_guards import prepare
from daintree_tui.core.sandbox.mount_table import root_mounts, writable_mounts
from daintree_tui.core.sandbox.spec import SandboxSpec
from daintree_tui.core.sandbox_probe import probe_failure
from daintree_tui.core.spawn import safe_path


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
# One probe at a time: the facts of many worktrees are read on a pool of threads, and each asked at once before
# any had its answer (8 probes of ~7 ms of CPU each for one `daintree worktree list`, where one is enough).
_PROBING = threading.Lock()


def _probe(binary: str) -> tuple[bool, str]:
    """Run the probe, so `auto` knows whether bubblewrap works (user namespaces may be off or used up). A pass is
    remembered for the process; a failure is not: namespaces used up by other jobs come back, and a dashboard that
    started in that moment ran every later session unconfined."""
    if binary not in _WORKED:
        with _PROBING:
            if binary not in _WORKED:
                why = probe_failure(probe_argv(binary))
                if why is not None:
                    return False, why if why.startswith("bubblewrap cannot start") else \
                        f"bubblewrap cannot create a sandbox here: {why}"
                _WORKED.add(binary)
    return True, f"bubblewrap ({binary}) with a user namespace"


# What a terminal sends its foreground process group, a pane's: bubblewrap's own process is in it beside the agent,
# and a Ctrl-C ended it and (`--die-with-parent`) the whole sandbox, where the same agent outside handles the signal
# (aider stops its reply and waits; a script catches KeyboardInterrupt). In a pane bwrap runs with these ignored and
# the command with them back at their defaults, as outside. (The sandbox's own pid 1 ignores them anyway.)
_TERMINAL_SIGNALS = "INT,QUIT"
_SIGNAL_PREFIXES: dict[str, tuple[list[str], list[str]]] = {}
_SYSTEM_ENV = ("/usr/bin/env", "/bin/env")


def _terminal_signal_prefixes() -> tuple[list[str], list[str]]:
    """The argv before bwrap (it ignores the terminal's signals) and before the command inside (they are back at
    their defaults): GNU env's `--ignore-signal` and `--default-signal` (coreutils 8.31). Nothing where this env
    has neither (busybox, older coreutils): there Ctrl-C ends a sandboxed session as before. Asked once a process.
    The outer one runs outside the sandbox: it is the system's, never one found on a PATH that may name a folder
    of the worktree (`.`, `node_modules/.bin`), where the agent could have written an `env`."""
    env = next((path for path in _SYSTEM_ENV if os.access(path, os.X_OK)), "")
    if env not in _SIGNAL_PREFIXES:
        with _PROBING:
            if env not in _SIGNAL_PREFIXES:
                outer = [env, f"--ignore-signal={_TERMINAL_SIGNALS}"]
                inner = [env, f"--default-signal={_TERMINAL_SIGNALS}"]
                try:
                    works = bool(env) and subprocess.run([*outer, *inner, env, "--version"], stdin=subprocess.DEVNULL,
                                                         capture_output=True, timeout=5).returncode == 0
                except (OSError, subprocess.TimeoutExpired):
                    return [], []  # no answer now (a loaded machine, no fork): asked again next time
                _SIGNAL_PREFIXES[env] = (outer, inner) if works else ([], [])
    return _SIGNAL_PREFIXES[env]


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
        # Never from a relative PATH entry: it is searched in the current folder, maybe an agent's worktree.
        self.binary = binary or shutil.which("bwrap", path=safe_path()) or ""

    def available(self) -> tuple[bool, str]:
        if not self.binary:
            return False, "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
        return _probe(self.binary)

    def wrap(self, argv: Sequence[str], spec: SandboxSpec, prepared: bool = False) -> list[str]:
        if not prepared:
            prepare(spec)
        # env reads a first word with `=` as a variable to set (`--` does not stop it): such a program keeps the
        # old way.
        outer, inner = _terminal_signal_prefixes() if spec.interactive and argv and "=" not in argv[0] \
            and "=" not in self.binary else ([], [])
        args = [*outer, self.binary, *_isolation(spec.network, spec.background)]
        if not spec.interactive:
            args.append("--new-session")  # no controlling terminal: TIOCSTI cannot type into the caller's
        args += root_mounts(spec)
        args += writable_mounts(spec)
        for path in spec.hidden:
            if path.is_dir():
                args += ["--tmpfs", str(path)]
        for path in spec.hidden_files:
            if path.is_file():
                args += ["--ro-bind", "/dev/null", str(path)]
        args += ["--remount-ro", "/run"]
        args += ["--chdir", str(spec.cwd or spec.worktree), "--", *inner, *argv]
        return args
