"""Shared fixtures: real git repositories in tmp_path, the real CLI in a subprocess, a private user config."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# What test modules share lives in tests/helpers/ (no test module imports another: tests/test_layers.py). Its
# asserts report their values as a test's own do; its fixture modules are plugins, so every test module finds
# their fixtures by name.
pytest.register_assert_rewrite("tests.helpers")
pytest_plugins = [
    "tests.helpers.agents_fixtures",
    "tests.helpers.checkpoints_fixtures",
    "tests.helpers.remote_fixtures",
    "tests.helpers.sandbox_fixtures",
]

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


# The tools a test needs beyond Python and git, by the fixtures it takes and the skip conditions it carries: each
# test is marked `tmux`, `sshd` or `bwrap` for them, and `make test-fast` runs those marked with none.
NEEDS_BY_FIXTURE = {"tmux_socket": "tmux", "sandbox_env": "bwrap", "sshd": "sshd"}
NEEDS_BY_SKIP_REASON = {"bubblewrap": "bwrap", "tmux": "tmux", "OpenSSH": "sshd", "sshd": "sshd"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        needs = {NEEDS_BY_FIXTURE[name] for name in getattr(item, "fixturenames", ()) if name in NEEDS_BY_FIXTURE}
        for mark in item.iter_markers("skipif"):
            reason = str(mark.kwargs.get("reason", ""))
            needs |= {tool for word, tool in NEEDS_BY_SKIP_REASON.items() if word in reason}
        for tool in sorted(needs):
            item.add_marker(tool)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own home, user config/data dirs and a git identity: nothing of the real user's leaks in,
    and nothing a test does lands in the real user's home (a sandboxed session makes the empty files it binds
    read-only in the agent's folders, ~/.claude and the like)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.delenv("CLAUDECODE", raising=False)
    monkeypatch.delenv("DAINTREE_WORKTREE", raising=False)
    # Automatic checkpoints default to off in the suite (core/user_config.py, an env var for the tests only): with
    # them on, each of the hundreds of test sessions on tmux would start a watcher (~0.5 s of CPU) to take them.
    # The tests of checkpoints and the watcher turn them on in their user config (`[checkpoints] auto = true`).
    monkeypatch.setenv("DAINTREE_TEST_AUTO_CHECKPOINTS_DEFAULT", "0")
    for key, value in GIT_IDENTITY.items():
        monkeypatch.setenv(key, value)


# The agent CLIs the presets look for. A test about what is installed puts its own fakes on PATH; the real ones,
# where this machine has them (npm puts claude, codex, gemini and opencode in /usr/bin), must not count.
AGENT_PROGRAMS = ("claude", "codex", "gemini", "opencode", "aider")


def path_without_agents(path: str | None = None) -> str:
    """`path` (default: PATH) with no agent CLI on it: each folder that holds one is replaced by a folder of links
    to all else it holds, made in $HOME (which a sandboxed session can read; /tmp it cannot), so git, tmux and sh
    are found where they were and `claude` is not found at all."""
    home = Path(os.environ["HOME"])
    out = []
    for index, folder in enumerate((path if path is not None else os.environ.get("PATH", "")).split(os.pathsep)):
        try:
            names = os.listdir(folder) if folder else []
        except OSError:
            continue
        if not any(name in names for name in AGENT_PROGRAMS):
            out.append(folder)
            continue
        shadow = home / "path-without-agents" / str(index)
        shadow.mkdir(parents=True, exist_ok=True)
        for name in names:
            if name not in AGENT_PROGRAMS and not (shadow / name).is_symlink():
                (shadow / name).symlink_to(Path(folder) / name)
        out.append(str(shadow))
    return os.pathsep.join(out)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout


def commit_file(wt: Path, name: str, text: str, message: str = "work") -> str:
    """Write `name` in worktree `wt`, commit everything, and return the new commit."""
    path = wt / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", message)
    return git(wt, "rev-parse", "HEAD").strip()


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# demo\n")
    (path / "app.py").write_text("print('hello')\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit on `main`."""
    return make_repo(tmp_path / "repo")


class CLI:
    """Runs the real `daintree` CLI: `main([...])` in this process (fast: no interpreter start-up, no imports),
    or with `subprocess=True` (and always with --host) as a child process (for what only a process shows: exit
    status as the shell sees it, nothing but our output on fd 1, ssh on real descriptors, a timeout)."""

    def __init__(self, cwd: Path, subprocess: bool = False) -> None:
        self.cwd = cwd
        self.subprocess = subprocess

    def __call__(self, *args: str, cwd: Path | None = None, timeout: float = 60,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        if self.subprocess or "--host" in args:  # a remote command streams through ssh on our own fds
            return subprocess.run(
                [sys.executable, "-m", "daintree_tui", *args], cwd=cwd or self.cwd, capture_output=True,
                text=True, timeout=timeout, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
            )
        return run_in_process(list(args), cwd or self.cwd, env or {})

    def json(self, *args: str, cwd: Path | None = None) -> Any:
        proc = self(*args, "--json", cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def ok(self, *args: str, cwd: Path | None = None,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        proc = self(*args, cwd=cwd, env=env)
        assert proc.returncode == 0, f"{args}: rc={proc.returncode} stderr={proc.stderr}"
        return proc


def run_in_process(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`daintree ARGS` in this process, from `cwd`, with `env` added: its exit code, stdout and stderr."""
    import contextlib
    import io

    from daintree_tui.cli import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.StringIO()
    saved_env = {key: os.environ.get(key) for key in env}
    saved_cwd = os.getcwd()
    try:
        os.environ.update(env)
        os.chdir(cwd)
        with open(os.devnull) as stdin, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            saved_stdin, sys.stdin = sys.stdin, stdin
            try:
                code = main(args)
            finally:
                sys.stdin = saved_stdin
    finally:
        os.chdir(saved_cwd)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    out.flush()
    stdout = out.buffer.getvalue().decode("utf-8", errors="replace")
    return subprocess.CompletedProcess(["daintree", *args], code, stdout, err.getvalue())


@pytest.fixture
def cli(repo: Path) -> CLI:
    return CLI(repo)


def events(repo: Path) -> list[dict[str, Any]]:
    path = repo / ".worktrees" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def project(repo: Path) -> Iterator[Any]:
    from daintree_tui.core.project import Project

    yield Project.discover(repo)


@pytest.fixture
def tmux_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A unique private tmux socket for this test; its server is killed at teardown."""
    import uuid

    name = f"daintree-test-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("DAINTREE_TMUX_SOCKET", name)
    monkeypatch.delenv("DAINTREE_NO_TMUX", raising=False)
    monkeypatch.setenv("DAINTREE_DEMO_SPEED", "20")
    yield name
    subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)
    from daintree_tui.sessions.tmux import socket_path

    socket_path(name).unlink(missing_ok=True)


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.05, pause: Any = None) -> Any:
    """Poll until `predicate()` is truthy; fail with a clear message after `timeout` seconds. `pause()` waits
    between looks (default: sleep `interval`)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        (pause or (lambda: time.sleep(interval)))()


class Lines:
    """The lines a child process prints, read on a thread of their own: a test waits for the line it needs with
    a deadline instead of blocking in `readline()` past it (a busy machine must fail a test, never hang it)."""

    def __init__(self, stream: Any) -> None:
        import queue
        import threading

        self._queue: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self._queue.put(line)

    def until(self, predicate: Any, timeout: float = 30.0) -> str:
        """The first line (from those not yet returned) for which `predicate(line)` holds."""
        import queue
        import time

        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no such line within {timeout}s; seen: {self.seen[-5:]}") from None
            self.seen.append(line)
            if predicate(line):
                return line


def trusted_config(repo: Path, text: str) -> None:
    """Write the repository's `.daintree.toml` and trust it, as its user does after reading it (`daintree trust`):
    commands from a repo's config (agents, hooks, bakeoff.score) run only then."""
    from daintree_tui.core.project import Project
    from daintree_tui.core.trust import trust

    (repo / ".daintree.toml").write_text(text)
    trust(Project.discover(repo))


@contextlib.contextmanager
def mcp_http_server(repo: Path) -> Iterator[int]:
    """`daintree mcp --http PORT` for `repo` on a free port of 127.0.0.1, listening when the block starts, stopped
    (ours only) when it ends. Yields the port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = subprocess.Popen([sys.executable, "-m", "daintree_tui", "mcp", "--repo", str(repo), "--http", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def listening() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0

        wait_for(listening, timeout=20)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=10)
