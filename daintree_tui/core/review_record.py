"""The review of one worktree: comments a person left on lines of its diff, and the verdicts given on its head.

`.worktrees/.reviews/<name>.json` (0600), the user's own: the state dir is read-only in every sandbox, and a record
that git tracks or checked out there (an agent's committed "approval") is ignored, as other state of ours is. A link
or anything but a regular file at that path is refused, read or written. Every change is a read-modify-write under
the project lock, written atomically with its `.bak`. Reading is tolerant: a malformed comment or verdict is
skipped with a warning, the rest stands.

A comment names a path and a line of the new side (the worktree's file as it is) and keeps the text of that line as
it was (`quote`): when the file's line no longer reads so, the comment is `outdated`, never dropped. A verdict
(approve, request changes) is of one head commit: a new commit after it asks again.
"""

from __future__ import annotations

import getpass
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from daintree_tui.core import fs_safe, state_files
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.log import warn
from daintree_tui.core.project import Project
from daintree_tui.core.store import read_json, write_json
from daintree_tui.core.validate import check_name

REVIEWS_DIR = ".reviews"
MAX_COMMENT_CHARS = 4000
MAX_COMMENTS = 500
QUOTE_CHARS = 400  # of a quoted line
READ_LIMIT = 8 * 1024 * 1024  # of a worktree file read for the line a comment quotes
APPROVE, REQUEST_CHANGES = "approve", "request-changes"
VERDICTS = (APPROVE, REQUEST_CHANGES)


def who() -> str:
    """The person acting (the login name), as a review records it."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@dataclass(frozen=True)
class Comment:
    """One comment on `path`:`line` (new side), with the line's text when it was made (`quote`)."""

    id: int
    path: str
    line: int
    text: str
    quote: str | None
    head: str | None
    by: str
    at: float
    sent_at: float | None = None

    @property
    def sent(self) -> bool:
        return self.sent_at is not None

    @classmethod
    def from_dict(cls, data: Any) -> Comment:
        if not isinstance(data, dict):
            raise ValueError("not an object")
        path, line, text = data.get("path"), data.get("line"), data.get("text")
        if not isinstance(path, str) or not path or not isinstance(text, str):
            raise ValueError("path and text must be strings")
        if not isinstance(line, int) or isinstance(line, bool) or line < 1:
            raise ValueError("line must be a positive whole number")
        quote, head, sent_at = data.get("quote"), data.get("head"), data.get("sent_at")
        return cls(id=int(data.get("id", 0)), path=path, line=line, text=text[:MAX_COMMENT_CHARS],
                   quote=quote if isinstance(quote, str) else None, head=head if isinstance(head, str) else None,
                   by=str(data.get("by", "")), at=float(data.get("at", 0.0)),
                   sent_at=float(sent_at) if isinstance(sent_at, int | float) and not isinstance(sent_at, bool)
                   else None)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "line": self.line, "text": self.text, "quote": self.quote,
                "head": self.head, "by": self.by, "at": self.at, "sent": self.sent, "sent_at": self.sent_at}


@dataclass(frozen=True)
class Verdict:
    """Approve or request changes, of head commit `head`."""

    kind: str
    head: str
    message: str
    by: str
    at: float

    @classmethod
    def from_dict(cls, data: Any) -> Verdict:
        if not isinstance(data, dict) or data.get("kind") not in VERDICTS or not isinstance(data.get("head"), str):
            raise ValueError("kind must be approve or request-changes, with a head commit")
        return cls(kind=str(data["kind"]), head=str(data["head"]), message=str(data.get("message") or ""),
                   by=str(data.get("by", "")), at=float(data.get("at", 0.0)))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "head": self.head, "message": self.message, "by": self.by, "at": self.at}


@dataclass(frozen=True)
class Review:
    """What `.reviews/<name>.json` holds; `created_at` ties it to one worktree of that name (a new worktree of the
    same name starts a new review)."""

    worktree: str
    created_at: float = 0.0
    comments: tuple[Comment, ...] = ()
    verdicts: tuple[Verdict, ...] = ()
    pr: str | None = None

    def verdict_for(self, head: str | None) -> Verdict | None:
        """The last verdict, if it was given on `head`."""
        last = self.verdicts[-1] if self.verdicts else None
        return last if last is not None and head is not None and last.head == head else None

    def state(self, head: str | None) -> str:
        """open, changes-requested or approved: the last verdict, while the head is the one it was given on."""
        verdict = self.verdict_for(head)
        if verdict is None:
            return "open"
        return "approved" if verdict.kind == APPROVE else "changes-requested"

    def unsent(self) -> list[Comment]:
        return [c for c in self.comments if not c.sent]

    @classmethod
    def from_dict(cls, name: str, data: Any, where: str) -> Review:
        if not isinstance(data, dict):
            return cls(name)
        comments: list[Comment] = []
        for raw in data.get("comments", []) if isinstance(data.get("comments"), list) else []:
            try:
                comments.append(Comment.from_dict(raw))
            except (ValueError, TypeError) as exc:
                warn(f"skipped a comment in {where}: {exc}")
        verdicts: list[Verdict] = []
        for raw in data.get("verdicts", []) if isinstance(data.get("verdicts"), list) else []:
            try:
                verdicts.append(Verdict.from_dict(raw))
            except (ValueError, TypeError) as exc:
                warn(f"skipped a verdict in {where}: {exc}")
        created = data.get("created_at")
        pr = data.get("pr")
        return cls(name, float(created) if isinstance(created, int | float) else 0.0, tuple(comments[:MAX_COMMENTS]),
                   tuple(verdicts), pr if isinstance(pr, str) else None)

    def to_dict(self) -> dict[str, Any]:
        return {"worktree": self.worktree, "created_at": self.created_at,
                "comments": [c.to_dict() for c in self.comments], "verdicts": [v.to_dict() for v in self.verdicts],
                "pr": self.pr}


class ReviewStore:
    """The reviews of one project's worktrees."""

    def __init__(self, project: Project) -> None:
        self.project = project

    @property
    def folder(self) -> Path:
        return self.project.state_dir / REVIEWS_DIR

    def path(self, name: str) -> Path:
        check_name(name, new=False)
        return self.folder / f"{name}.json"

    def _refuse_odd(self, path: Path) -> None:
        """A link or a non-regular file where the record (or its folder) goes is nobody's record of ours."""
        for where, want_dir in ((self.folder, True), (path, False), (path.with_name(path.name + ".bak"), False)):
            try:
                info = os.lstat(where)
            except FileNotFoundError:
                continue
            fine = stat.S_ISDIR(info.st_mode) if want_dir else stat.S_ISREG(info.st_mode)
            if not fine:
                raise OperationError(f"refusing the review record {where}: it is "
                                     f"{'a symbolic link' if stat.S_ISLNK(info.st_mode) else 'not a regular file'}"
                                     " (delete it; daintree writes its own)")

    def load(self, name: str, created_at: float | None = None) -> Review:
        """The review of worktree `name` (an empty one when there is none, or when it is of an earlier worktree of
        that name: `created_at` is the worktree's).

        Raises:
            OperationError: a link or a non-regular file at the record's path.
        """
        path = self.path(name)
        self._refuse_odd(path)
        if not path.exists() and not path.with_name(path.name + ".bak").exists():
            return Review(name, created_at or 0.0)
        if state_files.from_history(self.project, path):
            warn(f"ignored the review record {path}: git tracks it or checked it out, so it came with the "
                 "repository's history, not from you (delete it and `git rm --cached` it)")
            return Review(name, created_at or 0.0)
        data, problem = read_json(path, "review record")
        if problem:
            warn(problem)
        review = Review.from_dict(name, data, str(path))
        if created_at is not None and review.created_at and abs(review.created_at - created_at) > 1e-6:
            return Review(name, created_at)  # of a removed worktree that had this name
        return review if review.created_at or created_at is None else replace(review, created_at=created_at)

    def files(self, name: str) -> list[tuple[Path, int]]:
        """The review's record and its `.bak` as they are, each with its size, when it is a regular file of ours
        in the real reviews folder (what `discard` deletes)."""
        check_name(name, new=False)
        found: list[tuple[Path, int]] = []
        try:
            with fs_safe.real_folder(self.folder) as fd:
                for file in (f"{name}.json", f"{name}.json.bak"):
                    info = self._own_regular(fd, file)
                    if info is not None:
                        found.append((self.folder / file, info.st_size))
        except FileNotFoundError:
            return []
        except OSError as exc:  # the folder is a link, or not a folder: nothing in it is ours to delete
            warn(f"left {self.folder} alone: {exc.strerror or exc}")
            return []
        return found

    def _own_regular(self, dir_fd: int, file: str) -> os.stat_result | None:
        try:
            info = os.stat(file, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            warn(f"left {self.folder / file} alone: it is "
                 f"{'a symbolic link' if stat.S_ISLNK(info.st_mode) else 'not a regular file of yours'}")
            return None
        if state_files.from_history(self.project, self.folder / file):
            warn(f"left {self.folder / file} alone: git tracks it or checked it out (the repository's, not ours)")
            return None
        return info

    def discard(self, name: str) -> list[Path]:
        """Delete the review of worktree `name` as the worktree goes (remove, gc): its record and `.bak`, each
        only when it is a regular file of ours in the real reviews folder; a link is never followed (unlinked
        through the folder's descriptor, by name), a record from git's history is left. Returns what went."""
        check_name(name, new=False)
        gone: list[Path] = []
        try:
            with fs_safe.real_folder(self.folder) as fd:
                for file in (f"{name}.json", f"{name}.json.bak"):
                    if self._own_regular(fd, file) is not None:
                        os.unlink(file, dir_fd=fd)
                        gone.append(self.folder / file)
        except FileNotFoundError:
            pass
        except OSError as exc:
            warn(f"left the review of {name} in {self.folder}: {exc.strerror or exc}")
        return gone

    def update(self, name: str, change: Callable[[Review], Review], created_at: float | None = None) -> Review:
        """Read, change and write the review under the project lock."""
        with self.project.lock.hold():
            review = change(self.load(name, created_at))
            path = self.path(name)
            self.folder.mkdir(mode=0o700, exist_ok=True)
            self._refuse_odd(path)
            write_json(path, review.to_dict())
        return review


def new_comment(review: Review, path: str, line: int, text: str, quote: str | None, head: str | None) -> Review:
    """`review` with one more comment (validated: a plain relative path, a line from 1, some text)."""
    text = text.strip()
    if not text:
        raise InputError("a comment needs some text")
    if len(text) > MAX_COMMENT_CHARS:
        raise InputError(f"a comment is at most {MAX_COMMENT_CHARS} characters (got {len(text)})")
    if line < 1:
        raise InputError(f"line numbers start at 1 (got {line})")
    plain_path(path)
    if len(review.comments) >= MAX_COMMENTS:
        raise InputError(f"{review.worktree} has {MAX_COMMENTS} comments already: send them first")
    number = max((c.id for c in review.comments), default=0) + 1
    comment = Comment(number, path, line, text, quote, head, who(), time.time())
    return replace(review, comments=(*review.comments, comment))


def plain_path(path: str) -> str:
    """`path` if it names a file inside a worktree (relative, no `..`, no empty part)."""
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\0" in path:
        raise InputError(f"a comment's path is relative to the worktree, without `..` (got {path!r})")
    return path


def file_line(worktree: Path, rel: str, line: int) -> str | None:
    """Line `line` (from 1) of the worktree's file `rel`, or None when there is no such line or file. The file is
    the agent's: opened one folder at a time without following a link (a `notes.py -> ~/.ssh/id_ed25519` would
    have us quote into its session what its sandbox hides from it), never waiting on a FIFO, read up to a limit."""
    try:
        with fs_safe.open_parent(worktree, plain_path(rel), create=False) as (dir_fd, name):
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except (OSError, OperationError, InputError):
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = fh.read(READ_LIMIT)
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    if line > len(lines):
        return None
    return lines[line - 1].decode("utf-8", "replace").rstrip("\r")[:QUOTE_CHARS]


def outdated(comment: Comment, worktree: Path) -> bool:
    """Whether the line a comment quotes reads otherwise now (changed, moved away, or its file gone)."""
    if comment.quote is None:
        return False
    return file_line(worktree, comment.path, comment.line) != comment.quote
