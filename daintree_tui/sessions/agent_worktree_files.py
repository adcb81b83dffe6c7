"""What an agent writes about itself into the worktree it works in, kept out of the worktree's work.

aider keeps its chat and input history (`.aider.chat.history.md`, `.aider.input.history`) and its repo map's cache
(`.aider.tags.cache.v3/` or `v4/`, by its tree-sitter pack) in the repository's top folder, and asks to add
`.aider*` to the repository's `.gitignore` (a change to a tracked file). Each of them made the worktree dirty, so
`worktree merge` and the train skipped it ("uncommitted changes") after every run. Its histories go to the
session's own folder outside the worktree (`--chat-history-file`, `--input-history-file`: the session's TMPDIR,
writable in its sandbox, removed with the worktree), it is told not to touch `.gitignore` (`--no-gitignore`), and
its cache folders, for which it has no option, hold a `.gitignore` of `*`, so git sees nothing in them. Options
the user's preset gives itself win (they come after ours). Nothing of the user's is moved or deleted: a history
already in the worktree stays where it is.
"""

from __future__ import annotations

import os
from pathlib import Path

from daintree_tui.core.log import suppressed

AIDER_HISTORIES = (("--chat-history-file", "chat.history.md"), ("--input-history-file", "input.history"))
AIDER_GITIGNORE_FLAGS = ("--gitignore", "--no-gitignore")
AIDER_CACHES = (".aider.tags.cache.v3", ".aider.tags.cache.v4")
IGNORE_ALL = "# Written by daintree: aider's cache is not the worktree's work.\n*\n"


def _given(argv: list[str], flags: tuple[str, ...]) -> bool:
    return any(arg == flag or arg.startswith(f"{flag}=") for arg in argv[1:] for flag in flags)


def keep_out_of_worktree(argv: list[str], worktree: Path, state: Path) -> list[str]:
    """`argv` with the options that keep its agent's own files out of `worktree` (aider's: see the module), its
    histories in `state`; the cache folders made ignored. Other agents' command lines come back as they are."""
    if not argv or os.path.basename(argv[0]) != "aider":
        return argv
    ours: list[str] = []
    for flag, name in AIDER_HISTORIES:
        if not _given(argv, (flag,)):
            ours += [flag, str(state / name)]
    if ours:
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _given(argv, AIDER_GITIGNORE_FLAGS):
        ours.append("--no-gitignore")
    for folder in AIDER_CACHES:
        ignored_folder(worktree, folder)
    return [argv[0], *ours, *argv[1:]]


def ignored_folder(worktree: Path, name: str) -> bool:
    """Make `worktree/name/` hold a `.gitignore` of `*` (git then lists nothing in it); False when it could not.
    The worktree is the agent's to write: the folder and the file are made only where nothing is, never through a
    link (a link there is left alone), and nothing that exists is written over."""
    try:
        top = os.open(worktree, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # ours: checked as the session's
    except OSError:
        return False
    try:
        with suppressed(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=top)
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top)
        try:
            fd = os.open(".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=sub)
        except FileExistsError:
            return True  # the agent's own, or ours from an earlier run
        finally:
            os.close(sub)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(IGNORE_ALL)
        return True
    except OSError:
        return False
    finally:
        os.close(top)
