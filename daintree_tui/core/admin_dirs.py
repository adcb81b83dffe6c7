"""Git's admin dirs of linked worktrees (`.git/worktrees/<id>/`), checked against the index before the outside's
git acts on them.

An agent could write its own admin dir (docs/design.md 2a, rule 9), and git trusts what it finds there: `worktree prune`
removes the second of two admin dirs whose `gitdir` names the same path ("duplicate entry": worktree a's `gitdir`
naming `.worktrees/b/.git` cost b its index, HEAD and reflog), `worktree repair` writes the `.git` file of whatever
path a `gitdir` names, `worktree list` reports the path a `gitdir` claims (and reads `locked` and `gitdir` whole:
a FIFO hangs it), and `worktree add` refuses a path some `gitdir` claims. So before any of them runs, each live
index entry's admin dir is found from what the outside trusts: the entry's path in the index, inside the worktree
dir, and that worktree's own `.git` file (read-only in every sandbox; git's naming when it has none), which must
be a small regular file naming `<common dir>/worktrees/<id>`. That admin dir's `gitdir` must then say exactly
`<path>/.git`; anything else (another path, a link, a FIFO, a huge file, a folder, nothing) is rewritten from the
index as git writes it, replacing what is there rather than writing through it. An admin dir of no live entry that
claims a live entry's path loses its `gitdir` (git then prunes it as the record of nothing it is). During a prune
every live entry's admin dir is locked, so nothing another admin dir says can make git prune it, and afterwards
each is checked: one gone is a failure, said loudly.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from daintree_tui.core import git as g
from daintree_tui.core.errors import ConfigError, OperationError
from daintree_tui.core.fs_safe import read_state_file, small_text
from daintree_tui.core.log import suppressed, warn
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.store import read_json, remove_tree

if TYPE_CHECKING:
    from daintree_tui.core.project import Project

MAX_POINTER = 4096  # a `.git` file or a `gitdir` is one path; git writes nothing larger there
LOCK_MARK = "daintree: held during git worktree prune, pid "


@dataclass(frozen=True)
class Owned:
    """A live index entry and the admin dir that is its, found from the outside's side."""

    entry: WorktreeEntry
    path: Path  # the worktree, its real path (what git writes into `gitdir`)
    admin: Path


@dataclass
class Pruned:
    findings: list[str] = field(default_factory=list)  # what the guard repaired (or would)
    stale: list[str] = field(default_factory=list)  # git's lines: the records it pruned (or would)


def _small_text(path: Path) -> str | None:
    """The text of a small regular file, never through a link nor from a FIFO or device; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_POINTER:  # a folder too: open() lets one through
            return None
        raw = os.read(fd, MAX_POINTER + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(raw) > MAX_POINTER:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def admin_dir_of(common_dir: Path, worktree: Path) -> Path | None:
    """The admin dir the worktree's own `.git` file names, when that file is a small regular file saying
    `gitdir: <common dir>/worktrees/<id>` and that is a folder (not a link); None otherwise."""
    text = _small_text(worktree / ".git")
    if text is None or not text.startswith("gitdir: "):
        return None
    target = text[len("gitdir: "):].rstrip("\r\n")
    if not target or "\n" in target or "\0" in target:
        return None
    named = Path(os.path.normpath(os.path.join(worktree, target)))  # git may write it relative to the worktree
    admins = common_dir / "worktrees"
    if named.name in ("", ".", "..") or os.path.realpath(named.parent) != os.path.realpath(admins):
        return None
    admin = admins / named.name
    return admin if _is_dir(admin) else None


def git_admin_dir(common_dir: Path, worktree: Path) -> Path:
    """The worktree's `.git/worktrees/<id>/`: the one its `.git` file names when that record's `gitdir` names the
    worktree back (both are read-only in every sandbox), else the record whose `gitdir` names it, found from the
    common dir's side (a `.git` file rewritten by an unsandboxed agent may point at the common dir itself)."""
    admin_root = common_dir / "worktrees"
    want = str(worktree / ".git")
    named = admin_dir_of(common_dir, worktree)
    candidates = [named] if named is not None else []
    candidates += [admin_root / worktree.name]
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


def admin_dir_named_by(common: Path, worktree: Path) -> Path | None:
    """The admin dir (`.git/worktrees/<id>/`) that the worktree's own `.git` file names, resolved; None when that
    file is not one of git's or names no admin dir of this repository. A daintree worktree's `.git` file is
    read-only in its sandbox: its agent cannot point it elsewhere (its admin dir's `gitdir` it can)."""
    text = small_text(worktree / ".git")
    if text is None or not text.startswith("gitdir: "):
        return None
    admin = (worktree / text[len("gitdir: "):]).resolve()
    return admin if admin.parent == (common / "worktrees").resolve() else None


def index_entries(project: Project) -> list[WorktreeEntry]:
    """The index's entries as they are on disk (no recovery from git: this runs before git is asked)."""
    data, _ = read_json(project.index_path, "index")
    raw = data.get("worktrees") if isinstance(data, dict) else None
    entries = []
    for item in raw if isinstance(raw, list) else []:
        with suppressed(KeyError, TypeError, ValueError):
            entries.append(WorktreeEntry.from_dict(item))
    return entries


def owned_admin_dirs(project: Project, entries: list[WorktreeEntry] | None = None) -> list[Owned]:
    """Each live entry whose worktree is there, inside the worktree dir, with the admin dir that is its: the one
    its `.git` file names, else (no usable `.git` file) the one git's naming gives it, `worktrees/<dir name>`,
    when no other entry's `.git` names that. Two entries naming one admin dir: the first keeps it."""
    common = project.common_dir
    if common is None or not _is_dir(common / "worktrees"):
        return []
    try:
        wt_root = project.worktrees_root
    except ConfigError:
        return []
    claimed: dict[Path, Owned] = {}
    unnamed: list[tuple[WorktreeEntry, Path]] = []
    for entry in index_entries(project) if entries is None else entries:
        path = Path(entry.path)
        if not entry.live or not path.is_absolute() or not _is_dir(path):
            continue
        real = Path(os.path.realpath(path))
        if real == wt_root or not real.is_relative_to(wt_root):
            continue
        admin = admin_dir_of(common, path)
        if admin is None:
            unnamed.append((entry, real))
        elif admin not in claimed:
            claimed[admin] = Owned(entry, real, admin)
    for entry, real in unnamed:
        admin = common / "worktrees" / real.name
        if admin not in claimed and _is_dir(admin) and _may_be_of(admin, real, Path(entry.path)):
            claimed[admin] = Owned(entry, real, admin)
    return list(claimed.values())


def _may_be_of(admin: Path, real: Path, path: Path) -> bool:
    """Whether a record found by its name alone may be this worktree's: its `gitdir` names it, or names nothing
    that is there (git would prune it anyway). Never one naming a worktree that exists elsewhere: the user's own
    `git worktree add ../x` has the record `x`, and a daintree worktree `x` made after it has `x1`."""
    text = _small_text(admin / "gitdir")
    if text is None:
        return True
    said = os.path.normpath(os.path.join(admin, text.rstrip("\r\n")))
    return said in (f"{real}/.git", str(path / ".git")) or not os.path.lexists(said)


def _gitdir_problem(admin: Path, want: str, also: str) -> str | None:
    """Why the admin dir's `gitdir` is not the worktree's (None when it is)."""
    path = admin / "gitdir"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "is missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_size > MAX_POINTER:
        return f"is {st.st_size} bytes"
    text = _small_text(path)
    if text is None:
        return "cannot be read"
    said = text.rstrip("\r\n")
    if said in (want, also) or os.path.normpath(os.path.join(admin, said)) in (want, also):
        return None
    return f"names {said[:200]!r}"


def _replace_file(admin: Path, name: str, text: str) -> None:
    """`admin/name` holds `text` (0644, as git writes it): a new file renamed over whatever is there (a link is
    replaced, never followed; a folder is deleted first). Every step goes through the admin dir's own descriptor,
    opened without following a link."""
    dir_fd = os.open(admin, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with suppressed(OSError):
            if stat.S_ISDIR(os.lstat(name, dir_fd=dir_fd).st_mode):
                remove_tree(admin / name)  # never follows a link inside; any depth
        for _ in range(8):
            tmp = f".{name}.daintree-{os.urandom(6).hex()}"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                             dir_fd=dir_fd)
            except FileExistsError:
                continue
            try:
                os.fchmod(fd, 0o644)
                os.write(fd, text.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except OSError:
                with suppressed(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
            return
        raise OSError(errno.EEXIST, "no free temporary name", str(admin))
    finally:
        os.close(dir_fd)


def _drop(path: Path) -> bool:
    try:
        if _is_dir(path):
            remove_tree(path)  # any depth: 1,500 levels made Python's rmtree raise RecursionError
            if os.path.lexists(path):
                raise OSError(errno.ENOTEMPTY, "could not delete it", str(path))
        else:
            path.unlink()
    except FileNotFoundError:
        return False
    return True


def release(admin: Path) -> None:
    """Drop the `locked` of a removed worktree's record, whoever wrote it, so that git prunes the record."""
    with suppressed(OSError):
        _drop(admin / "locked")


def _lock_of_ours_left(admin: Path) -> bool:
    """A `locked` this tool placed during a prune whose process is gone (it was killed mid-prune)."""
    text = _small_text(admin / "locked")
    if text is None or not text.startswith(LOCK_MARK):
        return False
    try:
        pid = int(text[len(LOCK_MARK):].strip())
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (ValueError, OSError):
        return False
    return False


def guard(project: Project, entries: list[WorktreeEntry] | None = None, *, fix: bool = True,
          quiet: bool = False) -> list[str]:
    """Check every admin dir git would read against the index; with `fix`, repair each from the index and log
    `reconcile.fixed`. Returns what was found. Runs before every `git worktree prune`, `repair`, `add` and every
    listing the outside acts on."""
    common = project.common_dir
    if common is None or not _is_dir(common / "worktrees"):
        return []
    owned = owned_admin_dirs(project, entries)
    findings: list[str] = []
    rewrote, removed = ("rewrote", "removed") if fix else ("would rewrite", "would remove")

    def found(what: str, entry: WorktreeEntry | None, repair: Callable[[], object]) -> None:
        """Record a finding; with `fix`, repair it now."""
        findings.append(what)
        if not fix:
            return
        try:
            repair()
        except OSError as exc:
            findings[-1] = f"{what.split(';')[0]}; could not repair it: {exc.strerror or exc}"
            warn(findings[-1])
            return
        project.events.append("reconcile.fixed", fix=what, worktree=entry.brief() if entry else None)
        if not quiet:
            warn(what)

    claims: dict[str, Owned] = {}
    for own in owned:
        want, also = f"{own.path}/.git", str(Path(own.entry.path) / ".git")
        claims[want] = claims[also] = own
        name, admin, branch = own.entry.name, own.admin, own.entry.branch
        problem = _gitdir_problem(admin, want, also)
        if problem:
            found(f"worktree {name}: git's record {admin} has a gitdir that {problem}; {rewrote} it from the index "
                  f"({want})", own.entry, partial(_replace_file, admin, "gitdir", want + "\n"))
        head = admin / "HEAD"
        if _small_text(head) is None and branch and g.branch_name_ok(project.root, branch):
            what = "no HEAD" if not os.path.lexists(head) else "a HEAD that is not a small regular file"
            found(f"worktree {name}: git's record {admin} has {what}; {rewrote} it from the index "
                  f"(ref: refs/heads/{branch})", own.entry,
                  partial(_replace_file, admin, "HEAD", f"ref: refs/heads/{branch}\n"))
        locked = admin / "locked"
        if os.path.lexists(locked) and (_small_text(locked) is None or _lock_of_ours_left(admin)):
            found(f"worktree {name}: git's record {admin} has a lock that is not a small regular file (or one an "
                  f"interrupted prune left); {removed} it", own.entry, partial(_drop, locked))
    mine = {own.admin for own in owned}
    try:
        others = [Path(e.path) for e in os.scandir(common / "worktrees")
                  if e.is_dir(follow_symlinks=False) and Path(e.path) not in mine]
    except OSError:
        others = []
    for admin in others:
        text = _small_text(admin / "gitdir")
        said = text.rstrip("\r\n") if text is not None else None
        victim = claims.get(os.path.normpath(os.path.join(admin, said))) if said else None
        if victim is not None:
            found(f"git's record {admin} belongs to no live worktree but its gitdir claims {victim.entry.name}'s "
                  f"path; {removed} that gitdir (git prunes the record, never {victim.entry.name}'s)", None,
                  partial(_drop, admin / "gitdir"))
    g.drop_unreadable_admin_files(common)  # the rest: nothing git reads may be a link, a FIFO or huge
    return findings


def _lock(admin: Path) -> bool:
    """Lock an admin dir for the prune (git keeps a locked one whatever any gitdir says); False when it already
    was (the user's lock stays, and stays theirs)."""
    try:
        fd = os.open(admin / "locked", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError:
        return False
    try:
        os.write(fd, f"{LOCK_MARK}{os.getpid()}\n".encode())
    finally:
        os.close(fd)
    return True


def _unlock(admin: Path) -> None:
    if _small_text(admin / "locked") == f"{LOCK_MARK}{os.getpid()}\n":
        with suppressed(OSError):
            (admin / "locked").unlink()


def prune(project: Project, entries: list[WorktreeEntry] | None = None, *, dry_run: bool = False,
          fix: bool = True, quiet: bool = False) -> Pruned:
    """`git worktree prune` (or its `--dry-run --verbose` report) that never removes a live entry's admin dir:
    the guard first, each live entry's admin dir locked while git runs, and each checked after.

    Raises:
        OperationError: a live entry's admin dir was gone after the prune (said loudly: that worktree is no
            longer a git repository).
    """
    result = Pruned(guard(project, entries, fix=fix, quiet=quiet))
    owned = owned_admin_dirs(project, entries)
    placed = [own.admin for own in owned if fix and _lock(own.admin)]
    try:
        args = ("--dry-run", "--verbose") if dry_run else ()
        proc = g.git(project.root, "worktree", "prune", *args, check=False)
    finally:
        for admin in placed:
            _unlock(admin)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    ids = {own.admin.name for own in owned}
    # Unlocked (a report), git would name a live entry's record; the fix never removes one: not reported.
    result.stale = [ln for ln in lines if not any(f"worktrees/{i}:" in ln for i in ids)]
    lost = [own for own in owned if not _is_dir(own.admin)]
    if lost:
        names = ", ".join(f"{own.entry.name} ({own.admin})" for own in lost)
        message = (f"git worktree prune removed the record of live worktree(s) {names}: they are no longer git "
                   "repositories; `daintree doctor` says what is left")
        warn(message)
        raise OperationError(message)
    return result
