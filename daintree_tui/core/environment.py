"""The environment every session, hook and `run` gets (docs/design.md section 4)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project

REMOVED_VARS = ("CLAUDECODE",)


def worktree_env(project: Project, entry: WorktreeEntry, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment plus ours; `CLAUDECODE` removed so a nested `claude` starts."""
    env = dict(os.environ if base is None else base)
    for name in REMOVED_VARS:
        env.pop(name, None)
    for name in [k for k in env if k.startswith("DAINTREE_PORT_")]:
        del env[name]
    tmpdir = project.tmpdir_for(entry.name)
    env.update({
        "DAINTREE_TASK_ID": "" if entry.task_id is None else str(entry.task_id),
        "DAINTREE_WORKTREE": entry.name,
        "DAINTREE_WORKTREE_PATH": entry.path,
        "DAINTREE_BRANCH": entry.branch,
        "DAINTREE_ROOT": str(project.root),
        "TMPDIR": str(tmpdir),
    })
    if entry.ports:
        env["PORT"] = str(entry.ports[0])
        for i, port in enumerate(entry.ports):
            env[f"DAINTREE_PORT_{i}"] = str(port)
    return env
