"""The session inbox from inside a sandbox: how a sandboxed agent's own `daintree` calls write their requests and
wait for the outside's replies.

Inside a sandbox the state (`.worktrees/`, `.tasks/`, refs other than the agent's own branch) is read-only. The
`daintree` CLI there writes its request as a JSON file into the inbox mounted at /run/daintree/inbox, found by
the mount, never by an environment variable; the outside applies it (services/inbox.py) and writes a reply next
to it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from daintree_tui.core.log import suppressed
from daintree_tui.core.mounts import INBOX_MOUNT
from daintree_tui.core.project import Project


def mounted_inbox() -> Path | None:
    """The inbox of the sandbox this process runs in, found by the mount (never by an environment variable)."""
    return INBOX_MOUNT if INBOX_MOUNT.is_dir() and os.access(INBOX_MOUNT, os.W_OK) else None


def inbox_owner(project: Project) -> str | None:
    """Inside a sandbox: the worktree whose inbox is mounted here, found by the mount's identity (a bind mount is
    the same directory, same device and inode, as its source under `.worktrees/.inbox/`, readable here)."""
    try:
        mounted = os.stat(INBOX_MOUNT)
        owners = list(os.scandir(project.state_dir / ".inbox"))
    except OSError:
        return None
    for owner in owners:
        try:
            st = owner.stat(follow_symlinks=False)
        except OSError:
            continue
        if not owner.name.startswith(".") and (st.st_dev, st.st_ino) == (mounted.st_dev, mounted.st_ino):
            return owner.name
    return None


def withdraw(inbox: Path, request_id: str) -> bool:
    """Take back a request nobody has applied yet (False: it is gone, being applied or answered)."""
    try:
        (inbox / f"req-{request_id}.json").unlink()
    except OSError:
        return False
    return True


def submit(inbox: Path, kind: str, payload: dict[str, Any]) -> str:
    """Write one request atomically; returns its id."""
    request_id = os.urandom(16).hex()  # as random as uuid4, without importing uuid
    body = json.dumps({"id": request_id, "kind": kind, "payload": payload, "created_at": time.time()})
    tmp = inbox / f".tmp-{request_id}"
    tmp.write_text(body)
    os.replace(tmp, inbox / f"req-{request_id}.json")
    return request_id


def wait_reply(inbox: Path, request_id: str, timeout: float) -> dict[str, Any] | None:
    """The reply to a request, when the outside answers within `timeout` seconds."""
    path = inbox / f"reply-{request_id}.json"
    deadline = time.monotonic() + timeout
    while True:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict):
            with suppressed(OSError):
                path.unlink()
            return data
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)
