"""The conflict radar: which live worktrees' work would conflict with each other's, or with their base's tip.

A worktree's *work* is what a merge of it would bring: its commits since it left its target branch and what it
holds uncommitted (tracked and untracked files, ignored ones not). The uncommitted part is read as a tree the
way `worktree commit` reads one (docs/design.md 2a rule 9): inside the worktree's sandbox, through a temporary index
(a copy of its own, in its TMPDIR), so its index, HEAD and files stay as they are; the objects that writes come
in through the quarantine check (`bring_in`) and the tree must be whole before anything here reads it. A commit
of that tree on top of the branch (`commit-tree` outside, objects only, fixed identity and date so that the same
work is the same commit on every pass) stands for the work.

Predictions use git's own merge machinery (`git merge-tree --write-tree`, git 2.38 and later, all pairs in one
process through `--stdin`), outside, on objects only. A pair is merged only when both sides change a common
path since they left their target (`changed_paths`), so the cost follows the pairs that overlap, not n^2; each
result is kept per pair of commits, and so is every other answer (a fork point, a list of paths), so a pass over
worktrees where nothing changed asks git for one listing of the branches and nothing else.

A worktree whose work is in its target already (squashed or rebased there, so never the target's ancestor) is
left out (core/radar_merge.py `landed`): it had been predicted to conflict with every later change of its lines.

Two worktrees whose fork points differ are compared on what each changed since its own fork point: a file one
changed that the target changed in between is that worktree's conflict with the target, reported as such.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daintree_tui.core import git as g
from daintree_tui.core import ownership
from daintree_tui.core.agent_git import whole
from daintree_tui.core.errors import OperationError
from daintree_tui.core.log import suppressed
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.radar_merge import Merges
from daintree_tui.core.sandbox import bring_in
from daintree_tui.core.spawn import command
from daintree_tui.core.work_tree import oid, read_work_tree

WORKERS = 4  # git and sandbox starts at once: most of each is a wait on a fork, a mount table, the disk

# What a commit standing for uncommitted work is made of: the same tree on the same parent is the same commit.
_WORK_COMMIT_ENV = {"GIT_AUTHOR_NAME": "daintree radar", "GIT_AUTHOR_EMAIL": "radar@daintree.invalid",
                    "GIT_AUTHOR_DATE": "@0 +0000", "GIT_COMMITTER_NAME": "daintree radar",
                    "GIT_COMMITTER_EMAIL": "radar@daintree.invalid", "GIT_COMMITTER_DATE": "@0 +0000"}
_oid = oid


@dataclass(frozen=True)
class Conflict:
    """A predicted conflict: `worktree` (the first of the two by name, or the worktree facing its target) with
    `other` (another worktree's name, or the target branch's), in `files`."""

    worktree: str
    other: str
    files: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"worktree": self.worktree, "other": self.other, "files": list(self.files)}


@dataclass(frozen=True)
class RadarReport:
    """One pass of the radar."""

    conflicts: tuple[Conflict, ...] = ()
    unreadable: Mapping[str, str] = field(default_factory=dict)
    """Worktrees whose work could not be read this pass, and why (their last known work stands in, if any)."""
    merges: int = 0
    """How many merges git was asked for (0 when every answer was known from an earlier pass)."""
    seconds: float = 0.0
    names: frozenset[str] = frozenset()
    """The worktrees of this pass (to tell a worktree from a target branch of the same name)."""

    def involving(self, name: str) -> list[Conflict]:
        return [c for c in self.conflicts if name in (c.worktree, c.other)]

    def others(self, name: str) -> list[str]:
        """The names `name` conflicts with: worktrees and target branches, each once."""
        return sorted({c.other if c.worktree == name else c.worktree for c in self.involving(name)})

    def by_worktree(self) -> dict[str, tuple[tuple[str, tuple[str, ...]], ...]]:
        """name -> ((other, files), ...) for every worktree in a conflict (both sides of a pair of worktrees)."""
        out: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for c in self.conflicts:
            out.setdefault(c.worktree, []).append((c.other, c.files))
            if c.other in self.names:
                out.setdefault(c.other, []).append((c.worktree, c.files))
        return {name: tuple(found) for name, found in out.items()}


@dataclass
class _Work:
    name: str
    entry: WorktreeEntry
    target: str | None = None
    target_tip: str | None = None
    target_tree: str | None = None
    tip: str | None = None
    commit: str | None = None  # the tip, or a commit of the uncommitted work on top of it
    fork: str | None = None
    paths: frozenset[str] = frozenset()


class Radar:
    """Predicts conflicts between live worktrees. One instance remembers what git said, so a pass over what did not
    change costs next to nothing; `scan` is safe to call from several threads (one pass at a time)."""

    def __init__(self, project: Project, entries: Any) -> None:
        """`entries`: a callable returning the index's entries (`WorktreeService.entries`)."""
        self.project = project
        self._entries = entries
        self._lock = threading.Lock()
        self._trees: dict[str, str] = {}  # name -> the tree of its files, as last read
        self._checked: set[str] = set()  # trees known whole in the shared store
        self._commits: dict[tuple[str, str], str] = {}  # (tree, tip) -> a commit of that tree on that tip
        self._forks: dict[tuple[str, str], str | None] = {}
        self._paths: dict[tuple[str, str], frozenset[str]] = {}
        self._merges = Merges(project.root)

    # -- one pass ------------------------------------------------------------------------------------------------

    def scan(self, entries: Sequence[WorktreeEntry] | None = None, *, dirty: Mapping[str, int] | None = None,
             changed: Collection[str] | None = None) -> RadarReport:
        """Predict the conflicts of the live worktrees (`entries`, default: all in the index).

        Args:
            dirty: uncommitted-file counts already known (the git facts): a worktree known clean needs no look
                inside its sandbox.
            changed: the worktrees whose files may have changed since the last pass (None: any); the others'
                files are taken as last read. Branch tips are read every pass.
        """
        with self._lock:
            start = time.monotonic()
            return self._scan(entries, dirty or {}, changed, start)

    def _scan(self, entries: Sequence[WorktreeEntry] | None, dirty: Mapping[str, int],
              changed: Collection[str] | None, start: float) -> RadarReport:
        project = self.project
        if not project.is_git:
            return RadarReport()
        live = [e for e in (entries if entries is not None else self._entries()) if e.live and Path(e.path).is_dir()]
        unreadable: dict[str, str] = {}
        fresh = {e.name for e in live if e.name not in self._trees or changed is None or e.name in changed}
        to_read = [e for e in live if e.name in fresh and dirty.get(e.name) != 0]
        reading = {e.name for e in to_read}
        for entry in live:
            if entry.name not in reading:
                with suppressed(OperationError, OSError):
                    bring_in(project, entry, quick=True)  # what its agent committed, before its tip is read
        if to_read:
            listed = ownership.linked_worktrees(project)
            with ThreadPoolExecutor(max_workers=min(WORKERS, len(to_read))) as pool:
                for entry, (tree, problem) in zip(to_read, pool.map(lambda e: self._read_tree(e, listed), to_read),
                                                  strict=True):
                    if tree is not None:
                        self._trees[entry.name] = tree
                    else:
                        unreadable[entry.name] = problem
                        # Read again at the next pass, told or not; meanwhile its branch stands for its work.
                        self._trees.pop(entry.name, None)
        refs = self._branches()
        head = g.git(project.root, "symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip()
        works: list[_Work] = []
        for entry in live:
            tip_tree = refs.get(entry.branch)
            if tip_tree is None:
                unreadable.setdefault(entry.name, f"its branch {entry.branch} names no commit")
                continue
            tip, tip_tree_id = tip_tree
            if entry.name in fresh and dirty.get(entry.name) == 0:
                self._trees[entry.name] = tip_tree_id
            tree = self._trees.get(entry.name, tip_tree_id)
            work = _Work(entry.name, entry, tip=tip)
            work.target = self._target(entry, refs, head)
            work.target_tip, work.target_tree = refs.get(work.target or "", (None, None))
            try:
                work.commit = tip if tree == tip_tree_id else self._work_commit(entry, tree, tip)
            except OperationError as exc:
                unreadable.setdefault(entry.name, str(exc))
                work.commit = tip
            works.append(work)
        self._forget(live)
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            list(pool.map(self._place, works))
            targets = {(w.fork, w.target_tip) for w in works if w.fork and w.target_tip}
            target_paths = dict(zip(targets, pool.map(lambda ft: self._changed(*ft), targets), strict=True))
        landed, merges = self._landed(works, target_paths)
        works = [w for w in works if w.name not in landed]
        pairs = self._candidate_pairs(works, target_paths)
        results, more = self._merges.merge_all([(a, b) for _, _, a, b in pairs])
        merges += more
        conflicts = []
        by_name = {w.name: w for w in works}
        for (left, right, _, _), result in zip(pairs, results, strict=True):
            files = () if result is None or result.clean else result.files
            if files and right in by_name:
                files = _own_files(by_name[left], by_name[right], files, target_paths)
            if files:
                conflicts.append(Conflict(left, right, files))
        return RadarReport(tuple(sorted(conflicts, key=lambda c: (c.worktree, c.other))), unreadable, merges,
                           time.monotonic() - start, frozenset(w.name for w in works))

    def _read_tree(self, entry: WorktreeEntry, listed: list[Path]) -> tuple[str | None, str]:
        """The tree of the worktree's files (committed, uncommitted and untracked alike), read in its sandbox and
        brought in checked (core/work_tree.py); or None and why not."""
        try:
            tree, tip = read_work_tree(self.project, entry, listed, checked=False)
        except OperationError as exc:
            return None, str(exc)
        if tree not in self._checked:
            if not whole(self.project.root, tree, "tree", tip):
                return None, f"its uncommitted work {tree[:12]} did not come through the sandbox's check whole"
            self._checked.add(tree)
        return tree, ""

    def _branches(self) -> dict[str, tuple[str, str]]:
        """branch -> (commit, its tree), for every branch that names a commit: one git call."""
        out = g.git(self.project.root, "for-each-ref", "--format=%(objecttype) %(objectname) %(tree) %(refname)",
                    "refs/heads/").stdout
        refs: dict[str, tuple[str, str]] = {}
        for line in out.splitlines():
            kind, _, rest = line.partition(" ")
            commit, _, rest = rest.partition(" ")
            tree, _, ref = rest.partition(" ")
            if kind == "commit" and ref.startswith("refs/heads/"):
                refs[ref[len("refs/heads/"):]] = (commit, tree)
        return refs

    def _target(self, entry: WorktreeEntry, refs: Mapping[str, object], head: str) -> str | None:
        """Where the worktree would merge: `ReviewService.target_branch`'s rule (its base branch, else the
        primary's), asked of the branch listing instead of git once per worktree."""
        if entry.base_ref != "HEAD" and entry.base_ref in refs:
            return entry.base_ref
        return head or None

    def _work_commit(self, entry: WorktreeEntry, tree: str, tip: str) -> str:
        key = (tree, tip)
        if key not in self._commits:
            argv, env = command(self.project.root, "commit-tree", "--no-gpg-sign", tree, "-p", tip, "-m",
                                f"daintree radar: uncommitted work of {entry.name}")
            proc = subprocess.run(argv, capture_output=True, text=True, env={**env, **_WORK_COMMIT_ENV},
                                  stdin=subprocess.DEVNULL, check=False)
            commit = _oid(proc.stdout) if proc.returncode == 0 else None
            if commit is None:
                raise OperationError(f"could not stand its uncommitted work for a commit: "
                                     f"{g.last_line(proc.stderr) or proc.returncode}")
            self._commits[key] = commit
        return self._commits[key]

    def _place(self, work: _Work) -> None:
        """Its fork point from the target and the paths it changed since."""
        if work.tip is None or work.commit is None:
            return
        if work.target_tip is not None and work.target != work.entry.branch:
            key = (work.tip, work.target_tip)
            if key not in self._forks:
                proc = g.git(self.project.root, "merge-base", work.tip, work.target_tip, check=False)
                self._forks[key] = _oid(proc.stdout) if proc.returncode == 0 else None
            work.fork = self._forks[key]
        base = work.fork or work.entry.base_commit
        if _oid(base) is not None:
            work.paths = self._changed(base, work.commit)

    def _changed(self, old: str, new: str) -> frozenset[str]:
        key = (old, new)
        if key not in self._paths:
            proc = g.git(self.project.root, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff",
                         "--no-textconv", old, new, "--", check=False)
            self._paths[key] = frozenset(p for p in proc.stdout.split("\0") if p) if proc.returncode == 0 \
                else frozenset()
        return self._paths[key]

    def _candidate_pairs(self, works: list[_Work],
                         target_paths: Mapping[tuple[str, str], frozenset[str]]) -> list[tuple[str, str, str, str]]:
        """(worktree, other, its commit, the other's) for every pair that changes a common path: each worktree with
        its target's tip, and each two worktrees, found through the paths (never by trying every pair)."""
        pairs = [(w.name, w.target or "", w.commit or "", w.target_tip or "") for w in works
                 if _faces_target(w, target_paths)]
        by_path: dict[str, list[int]] = {}
        for i, w in enumerate(works):
            for path in w.paths:
                by_path.setdefault(path, []).append(i)
        overlapping: set[tuple[int, int]] = set()
        for holders in by_path.values():
            for x, i in enumerate(holders):
                for j in holders[x + 1:]:
                    overlapping.add((i, j) if works[i].name < works[j].name else (j, i))
        for i, j in sorted(overlapping, key=lambda p: (works[p[0]].name, works[p[1]].name)):
            a, b = works[i], works[j]
            if a.commit and b.commit and a.commit != b.commit:
                pairs.append((a.name, b.name, a.commit, b.commit))
        return pairs

    def _landed(self, works: list[_Work], target_paths: Mapping[tuple[str, str], frozenset[str]]) -> tuple[
            set[str], int]:
        """The worktrees whose work is in their target already, and how many merges git was asked for: the index
        says their tip landed there (`landed`, a squash that the target then changed further), or their merge into
        the target changes nothing (git's tree is the target's own)."""
        found = {w.name for w in works if w.tip and w.commit == w.tip and w.target and w.target_tip
                 and self._merges.recorded_landed(w.entry.extra, w.tip, w.target, w.target_tip)}
        asked = [w for w in works if w.name not in found and _faces_target(w, target_paths)]
        answers, merges = self._merges.merge_all([(w.commit or "", w.target_tip or "") for w in asked])
        found.update(w.name for w, answer in zip(asked, answers, strict=True)
                     if answer is not None and answer.clean and answer.tree == w.target_tree)
        return found, merges

    def _forget(self, live: list[WorktreeEntry]) -> None:
        """Drop what only gone worktrees used, so the caches follow the live set."""
        names = {e.name for e in live}
        for name in [n for n in self._trees if n not in names]:
            del self._trees[name]
        limit = 20 * max(len(live), 10)
        if len(self._checked) > limit:
            self._checked.clear()  # checked again when next read: whole once is whole for good
        for cache in (self._commits, self._forks, self._paths):
            while len(cache) > limit:
                cache.pop(next(iter(cache)))  # the oldest first (dicts keep their order)
        self._merges.forget(limit)


def _faces_target(w: _Work, target_paths: Mapping[tuple[str, str], frozenset[str]]) -> bool:
    """Whether a merge of the worktree into its target is worth asking: the target moved since it forked, on a
    path that the worktree changed too."""
    return bool(w.fork and w.target_tip and w.target and w.commit and w.target_tip != w.fork
                and w.paths & target_paths.get((w.fork, w.target_tip), frozenset()))


def _own_files(a: _Work, b: _Work, files: tuple[str, ...],
               target_paths: Mapping[tuple[str, str], frozenset[str]]) -> tuple[str, ...]:
    """The files of a conflict of two worktrees that is theirs: a file one of them did not change, whose change on
    that side came from the target after the other forked, is the other's conflict with the target (reported as
    such), not a conflict between the two (a worktree made after main moved on carries main's change)."""
    def from_target(side: _Work, other: _Work, path: str) -> bool:
        return path not in side.paths and path in target_paths.get((other.fork or "", other.target_tip or ""), ())
    return tuple(f for f in files if not (from_target(a, b, f) or from_target(b, a, f)))


def conflict_names(report: RadarReport, names: Iterable[str]) -> dict[str, list[str]]:
    """name -> the names it conflicts with, for `worktree list --json`'s `conflicts`."""
    return {name: report.others(name) for name in names}

