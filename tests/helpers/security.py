"""What a hostile party controls: a repository the victim clones."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import git, make_repo


def hostile_clone(tmp_path: Path, files: dict[str, str], symlinks: dict[str, str] | None = None,
                  name: str = "victim") -> Path:
    """An upstream repository that commits `files` (state under `.worktrees/` included) and `symlinks`, and the
    victim's fresh clone of it."""
    upstream = make_repo(tmp_path / "upstream")
    for rel, text in files.items():
        (upstream / rel).parent.mkdir(parents=True, exist_ok=True)
        (upstream / rel).write_text(text)
    for rel, target in (symlinks or {}).items():
        (upstream / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, upstream / rel)
    git(upstream, "add", "-f", "-A")
    git(upstream, "commit", "-q", "-m", "looks harmless")
    clone = tmp_path / name
    subprocess.run(["git", "clone", "-q", str(upstream), str(clone)], check=True, capture_output=True)
    return clone
