"""Dependencies of a new worktree: copy the ignored files it needs (`.env*`), link the heavy dirs (`node_modules`).

Both start from one look at what git ignores in the primary: `git ls-files --others --ignored --exclude-standard
--directory`, which names an ignored directory once (`packages/web/node_modules/`) without walking into it, so
the look costs about the same for a monorepo with a million files under its `node_modules` as for an empty one.
It is capped (`SCAN_LIMIT` entries, `SCAN_SECONDS`); past the cap, what was found so far is used, with a warning.

- Included files: the patterns of `deps.include` plus those of `.worktreeinclude` (gitignore syntax, so
  `!pattern` excludes, and the last pattern that matches wins), matched against ignored files and ignored
  directories (a matched directory is copied whole). An ignored directory is looked into only when a pattern
  names a path inside it (`certs/dev.pem`), never for a pattern that matches anywhere (`*.pem`).
- Linked dirs: each `deps.link` path is a gitignore pattern too: `node_modules` matches every ignored
  `node_modules` directory at any depth (one link each), `vendor/bundle` only that one.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from daintree_tui.core import fs_safe
from daintree_tui.core import git as g
from daintree_tui.core.config import Config, LinkSpec
from daintree_tui.core.errors import OperationError
from daintree_tui.core.log import warn

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

INCLUDE_FILE = ".worktreeinclude"
SCAN_LIMIT = 50_000  # ignored entries read from git (files, and directories as a whole)
SCAN_SECONDS = 10.0
COPY_LIMIT = 5_000  # files copied out of directories that include patterns name


@dataclass(frozen=True)
class Ignored:
    """What git ignores in the primary, as one `ls-files --directory` look gives it (paths relative, `/`)."""

    files: tuple[str, ...]
    dirs: tuple[str, ...]  # without the trailing slash; not walked into
    complete: bool = True  # False when the look hit SCAN_LIMIT or SCAN_SECONDS


@dataclass
class DepsReport:
    """What a new worktree got from the primary."""

    copied: list[str] = field(default_factory=list)
    linked: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"copied": self.copied, "linked": self.linked}


def include_patterns(root: Path, cfg: Config) -> list[str]:
    """`deps.include`, then the patterns of `.worktreeinclude` (which add to them and can exclude with `!`)."""
    patterns = list(cfg.deps_include)
    path = root / INCLUDE_FILE
    if path.is_file() and not path.is_symlink():
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        patterns += [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return patterns


def scan_ignored(root: Path, skip_dirs: list[Path], limit: int | None = None,
                 seconds: float | None = None) -> Ignored:
    """The ignored files and directories of the primary, at any depth, without walking into ignored directories.

    `skip_dirs` (the worktrees, the state dir) are left out. Stops at `limit` entries or after `seconds`.
    """
    limit = SCAN_LIMIT if limit is None else limit
    seconds = SCAN_SECONDS if seconds is None else seconds
    # git's complaint goes to a file (not a pipe read beside stdout's, which could fill and stall it): a failure
    # says what git said.
    errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed once git has ended, or when it cannot start)
    try:
        proc = subprocess.Popen(["git", "-C", str(root), "ls-files", "-z", "--others", "--ignored",
                                 "--exclude-standard", "--directory"], stdout=subprocess.PIPE, stderr=errors,
                                stdin=subprocess.DEVNULL)
    except BaseException:
        errors.close()
        raise
    timer = threading.Timer(seconds, proc.kill)
    timer.start()
    entries: list[str] = []
    complete = True
    pending = b""
    assert proc.stdout is not None
    try:
        while chunk := os.read(proc.stdout.fileno(), 65536):
            *names, pending = (pending + chunk).split(b"\0")
            entries += [os.fsdecode(n) for n in names if n]
            if len(entries) >= limit:
                entries, complete = entries[:limit], False
                proc.kill()
                break
    finally:
        timer.cancel()
        proc.stdout.close()
        code = proc.wait()
        errors.seek(0)
        said = g.last_line(os.fsdecode(errors.read(4096)))
        errors.close()
    if complete and code < 0:  # killed by the timer
        complete = False
        warn(f"deps: git took longer than {seconds:.0f}s to list the ignored files; using what it listed")
    elif complete and code != 0:
        raise OperationError(f"git ls-files failed in {root} (exit {code}){': ' + said if said else ''}")
    elif not complete:
        warn(f"deps: stopped after {limit} ignored entries; files and dirs past them are not copied or linked")
    skip = [d.resolve() for d in skip_dirs]
    files: list[str] = []
    dirs: list[str] = []
    for entry in entries:
        rel = entry.rstrip("/")
        if not rel:
            continue
        where = (root / rel).resolve()
        if any(where.is_relative_to(d) or d.is_relative_to(where) for d in skip):
            continue
        (dirs if entry.endswith("/") else files).append(rel)
    return Ignored(tuple(files), tuple(dirs), complete)


class IgnoredScan:
    """`scan_ignored` running beside `git worktree add`: it only reads the primary, and the add only writes under
    the worktrees folder, which the scan skips. Started before the add and read after it, the look (and the
    import of pathspec that matching needs) costs the create no time of its own."""

    def __init__(self, root: Path, skip_dirs: list[Path]) -> None:
        self._ignored: Ignored | None = None
        self._error: BaseException | None = None
        # A daemon thread: if the add fails, the scan is simply not read (it ends by itself, capped).
        self._thread = threading.Thread(target=self._run, args=(root, skip_dirs), name="daintree-ignored-scan",
                                        daemon=True)
        self._thread.start()

    def _run(self, root: Path, skip_dirs: list[Path]) -> None:
        try:
            self._ignored = scan_ignored(root, skip_dirs)
            _gitignore([])  # pathspec's import, while the add runs
        except BaseException as exc:  # handed to whoever reads the result
            self._error = exc

    def result(self) -> Ignored:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._ignored is not None
        return self._ignored


def _gitignore(patterns: list[str]) -> GitIgnoreSpec:
    from pathspec import GitIgnoreSpec  # imported by the one command that needs it (create)

    return GitIgnoreSpec.from_lines(patterns)


def _named_dirs(patterns: list[str]) -> list[str]:
    """The directories that patterns name a path inside (`certs/dev.pem` -> `certs`): the only ignored
    directories worth looking into. A pattern with no slash before its end matches anywhere and names none."""
    named = []
    for pattern in patterns:
        if pattern.startswith("!"):
            continue
        body = pattern.strip().lstrip("/").rstrip("/")
        literal = re.split(r"[*?\[\\]", body, maxsplit=1)[0]
        if "/" in literal:
            named.append(literal.rsplit("/", 1)[0])
    return named


def _walk_files(root: Path, rel_dir: str, prune: GitIgnoreSpec, budget: list[int]) -> Iterator[str]:
    """Files under `root/rel_dir` (relative to `root`), never following a link, skipping linked dirs."""
    for current, dirnames, filenames in os.walk(root / rel_dir, followlinks=False):
        rel_current = Path(current).relative_to(root).as_posix()
        dirnames[:] = [d for d in dirnames if not prune.match_file(f"{rel_current}/{d}/")]
        for name in filenames:
            if budget[0] <= 0:
                return
            budget[0] -= 1
            yield f"{rel_current}/{name}"


def files_to_include(root: Path, patterns: list[str], ignored: Ignored, links: list[LinkSpec]) -> list[str]:
    """Ignored files that match `patterns` (a tracked or plain untracked file is the branch's business, not ours),
    including the files of ignored directories the patterns match or name a path inside."""
    if not patterns:
        return []
    spec = _gitignore(patterns)
    linked = _gitignore([link.path for link in links])
    found = [f for f in ignored.files if spec.match_file(f)]
    named = _named_dirs(patterns)
    budget = [COPY_LIMIT]
    for d in ignored.dirs:
        if linked.match_file(f"{d}/"):
            continue
        named_inside = any(n == d or n.startswith(f"{d}/") or d.startswith(f"{n}/") for n in named)
        if named_inside or spec.match_file(f"{d}/"):
            found += [f for f in _walk_files(root, d, linked, budget) if spec.match_file(f)]
    if budget[0] <= 0:
        warn(f"deps: copied at most {COPY_LIMIT} files out of ignored directories; name fewer in the patterns")
    return sorted(set(found))


def copy_includes(root: Path, worktree: Path, files: list[str]) -> list[str]:
    """Copy each file into the worktree, never overwriting one that is already there and never through a
    symbolic link (the branch may have committed `config -> /somewhere/else`): such a file is skipped."""
    copied = []
    for rel in files:
        src = root / rel
        if src.is_symlink() or not src.is_file():
            continue
        try:
            if fs_safe.safe_copy_file(src, worktree, rel):
                copied.append(rel)
        except OperationError as exc:
            warn(f"deps: not copying {rel}: {exc}")
    return copied


def dirs_to_link(ignored: Ignored, links: list[LinkSpec]) -> list[tuple[str, LinkSpec]]:
    """Each ignored directory that a `deps.link` pattern matches, with the spec that matched (the last, as in
    gitignore); `mode = "none"` entries match and link nothing."""
    specs = [(link, _gitignore([link.path])) for link in links]
    out = []
    for d in ignored.dirs:
        matched = [link for link, spec in specs if spec.match_file(f"{d}/")]
        if matched and matched[-1].mode != "none":
            out.append((d, matched[-1]))
    return out


def link_dependencies(root: Path, worktree: Path, targets: list[tuple[str, LinkSpec]],
                      common_dir: Path) -> list[dict[str, str]]:
    """Symlink (or copy) each ignored directory of the primary into the worktree at the same place."""
    linked = []
    for rel, spec in targets:
        src = root / rel
        try:
            with fs_safe.open_parent(worktree, rel) as (dir_fd, name):
                try:
                    os.lstat(name, dir_fd=dir_fd)
                    continue  # the branch has its own; never overwrite it
                except FileNotFoundError:
                    pass
                if spec.mode == "symlink":
                    os.symlink(src, name, dir_fd=dir_fd)
                else:
                    # cp writes into the directory that was checked (by its fd), and copies links as links.
                    try:
                        proc = subprocess.run(["cp", "-a", "--reflink=auto", "--no-target-directory", "--",
                                               str(src), fs_safe.fd_path(dir_fd, name)], capture_output=True, text=True)
                    except OSError as exc:
                        raise OperationError(f"cannot copy {rel}: cp: {exc.strerror}") from None
                    if proc.returncode != 0:
                        raise OperationError(f"cannot copy {rel}: {g.last_line(proc.stderr)}")
        except FileExistsError:
            continue
        except OperationError as exc:
            if "refusing" not in str(exc):
                raise
            warn(f"deps: not linking {rel}: {exc}")
            continue
        # No trailing slash: a `dir/` pattern does not match a symlink.
        g.add_exclude(common_dir, [f"/{rel}"])
        linked.append({"path": rel, "mode": spec.mode})
    return linked


def provide(root: Path, worktree: Path, cfg: Config, common_dir: Path, skip_dirs: list[Path],
            scan: IgnoredScan | None = None) -> DepsReport:
    """Everything a new worktree gets from the primary: one look at the ignored entries (`scan`, when it was
    started already), then copies and links."""
    ignored = scan.result() if scan is not None else scan_ignored(root, skip_dirs)
    links = list(cfg.deps_link)
    copied = copy_includes(root, worktree, files_to_include(root, include_patterns(root, cfg), ignored, links))
    linked = link_dependencies(root, worktree, dirs_to_link(ignored, links), common_dir)
    return DepsReport(copied, linked)
