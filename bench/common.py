"""Helpers shared by the benchmarks: generated repositories, timing, a table printer."""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

# The command a user types: the installed `daintree` script beside this interpreter (not `python -m`, whose runpy
# a user's command does not pay for), else the module.
_SCRIPT = Path(sys.executable).parent / "daintree"
DAINTREE = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "daintree_tui"]
DAINTREE_LINE = shlex.join(DAINTREE)

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@daintree.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@daintree.invalid"}


def ensure_bytecode() -> None:
    """Byte-compile our package, as a user's first run leaves it: a start-up bench run where
    PYTHONDONTWRITEBYTECODE is set (as on this machine) would otherwise compile every module of ours from source
    in every sample, while the libraries it is compared with were compiled when they were installed."""
    import compileall

    import daintree_tui

    compileall.compile_dir(str(Path(daintree_tui.__file__).parent), quiet=1)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, env=GIT_ENV)


def small_repo(path: Path, files: int = 1) -> Path:
    """A repository of `files` one-line files, one commit (for benches where the repository's size is not the
    point)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for i in range(files):
        (path / f"f{i}.txt").write_text(f"{i}\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


def generated_repo(path: Path, files: int) -> Path:
    """A repository with `files` small files spread over 100 directories, one commit."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for i in range(files):
        d = path / f"src/pkg{i % 100}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text(f"VALUE = {i}\n" * 5)
    (path / ".gitignore").write_text(".env\nnode_modules/\n")
    (path / ".env").write_text("SECRET=1\n")
    (path / "node_modules").mkdir()
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "generated")
    return path


def median_times(fns: list[Callable[[int], object]], runs: int, warmup: int = 1) -> list[float]:
    """Median wall time of each function, interleaved run by run so that drift (page cache, a busy
    neighbour) hits baseline and candidate alike, each started after a sync. `warmup` rounds are run first
    and discarded."""
    samples: list[list[float]] = [[] for _ in fns]
    for i in range(-warmup, runs):
        for k, fn in enumerate(fns):
            os.sync()  # start each sample with no write-back left over from the one before
            start = time.perf_counter()
            fn(i + warmup * 1000 if i < 0 else i)
            if i >= 0:
                samples[k].append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples]


def loadavg() -> str:
    """The machine's load over the last minute, as /proc/loadavg says it ("?" where it cannot be read)."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def table(title: str, rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))  # noqa: E731
    return "\n".join([f"## {title}", line(header), line(["-" * w for w in widths]), *map(line, rows), ""])


def idle_sessions(repo: Path, socket: str, worktrees: int, sessions: int) -> Path:
    """Worktrees `wt-00`... in `repo`, the first `sessions` of them running an idle agent on tmux socket
    `socket`. The agent is the repository's command, so the config is trusted: the caller points XDG_DATA_HOME
    at a temp dir first, so the trust record is never the user's own."""
    from daintree_tui.core.project import Project
    from daintree_tui.core.trust import trust
    from daintree_tui.core.worktrees import WorktreeService
    from daintree_tui.sessions.manager import SessionManager

    (repo / ".daintree.toml").write_text(
        "[ports]\nrange = [20000, 29999]\n[agents.idle]\ncommand = \"sh -c 'echo ready; exec cat'\"\n"
        "[notifications]\nbell = false\ndesktop = false\n")
    os.environ["DAINTREE_TMUX_SOCKET"] = socket
    project = Project.discover(repo)
    trust(project)
    service = WorktreeService(project)
    manager = SessionManager(project)
    for i in range(worktrees):
        service.create(f"wt-{i:02d}")
        if i < sessions:
            manager.start(f"wt-{i:02d}", "idle", size=(120, 40))
    return repo


def kill_tmux(socket: str) -> None:
    """End a bench's private tmux server and remove its socket (a killed server leaves it behind)."""
    from daintree_tui.sessions.tmux import socket_path

    subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
    socket_path(socket).unlink(missing_ok=True)
