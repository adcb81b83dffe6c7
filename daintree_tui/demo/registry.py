"""Demo repositories we created: a record of them, stopping their agents, and removing them.

Each demo repository gets a marker, `.git/daintree-demo.json`, holding a random token, and the user's data
directory keeps the list of demos (path and token). `daintree demo --clean` deletes a directory only when both
agree: the path is in the user's list (which only we write) and the directory still holds our marker with the
same token. A path that lost its marker, or now belongs to something else, is refused and forgotten, never
deleted. While a dashboard shows a demo it holds a shared lock on the marker, so `--clean` in another terminal
skips that demo instead of pulling the repository from under it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from daintree_tui.core.config import user_data_dir
from daintree_tui.core.index import Index
from daintree_tui.core.project import Project
from daintree_tui.core.store import StateLock, create_new, read_json, write_json

MARKER = "daintree-demo.json"


def registry_path() -> Path:
    return user_data_dir() / "demos.json"


def marker_path(root: Path) -> Path:
    return root / ".git" / MARKER


def _registry_lock() -> StateLock:
    return StateLock(user_data_dir() / "demos.lock")


def _read_registry() -> list[dict[str, str]]:
    data, _ = read_json(registry_path(), "demo list")
    demos = data.get("demos") if isinstance(data, dict) else None
    if not isinstance(demos, list):
        return []
    return [d for d in demos if isinstance(d, dict) and isinstance(d.get("path"), str)
            and isinstance(d.get("token"), str)]


def mark_demo(root: Path) -> None:
    """Mark `root` (a demo repository just created) as ours and add it to the user's list of demos."""
    root = root.resolve()
    token = secrets.token_hex(16)
    marker = marker_path(root)
    create_new(marker, json.dumps({"token": token, "created_at": time.time()}))  # never through a link
    user_data_dir().mkdir(parents=True, exist_ok=True)
    with _registry_lock().hold():
        demos = [d for d in _read_registry() if d["path"] != str(root)]
        demos.append({"path": str(root), "token": token, "created_at": str(time.time())})
        write_json(registry_path(), {"demos": demos})


def _marker_token(root: Path) -> str | None:
    """The token in `root`'s marker, or None when there is no marker of ours (missing, a link, unreadable)."""
    marker = marker_path(root)
    try:
        if not stat.S_ISDIR(os.lstat(root).st_mode) or not stat.S_ISREG(os.lstat(marker).st_mode):
            return None
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    token = data.get("token") if isinstance(data, dict) else None
    return token if isinstance(token, str) else None


def is_demo(root: Path) -> bool:
    """Whether `root` is a demo repository we created and still have on our list."""
    root = root.resolve()
    token = _marker_token(root)
    return token is not None and any(d["path"] == str(root) and d["token"] == token for d in _read_registry())


@contextlib.contextmanager
def showing(root: Path) -> Iterator[None]:
    """Hold a shared lock on the demo's marker while a dashboard shows it (`clean` skips a demo in use)."""
    try:
        fd = os.open(marker_path(root), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def _in_use(root: Path) -> bool:
    try:
        fd = os.open(marker_path(root), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def stop_demo_sessions(root: Path) -> list[str]:
    """Stop the agents of demo repository `root` (and with them its tmux server); nothing else.

    Only sessions of the demo's own worktrees that the demo's session records know are stopped, so a tmux
    server shared through DAINTREE_TMUX_SOCKET never loses another repository's sessions. Returns the names.
    """
    from daintree_tui.sessions.host import tmux_available
    from daintree_tui.sessions.manager import SessionManager

    if not tmux_available():
        return []  # without tmux the demo's sessions lived in the dashboard and ended with it
    project = Project.discover(root)
    manager = SessionManager(project)
    ours = {e.name for e in Index(project).load() if manager.record(e.name) is not None}
    stopped = []
    for state in manager.host.list():
        if state.worktree in ours and manager.stop(state.worktree):
            stopped.append(state.worktree)
    return stopped


@dataclass
class CleanResult:
    removed: list[str] = field(default_factory=list)
    in_use: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path, why)

    def to_dict(self) -> dict[str, object]:
        return {"removed": self.removed, "in_use": self.in_use,
                "refused": [{"path": p, "reason": r} for p, r in self.refused]}


def _refusal(root: Path, token: str) -> str | None:
    """Why `root` must not be deleted, or None when it is the demo we recorded."""
    if root != root.resolve() or not root.is_absolute():
        return "not an absolute, link-free path"
    home = Path.home().resolve()
    if root == Path(root.anchor) or home.is_relative_to(root):
        return "it holds your home directory"
    marker_token = _marker_token(root)
    if marker_token is None:
        return f"no demo marker (.git/{MARKER}) of ours in it"
    if marker_token != token:
        return "its demo marker is not the one we wrote"
    return None


def clean_demos() -> CleanResult:
    """Stop the agents of every demo we created and delete its repository; skip demos a dashboard shows."""
    result = CleanResult()
    with _registry_lock().hold():
        demos = _read_registry()
        keep = []
        for demo in demos:
            root = Path(demo["path"])
            if not os.path.lexists(root):
                continue  # already gone (a temp dir cleaned by the system): forget it
            why = _refusal(root, demo["token"])
            if why is not None:
                result.refused.append((str(root), why))
                continue  # not ours any more: never deleted, and forgotten
            if _in_use(root):
                result.in_use.append(str(root))
                keep.append(demo)
                continue
            stop_demo_sessions(root)
            try:
                shutil.rmtree(root)
            except OSError as exc:
                result.refused.append((str(root), f"cannot delete it: {exc.strerror or exc}"))
                keep.append(demo)
                continue
            result.removed.append(str(root))
        write_json(registry_path(), {"demos": keep})
    return result
