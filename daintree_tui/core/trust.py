"""Trust: the one place that decides what may be deleted, what may run, and where a write may go (DESIGN.md 2a).

Trusted: the user's own config, the user's own command line outside a session, and the trust record (path and
sha256 of a repository's `.daintree.toml`, kept in the user's data dir). Everything else (anything in the
repository, committed or not, whatever lies under `.worktrees/` and `.tasks/`, task text, names, what an agent
writes or sets) is data: checked against git and the filesystem here, never obeyed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, BinaryIO

from daintree_tui.core import admin_dirs, spawn
from daintree_tui.core import git as g
from daintree_tui.core.config import REPO_CONFIG_NAME, Config, user_data_dir
from daintree_tui.core.errors import ConfigError, InputError, OperationError
from daintree_tui.core.log import warn
from daintree_tui.core.store import atomic_write_text, read_json, write_json

if TYPE_CHECKING:
    from daintree_tui.core.project import Project

# -- what may run ------------------------------------------------------------------------------------------------


def trust_file() -> Path:
    return user_data_dir() / "trust.json"


def file_sha256(path: Path) -> str:
    import hashlib  # only trust checks hash (most commands of a repo without hooks never do)

    return hashlib.sha256(path.read_bytes()).hexdigest()


def trust_key(config_path: Path) -> str:
    """Where a trusted config lies: its folder resolved, the file itself not followed. A clone's
    `.daintree.toml -> ~/src/mine/.daintree.toml` resolved to a file the user trusted, so that the clone's hooks
    (`./setup.sh`: the clone's own script) ran, untrusted, with the trust of another repository."""
    return str(config_path.parent.resolve() / config_path.name)


def is_trusted(config_path: Path) -> bool:
    """Whether the user trusted exactly these bytes of this file (a later change needs trust again)."""
    data, _ = read_json(trust_file(), "trust record")
    if not isinstance(data, dict):
        return False
    try:
        return data.get(trust_key(config_path)) == file_sha256(config_path)
    except OSError:
        return False


def trusted_copy(config_path: Path) -> Path:
    """Where the bytes the user trusted of this file are kept (beside the trust record, in the user's data dir):
    what `daintree trust --show` compares the file with once it has changed."""
    import hashlib

    return user_data_dir() / "trusted" / f"{hashlib.sha256(trust_key(config_path).encode()).hexdigest()[:32]}.toml"


def changed_since_trust(config_path: Path | None) -> bool:
    """Whether the user trusted another version of this file (it is recorded, with other bytes than it has now)."""
    if config_path is None:
        return False
    data, _ = read_json(trust_file(), "trust record")
    recorded = data.get(trust_key(config_path)) if isinstance(data, dict) else None
    return isinstance(recorded, str) and not is_trusted(config_path)


def untrusted_state(config_path: Path | None) -> str:
    """Why the repository's config may not run, as said after its name: "is not trusted", or, for a file the user
    trusted before an edit, that it changed since (a bare "not trusted" read as if it had never been)."""
    if changed_since_trust(config_path):
        return "changed since you trusted it (what changed: `daintree trust --show`)"
    return "is not trusted"


def trust_diff(config_path: Path) -> list[str] | None:
    """The change since the user trusted the file, as unified-diff lines; None when no copy of what was trusted
    was kept (trusted by a version before the copies)."""
    import difflib

    try:
        before = trusted_copy(config_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    try:
        now = config_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        now = ""
    return [line.rstrip("\n") for line in difflib.unified_diff(
        before.splitlines(keepends=True), now.splitlines(keepends=True),
        fromfile=f"{REPO_CONFIG_NAME} (as you trusted it)", tofile=f"{REPO_CONFIG_NAME} (now)")]


def trust(project: Project) -> dict[str, str]:
    """Record the repo config's current hash for this user, and keep a copy of what was trusted."""
    import hashlib

    path = project.root / REPO_CONFIG_NAME
    if not path.is_file():
        raise InputError(f"nothing to trust: {path} does not exist")
    data, _ = read_json(trust_file(), "trust record")
    records = data if isinstance(data, dict) else {}
    content = path.read_bytes()  # hashed and kept as read once: what was shown to be trusted is what is kept
    digest = hashlib.sha256(content).hexdigest()
    copy = trusted_copy(path)
    try:
        private_dir(copy.parent)
        atomic_write_text(copy, content.decode("utf-8", errors="replace"))  # 0600 (mkstemp)
    except OSError as exc:
        raise OperationError(f"cannot write {copy}: {exc.strerror or exc}") from None
    records[trust_key(path)] = digest
    scripts = records.get("scripts")
    scripts = scripts if isinstance(scripts, dict) else {}
    scripts[trust_key(path)] = unconfined_scripts(project)
    records["scripts"] = scripts
    write_json(trust_file(), records)
    return {"path": str(path), "sha256": digest}


def unconfined_scripts(project: Project) -> dict[str, str]:
    """The repository's files (path -> sha256) that the repo config's unconfined hooks (post_remove) run."""
    from daintree_tui.core.pinned import UNCONFINED_HOOKS, named_files

    try:
        hooks = project.config.hooks
    except ConfigError:  # a config that does not load runs no hook; fixed, it is another file to trust
        return {}
    commands = [spec.command for hook in UNCONFINED_HOOKS for spec in hooks.get(hook, []) if spec.source == "repo"]
    return named_files(project.root, commands) if commands else {}


def scripts_changed_since_trust(project: Project) -> list[str]:
    """The repository files an unconfined hook of the repo config runs that changed since `daintree trust` (a
    merged branch may have changed them: they would run the agent's code outside its sandbox)."""
    from daintree_tui.core.pinned import changed

    path = project.root / REPO_CONFIG_NAME
    data, _ = read_json(trust_file(), "trust record")
    scripts = data.get("scripts") if isinstance(data, dict) else None
    recorded = scripts.get(trust_key(path)) if isinstance(scripts, dict) else None
    return changed(recorded, unconfined_scripts(project))


def _command_key(project: Project, command: str) -> str:
    import hashlib

    return hashlib.sha256(f"{project.root.resolve()}\0{command}".encode()).hexdigest()


def remember_command(project: Project, command: str) -> None:
    """Record (in the user's data dir) that this user gave `command` for this repository on their own command
    line, so a state file that names it later (a bake-off's score command) may run it; no other may."""
    data, _ = read_json(trust_file(), "trust record")
    records = data if isinstance(data, dict) else {}
    given = records.get("commands")
    given = [c for c in given if isinstance(c, str)] if isinstance(given, list) else []
    key = _command_key(project, command)
    if key not in given:
        records["commands"] = [*given, key][-1000:]
        write_json(trust_file(), records)


def command_remembered(project: Project, command: str) -> bool:
    data, _ = read_json(trust_file(), "trust record")
    given = data.get("commands") if isinstance(data, dict) else None
    return isinstance(given, list) and _command_key(project, command) in given


def trust_status(project: Project) -> dict[str, object]:
    path = project.root / REPO_CONFIG_NAME
    trusted = path.is_file() and is_trusted(path)
    changed = path.is_file() and changed_since_trust(path)
    return {"path": str(path), "exists": path.is_file(), "trusted": trusted, "changed": changed,
            "diff": trust_diff(path) if changed else None, "record": str(trust_file()),
            "commands": dict(project.config.repo_commands)}


def repo_config_trusted(cfg: Config) -> bool:
    return cfg.repo_config_path is not None and is_trusted(cfg.repo_config_path)


def untrusted_commands(cfg: Config) -> dict[str, str]:
    """The command-bearing keys of the repository's config that may not run yet (empty once trusted)."""
    if not cfg.repo_commands or repo_config_trusted(cfg):
        return {}
    return dict(cfg.repo_commands)


def command_trusted(cfg: Config, key: str) -> bool:
    """Whether the command under `key` may run: it is the user's own, or the repo's file is trusted."""
    return key not in cfg.repo_commands or repo_config_trusted(cfg)


def untrusted_message(key: str, command: str, config_path: Path | None = None) -> str:
    return (f"{key} = {command!r} comes from the repository's {REPO_CONFIG_NAME}, which "
            f"{untrusted_state(config_path)}: review the file, then run `daintree trust`")


def require_trusted(cfg: Config, key: str) -> None:
    """Refuse (exit 1) to run a repository command the user has not trusted."""
    if not command_trusted(cfg, key):
        raise OperationError(untrusted_message(key, cfg.repo_commands[key], cfg.repo_config_path))


def require_agent_trusted(cfg: Config, agent: str) -> None:
    """Refuse (exit 1) an agent whose command (or first-prompt flag) the repository's untrusted file sets: said
    before a create that would start it, so a refusal leaves no worktree behind."""
    for key in ("command", "prompt_mode"):
        require_trusted(cfg, f"agents.{agent}.{key}")


def inside_session(project: Project, cwd: Path | None = None) -> bool:
    """Whether this process runs inside an agent's session: its environment names a worktree, or its working
    directory is inside one. An agent must not waive a gate (`--no-verify`) for itself."""
    if os.environ.get("DAINTREE_WORKTREE"):
        return True
    here = (cwd or Path.cwd()).resolve()
    if project.is_git:
        with contextlib.suppress(OperationError, ConfigError):
            if here.is_relative_to(project.worktrees_root) and here != project.worktrees_root:
                return True
            for wt in linked_worktrees(project):
                if here.is_relative_to(wt):
                    return True
    return False


def require_outside_session(project: Project, what: str) -> None:
    if inside_session(project):
        raise OperationError(f"{what} is refused from inside a session: only a person outside it may skip checks")


# -- where worktrees may live ------------------------------------------------------------------------------------


def check_worktree_dir(root: Path, value: str, source: str, common_dir: Path | None) -> Path:
    """Resolve `worktree_dir`. The repository's file may put it only inside the repository (not the root itself,
    not `.git`); the user's own config may put it beside (`../wt`), never at or above the primary."""
    resolved = (root / value).resolve()
    root = root.resolve()
    git_dir = (common_dir or root / ".git").resolve()
    if resolved == root or root.is_relative_to(resolved):
        raise ConfigError(f"config: worktree_dir = {value!r} is the repository or one of its parents; it must be "
                          "a directory of its own")
    if resolved.is_relative_to(git_dir) or resolved.is_relative_to(root / ".git"):
        raise ConfigError(f"config: worktree_dir = {value!r} is inside .git")
    if source == "repo" and not resolved.is_relative_to(root):
        raise ConfigError(f"config: worktree_dir = {value!r} in {REPO_CONFIG_NAME} points outside the repository; "
                          "only your own config (~/.config/daintree/config.toml) may put worktrees elsewhere")
    return resolved


# -- what may be deleted, moved, adopted or gc'ed ----------------------------------------------------------------


def small_text(path: Path) -> str | None:
    """A small regular file's text, stripped (never through a link, never waiting on a FIFO), or None."""
    from daintree_tui.core.store import read_state_file

    try:
        return read_state_file(path).decode("utf-8", "replace").strip()
    except OSError:
        return None


def admin_dir_named_by(common: Path, worktree: Path) -> Path | None:
    """The admin dir (`.git/worktrees/<id>/`) that the worktree's own `.git` file names, resolved; None when that
    file is not one of git's or names no admin dir of this repository. A daintree worktree's `.git` file is
    read-only in its sandbox: its agent cannot point it elsewhere (its admin dir's `gitdir` it can)."""
    text = small_text(worktree / ".git")
    if text is None or not text.startswith("gitdir: "):
        return None
    admin = (worktree / text[len("gitdir: "):]).resolve()
    return admin if admin.parent == (common / "worktrees").resolve() else None


def write_admin_file(admin: Path, name: str, text: str) -> None:
    """Replace `name` in a worktree's admin dir (its agent's to write) as git does, by a rename: never through
    a link the agent left there, never into a folder it swapped in for the admin dir."""
    folder = os.open(admin, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        tmp = f"{name}.{os.getpid()}.daintree-tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=folder)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)


def linked_worktrees(project: Project, *, repair: bool = True) -> list[Path]:
    """The linked worktrees git lists for this repository (the primary, listed first, excluded), resolved.

    Git lists the path each admin dir's `gitdir` claims, and an agent could write its own: the admin dirs are
    checked against the index first (and, with `repair`, repaired from it)."""
    admin_dirs.guard(project, fix=repair)
    listed = g.list_worktrees(project.root)
    primary = project.root.resolve()
    return [w.path.resolve() for w in listed if w.path.resolve() != primary]


def ownership_problem(project: Project, path: Path, listed: list[Path] | None = None) -> str | None:
    """Why `path` is not one of our worktrees (None when it is): git must list it as a linked worktree of this
    repository, it must lie inside the worktree dir, on the same filesystem, and be neither the primary nor one
    of its ancestors. Index and journal entries are checked with this; they are never obeyed on their own."""
    root = project.root.resolve()
    try:
        wt_root = project.worktrees_root
    except ConfigError as exc:
        return str(exc)
    if path.is_symlink():
        return f"{path} is a symbolic link"
    real = path.resolve()
    if real == root or root.is_relative_to(real):
        return f"{path} is the repository or one of its parents"
    if not real.is_relative_to(wt_root) or real == wt_root:
        return f"{path} is not inside the worktree directory {wt_root}"
    if project.common_dir is not None and real.is_relative_to(project.common_dir.resolve()):
        return f"{path} is inside .git"
    with contextlib.suppress(OSError):
        if real.exists() and wt_root.exists() and real.stat().st_dev != wt_root.stat().st_dev:
            return f"{path} is on another filesystem than the worktree directory"
    if listed is None:
        try:
            listed = linked_worktrees(project)
        except OperationError as exc:
            return f"git cannot list worktrees: {exc}"
    if real not in listed:
        return f"git does not list {path} as a worktree of this repository"
    return None


def require_ours(project: Project, path: Path, what: str) -> None:
    problem = ownership_problem(project, path)
    if problem:
        raise OperationError(f"refusing to {what}: {problem}")


def work_at_risk(project: Project, path: Path, agreed: frozenset[str] = frozenset(),
                 run: g.Runner = g.git) -> list[str]:
    """What deleting the worktree at `path` would lose, each as a reason: a tree git cannot inspect (its `.git`
    file is gone), uncommitted or untracked files (but those in `agreed`, which the user agreed to lose),
    checked-out submodules, commits on a detached HEAD that no branch contains. `run` runs git there (the
    worktree's sandboxed git, core/worktree_git.py)."""
    if not path.is_dir():
        return []
    if not (path / ".git").is_file() and not (path / ".git").is_dir():
        return [f"{path} cannot be inspected: its .git file is missing (a repair may bring it back: "
                "`git worktree repair`)"]
    reasons = []
    try:
        dirty = [name for name in g.dirty_files(path, run=run) if name not in agreed]
    except OperationError as exc:
        return [f"{path} cannot be inspected: {exc}"]
    if dirty:
        shown = ", ".join(dirty[:10]) + (f" and {len(dirty) - 10} more" if len(dirty) > 10 else "")
        reasons.append(f"uncommitted changes: {shown}")
    try:
        nested = g.populated_submodules(path, run=run)
        unreachable = commits_on_no_branch(path, run=run)
    except OperationError as exc:
        return [f"{path} cannot be inspected: {exc}"]
    if nested:
        reasons.append(f"submodules whose own uncommitted work is not inspected: {', '.join(nested[:10])}")
    if unreachable:
        reasons.append(f"HEAD has {unreachable} commit(s) that no branch contains (detached HEAD work)")
    return reasons


def commits_on_no_branch(path: Path, run: g.Runner = g.git) -> int:
    """How many commits reachable from the worktree's HEAD are on no branch (0 when HEAD is on a branch)."""
    head = run(path, "symbolic-ref", "-q", "HEAD", check=False)
    if head.returncode == 0:
        return 0
    proc = run(path, "rev-list", "--count", "HEAD", "--not", "--branches", check=False)
    try:
        return int(proc.stdout.strip() or 0)
    except ValueError:
        return 0


def branch_safe_to_delete(root: Path, branch: str) -> bool:
    """A branch may go without a prompt only when every commit on it is also on another branch."""
    proc = g.git(root, "rev-list", "--count", f"refs/heads/{branch}", "--not",
                 *[f"--exclude=refs/heads/{branch}", "--branches"], check=False)
    return proc.returncode == 0 and proc.stdout.strip() == "0"


# -- where a write may go ----------------------------------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _parts(rel: str | Path) -> list[str]:
    parts = PurePosixPath(str(rel)).parts
    if not parts or PurePosixPath(str(rel)).is_absolute() or any(p in ("..", ".", "") for p in parts):
        raise OperationError(f"refusing to write {rel}: not a plain relative path")
    return list(parts)


@contextlib.contextmanager
def open_parent(base: Path, rel: str | Path, create: bool = True) -> Iterator[tuple[int, str]]:
    """Open the directory that will hold `base/rel`, walking one component at a time with O_NOFOLLOW (openat),
    so no symbolic link anywhere below `base` can lead the write out. Yields (dir fd, final name).

    Raises:
        OperationError: a component is a symbolic link or not a directory.
    """
    parts = _parts(rel)
    try:
        fd = os.open(base, _DIR_FLAGS)
    except OSError as exc:
        raise OperationError(f"refusing to write into {base}: {exc.strerror}") from None
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                where = "/".join(parts[: i + 1])
                raise OperationError(f"refusing to write {rel}: {where} is a symbolic link or not a directory "
                                     f"({exc.strerror})") from None
            os.close(fd)
            fd = nxt
        yield fd, parts[-1]
    finally:
        os.close(fd)


def safe_copy_file(src: Path, base: Path, rel: str | Path) -> bool:
    """Copy the regular file `src` to `base/rel`: never through a symbolic link, never over an existing entry.
    Returns whether it copied (False: something is already there)."""
    with open_parent(base, rel) as (dir_fd, name):
        try:
            os.lstat(name, dir_fd=dir_fd)
            return False
        except FileNotFoundError:
            pass
        src_fd = os.open(src, os.O_RDONLY | os.O_CLOEXEC)
        try:
            mode = stat.S_IMODE(os.fstat(src_fd).st_mode)
            dst_fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode & 0o777,
                             dir_fd=dir_fd)
            with os.fdopen(src_fd, "rb", closefd=False) as reader, os.fdopen(dst_fd, "wb") as writer:
                shutil.copyfileobj(reader, writer)
        finally:
            os.close(src_fd)
    return True


def safe_symlink(target: Path, base: Path, rel: str | Path) -> bool:
    """Make the symbolic link `base/rel -> target` without following a link in any component of `rel`."""
    with open_parent(base, rel) as (dir_fd, name):
        try:
            os.symlink(target, name, dir_fd=dir_fd)
        except FileExistsError:
            return False
    return True


def fd_path(dir_fd: int, name: str) -> str:
    """A path another process can use for `name` in the directory open as `dir_fd` (checked by open_parent), so
    a tool that takes a path (`cp -a`) writes into the very directory that was checked."""
    proc = Path(f"/proc/{os.getpid()}/fd/{dir_fd}")
    if proc.exists():
        return f"{proc}/{name}"
    raise OperationError("cannot copy safely here: /proc is not mounted")


def private_dir(path: Path) -> Path:
    """Make `path` (and its parents) and keep it 0700: logs and the event log are the user's only."""
    path.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if stat.S_IMODE(path.stat().st_mode) != 0o700:
            path.chmod(0o700)
    return path


# What git tracks under `.worktrees/`, per primary index (path, mtime, size, inode): one `git ls-files` per change
# of the index, however often the dashboard reads a record.
_TRACKED_STATE: dict[Path, tuple[tuple[int, int, int], frozenset[Path]]] = {}
_TRACKED_STATE_LOCK = threading.Lock()  # the dashboard asks from several workers


def _primary_index(project: Project) -> tuple[Path, tuple[int, int, int]] | None:
    """The primary's index and its identity (mtime, size, inode), which what git tracks is a function of; None
    when there is nothing to list."""
    common = project.common_dir
    if common is None:
        return None
    index = common / "index"
    identity = spawn.file_identity(str(index))
    return None if identity is None else (index, identity)


def start_tracked_state(project: Project) -> None:
    """Start the listing `tracked_state_files` reads (unless the console script did, before its imports): a
    command that changes state asks it first thing, and its git then runs while the command imports and reads
    what it needs. Started here, not in a thread: a thread waited for the GIL behind those imports before it
    could start git."""
    listing = _primary_index(project)
    if listing is not None:
        index, identity = listing
        with _TRACKED_STATE_LOCK:
            cached = _TRACKED_STATE.get(index)
            if cached is None or cached[0] != identity:
                spawn.start_ahead(str(project.root), spawn.TRACKED_STATE, identity)


def tracked_state_files(project: Project) -> frozenset[Path]:
    """The files under the state dir (`.worktrees/`) that git tracks in the primary: they came with the
    repository's history (a clone, or a `git pull`/merge of your own while a session runs: git writes over
    ignored files), so they are not daintree's, whatever they say."""
    listing = _primary_index(project)
    if listing is None:
        return frozenset()
    index, identity = listing
    with _TRACKED_STATE_LOCK:
        cached = _TRACKED_STATE.get(index)
        if cached is not None and cached[0] == identity:
            return cached[1]
        # A listing started for another version of the index is killed: it may be of the old one.
        ahead = spawn.take_ahead(str(project.root), spawn.TRACKED_STATE, identity)
        if ahead is not None:
            listed = ahead[0].communicate()[0]
        else:
            listed = g.git(project.root, *spawn.TRACKED_STATE, check=False).stdout
        tracked = frozenset(project.root / name for name in listed.split("\0") if name)
        _TRACKED_STATE[index] = (identity, tracked)
        return tracked


_FROM_HISTORY: dict[Path, tuple[tuple[int, int, int], bool]] = {}
HISTORY_CHECK_LIMIT = 16 * 1024 * 1024
_IDENT = re.compile(rb"\$Id:[^$\n]*\$")


def from_history(project: Project, path: Path) -> bool:
    """Whether state file `path` came through git: git tracks it, or its content is a blob of the repository
    (git checked it out: a merge or pull, then untracked with `git reset HEAD~1` or `git rm --cached`, which
    leave the file as it was; daintree never writes its state into git). CRLF line ends and an expanded `$Id$`
    (a `.gitattributes` can ask for both) are taken back to what the blob holds."""
    # The content first: its hashing is the caller's own work, done while the tracked listing that discovery
    # started in the background (`start_tracked_state`) may still run.
    return _content_from_history(project, path) or path in tracked_state_files(project)


def _content_from_history(project: Project, path: Path) -> bool:
    common = project.common_dir
    try:
        info = path.stat()
    except OSError:
        return False
    key = (info.st_mtime_ns, info.st_size, info.st_ino)
    cached = _FROM_HISTORY.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    found = False
    if common is not None and stat.S_ISREG(info.st_mode) and info.st_size <= HISTORY_CHECK_LIMIT:
        with contextlib.suppress(OSError):
            data = path.read_bytes()
            forms = {data, data.replace(b"\r\n", b"\n"), _IDENT.sub(b"$Id$", data.replace(b"\r\n", b"\n"))}
            found = any(object_exists(common, blob_id(common, form), info.st_mtime_ns) for form in forms)
    _FROM_HISTORY[path] = (key, found)
    return found


def blob_id(common: Path, data: bytes) -> bytes:
    """The object name git gives `data` as a blob in the repository at `common` (sha1, or sha256)."""
    try:
        config = (common / "config").read_text(errors="replace").lower()
    except OSError:
        config = ""
    sha256 = re.search(r"objectformat\s*=\s*sha256", config) is not None
    import hashlib  # here, not at the top: loading OpenSSL's library is 3-6 ms of every command's start

    hasher = hashlib.sha256() if sha256 else hashlib.sha1()  # git's object name, not a secret
    hasher.update(b"blob %d\0" % len(data) + data)
    return hasher.digest()


def object_exists(common: Path, name: bytes, before_ns: int) -> bool:
    """Whether object `name` (raw) is in the repository's objects, loose or packed, or its alternates', written no
    later than `before_ns` (git writes a checkout's objects before its files): a sandboxed agent can write loose
    objects, and one it made of daintree's own index after reading it would otherwise have that index ignored."""
    stores = [common / "objects"]
    with contextlib.suppress(OSError):
        for line in (common / "objects" / "info" / "alternates").read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                stores.append((common / "objects" / line.strip()).resolve())
    hexname = name.hex()
    for store in stores:
        with contextlib.suppress(OSError):
            if (store / hexname[:2] / hexname[2:]).stat().st_mtime_ns <= before_ns:
                return True
        with contextlib.suppress(OSError):
            for idx in (store / "pack").glob("*.idx"):
                if idx.stat().st_mtime_ns <= before_ns and _in_pack_index(idx, name):
                    return True
    return False


def _in_pack_index(idx: Path, name: bytes) -> bool:
    """Whether a pack's index (version 2) lists `name`: a binary search of its sorted names."""
    size = len(name)
    with idx.open("rb") as fh:
        head = fh.read(8 + 256 * 4)
        if len(head) < 8 + 256 * 4 or head[:8] != b"\xfftOc\x00\x00\x00\x02":
            return False
        fanout = [int.from_bytes(head[8 + 4 * i:12 + 4 * i], "big") for i in range(256)]
        lo = fanout[name[0] - 1] if name[0] else 0
        hi = fanout[name[0]]
        while lo < hi:
            mid = (lo + hi) // 2
            fh.seek(8 + 256 * 4 + mid * size)
            here = fh.read(size)
            if here == name:
                return True
            if here < name:
                lo = mid + 1
            else:
                hi = mid
    return False


def read_own_state(project: Project, path: Path, what: str) -> Any:
    """A state file of ours (a session record), or None when git tracks it (with a warning): a record a pull
    wrote over ours would give a running session another role (a lead's tools, merges without approval)."""
    if from_history(project, path):
        warn(f"ignored {what} {path}: git tracks it or checked it out, so it came with the repository's history, "
             "not from daintree (delete it and `git rm --cached` it: daintree writes its own again)")
        return None
    data, _ = read_json(path, what)
    return data


STATE_ENTRIES = (".trash", ".tmp", ".journal", ".logs", ".sessions", ".run", ".cache", ".lock", ".locks",
                 ".sandbox-home", ".inbox", "events.jsonl", "events.jsonl.1", "index.json", "index.json.bak")


def state_dir_problem(project: Project) -> str | None:
    """A committed `.worktrees` or `.tasks` that is a symbolic link would take every state write elsewhere:
    refused. A symbolic link where one of our own folders goes (`.worktrees/.trash -> ~`, whose contents the
    next cleanup deletes; `events.jsonl -> ~/.bashrc`) is never ours: it is removed (only the link), with a
    warning."""
    for path in (project.state_dir, project.tasks_dir):
        if path.is_symlink():
            return f"{path} is a symbolic link; daintree keeps its state only in a real directory"
    for name in STATE_ENTRIES:
        path = project.state_dir / name
        if path.is_symlink():
            warn(f"removed the symbolic link {path} (-> {os.readlink(path)}): daintree keeps its state in real "
                 "files and folders")
            with contextlib.suppress(OSError):
                path.unlink()
    return None


def open_private_append(path: Path) -> BinaryIO:
    """Open a log for appending, the user's only (0600), never through a symbolic link (one found where the log
    goes is replaced: the log folder is ours)."""
    private_dir(path.parent)
    if path.is_symlink():
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")
