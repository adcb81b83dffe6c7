"""A worktree's commit made from the outside without running the agent's code there (`worktree commit`, and an
agent's own commit request applied from its inbox)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from daintree_tui.core import git as g
from daintree_tui.core.agent_git import whole
from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import OperationError
from daintree_tui.core.fs_safe import read_state_file
from daintree_tui.core.log import suppressed
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.runner import run_command
from daintree_tui.core.sandbox import bring_in, wrap_command
from daintree_tui.core.worktree_git import WorktreeGit


def commit_confined(project: Project, entry: WorktreeEntry, git: WorktreeGit, message: str) -> str:
    """Commit what is staged: the user's hooks and the tree run inside the worktree's sandbox, the commit
    object and the branch's move are made here, from objects alone; the new commit.

    Hooks like pre-commit, husky's lint-staged or a `make lint` run what the worktree holds (an agent's
    `.pre-commit-config.yaml`, package.json, Makefile): run outside, an agent's own `worktree commit` request
    (applied from its inbox) ran its code with the user's full access. So pre-commit, prepare-commit-msg and
    commit-msg run first, confined, and post-commit after. `git commit` itself writes through the admin dir
    (`COMMIT_EDITMSG`, `logs/HEAD`, the index), so the tree is written inside (`write-tree`, into the
    quarantine), brought in checked, and the commit made here with `commit-tree`, which reads no file of the
    worktree: signing (gpg or ssh keys, hidden in the sandbox) still works.
    """
    path = Path(entry.path)
    pinned = g.pinned_hooks(project.root)
    hooks_dir = Path(pinned[1].split("=", 1)[1]) if pinned else None

    def hook(name: str, *args: str) -> None:
        # Run as git runs a hook (an executable of that name, in the worktree), by hand: `git hook run` is
        # git 2.36 and later.
        script = hooks_dir / name if hooks_dir is not None else None
        if script is None or not script.is_file() or not os.access(script, os.X_OK):
            return
        _, env = g.command(path)
        env = worktree_env(project, entry, {**env, "GIT_EDITOR": ":"})
        result = run_command(wrap_command(project, entry, [str(script), *args], env, kind=None), path, env, None)
        if result.exit_code != 0:
            said = g.last_line(result.stderr) or g.last_line(result.stdout) or f"exit {result.exit_code}"
            raise OperationError(f"{entry.name}: the {name} hook refused the commit: {said}")

    tmpdir = project.tmpdir_for(entry.name)
    tmpdir.mkdir(parents=True, exist_ok=True)
    # In the TMPDIR: the confined hooks may edit the message; a name of our own making (O_EXCL), read back
    # only as a regular file.
    fd, msg_name = tempfile.mkstemp(prefix="commit-msg-", suffix=".txt", dir=tmpdir)
    msg_file = Path(msg_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(message if message.endswith("\n") else message + "\n")
        hook("pre-commit")
        hook("prepare-commit-msg", str(msg_file), "message")
        hook("commit-msg", str(msg_file))
        final = read_state_file(msg_file).decode("utf-8", "replace")
    finally:
        msg_file.unlink(missing_ok=True)
    cleaned = g.git(project.root, "stripspace", input=final).stdout
    if not cleaned.strip():
        raise OperationError(f"{entry.name}: the commit message is empty (after the commit-msg hook)")
    tree = git("write-tree").stdout.strip()
    parent = bring_in(project, entry)
    root = project.root
    # The tree alone is not enough: the agent's index can name a tree of its own whose blobs exist nowhere
    # (`mktree --missing`, then `read-tree`: `write-tree` answers from the index's cache of trees), and a
    # commit of it made a branch that `git fsck` and `git gc` of the whole repository fail on.
    if not whole(root, tree, "tree", parent):
        raise OperationError(f"{entry.name}: the staged tree {tree[:12]} did not come through the sandbox's "
                             "check whole (objects missing or refused): nothing was committed")
    sign = g.git(root, "config", "--type=bool", "commit.gpgSign", check=False).stdout.strip() == "true"
    sha = g.git(root, "commit-tree", *(["-S"] if sign else []), tree, *(["-p", parent] if parent else []),
                "-F", "-", input=cleaned).stdout.strip()
    subject = cleaned.splitlines()[0] if cleaned.strip() else ""
    g.git(root, "update-ref", "-m", f"commit: {subject}", f"refs/heads/{entry.branch}", sha, parent or "")
    bring_in(project, entry)  # the agent's ref folder follows the branch
    with suppressed(OperationError):
        hook("post-commit")  # as git does: its failure changes nothing
    return sha
