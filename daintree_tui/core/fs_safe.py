"""File access that no link, FIFO or foreign folder can turn (docs/design.md 2a rules 4 and 7).

Whatever an agent can write (its worktree, the state dir's files that came with a clone) may be a symbolic link
to a file of the user's, a FIFO that blocks a reader, or `/dev/zero`. Reads here take only a regular file of sane
size, never through a link; writes below a folder go one component at a time with O_NOFOLLOW; private folders
(logs, locks, ssh sockets, the trust record's copies) are real directories of this user, 0700.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from daintree_tui.core.errors import OperationError
from daintree_tui.core.log import suppressed

# -- private folders and logs ----------------------------------------------------------------------------------


def private_dir(path: Path, what: str = "daintree's files") -> Path:
    """Make `path` (and its parents) a folder only this user can enter: a real directory (not a link), this
    user's, mode 0700. What it holds (hook output, task text, terminal logs, lock files, ssh master sockets that
    run commands on a host as us) is the user's only, so a folder someone else made (in a shared /tmp) or a link
    planted where it goes is refused, never used.

    Raises:
        OperationError: `path` is a link or a file, or another user's folder (the message names `what`).
        OSError: it cannot be made.
    """
    with suppressed(FileExistsError):
        path.mkdir(mode=0o700, parents=True)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise OperationError(f"{path} must be a directory, not a link or file: refusing to keep {what} there")
    if info.st_uid != os.getuid():
        raise OperationError(f"{path} belongs to another user: refusing to keep {what} there")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def open_private_append(path: Path) -> BinaryIO:
    """Open a log for appending, the user's only (0600), never through a symbolic link (one found where the log
    goes is replaced: the log folder is ours)."""
    private_dir(path.parent)
    if path.is_symlink():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


# -- reading what an agent or a clone may have written ---------------------------------------------------------

MAX_STATE_BYTES = 64 * 1024 * 1024


def read_state_file(path: Path) -> bytes:
    """A state file's bytes: a regular file of sane size, never through a symbolic link. State comes with clones
    (`.tasks/`, `.worktrees/`): a committed `.tasks/task_1.json -> /dev/zero` was read until memory ran out, and
    `task list`, `approvals`, `usage` and the dashboard hung on it.

    Raises:
        FileNotFoundError: there is no file; OSError: a link, not a regular file, or too large.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        raw = fh.read(MAX_STATE_BYTES + 1)
    if len(raw) > MAX_STATE_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_STATE_BYTES // (1024 * 1024)} MB", str(path))
    return raw


def small_text(path: Path) -> str | None:
    """A small regular file's text, stripped (never through a link, never waiting on a FIFO), or None."""
    try:
        return read_state_file(path).decode("utf-8", "replace").strip()
    except OSError:
        return None


# -- writing below a folder an agent can write -----------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@contextlib.contextmanager
def real_folder(path: Path | str, dir_fd: int | None = None) -> Iterator[int]:
    """A descriptor of the real folder at `path` (relative to `dir_fd` when given), never a link's target."""
    fd = os.open(path, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _parts(rel: str | Path) -> list[str]:
    parts = PurePosixPath(str(rel)).parts
    if not parts or PurePosixPath(str(rel)).is_absolute() or any(p in ("..", ".", "") for p in parts):
        raise OperationError(f"refusing to write {rel}: not a plain relative path")
    return list(parts)


@contextlib.contextmanager
def open_parent(base: Path, rel: str | Path, create: bool = True) -> Iterator[tuple[int, str]]:
    """Open the directory that will hold `base/rel`, walking one component at a time with O_NOFOLLOW (openat),
    so no symbolic link anywhere below `base` can lead the write out. Yields (dir fd, final name).

    Raises:
        OperationError: a component is a symbolic link or not a directory.
    """
    parts = _parts(rel)
    try:
        fd = os.open(base, _DIR_FLAGS)
    except OSError as exc:
        raise OperationError(f"refusing to write into {base}: {exc.strerror}") from None
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                where = "/".join(parts[: i + 1])
                raise OperationError(f"refusing to write {rel}: {where} is a symbolic link or not a directory "
                                     f"({exc.strerror})") from None
            os.close(fd)
            fd = nxt
        yield fd, parts[-1]
    finally:
        os.close(fd)


def safe_copy_file(src: Path, base: Path, rel: str | Path) -> bool:
    """Copy the regular file `src` to `base/rel`: never through a symbolic link, never over an existing entry.
    Returns whether it copied (False: something is already there)."""
    with open_parent(base, rel) as (dir_fd, name):
        try:
            os.lstat(name, dir_fd=dir_fd)
            return False
        except FileNotFoundError:
            pass
        src_fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
        try:
            mode = stat.S_IMODE(os.fstat(src_fd).st_mode)
            dst_fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode & 0o777,
                             dir_fd=dir_fd)
            with os.fdopen(src_fd, "rb", closefd=False) as reader, os.fdopen(dst_fd, "wb") as writer:
                shutil.copyfileobj(reader, writer)
        finally:
            os.close(src_fd)
    return True


def safe_symlink(target: Path, base: Path, rel: str | Path) -> bool:
    """Make the symbolic link `base/rel -> target` without following a link in any component of `rel`."""
    with open_parent(base, rel) as (dir_fd, name):
        try:
            os.symlink(target, name, dir_fd=dir_fd)
        except FileExistsError:
            return False
    return True


def fd_path(dir_fd: int, name: str) -> str:
    """A path another process can use for `name` in the directory open as `dir_fd` (checked by open_parent), so
    a tool that takes a path (`cp -a`) writes into the very directory that was checked."""
    proc = Path(f"/proc/{os.getpid()}/fd/{dir_fd}")
    if proc.exists():
        return f"{proc}/{name}"
    raise OperationError("cannot copy safely here: /proc is not mounted")


def writer_tag() -> str:
    """This process and thread, for the name of a file being written: two threads of one process (the dashboard's
    git facts and its radar, or a merge train beside them) bring in one worktree at once, and shared one name."""
    return f"{os.getpid()}_{threading.get_ident()}"


def replace_file_in(folder_path: Path, name: str, text: str) -> None:
    """Replace `name` in a folder another party writes (a worktree's admin dir, its agent's) as git does, by a
    rename: never through a link left there, never into a folder swapped in for `folder_path`."""
    folder = os.open(folder_path, _DIR_FLAGS)
    try:
        tmp = f"{name}.{writer_tag()}.daintree-tmp"
        with suppressed(FileNotFoundError):
            os.unlink(tmp, dir_fd=folder)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)
