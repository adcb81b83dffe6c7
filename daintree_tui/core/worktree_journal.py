"""The journal of in-flight worktree operations: one file per create or remove under way
(`.worktrees/.journal/<name>.json`), so that `doctor --fix` finishes or undoes what a `kill -9` interrupted. A
journal is data (it may have come with a clone): one git tracks or checked out is skipped, and only its name and
op are used, both checked."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from daintree_tui.core import state_files, validate
from daintree_tui.core.log import suppressed, warn
from daintree_tui.core.project import Project
from daintree_tui.core.store import read_json, write_json


class Journal:
    """The journal files of one project."""

    def __init__(self, project: Project) -> None:
        self.project = project

    def path(self, name: str) -> Path:
        return self.project.journal_dir / f"{name}.json"

    def write(self, name: str, **data: Any) -> None:
        write_json(self.path(name), {"name": name, "started": time.time(), **data})

    def clear(self, name: str) -> None:
        for path in (self.path(name), self.path(name).with_name(f"{name}.json.bak")):
            with suppressed(FileNotFoundError):
                path.unlink()

    def records(self) -> list[dict[str, Any]]:
        """The journals of operations under way (or interrupted), each checked."""
        out = []
        if self.project.journal_dir.is_dir():
            for path in sorted(self.project.journal_dir.glob("*.json")):
                if state_files.from_history(self.project, path):
                    # It came through git (a pull, a merged branch): "finish the remove of b1" is not ours to obey.
                    warn(f"skipping journal {path}: git tracks it or checked it out, so it came with the "
                         "repository's history, not from daintree (delete it and `git rm --cached` it)")
                    continue
                data, _ = read_json(path, "journal")
                # A journal is data (it may have come with a clone): only its name and op are used, both checked.
                if (isinstance(data, dict) and validate.name_problem(data.get("name"), new=False) is None
                        and data.get("op") in ("create", "remove") and path.name == f"{data['name']}.json"):
                    out.append(data)
                else:
                    warn(f"skipping journal {path}: not a journal record")
        return out
