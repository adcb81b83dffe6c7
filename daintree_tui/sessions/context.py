"""Context injection: the task, files or the clipboard, as one text to paste into an agent's session."""

from __future__ import annotations

from pathlib import Path

from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.project import Project
from daintree_tui.core.tasks import TaskService

FILE_CAP = 64 * 1024


def fenced_file(display: str, data: bytes, cap: int = FILE_CAP) -> str:
    text = data[:cap].decode("utf-8", errors="replace")
    note = f"\n[truncated: {len(data) - cap} more bytes]" if len(data) > cap else ""
    fence = "````" if "```" in text else "```"
    return f"{display}:\n{fence}\n{text.rstrip()}{note}\n{fence}\n"


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
        path = Path(raw) if Path(raw).is_absolute() else Path(entry.path) / raw
        if not path.is_file():
            path = Path(raw).resolve()
        if not path.is_file():
            raise InputError(f"no such file: {raw}")
        parts.append(fenced_file(raw, path.read_bytes()))
    if clipboard:
        import pyperclip

        try:
            text = pyperclip.paste()
        except pyperclip.PyperclipException as exc:
            raise OperationError(f"no clipboard available: {exc}") from None
        if not text:
            raise OperationError("the clipboard is empty")
        parts.append(text)
    return "\n".join(parts)
