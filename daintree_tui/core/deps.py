"""Dependencies of a new worktree: copy the ignored files it needs (`.env*`), link the heavy dirs (`node_modules`)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from daintree_tui.core import git as g
from daintree_tui.core import trust
from daintree_tui.core.config import Config
from daintree_tui.core.errors import OperationError
from daintree_tui.core.log import warn

INCLUDE_FILE = ".worktreeinclude"


def include_patterns(root: Path, cfg: Config) -> list[str]:
    """`.worktreeinclude` (gitignore syntax) when present, else `deps.include`."""
    path = root / INCLUDE_FILE
    if path.is_file():
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        return [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return list(cfg.deps_include)


def files_to_include(root: Path, patterns: list[str], skip_dirs: list[Path]) -> list[str]:
    """Untracked files that match `patterns` *and* that git ignores (a tracked or plain untracked file is the
    branch's business, not ours). Paths are relative to `root`."""
    if not patterns:
        return []
    with tempfile.NamedTemporaryFile("w", suffix=".include", delete=False) as fh:
        fh.write("\n".join(patterns) + "\n")
        pattern_file = fh.name
    try:
        matched = g.git(root, "ls-files", "-z", "--others", "--ignored", f"--exclude-from={pattern_file}").stdout
    finally:
        os.unlink(pattern_file)
    candidates = [p for p in matched.split("\0") if p]
    skip = [d.resolve() for d in skip_dirs]
    candidates = [p for p in candidates if not any((root / p).resolve().is_relative_to(d) for d in skip)]
    if not candidates:
        return []
    ignored = g.git(root, "check-ignore", "-z", "--stdin", input="\0".join(candidates) + "\0", check=False).stdout
    ignored_set = {p for p in ignored.split("\0") if p}
    return [p for p in candidates if p in ignored_set]


def copy_includes(root: Path, worktree: Path, files: list[str]) -> list[str]:
    """Copy each file into the worktree, never overwriting one that is already there and never through a
    symbolic link (the branch may have committed `config -> /somewhere/else`): such a file is skipped."""
    copied = []
    for rel in files:
        src = root / rel
        if not src.is_file():
            continue
        try:
            if trust.safe_copy_file(src, worktree, rel):
                copied.append(rel)
        except OperationError as exc:
            warn(f"deps: not copying {rel}: {exc}")
    return copied


def link_dependencies(root: Path, worktree: Path, cfg: Config, common_dir: Path) -> list[dict[str, str]]:
    """Symlink (or copy) each `deps.link` path present in the primary into the worktree."""
    linked = []
    for spec in cfg.deps_link:
        src, dst = root / spec.path, worktree / spec.path
        if spec.mode == "none" or not (src.exists() or src.is_symlink()):
            continue
        if dst.exists() or dst.is_symlink():
            continue  # the branch has its own; never overwrite it
        try:
            with trust.open_parent(worktree, spec.path) as (dir_fd, name):
                if spec.mode == "symlink":
                    os.symlink(src, name, dir_fd=dir_fd)
                else:
                    # cp writes into the directory that was checked (by its fd), and copies links as links.
                    proc = subprocess.run(["cp", "-a", "--reflink=auto", "--no-target-directory", "--", str(src),
                                           trust.fd_path(dir_fd, name)], capture_output=True, text=True)
                    if proc.returncode != 0:
                        raise OperationError(f"cannot copy {spec.path}: {g.last_line(proc.stderr)}")
        except FileExistsError:
            continue
        except OperationError as exc:
            if "refusing" not in str(exc):
                raise
            warn(f"deps: not linking {spec.path}: {exc}")
            continue
        # No trailing slash: a `dir/` pattern does not match a symlink.
        g.add_exclude(common_dir, [f"/{spec.path.strip('/')}"])
        linked.append({"path": spec.path, "mode": spec.mode})
    return linked
