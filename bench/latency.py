"""Benchmark 6: key to echo as a person sees it, from an OUTER terminal.

A PTY of our own plays the user's terminal emulator: it runs (a) the dashboard with a session focused and (b) plain
`tmux attach` to a twin session running the same program (`cat`, echoing through the tty). Keys are written to the
outer PTY's master; the output is parsed with the same emulator the dashboard uses, and a key counts as echoed when
the outer screen shows it. A key's time runs from the write of the key to the read of the output that made it
show: the bench's own parsing and screen checks are outside the sample, and nothing polls (the bench sleeps in
`select` on the PTY, so it wakes when the first byte is there). The two are measured in interleaved blocks in one
run, so a busy neighbour hits both.

    python -m bench.latency        (also part of `python -m bench`)
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from bench.common import small_repo, table

COLS, ROWS = 120, 40
KEYS_PER_BLOCK = 25
BLOCKS = 8
LINE_KEYS = 24  # keys measured per typed line, after a 3-character line id


class OuterTerminal:
    """A terminal emulator driving `argv` in a PTY we own, the way a user's terminal does."""

    def __init__(self, argv: list[str], env: dict[str, str], cols: int = COLS, rows: int = ROWS) -> None:
        from daintree_tui.sessions.emulator import TerminalEmulator
        from daintree_tui.sessions.pty_host import set_winsize

        master, slave = os.openpty()
        set_winsize(slave, cols, rows)
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     start_new_session=True, close_fds=True)
        os.close(slave)
        self.fd = master
        self.emulator = TerminalEmulator(cols, rows, respond=self.send)

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def read_once(self, timeout: float) -> float | None:
        """Wait up to `timeout` for output, read one chunk and parse it; the time it was read, None if none came."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return None
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            return None
        arrived = time.perf_counter()
        if not data:
            return None
        self.emulator.feed(data)
        return arrived

    def pump(self, timeout: float) -> bool:
        """Read what is there (waiting up to `timeout` for the first byte); False when nothing came."""
        if self.read_once(timeout) is None:
            return False
        while self.read_once(0) is not None:
            pass
        return True

    def text(self) -> str:
        return self.emulator.text()

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self.text()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"outer screen never matched; it shows:\n{self.text()}")
            self.pump(0.05)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        os.close(self.fd)


def measure_line(term: OuterTerminal, line_id: str, keys: int) -> list[float]:
    """Type one line: a unique id (not timed) then `keys` characters, each timed until the outer screen shows
    the line so far; then enter (cat prints the line back) and wait for the screen to settle."""
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    typed = ""
    for char in line_id:
        typed += char
        term.send(char.encode())
    term.wait_for(lambda text: typed in text)
    samples = []
    for i in range(keys):
        char = alphabet[i % len(alphabet)]
        typed += char
        start = time.perf_counter()
        term.send(char.encode())
        while True:
            arrived = term.read_once(0.2)
            if arrived is not None and typed in term.text():
                break
            if time.perf_counter() - start > 5:
                raise TimeoutError(f"{typed!r} never showed:\n{term.text()}")
        samples.append(arrived - start)
        # a typist's pace (~100 words a minute): the next key comes after the screen settled
        time.sleep(0.02)
    term.send(b"\r")
    term.wait_for(lambda text: text.count(typed) >= 2)
    return samples


def make_repo(path: Path) -> Path:
    repo = small_repo(path)
    (repo / ".daintree.toml").write_text("[agents.echo]\ncommand = \"sh -c 'exec cat'\"\n"
                                         "[notifications]\nbell = false\ndesktop = false\n")
    return repo


def start_sessions(repo: Path, socket: str, names: tuple[str, ...]) -> None:
    """Worktrees `names` in `repo`, each running the echo agent on the tmux server `socket`."""
    from daintree_tui.core.hooks import trust
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService
    from daintree_tui.sessions.manager import SessionManager

    os.environ["DAINTREE_TMUX_SOCKET"] = socket
    trust(Project.discover(repo))  # the echo agent comes from the repository's config (private XDG_DATA_HOME)
    project = Project.discover(repo)
    service = WorktreeService(project)
    manager = SessionManager(project)
    for name in names:
        service.create(name)
        manager.start(name, "echo", size=(80, 30))


def measure(root: Path, socket: str, plain_socket: str) -> tuple[list[float], list[float]]:
    # The plain twin lives in a repository and on a tmux server of its own, both made the same way: were it one of
    # the dashboard's sessions, the dashboard would be busy showing the twin's status change (running while it is
    # typed into, waiting after) during the dashboard's own block, work no user's typing causes.
    dash_repo = make_repo(root / "repo")
    start_sessions(make_repo(root / "plain-repo"), plain_socket, ("plain",))
    start_sessions(dash_repo, socket, ("typing", "idle"))
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", "DAINTREE_TMUX_SOCKET": socket}
    env.pop("TMUX", None)
    plain = OuterTerminal(["tmux", "-L", plain_socket, "attach", "-t", "=dt-plain"], env)
    dashboard = OuterTerminal([sys.executable, "-m", "daintree_tui", "--repo", str(dash_repo)], env)
    try:
        dashboard.wait_for(lambda text: "typing" in text and "idle" in text)
        dashboard.send(b"\r")  # `typing` is the first row, the current worktree: open it
        # the hint says "keys go to the agent" (older builds: "typing goes to the agent")
        dashboard.wait_for(lambda text: "goes to the agent" in text or "go to the agent" in text)
        assert " typing " in dashboard.emulator.line_text(1), dashboard.text()
        plain.pump(1.0)
        plain_samples: list[float] = []
        dash_samples: list[float] = []
        for block in range(BLOCKS):
            plain_samples += measure_line(plain, f"{block:02d}p", KEYS_PER_BLOCK)
            dash_samples += measure_line(dashboard, f"{block:02d}d", KEYS_PER_BLOCK)
        return plain_samples, dash_samples
    finally:
        dashboard.close()
        plain.close()


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def run() -> str:
    tag = uuid.uuid4().hex[:6]
    socket, plain_socket = f"daintree-bench-{tag}", f"daintree-bench-{tag}-plain"
    saved = {key: os.environ.get(key) for key in ("DAINTREE_TMUX_SOCKET", "XDG_DATA_HOME")}
    try:
        with tempfile.TemporaryDirectory(prefix="daintree-bench-") as tmp:
            # Trusting the bench's config writes a trust record: keep it out of the user's own.
            os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")
            plain, dash = measure(Path(tmp), socket, plain_socket)
    finally:
        from daintree_tui.sessions.tmux import socket_path

        for name in (socket, plain_socket):
            subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)
            socket_path(name).unlink(missing_ok=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    p50 = (statistics.median(plain) * 1000, statistics.median(dash) * 1000)
    p95 = (percentile(plain, 0.95) * 1000, percentile(dash, 0.95) * 1000)
    target = 1.5 * p95[0] + 8
    rows = [
        [f"6. plain `tmux attach`, {len(plain)} keys", f"{p50[0]:.1f} / {p95[0]:.1f} ms", "", ""],
        [f"6. the dashboard, {len(dash)} keys", f"{p50[1]:.1f} / {p95[1]:.1f} ms", f"{p95[1] / p95[0]:.2f}x",
         f"p95 <= {target:.1f} ms ({'met' if p95[1] <= target else 'MISSED'})"],
    ]
    return table("6. Key to echo seen from an outer terminal (p50 / p95)", rows,
                 ["what", "result", "p95 ratio", "target: 1.5x plain + 8 ms"])


if __name__ == "__main__":
    print(run())
