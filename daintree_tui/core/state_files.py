"""Whether a state file under `.worktrees/` is daintree's own, or came with the repository's history.

Git writes over ignored files (a clone, a pull, a merge of an agent's branch), so a record found in the state dir
may be someone else's word: an index naming other paths, a session record giving a session another role, a
journal asking to finish a remove. A file git tracks there, or whose content is a blob of the repository (checked
out, then untracked), is not ours, whatever it says (docs/design.md 2a, rule 9).
"""

from __future__ import annotations

import re
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daintree_tui.core import git as g
from daintree_tui.core import spawn
from daintree_tui.core.git_objects import blob_id, object_exists
from daintree_tui.core.log import suppressed, warn
from daintree_tui.core.store import read_json

if TYPE_CHECKING:
    from daintree_tui.core.project import Project

# What git tracks under `.worktrees/`, per primary index (path, mtime, size, inode): one `git ls-files` per change
# of the index, however often the dashboard reads a record.
_TRACKED_STATE: dict[Path, tuple[tuple[int, int, int], frozenset[Path]]] = {}
_TRACKED_STATE_LOCK = threading.Lock()  # the dashboard asks from several workers


def _primary_index(project: Project) -> tuple[Path, tuple[int, int, int]] | None:
    """The primary's index and its identity (mtime, size, inode), which what git tracks is a function of; None
    when there is nothing to list."""
    common = project.common_dir
    if common is None:
        return None
    index = common / "index"
    identity = spawn.file_identity(str(index))
    return None if identity is None else (index, identity)


def start_tracked_state(project: Project) -> None:
    """Start the listing `tracked_state_files` reads (unless the console script did, before its imports): a
    command that changes state asks it first thing, and its git then runs while the command imports and reads
    what it needs. Started here, not in a thread: a thread waited for the GIL behind those imports before it
    could start git."""
    listing = _primary_index(project)
    if listing is not None:
        index, identity = listing
        with _TRACKED_STATE_LOCK:
            cached = _TRACKED_STATE.get(index)
            if cached is None or cached[0] != identity:
                spawn.start_ahead(str(project.root), spawn.TRACKED_STATE, identity)


def tracked_state_files(project: Project) -> frozenset[Path]:
    """The files under the state dir (`.worktrees/`) that git tracks in the primary: they came with the
    repository's history (a clone, or a `git pull`/merge of your own while a session runs: git writes over
    ignored files), so they are not daintree's, whatever they say."""
    listing = _primary_index(project)
    if listing is None:
        return frozenset()
    index, identity = listing
    with _TRACKED_STATE_LOCK:
        cached = _TRACKED_STATE.get(index)
        if cached is not None and cached[0] == identity:
            return cached[1]
        # A listing started for another version of the index is killed: it may be of the old one.
        ahead = spawn.take_ahead(str(project.root), spawn.TRACKED_STATE, identity)
        if ahead is not None:
            listed = ahead[0].communicate()[0]
        else:
            listed = g.git(project.root, *spawn.TRACKED_STATE, check=False).stdout
        tracked = frozenset(project.root / name for name in listed.split("\0") if name)
        _TRACKED_STATE[index] = (identity, tracked)
        return tracked


_FROM_HISTORY: dict[Path, tuple[tuple[int, int, int], bool]] = {}
HISTORY_CHECK_LIMIT = 16 * 1024 * 1024
_IDENT = re.compile(rb"\$Id:[^$\n]*\$")


def from_history(project: Project, path: Path) -> bool:
    """Whether state file `path` came through git: git tracks it, or its content is a blob of the repository
    (git checked it out: a merge or pull, then untracked with `git reset HEAD~1` or `git rm --cached`, which
    leave the file as it was; daintree never writes its state into git). CRLF line ends and an expanded `$Id$`
    (a `.gitattributes` can ask for both) are taken back to what the blob holds."""
    # The content first: its hashing is the caller's own work, done while the tracked listing that discovery
    # started in the background (`start_tracked_state`) may still run.
    return _content_from_history(project, path) or path in tracked_state_files(project)


def _content_from_history(project: Project, path: Path) -> bool:
    common = project.common_dir
    try:
        info = path.stat()
    except OSError:
        return False
    key = (info.st_mtime_ns, info.st_size, info.st_ino)
    cached = _FROM_HISTORY.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    found = False
    if common is not None and stat.S_ISREG(info.st_mode) and info.st_size <= HISTORY_CHECK_LIMIT:
        with suppressed(OSError):
            data = path.read_bytes()
            forms = {data, data.replace(b"\r\n", b"\n"), _IDENT.sub(b"$Id$", data.replace(b"\r\n", b"\n"))}
            found = any(object_exists(common, blob_id(common, form), info.st_mtime_ns) for form in forms)
    _FROM_HISTORY[path] = (key, found)
    return found


def read_own_state(project: Project, path: Path, what: str) -> Any:
    """A state file of ours (a session record), or None when git tracks it (with a warning): a record a pull
    wrote over ours would give a running session another role (a lead's tools, merges without approval)."""
    if from_history(project, path):
        warn(f"ignored {what} {path}: git tracks it or checked it out, so it came with the repository's history, "
             "not from daintree (delete it and `git rm --cached` it: daintree writes its own again)")
        return None
    data, _ = read_json(path, what)
    return data
