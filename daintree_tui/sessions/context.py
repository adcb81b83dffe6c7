"""Context injection: the task, files or the clipboard, as one text to paste into an agent's session."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from daintree_tui.core import fs_safe
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.project import Project
from daintree_tui.core.tasks import TaskService

FILE_CAP = 64 * 1024


def fenced_file(display: str, data: bytes, cap: int = FILE_CAP, size: int | None = None) -> str:
    """`data` (the first bytes of a file of `size` bytes, all of it by default) fenced, at most `cap` bytes."""
    size = len(data) if size is None else size
    text = data[:cap].decode("utf-8", errors="replace")
    note = f"\n[truncated: {size - cap} more bytes]" if size > cap else ""
    fence = "````" if "```" in text else "```"
    return f"{display}:\n{fence}\n{text.rstrip()}{note}\n{fence}\n"


def _read_to_send(worktree: Path, raw: str) -> tuple[bytes, int]:
    """The first FILE_CAP bytes of the file `raw` names, and its size: relative to the worktree when it is there,
    else to the current directory.

    A worktree's files are the agent's: a `notes.md -> ~/.ssh/id_ed25519` it planted there would have us paste
    what its sandbox hides from it into its own session. A relative name found in the worktree must stay in it,
    and is opened one folder at a time without following a link (the agent may swap the file for a link, or a
    FIFO that blocks the read, between our look and our open); a file elsewhere is sent only when the user names
    it by a path of their own.
    """
    inside = worktree / raw
    if not Path(raw).is_absolute() and os.path.lexists(inside):
        try:
            real, root = inside.resolve(), worktree.resolve()
        except OSError as exc:
            raise OperationError(f"{raw} in worktree {worktree.name} cannot be read: {exc.strerror}") from None
        if real != root and root not in real.parents:
            raise OperationError(f"{raw} in worktree {worktree.name} links outside it (to {real}): not sent; give "
                                 "that file's own path if you mean it")
        try:
            with fs_safe.open_parent(root, real.relative_to(root), create=False) as (dir_fd, name):
                fd = os.open(name, _READ_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
        except (OSError, OperationError):
            raise OperationError(f"{raw} in worktree {worktree.name} changed while it was opened (a link or a "
                                 "folder put in its way): not sent") from None
    else:
        try:
            fd = os.open(Path(raw).resolve(), _READ_FLAGS)
        except OSError:
            raise InputError(f"no such file: {raw}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"not a regular file: {raw}")
        return fh.read(FILE_CAP), info.st_size


_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC  # O_NONBLOCK: opening a FIFO never waits for a writer


def build_context(project: Project, name: str, *, files: list[str], task: bool, clipboard: bool) -> str:
    """The text to paste: file paths are taken relative to the worktree (or absolute)."""
    entry = find(Index(project).load(), name)
    if entry is None or not entry.live:
        raise InputError(f"no live worktree named {name!r}")
    parts: list[str] = []
    if task:
        if entry.task_id is None:
            raise InputError(f"worktree {name} has no task bound")
        bound = TaskService(project).get(entry.task_id)
        parts.append(f"Task #{bound.id}: {bound.subject}\n\n{bound.description}".rstrip() + "\n")
    for raw in files:
        data, size = _read_to_send(Path(entry.path), raw)
        parts.append(fenced_file(raw, data, size=size))
    if clipboard:
        import pyperclip

        try:
            text = pyperclip.paste()
        except pyperclip.PyperclipException:
            # pyperclip's own message is a paragraph with a URL; the error is one line (docs/design.md 6).
            raise OperationError("no clipboard available: install xclip, xsel or wl-clipboard "
                                 "(or send the text as TEXT, or with --file)") from None
        if not text:
            raise OperationError("the clipboard is empty")
        parts.append(text)
    return "\n".join(parts)
