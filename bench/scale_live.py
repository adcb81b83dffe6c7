"""Benchmark 8: the dashboard with N busy agents (N = 0, 10, 40, 100), each printing one line a second.

The dashboard runs at 200x50 in a pane of an outer tmux server (the user's terminal) with one extra session,
`aa-echo` (a `cat`), open and focused in its embedded terminal. For each N, over a fixed window:
- dashboard CPU: its process and the children it waited for (the tmux and git calls), from /proc/PID/stat, plus
  its `tmux attach` client; the sessions' tmux server CPU separately; the dashboard's RSS at the end;
- key-to-echo p95: a key written to a terminal of our own attached to the outer tmux until the output that shows
  it echoed by `cat` is read (bench.latency's method);
- the slope: extra CPU per added busy session (least squares over the N).

`DAINTREE_BENCH_DASHBOARD_PATH=/path/to/other/checkout` also runs that checkout's dashboard, right after this
one's for each N (how the 'before' figures in docs/benchmarks.md were taken); several checkouts, separated by `:`, run
in that order. `DAINTREE_BENCH_BUSY=0,10` and
`DAINTREE_BENCH_WINDOW=5` shorten a run.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import kill_tmux, small_repo, table
from bench.dashboard import Viewer, cpu_ticks, descendants

COUNTS = tuple(int(n) for n in os.environ.get("DAINTREE_BENCH_BUSY", "0,10,40,100").split(","))
WINDOW = float(os.environ.get("DAINTREE_BENCH_WINDOW", "15"))
KEYS = 48
LINE_KEYS = 24  # keys timed per typed line (after its id), as in bench.latency
BUSY = "sh -c 'i=0; while :; do i=$((i+1)); echo \\\"step $i: editing src/module_$i.py\\\"; sleep 1; done'"


def build(root: Path, socket: str) -> tuple[Path, object]:
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktrees import WorktreeService
    from daintree_tui.sessions.manager import SessionManager

    repo = small_repo(root / "repo")
    (repo / ".daintree.toml").write_text(
        f"[ports]\nrange = [20000, 29999]\n[agents.busy]\ncommand = \"{BUSY}\"\nsandbox = \"off\"\n"
        "[agents.echo]\ncommand = \"sh -c 'exec cat'\"\n"
        "[notifications]\nbell = false\ndesktop = false\n")
    os.environ["DAINTREE_TMUX_SOCKET"] = socket
    project = Project.discover(repo)
    # The busy agents run unsandboxed: bwrap's mount table plus the loop would pass tmux's command-length limit,
    # and what is measured is the dashboard, not the sandbox. Loosening the sandbox needs the config trusted.
    from daintree_tui.core.hooks import trust

    trust(project)
    project = Project.discover(repo)
    service = WorktreeService(project)
    manager = SessionManager(project)
    service.create("aa-echo")
    manager.start("aa-echo", "echo", size=(120, 40))
    for i in range(max(COUNTS)):
        service.create(f"busy-{i:03d}")
    return repo, manager


def proc_cpu(pids: list[int]) -> int:
    return sum(cpu_ticks(p) for p in pids if Path(f"/proc/{p}").exists())


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


def shown(viewer: Viewer, text: str, timeout: float = 10.0) -> float:
    """When `text` appeared in the outer pane (fails with the whole screen, not a clipped one)."""
    try:
        return viewer.wait_for(text, timeout=timeout)
    except RuntimeError:
        raise RuntimeError(f"{text!r} never appeared; the outer pane shows:\n"
                           + viewer.tmux("capture-pane", "-p").stdout) from None


def focus_terminal(viewer: Viewer) -> None:
    """Open the first row (aa-echo) and focus its terminal; a busy dashboard may miss the first Enter."""
    for _ in range(6):
        viewer.tmux("send-keys", "Enter")
        try:
            viewer.wait_for("go to the agent", timeout=5)
            return
        except RuntimeError:
            continue
    shown(viewer, "go to the agent", timeout=1)


def echo_p95(viewer: Viewer, round_no: int) -> float:
    """Type into the focused `cat` through a terminal of our own attached to the outer tmux (a second client of
    the user's terminal), each key timed from its write to the read of the output that showed it echoed: the
    method of bench.latency, where nothing polls. (Before, every sample held `send-keys` and `capture-pane`
    forks every 5 ms, whose cost swung with the load more than the dashboard did.)"""
    from bench.latency import OuterTerminal, measure_line

    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    env.pop("TMUX", None)
    term = OuterTerminal(["tmux", "-L", viewer.socket, "attach"], env, cols=200, rows=50)
    samples: list[float] = []
    try:
        term.pump(1.0)  # tmux's queries on attach, answered before any key
        line = 0
        while len(samples) < KEYS:
            samples += measure_line(term, f"r{round_no}l{line}", min(LINE_KEYS, KEYS - len(samples)))
            line += 1
    finally:
        term.close()
    samples.sort()
    return samples[min(len(samples) - 1, int(len(samples) * 0.95))]


def slope(xs: list[float], ys: list[float]) -> float:
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def settle(repo: Path) -> None:
    """Record the sessions' current status before the dashboard opens (as an earlier dashboard or `session
    watch` would have), then wait until nothing is written any more: the window measures the steady state of
    agents at work, not the start-up of forty of them (each transition is an event, each event a reload)."""
    from daintree_tui.core.project import Project
    from daintree_tui.services import Services

    services = Services(Project.discover(repo))
    events = repo / ".worktrees" / "events.jsonl"
    quiet_since, size = time.monotonic(), -1
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        services.observer.poll(with_screens=False)
        now_size = events.stat().st_size if events.exists() else 0
        if now_size != size:
            size, quiet_since = now_size, time.monotonic()
        elif time.monotonic() - quiet_since > 3:
            return
        time.sleep(0.5)


def measure(viewer: Viewer, repo: Path, socket: str, busy: int, env: dict[str, str],
            checkout: str | None) -> dict[str, float]:
    settle(repo)
    command = f"{sys.executable} -m daintree_tui"
    if checkout:
        command = f"env PYTHONPATH={checkout} {command}"
    viewer.launch(command, repo, env)
    viewer.tmux("resize-window", "-x", "200", "-y", "50")
    viewer.wait_for("aa-echo", timeout=60)
    if busy:
        viewer.wait_for("busy-000", timeout=60)
    # Start-up work is a one-off that both checkouts share (git facts and disk use of 101 worktrees: ~400
    # forks): wait until the facts are on screen (ahead/behind), then a while for disk use and the polls.
    viewer.wait_for("↑0↓0", timeout=120)
    time.sleep(8)
    focus_terminal(viewer)
    time.sleep(2)
    pid = viewer.pane_pid()
    server = int(subprocess.run(["tmux", "-L", socket, "display-message", "-p", "#{pid}"],
                                capture_output=True, text=True).stdout.strip())
    dash = descendants(pid)
    tick = os.sysconf("SC_CLK_TCK")
    before_dash, before_server = proc_cpu(dash), cpu_ticks(server)
    start = time.perf_counter()
    time.sleep(WINDOW)
    elapsed = time.perf_counter() - start
    dash_cpu = (proc_cpu(dash) - before_dash) / tick / elapsed * 100
    server_cpu = (cpu_ticks(server) - before_server) / tick / elapsed * 100
    p95 = echo_p95(viewer, busy)
    return {"busy": busy, "dash": dash_cpu, "server": server_cpu, "rss": rss_mb(pid), "echo": p95 * 1000}


def run() -> str:
    """Measure this checkout's dashboard; with DAINTREE_BENCH_DASHBOARD_PATH also that checkout's, for each N
    right after this one's (same sessions, same minute of machine load)."""
    socket = f"daintree-bench-{uuid.uuid4().hex[:6]}"
    viewer = Viewer()
    env = {"DAINTREE_TMUX_SOCKET": socket, "TERM": "xterm-256color"}
    others = [path for path in os.environ.get("DAINTREE_BENCH_DASHBOARD_PATH", "").split(os.pathsep) if path]
    variants: list[tuple[str, str | None]] = [("this checkout", None)] + [(path, path) for path in others]
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in variants}
    try:
        with tempfile.TemporaryDirectory(prefix="daintree-bench-", ignore_cleanup_errors=True) as tmp:
            repo, manager = build(Path(tmp), socket)
            started = 0
            for count in COUNTS:
                while started < count:
                    manager.start(f"busy-{started:03d}", "busy", size=(120, 40))  # type: ignore[attr-defined]
                    started += 1
                for label, checkout in variants:
                    results[label].append(measure(viewer, repo, socket, count, env, checkout))
                    viewer.close()
    finally:
        viewer.close()
        kill_tmux(socket)
        time.sleep(0.5)  # the sessions' pipe-pane writers end with the server
    return "\n".join(report(label, rows) for label, rows in results.items())


def report(label: str, results: list[dict[str, float]]) -> str:
    base = results[0]
    busy_rows = [r for r in results if r["busy"]]
    targets = {40: ("< 5%", "", ""), 100: ("< 10%", "<= 1.5x", "< 150 MB")}
    rows = []
    for r in results:
        cpu_target, echo_target, rss_target = targets.get(int(r["busy"]), ("", "", ""))
        rows.append([str(int(r["busy"])), f"{r['dash']:.1f}%", cpu_target, f"{r['server']:.1f}%",
                     f"{r['rss']:.0f} MB", rss_target, f"{r['echo']:.1f} ms",
                     f"{r['echo'] / base['echo']:.2f}x" if base["echo"] else "", echo_target])
    if len(busy_rows) >= 2:  # a slope needs two counts (DAINTREE_BENCH_BUSY=0 or =40 alone has none)
        dash_slope = slope([r["busy"] for r in busy_rows], [r["dash"] for r in busy_rows])
        server_slope = slope([r["busy"] for r in busy_rows], [r["server"] for r in busy_rows])
        rows.append(["slope per busy session", f"{dash_slope:+.3f}%", "", f"{server_slope:+.3f}%", "", "", "", "",
                     ""])
    return table(f"8. Busy agents (1 line/s each), dashboard at 200x50 in an outer tmux pane, {WINDOW:.0f} s "
                 f"window ({label})", rows,
                 ["busy", "dashboard CPU", "target", "tmux server CPU", "RSS", "target", "echo p95",
                  "vs 0 busy", "target"])


if __name__ == "__main__":
    print(run())
