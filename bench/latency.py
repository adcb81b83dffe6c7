"""Benchmark 5 (its second half): key to echo as a person sees it, from an OUTER terminal.

A PTY of our own plays the user's terminal emulator: it runs (a) the dashboard with a session focused and (b) plain
`tmux attach` to a twin session running the same program (`cat`, echoing through the tty). Keys are written to the
outer PTY's master; the output is parsed with the same emulator the dashboard uses, and a key counts as echoed when
the outer screen shows it. A key's time runs from the write of the key to the read of the output that made it
show: the bench's own parsing and screen checks are outside the sample, and nothing polls (the bench sleeps in
`select` on the PTY, so it wakes when the first byte is there). The two are measured in interleaved blocks in one
run, so a busy neighbour hits both.

`DAINTREE_BENCH_DASHBOARD_PATH=/path/to/other/checkout` also measures that checkout's dashboard (on sessions of its
own), in the same interleaved blocks: how the 'before' figures in docs/benchmarks.md were taken.
`DAINTREE_BENCH_BURNERS=2` runs two CPU-bound processes beside it for the whole measurement (issue 33's load 8 on
the 2-core machine); their count is in the table's title.

    python -m bench.latency        (also part of `python -m bench`)
"""

from __future__ import annotations

import contextlib
import os
import re
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

from bench.common import kill_tmux, small_repo, table

COLS, ROWS = 120, 40
KEYS_PER_BLOCK = 25
BLOCKS = 8
LINE_KEYS = 24  # keys measured per typed line, after a 3-character line id
BURNERS = int(os.environ.get("DAINTREE_BENCH_BURNERS", "0"))


class OuterTerminal:
    """A terminal emulator driving `argv` in a PTY we own, the way a user's terminal does."""

    def __init__(self, argv: list[str], env: dict[str, str], cols: int = COLS, rows: int = ROWS,
                 cwd: Path | None = None) -> None:
        from daintree_tui.sessions.emulator import TerminalEmulator
        from daintree_tui.sessions.pty_host import set_winsize

        master, slave = os.openpty()
        set_winsize(slave, cols, rows)
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
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

    def settle(self, quiet: float = 2.0, limit: float = 30.0) -> None:
        """Read until nothing has come for `quiet` seconds (or `limit` passed)."""
        deadline = time.monotonic() + limit
        while self.pump(quiet) and time.monotonic() < deadline:
            pass

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
    # Twice at the end of a screen line, where the terminal is (the echo and cat's copy): the dashboard's row of
    # the session shows its last line too, mid-line, and counting that one let the next line be typed before
    # cat's copy came.
    at_end = re.compile(re.escape(typed) + r" *$", re.MULTILINE)
    term.wait_for(lambda text: len(at_end.findall(text)) >= 2)
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


def open_dashboard(root: Path, socket: str, checkout: str | None, env: dict[str, str]) -> OuterTerminal:
    """A dashboard (this checkout's, or `checkout`'s) on a repository and tmux server of its own, `typing` open."""
    label = socket.rsplit("-", 1)[1]
    repo = make_repo(root / label)
    start_sessions(repo, socket, ("typing", "idle"))
    env = {**env, "DAINTREE_TMUX_SOCKET": socket}
    if checkout:
        env["PYTHONPATH"] = checkout
    # Run in the repository, so `-m` finds the package installed in this venv (or the checkout), never a cwd copy.
    dashboard = OuterTerminal([sys.executable, "-m", "daintree_tui", "--repo", str(repo)], env, cwd=repo)
    try:
        dashboard.wait_for(lambda text: "typing" in text and "idle" in text)
        for attempt in range(3):
            # `typing` is the first row, the current worktree: open it (an enter that comes while the lists are
            # still being filled can be lost: try again). The hint says "keys go to the agent" (older: "typing
            # goes to the agent").
            dashboard.send(b"\r")
            try:
                dashboard.wait_for(lambda text: "goes to the agent" in text or "go to the agent" in text, timeout=10)
                break
            except TimeoutError:
                if attempt == 2:
                    raise
        assert " typing " in dashboard.emulator.line_text(1), dashboard.text()
    except BaseException:
        dashboard.close()  # a dashboard left running on a hung-up terminal spins at half a core
        raise
    return dashboard


def measure(root: Path, tag: str, other: str | None) -> dict[str, list[float]]:
    """Samples per side: plain tmux, this dashboard and, with `other`, that checkout's dashboard."""
    # Every side has a repository and a tmux server of its own, all made the same way: were the plain twin one of
    # the dashboard's sessions, the dashboard would be busy showing the twin's status change (running while it is
    # typed into, waiting after) during the dashboard's own block, work no user's typing causes.
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    env.pop("TMUX", None)
    start_sessions(make_repo(root / "plain"), f"{tag}-plain", ("plain",))
    sides: dict[str, OuterTerminal] = {}
    try:
        sides["plain"] = OuterTerminal(["tmux", "-L", f"{tag}-plain", "attach", "-t", "=dt-plain"], env)
        sides["dashboard"] = open_dashboard(root, f"{tag}-dashboard", None, env)
        if other:
            sides["before"] = open_dashboard(root, f"{tag}-before", other, env)
        sides["plain"].pump(1.0)  # tmux's queries on attach, answered before any key
        # Typing is measured once start-up is over (git facts, the first polls, the start-up notices and their
        # expiry): one line per side that is not counted, then until every screen has been quiet for 2 s.
        for name, term in sides.items():
            measure_line(term, f"w{name[0]}", 5)
        for term in sides.values():
            term.settle()
        samples: dict[str, list[float]] = {name: [] for name in sides}
        for block in range(BLOCKS):
            for name, term in sides.items():
                samples[name] += measure_line(term, f"{block:02d}{name[0]}", KEYS_PER_BLOCK)
        return samples
    finally:
        for term in sides.values():
            term.close()


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def run() -> str:
    tag = f"daintree-bench-{uuid.uuid4().hex[:6]}"
    other = os.environ.get("DAINTREE_BENCH_DASHBOARD_PATH")
    saved = {key: os.environ.get(key) for key in ("DAINTREE_TMUX_SOCKET", "XDG_DATA_HOME", "XDG_CONFIG_HOME")}
    burners = [subprocess.Popen([sys.executable, "-S", "-c", "while True: pass"]) for _ in range(BURNERS)]
    try:
        with tempfile.TemporaryDirectory(prefix="daintree-bench-") as tmp:
            # Trusting the bench's config writes a trust record: keep it out of the user's own.
            os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "data")
            os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")  # the defaults, not the user's own config
            samples = measure(Path(tmp), tag, other)
        load = " / ".join(f"{v:.1f}" for v in os.getloadavg())  # taken before the burners end
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
        for side in ("plain", "dashboard", "before"):
            kill_tmux(f"{tag}-{side}")
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    plain_p95 = percentile(samples["plain"], 0.95) * 1000
    target = 1.5 * plain_p95 + 8
    labels = {"plain": "plain `tmux attach`", "dashboard": "the dashboard", "before": f"the dashboard of {other}"}
    rows = []
    for name, values in samples.items():
        p50, p95 = statistics.median(values) * 1000, percentile(values, 0.95) * 1000
        verdict = "" if name == "plain" else f"p95 <= {target:.1f} ms ({'met' if p95 <= target else 'MISSED'})"
        rows.append([f"5. {labels[name]}, {len(values)} keys", f"{p50:.1f} / {p95:.1f} ms",
                     "" if name == "plain" else f"{p95 / plain_p95:.2f}x", verdict])
    beside = f", {BURNERS} CPU-bound processes beside it" if BURNERS else ""
    return table(f"5. Key to echo seen from an outer terminal (p50 / p95; load average after: {load}{beside})", rows,
                 ["what", "result", "p95 ratio", "target: 1.5x plain + 8 ms"])


if __name__ == "__main__":
    print(run())
