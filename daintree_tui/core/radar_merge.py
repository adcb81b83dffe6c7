"""The radar's merges (core/radar.py): git's own `merge-tree --write-tree`, many pairs in one process through
`--stdin`, outside, on objects only; each answer kept per pair of commits, so a pass over what did not change asks
git for nothing. And whether a worktree's work is in its target already (`landed`): a branch squashed or rebased
onto its target is never the target's ancestor, and would otherwise be predicted to conflict with every later
change of the same lines, and with the target itself once that had moved on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from daintree_tui.core import git as g

COMMIT_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class MergeAnswer(NamedTuple):
    """What git said of one merge: clean or not, the conflicted files, the tree it wrote."""

    clean: bool
    files: tuple[str, ...]
    tree: str = ""


def parse_merge_tree(out: str, count: int) -> list[MergeAnswer | None]:
    """The answers of `git merge-tree --write-tree --name-only -z --stdin` to `count` merges, in order, None where
    the output ended early. Per merge git prints its status (1 clean, 0 not), the tree, the conflicted files and an
    empty field; after a conflicted one, its messages, each a count of paths, the paths, a type and a text, and an
    empty field."""
    tokens = out.split("\0")
    answers: list[MergeAnswer | None] = []
    i = 0
    try:
        for _ in range(count):
            status, tree = tokens[i], tokens[i + 1]
            i += 2
            files: list[str] = []
            while tokens[i] != "":
                files.append(tokens[i])
                i += 1
            i += 1
            if status == "0":
                while tokens[i] != "":
                    i += 1 + int(tokens[i]) + 2
                i += 1
            answers.append(MergeAnswer(status == "1", tuple(dict.fromkeys(files)), tree))
    except (IndexError, ValueError):
        pass
    return answers + [None] * (count - len(answers))


def merge_one(root: Path, a: str, b: str) -> MergeAnswer | None:
    """One merge, without `--stdin`: git prints the tree, then (conflicted) the files, an empty field, messages."""
    proc = g.git(root, "merge-tree", "--write-tree", "--name-only", "-z", a, b, check=False)
    if proc.returncode not in (0, 1):
        return None
    tree, *rest = proc.stdout.split("\0")
    files = rest[:rest.index("")] if "" in rest else rest
    return MergeAnswer(proc.returncode == 0, tuple(dict.fromkeys(files)), tree.strip())


class Merges:
    """Every merge the radar asked for, by pair of commits (either order), and what it learnt of landings."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.answers: dict[tuple[str, str], MergeAnswer] = {}
        self.ancestors: dict[tuple[str, str], bool] = {}

    def merge_all(self, pairs: Iterable[tuple[str, str]]) -> tuple[list[MergeAnswer | None], int]:
        """Each pair's answer: known ones from the cache, the rest from one `git merge-tree --stdin`; how many git
        merged."""
        keys = [(a, b) if a <= b else (b, a) for a, b in pairs]
        missing = list(dict.fromkeys(k for k in keys if k not in self.answers))
        if missing:
            out = g.git(self.root, "merge-tree", "--write-tree", "--name-only", "-z", "--stdin",
                        input="".join(f"{a} {b}\n" for a, b in missing), check=False).stdout
            for key, answer in zip(missing, parse_merge_tree(out, len(missing)), strict=True):
                # The batch stops at a pair git cannot merge (unrelated histories): the rest one by one. A pair that
                # cannot be merged at all has no prediction, and is not asked again while its commits stay.
                self.answers[key] = answer or merge_one(self.root, *key) or MergeAnswer(True, ())
        return [self.answers.get(k) for k in keys], len(missing)

    def is_ancestor(self, commit: str, of: str) -> bool:
        key = (commit, of)
        if key not in self.ancestors:
            self.ancestors[key] = g.is_ancestor(self.root, commit, of)
        return self.ancestors[key]

    def recorded_landed(self, extra: Mapping[str, Any], tip: str, target: str, target_tip: str) -> bool:
        """Whether the index says this branch tip landed on `target` (`landed`, written by `worktree merge` and
        the train) as a commit the target still holds: its work is in the target, however the target moved on
        since. The record is the outside's own; its commit is checked against git all the same."""
        landed = extra.get("landed")
        if not isinstance(landed, dict) or landed.get("tip") != tip or landed.get("into") != target:
            return False
        commit = landed.get("commit")
        return isinstance(commit, str) and COMMIT_RE.fullmatch(commit) is not None \
            and self.is_ancestor(commit, target_tip)

    def forget(self, limit: int) -> None:
        """Keep at most `limit` answers of each kind, the newest (dicts keep their order)."""
        while len(self.answers) > limit:
            self.answers.pop(next(iter(self.answers)))
        while len(self.ancestors) > limit:
            self.ancestors.pop(next(iter(self.ancestors)))
