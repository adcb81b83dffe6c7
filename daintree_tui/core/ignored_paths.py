"""What a merge or checkout would write over that git ignores: the user's `.env`, a build folder, a link.

Git treats an ignored file as expendable: a checkout or fast-forward that brings a tracked `.env` replaces the
user's own with no word (an agent commits one with `git add -f`). `worktree diff` (and the dashboard's) marks such
paths; a merge refuses them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from daintree_tui.core import git as g

IGNORED_MARK = "replaces an ignored file: "  # how `worktree diff` (and the dashboard's diff) marks such a path
_SPECS_PER_CALL = 500  # pathspecs per `ls-files`: a merge of many thousand files stays under the argv limit


def written_paths(cwd: Path, *revs: str, run: Callable[..., subprocess.CompletedProcess[str]] = g.git) -> list[str]:
    """The paths a change between `revs` adds, modifies, renames to or changes the type of (deletions aside)."""
    out = run(cwd, "diff", "--name-only", "-z", "--no-renames", "--diff-filter=d", *revs, "--").stdout
    return [p for p in out.split("\0") if p]


def ignored_in_the_way(checkout: Path, paths: list[str]) -> list[str]:
    """What `checkout` holds untracked and ignored that writing `paths` there would replace or write into.

    Git treats an ignored file as expendable: a checkout or fast-forward that brings a tracked `.env` replaces
    the user's own with no word (an agent commits one with `git add -f`). In the way are: an ignored file, link or
    folder at one of `paths`; an ignored file or link where one of them needs a folder (`logs` for `logs/a`); an
    ignored folder one of them would go into (`node_modules/` for `node_modules/.bin/x`); and what is ignored
    inside a folder that one of them replaces with a file. Git decides what is ignored (every exclude source it
    reads itself); folders are named with a trailing `/`.
    """
    wanted = set(paths)
    above: set[str] = set()  # the folders `paths` need
    for path in wanted:
        parts = path.split("/")
        above.update("/".join(parts[:i]) for i in range(1, len(parts)))
    specs = sorted(wanted | above)
    entries: dict[str, None] = {}
    for start in range(0, len(specs), _SPECS_PER_CALL):
        chunk = [f":(literal){spec}" for spec in specs[start:start + _SPECS_PER_CALL]]
        out = g.git(checkout, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory", "--",
                    *chunk).stdout
        entries.update(dict.fromkeys(e for e in out.split("\0") if e))
    found = []
    for entry in entries:
        bare = entry.rstrip("/")
        parts = bare.split("/")
        inside_replaced = any("/".join(parts[:i]) in wanted for i in range(1, len(parts)))
        # An entry only under a folder that stays a folder (ignored `src/x.pyc` beside a new `src/y.py`) is safe.
        if bare in wanted or bare in above or inside_replaced:
            found.append(entry)
    return sorted(found)


def _shown(path: str) -> str:
    """A path as one line of text: quoted (JSON's escapes) when it holds a control, a quote or a backslash."""
    return json.dumps(path, ensure_ascii=False) if any(c < " " or c in '"\\\x7f' for c in path) else path


def marked(diff: str, ignored: list[str]) -> str:
    """`diff` after a line `replaces an ignored file: PATH` for each of `ignored`."""
    return "".join(f"{IGNORED_MARK}{_shown(path)}\n" for path in ignored) + diff


def named(paths: list[str], most: int = 5) -> str:
    return ", ".join(map(_shown, paths[:most])) + (f" and {len(paths) - most} more" if len(paths) > most else "")
