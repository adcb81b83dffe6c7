"""The tree of a worktree's files as they are now (committed, uncommitted and untracked alike, ignored ones not),
read the way `worktree commit` reads one (docs/design.md 2a rule 9): inside the worktree's sandbox, through a
temporary index (a copy of its own, in its TMPDIR), so its index, HEAD and files stay as they are. The objects
that writes come in through the quarantine check (`bring_in`), and the tree must be whole in the shared store
before anything outside reads it. The conflict radar and the checkpoints both stand on it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from daintree_tui.core import git as g
from daintree_tui.core import ownership
from daintree_tui.core.agent_git import whole
from daintree_tui.core.errors import OperationError
from daintree_tui.core.log import suppressed
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.sandbox import bring_in
from daintree_tui.core.worktree_git import WorktreeGit

# Hooks and an fsmonitor of whatever config git finds stay off in every git of ours over an agent's files (the
# repository's own config is the user's; inside a sandbox nothing else is readable, outside it is the user's).
SAFE_GIT = "git -c core.fsmonitor=false -c core.hooksPath=/dev/null"

# Run inside the worktree's sandbox (WorktreeGit.run_shell), "$1" the temporary index, "$2" "$3" "$4" the size
# filter (_SIZE_FILTER) and its cap. The worktree's own index is copied first (only a regular file: it is the
# agent's to make a FIFO or a link), so git rehashes only what changed since it last looked; then every tracked
# change and every untracked file that is not ignored goes into the copy, and the copy becomes a tree.
# `diff-files --ignore-submodules=all` and `ls-files --others` never start git in a submodule's folder (a
# repository the agent made there would run its own config), and `update-index` ignores the `sub/` that names an
# untracked nested repository. A link is recorded as a link (its text), never followed.
WORK_TREE_SCRIPT = rf"""
set -e
tmp_index=$1
trap 'rm -f -- "$tmp_index"' EXIT
index=$(git rev-parse --path-format=absolute --git-path index)
rm -f -- "$tmp_index"
if [ -f "$index" ] && [ ! -L "$index" ]; then cp -- "$index" "$tmp_index"; fi
GIT_INDEX_FILE=$tmp_index
export GIT_INDEX_FILE
{{ {SAFE_GIT} diff-files --name-only -z --ignore-submodules=all; \
   {SAFE_GIT} ls-files --others --exclude-standard -z; }} \
    | "$2" -I -c "$3" "$4" | {SAFE_GIT} update-index --add --remove -z --stdin
{SAFE_GIT} write-tree
"""

# Between the listing and `update-index` (Python, the outside's, by path): the paths of regular files larger than
# MAX_FILE_BYTES are dropped. Hashing and compressing is the CPU of the outside, in no cgroup of the agent's: a 4 GiB
# sparse file (no disk at all) made every pass of the radar over it spend its 60 s of a core and fail, a pass
# that `worktree conflicts` and the train's order wait for. Such a file is taken as last committed (or, new, as
# absent): no prediction (and no checkpoint) is made of it. What is missing (a deletion) or not a regular file
# passes as it is.
MAX_FILE_BYTES = 64 << 20
_SIZE_FILTER = r"""
import os, stat, sys
cap = int(sys.argv[1])
kept = []
for path in sys.stdin.buffer.read().split(b"\0"):
    if not path:
        continue
    try:
        st = os.lstat(path)
    except OSError:
        kept.append(path)
        continue
    if not (stat.S_ISREG(st.st_mode) and st.st_size > cap):
        kept.append(path)
sys.stdout.buffer.write(b"".join(p + b"\0" for p in kept))
"""

_HEX = frozenset("0123456789abcdef")


def oid(text: str) -> str | None:
    """`text` as an object id (sha1 or sha256 hex), or None."""
    value = text.strip()
    return value if len(value) in (40, 64) and set(value) <= _HEX else None


def temp_index(project: Project, name: str, what: str) -> Path:
    """A fresh name for a temporary index in worktree `name`'s TMPDIR (the folder made): where its sandbox may
    write, and nowhere in the worktree."""
    tmpdir = project.tmpdir_for(name)
    tmpdir.mkdir(parents=True, exist_ok=True)
    return tmpdir / f".{what}-index-{os.urandom(6).hex()}"


def read_work_tree(project: Project, entry: WorktreeEntry, listed: list[Path] | None = None, *,
                   checked: bool = True) -> tuple[str, str | None]:
    """The tree of the worktree's files now and its branch's commit after what its sandbox wrote was brought in.

    Args:
        listed: git's linked worktrees, when the caller has them (`ownership.linked_worktrees`).
        checked: whether the tree must be whole in the shared store (a caller that remembers trees already
            checked passes False and checks the new ones itself).

    Raises:
        OperationError: not one of our worktrees, git failed there, or the tree did not come through whole.
    """
    problem = ownership.ownership_problem(project, Path(entry.path), listed)
    if problem:
        raise OperationError(problem)  # never run git in a directory the index merely names
    index = temp_index(project, entry.name, "tree")
    try:
        git = WorktreeGit(project, entry)
        try:
            proc = git.run_shell(WORK_TREE_SCRIPT, [str(index), sys.executable, _SIZE_FILTER, str(MAX_FILE_BYTES)])
        finally:
            with suppressed(OSError):
                index.unlink()  # the script's own trap removes it; a killed sandbox may not have
        lines = proc.stdout.strip().splitlines()
        tree = oid(lines[-1]) if proc.returncode == 0 and lines else None
        if tree is None:
            raise OperationError(f"could not read its uncommitted work: {g.last_line(proc.stderr) or 'no tree'}")
        tip = bring_in(project, entry)  # the objects its sandbox just wrote
    except (OSError, subprocess.SubprocessError) as exc:
        raise OperationError(f"could not read its uncommitted work: {exc}") from None
    except OperationError as exc:
        text = str(exc)
        raise OperationError(text if text.startswith("could not read") else
                             f"could not read its uncommitted work: {text}") from None
    # The agent's index can name a tree of its own whose blobs exist nowhere (`write-tree` answers from the index's
    # cache of trees): merged or restored, it would fail or name objects no one has.
    if checked and not whole(project.root, tree, "tree", tip):
        raise OperationError(f"its uncommitted work {tree[:12]} did not come through the sandbox's check whole")
    return tree, tip
