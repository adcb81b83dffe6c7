"""Checkpoints: the whole tree of a worktree's files (tracked and untracked, ignored ones not) recorded after each
turn of its agent, as a chain of commits on `refs/daintree/checkpoints/<name>` (docs/design.md 8).

- **Read** as the radar reads work (core/work_tree.py): inside the worktree's sandbox, through a temporary index
  in its TMPDIR, so the worktree's index, HEAD and files stay as they are; the tree comes in through the
  quarantine check and must be whole before a commit names it. A link is a link's text, never followed; a file
  over 64 MiB is left out (as last committed, or absent), as the radar leaves it out.
- **Recorded** outside, on objects only: `commit-tree` (a fixed identity, never signed) with the previous
  checkpoint as parent, then `update-ref NEW OLD` (compare and swap) under the project lock, after the worktree
  is found live in the index: a remove, which deletes the ref under the same lock, never leaves one behind. The
  common dir is read-only in every sandbox, so no agent writes or moves the ref.
- **Ids** are the checkpoints' places in the chain, oldest first (1, 2, 3 ...): the chain only grows while the
  worktree lives, so an id stays what it names. A commit's hex prefix (4 or more digits) names one too. Each
  commit says its own id (`Checkpoint-Seq`), so a read costs what it shows, whatever the chain's length: the next
  checkpoint reads the tip alone, a listing the newest LIST_NEWEST (50 000 checkpoints took every list and every
  turn's checkpoint 1.2 s of `git log` and parsing). A chain from before the trailer is counted once
  (`rev-list --count`).
- **Restored** inside the sandbox again: a temporary index read from the tree of the state before (itself
  checkpointed first, so a restore is undone by restoring that), refreshed against the files (a file changed
  meanwhile stops it), then `read-tree -m -u BEFORE TARGET`, which writes and deletes only what differs and
  refuses to overwrite an untracked file. An ignored file in the way (or one too big for any checkpoint) would be
  overwritten by git: refused first.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daintree_tui.core import git as g
from daintree_tui.core.capped import cut_at, read_capped
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.log import suppressed
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.spawn import command
from daintree_tui.core.validate import check_name, escape_controls
from daintree_tui.core.work_tree import MAX_FILE_BYTES, SAFE_GIT, oid, read_work_tree, temp_index
from daintree_tui.core.worktree_git import WorktreeGit

REF_PREFIX = "refs/daintree/checkpoints/"
DIFF_LIMIT = 8 << 20  # bytes of a diff read (`checkpoint diff`); the dashboard's timeline reads less
PROMPT_LIMIT = 200  # characters of the turn's first prompt line kept in the commit message
LIST_NEWEST = 200  # checkpoints a listing (`checkpoint list`, the timeline, MCP) reads unless asked for all
REASONS = ("waiting", "exited", "manual", "restore")
_IDENTITY = {"GIT_AUTHOR_NAME": "daintree checkpoint", "GIT_AUTHOR_EMAIL": "checkpoint@daintree.invalid",
             "GIT_COMMITTER_NAME": "daintree checkpoint", "GIT_COMMITTER_EMAIL": "checkpoint@daintree.invalid"}
_TRAILER = "Checkpoint-"
_ATTEMPTS = 3  # a manual checkpoint and a turn's at the same moment: the loser goes on top of the winner

# Run inside the worktree's sandbox: "$1" a temporary index, "$2" the tree the files are now, "$3" the target.
RESTORE_SCRIPT = rf"""
set -e
tmp_index=$1
trap 'rm -f -- "$tmp_index"' EXIT
rm -f -- "$tmp_index"
GIT_INDEX_FILE=$tmp_index
export GIT_INDEX_FILE
{SAFE_GIT} read-tree "$2"
if ! {SAFE_GIT} update-index --ignore-submodules --refresh >/dev/null 2>&1; then
    echo "its files changed while the restore began: nothing was restored" >&2
    exit 3
fi
{SAFE_GIT} read-tree -m -u "$2" "$3"
"""


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a worktree: `id` its place in the chain (1 = oldest)."""

    id: int
    commit: str
    tree: str
    ts: float
    files: int
    """Paths changed since the checkpoint before (the first: since the worktree's base commit)."""
    reason: str
    head: str | None = None
    """The worktree's branch commit when it was taken."""
    prompt: str | None = None
    """The first line of the turn's first prompt, where known."""
    parent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """What `checkpoint list --json` prints for it."""
        out: dict[str, Any] = {"id": self.id, "ts": self.ts, "commit": self.commit, "files": self.files,
                               "reason": self.reason, "head": self.head}
        if self.prompt:
            out["prompt"] = self.prompt
        return out


@dataclass(frozen=True)
class Restored:
    """A restore: the worktree's files became checkpoint `target`'s; `before` is the checkpoint of what they were
    (restore it to undo), `files` the paths that changed, `exact` whether the files read back as the target."""

    worktree: str
    target: Checkpoint
    before: Checkpoint
    files: tuple[str, ...]
    exact: bool

    def to_dict(self) -> dict[str, Any]:
        return {"worktree": self.worktree, "restored": self.target.id, "commit": self.target.commit,
                "before": self.before.id, "files": list(self.files), "exact": self.exact}


def ref_for(name: str) -> str:
    check_name(name, new=False)
    return REF_PREFIX + name


def prompt_line(text: str | None) -> str | None:
    """The first non-empty line of a prompt, shown escaped and cut to PROMPT_LIMIT (it is data: task text)."""
    for line in (text or "").splitlines():
        line = escape_controls(line.strip())
        if line:
            return line if len(line) <= PROMPT_LIMIT else line[:PROMPT_LIMIT - 1] + "…"
    return None


def _message(name: str, reason: str, ts: float, files: int, head: str | None, prompt: str | None, seq: int) -> str:
    lines = [f"daintree checkpoint of {name} ({reason})", "", f"{_TRAILER}Seq: {seq}", f"{_TRAILER}Ts: {ts:.3f}",
             f"{_TRAILER}Reason: {reason}", f"{_TRAILER}Files: {files}"]
    if head:
        lines.append(f"{_TRAILER}Head: {head}")
    if prompt:
        lines.append(f"{_TRAILER}Prompt: {prompt}")
    return "\n".join(lines) + "\n"


def _fields(body: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in body.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith(_TRAILER):
            fields[key[len(_TRAILER):].lower()] = value
    return fields


def _parse(index: int, commit: str, tree: str, parents: str, body: str) -> Checkpoint:
    fields = _fields(body)
    try:
        ts = float(fields.get("ts", "0"))
        files = int(fields.get("files", "0"))
    except ValueError:
        ts, files = 0.0, 0
    return Checkpoint(index, commit, tree, ts, files, fields.get("reason", "manual"), oid(fields.get("head", "")),
                      fields.get("prompt") or None, parents.split()[0] if parents.split() else None)


def tip(project: Project, name: str) -> str | None:
    return g.rev_parse_commit(project.root, ref_for(name))


_FORMAT = "--format=%H%x1f%T%x1f%P%x1f%B%x1e"


def _log(project: Project, rev: str, count: int | None) -> list[list[str]]:
    """The records (commit, tree, parents, message) of `count` checkpoints (None: all) from `rev` down, newest
    first."""
    out = g.git(project.root, "log", "--first-parent", *([f"-n{count}"] if count is not None else []), _FORMAT,
                rev, "--").stdout
    found = []
    for record in out.split("\x1e"):
        parts = record.strip("\n").split("\x1f")
        if len(parts) == 4 and oid(parts[0]):
            found.append(parts)
    return found


def _id_of(project: Project, record: list[str], at_least: int) -> int:
    """The id of the checkpoint `record` is: what it says (`Checkpoint-Seq`), or (a chain from before it said
    so, or a number that cannot be: fewer than the checkpoints read down from it) the commits down from it."""
    said = _fields(record[3]).get("seq", "")
    if said.isdigit() and len(said) < 10 and int(said) >= at_least:
        return int(said)
    return int(g.git(project.root, "rev-list", "--count", "--first-parent", record[0], "--").stdout.strip() or 0)


def chain(project: Project, name: str, newest: int | None = None) -> list[Checkpoint]:
    """Worktree `name`'s checkpoints, oldest first (none: []): the newest `newest` of them (None: all), each with
    its id in the whole chain."""
    head = tip(project, name)
    if head is None:
        return []
    records = _log(project, head, newest)
    if not records:
        return []
    whole = newest is None or len(records) < newest or not records[-1][2].split()
    top = len(records) if whole else _id_of(project, records[0], len(records))
    return [_parse(top - n, *record) for n, record in reversed(list(enumerate(records)))]


def last(project: Project, name: str) -> Checkpoint | None:
    """Worktree `name`'s newest checkpoint (what the next one goes on top of), read from the tip alone."""
    found = chain(project, name, 1)
    return found[-1] if found else None


def before(project: Project, checkpoint: Checkpoint) -> Checkpoint | None:
    """The checkpoint before `checkpoint` (None: it is the first)."""
    if checkpoint.parent is None or checkpoint.id <= 1:
        return None
    records = _log(project, checkpoint.parent, 1)
    return _parse(checkpoint.id - 1, *records[0]) if records else None


def resolve(project: Project, name: str, ident: str) -> Checkpoint:
    """The checkpoint `ident` names: its id, or a unique hex prefix (4+) of its commit (looked for among the
    newest LIST_NEWEST first, which the listing shows; the whole chain only when not there).

    Raises:
        InputError: no such checkpoint (exit 2).
    """
    text = ident.strip()
    newest = chain(project, name, LIST_NEWEST)
    top = newest[-1] if newest else None
    known = f"its checkpoints are 1..{top.id}" if top else "it has no checkpoints yet"
    if text.isdigit() and len(text) < 10:
        number = int(text)
        if top is not None and 1 <= number <= top.id:
            if number >= newest[0].id:
                return newest[number - newest[0].id]
            records = _log(project, f"{top.commit}~{top.id - number}", 1)
            if records:
                return _parse(number, *records[0])
        raise InputError(f"{name} has no checkpoint {text} ({known})")
    lowered = text.lower()
    if top is not None and len(lowered) >= 4 and set(lowered) <= set("0123456789abcdef"):
        matches = [c for c in newest if c.commit.startswith(lowered)]
        if not matches and newest[0].id > 1:  # older than the listing shows: the chain's commits, no messages
            older = g.git(project.root, "rev-list", "--first-parent", newest[0].commit, "--").stdout.split()[1:]
            places = [n for n, commit in enumerate(older) if commit.startswith(lowered)]
            if len(places) > 1:
                raise InputError(f"{text} names several checkpoints of {name}: give more digits, or its id")
            records = _log(project, older[places[0]], 1) if places else []
            if records:
                return _parse(newest[0].id - 1 - places[0], *records[0])
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise InputError(f"{text} names several checkpoints of {name}: give more digits, or its id")
    raise InputError(f"{name} has no checkpoint {text!r} ({known}; an id, or 4+ hex digits of its commit)")


def base_tree(project: Project, entry: WorktreeEntry) -> str | None:
    """The tree of the commit the worktree was created from: what its first checkpoint is compared with."""
    if oid(entry.base_commit or "") is None:
        return None
    proc = g.git(project.root, "rev-parse", "--verify", "--quiet", f"{entry.base_commit}^{{tree}}", check=False)
    return oid(proc.stdout) if proc.returncode == 0 else None


def _read(project: Project, *args: str) -> str:
    """`git args...` on objects in the repository, its output the bytes it is: names and contents are the agent's,
    not always UTF-8 (a file `n\\xff.txt` had every checkpoint of its worktree end in UnicodeDecodeError, the
    restore's first one too). Surrogateescape: a name is the very file again for `lstat`, and shown escaped."""
    argv, env = command(project.root, *args)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, errors="surrogateescape", env=env,
                              stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        raise OperationError(g.NO_GIT) from None
    if proc.returncode != 0:
        raise OperationError(f"git {args[0]} failed: {g.last_line(proc.stderr) or f'exit {proc.returncode}'}")
    return proc.stdout


def changed_paths(project: Project, old: str | None, new: str) -> list[str]:
    """Paths that differ between two trees (`old` None: every path of `new`), on objects only."""
    args = ["diff-tree", "-r", "--no-renames", "--name-only", "-z", old, new] if old else \
        ["ls-tree", "-r", "--name-only", "-z", new]
    return [p for p in _read(project, *args).split("\0") if p]


def take(project: Project, entry: WorktreeEntry, reason: str, prompt: str | None = None, *,
         tree: str | None = None, head: str | None = None) -> tuple[Checkpoint | None, Checkpoint | None]:
    """Record the worktree's files as a checkpoint unless they are as the last one (or, with none yet, as its
    base commit). Returns the new checkpoint (None when nothing changed) and the newest one after (the new one,
    the last one, or None when there is none). Reads the chain's tip alone, however long the chain.

    Raises:
        OperationError: the files could not be read whole, the worktree went away, git failed.
    """
    if tree is None:
        tree, head = read_work_tree(project, entry)
    ref = ref_for(entry.name)
    root = project.root
    for _ in range(_ATTEMPTS):
        newest = last(project, entry.name)
        before = newest.tree if newest is not None else base_tree(project, entry)
        if tree == before:
            return None, newest
        ts = round(time.time(), 3)
        files = len(changed_paths(project, before, tree))
        seq = newest.id + 1 if newest is not None else 1
        message = _message(entry.name, reason, ts, files, head, prompt_line(prompt), seq)
        argv, env = command(root, "commit-tree", "--no-gpg-sign", tree,
                            *(["-p", newest.commit] if newest else []), "-F", "-")
        proc = subprocess.run(argv, capture_output=True, text=True, input=message, check=False,
                              env={**env, **_IDENTITY, "GIT_AUTHOR_DATE": f"@{int(ts)} +0000",
                                   "GIT_COMMITTER_DATE": f"@{int(ts)} +0000"})
        commit = oid(proc.stdout) if proc.returncode == 0 else None
        if commit is None:
            raise OperationError(f"could not record a checkpoint of {entry.name}: "
                                 f"{g.last_line(proc.stderr) or proc.returncode}")
        with project.lock.hold():
            current = find(Index(project).load(), entry.name)
            if current is None or not current.live or current.path != entry.path:
                raise OperationError(f"worktree {entry.name} was removed: no checkpoint recorded")
            moved = g.git(root, "update-ref", "-m", f"daintree checkpoint ({reason})", ref, commit,
                          newest.commit if newest else "", check=False)
        if moved.returncode == 0:
            made = Checkpoint(seq, commit, tree, ts, files, reason, head, prompt_line(prompt),
                              newest.commit if newest else None)
            return made, made
    raise OperationError(f"the checkpoints of {entry.name} kept moving: none recorded (try again)")


def diff(project: Project, old: str | None, new: str, *, stat_only: bool = False, limit: int = DIFF_LIMIT) -> str:
    """The diff between two trees (or commits), on objects only: no external diff, no textconv (the files are
    the agent's: a driver named in its attributes is never run). At most `limit` bytes of it, then a line that
    says it was cut: every file under 64 MiB is in a checkpoint, and the dashboard read 40 MiB of one whole and
    spent minutes of its event loop highlighting it."""
    args = ["diff", "--no-ext-diff", "--no-textconv", "--no-color", *(["--stat"] if stat_only else [])]
    if old is None:  # the empty tree, in the repository's own hash
        old = g.git(project.root, "hash-object", "-t", "tree", "--stdin", input="").stdout.strip()
    argv, env = command(project.root, *args, old, new, "--")
    read = read_capped(argv, env, limit)
    if not read.cut and read.returncode != 0:
        raise OperationError(f"git diff failed: {g.last_line(read.stderr) or f'exit {read.returncode}'}")
    return cut_at(read.text, limit) if read.cut else read.text


def _in_the_way(worktree: Path, before: set[str], target: list[str]) -> list[str]:
    """Paths the restore would write over that are not in the state before: ignored files (or links, folders)
    that git's two-tree read would replace without a word. Looked at with lstat, never through a link."""
    found = []
    for path in target:
        if path in before:
            continue
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if prefix in before:
                break  # a file of the state before becomes a folder: git replaces what it recorded
            try:
                st = os.lstat(worktree / prefix)
            except OSError:
                break  # nothing there: nothing below either
            if depth == len(parts) or not stat.S_ISDIR(st.st_mode):  # a link to a folder is no folder here
                found.append(prefix)
                break
    return sorted(set(found))


def _listing(project: Project, tree: str) -> set[str]:
    return {p for p in _read(project, "ls-tree", "-r", "--name-only", "-z", tree).split("\0") if p}


def restore(project: Project, entry: WorktreeEntry, target: Checkpoint, before_tree: str) -> tuple[list[str], bool]:
    """Make the worktree's files `target`'s, from `before_tree` (what they are now, already checkpointed): the
    paths that changed, and whether the files read back exactly as the target.

    Raises:
        OperationError: an ignored file is in the way, the files changed meanwhile, git refused.
    """
    changed = changed_paths(project, before_tree, target.tree)
    if not changed:
        return [], True
    blocked = _in_the_way(Path(entry.path), _listing(project, before_tree), sorted(_listing(project, target.tree)))
    if blocked:
        shown = ", ".join(blocked[:5]) + (f" and {len(blocked) - 5} more" if len(blocked) > 5 else "")
        raise OperationError(f"restoring checkpoint {target.id} of {entry.name} would overwrite ignored files "
                             f"(or files over {MAX_FILE_BYTES >> 20} MiB, which no checkpoint holds): {shown} "
                             "(move them away first): nothing was restored")
    index = temp_index(project, entry.name, "restore")
    try:
        proc = WorktreeGit(project, entry).run_shell(RESTORE_SCRIPT, [str(index), before_tree, target.tree])
    finally:
        with suppressed(OSError):
            index.unlink()
    if proc.returncode != 0:
        raise OperationError(f"could not restore checkpoint {target.id} of {entry.name}: "
                             f"{g.last_line(proc.stderr) or f'exit {proc.returncode}'}")
    after, _ = read_work_tree(project, entry)
    return changed, after == target.tree


def drop(project: Project, name: str) -> bool:
    """Delete worktree `name`'s checkpoints (its ref; the commits go with git's next gc). True when it had any."""
    ref = ref_for(name)
    if g.rev_parse_commit(project.root, ref) is None:
        return False
    g.git(project.root, "update-ref", "-d", ref)
    return True


def names_with_checkpoints(project: Project) -> list[str]:
    """Every worktree name that has a checkpoint ref (live or not)."""
    out = g.git(project.root, "for-each-ref", "--format=%(refname)", REF_PREFIX, check=False).stdout
    return sorted(line[len(REF_PREFIX):] for line in out.splitlines() if line.startswith(REF_PREFIX))
