"""What a sandbox hides besides what its mount table leaves out: the folders of sockets that run commands outside
(tmux's, our ssh masters'), the user's credentials, and daintree's own secrets."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from daintree_tui.core.sandbox.spec import under_tmp
from daintree_tui.core.user_dirs import user_data_dir

SSH_CONTROL_DIR_ENV = "DAINTREE_SSH_CONTROL_DIR"


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


def escape_hatches(project_root: Path, worktree: Path) -> list[Path]:
    """Folders of sockets that run commands outside the sandbox and that the rebuilt /run and /tmp may not
    cover: tmux's (TMUX_TMPDIR) and our ssh masters'. Never one that holds the worktree or the repository."""
    candidates = [ssh_control_dir()]
    tmux_dir = os.environ.get("TMUX_TMPDIR")
    if tmux_dir:
        candidates.append(Path(tmux_dir) / f"tmux-{os.getuid()}")
    return [p for p in candidates if not under_tmp(p) and not project_root.is_relative_to(p)
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


def credentials(project_root: Path, worktree: Path, writable: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Credential folders and files to hide, and the folder of an ssh-agent socket that /tmp and /run do not
    already cover (e.g. ~/.1password/agent.sock); never one that holds the repository or a writable folder."""
    home = Path.home()
    kept = {Path(p) for p in writable}
    dirs = [home / d for d in CREDENTIAL_DIRS]
    agent = os.environ.get("SSH_AUTH_SOCK")
    if agent:
        folder = Path(agent).parent
        if not under_tmp(folder) and folder != Path("/run") and Path("/run") not in folder.parents \
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


USER_LOCKS = ("trust.lock", "demos.lock")  # core/trust_record.py, demo/registry.py


def user_locks() -> list[Path]:
    """daintree's locks in the user's data dir, each made (empty, 0600) if missing: the data dir is visible inside
    the sandbox (read-only), and a lock anyone can read anyone can flock. An agent holding `trust.lock` made every
    `daintree trust` wait its 60 s and fail. Inside they are /dev/null; made first, so that none appears there
    later, when the outside makes it."""
    folder = user_data_dir()
    locks = []
    for name in USER_LOCKS:
        path = folder / name
        if path not in _MADE:  # once a process: every worktree's git look builds a spec
            try:
                folder.mkdir(parents=True, exist_ok=True)
                os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
            except OSError:
                continue  # a link or a read-only data dir: nothing of ours to lock there either
            _MADE.add(path)
        locks.append(path)
    return locks


_MADE: set[Path] = set()
