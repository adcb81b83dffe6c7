"""The repository's scripts that an unconfined hook runs, pinned by `daintree trust` (docs/design.md 2a).

Trust pins the bytes of `.daintree.toml`. A hook that runs outside the sandbox (`post_remove`: its worktree is
gone) and calls `./scripts/cleanup.sh` would otherwise run whatever that script is by then, and a merged branch
is an agent's way to change it: the agent's code would run unconfined. So trust also records the sha256 of every
repository file such a command names (and, followed, what those files name, and the file a runner it names reads:
`make` its Makefile, `npm run` its package.json), and the hook runs only while they are the same bytes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

from daintree_tui.core.log import suppressed

# Hooks that run outside any sandbox, whatever the config says.
UNCONFINED_HOOKS = ("post_remove",)

# The file a runner reads without naming it.
RUNNER_FILES = {"make": ("Makefile", "makefile", "GNUmakefile"), "npm": ("package.json",), "yarn": ("package.json",),
                "pnpm": ("package.json",), "bun": ("package.json",), "just": ("justfile", "Justfile", ".justfile"),
                "task": ("Taskfile.yml", "Taskfile.yaml"), "rake": ("Rakefile",), "tox": ("tox.ini",),
                "nox": ("noxfile.py",), "docker-compose": ("docker-compose.yml", "compose.yaml"),
                "docker": ("docker-compose.yml", "compose.yaml")}
FOLLOW_LIMIT = 100  # files followed per hook
READ_LIMIT = 1024 * 1024  # a file larger than this is hashed, not read for names
_SEPARATORS = re.compile(r"[\s;|&()<>`'\"=,]+")


def _words(text: str) -> list[str]:
    """The words of `text`, and each one's tails after a `/` (`$ROOT/scripts/lib.sh` names scripts/lib.sh,
    `$(dirname "$0")/lib.sh` names lib.sh beside the script): a name too many costs a pin, one too few a hole."""
    words: list[str] = []
    for word in _SEPARATORS.split(text):
        parts = word.split("/")
        words += [tail for i in range(len(parts)) if (tail := "/".join(parts[i:])) and not tail.startswith("/")]
        if word.startswith("/"):
            words.append(word)
    return words


def _inside(root: Path, word: str, base: Path) -> Path | None:
    """The regular file inside `root` that `word` names (relative to `base`), else None; never in `.git`."""
    if word.startswith("-") or "\0" in word:
        return None
    with suppressed(OSError, ValueError):
        path = (base / word).resolve()
        if path.is_relative_to(root) and ".git" not in path.relative_to(root).parts and path.is_file():
            return path
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def named_files(root: Path, commands: Sequence[str]) -> dict[str, str]:
    """Every repository file (relative path -> sha256) that `commands`, run in `root`, name or reach."""
    root = root.resolve()
    found: dict[Path, None] = {}
    pending: list[Path] = []
    for command in commands:
        words = _words(command)
        for word in words:
            for name in RUNNER_FILES.get(Path(word).name, ()):
                if (hit := _inside(root, name, root)) is not None:
                    pending.append(hit)
            if (hit := _inside(root, word, root)) is not None:
                pending.append(hit)
    while pending and len(found) < FOLLOW_LIMIT:
        path = pending.pop()
        if path in found:
            continue
        found[path] = None
        with suppressed(OSError, UnicodeDecodeError):
            if path.stat().st_size <= READ_LIMIT:
                for word in _words(path.read_bytes().decode()):
                    for base in (root, path.parent):
                        if (hit := _inside(root, word, base)) is not None and hit not in found:
                            pending.append(hit)
    pins: dict[str, str] = {}
    for path in found:
        with suppressed(OSError):
            pins[path.relative_to(root).as_posix()] = _sha256(path)
    return pins


def changed(recorded: object, current: dict[str, str]) -> list[str]:
    """The files whose bytes differ from the record (or that appeared or went since), sorted."""
    before = {k: v for k, v in recorded.items() if isinstance(k, str)} if isinstance(recorded, dict) else {}
    return sorted(name for name in {*before, *current} if before.get(name) != current.get(name))
