"""Benchmark 8: the dashboard with N busy agents (N = 0, 10, 40, 100), each printing one line a second.

What a user sees: N worktrees, each with a session printing a line a second, plus one more, `aa-echo` (a `cat`),
and the dashboard opened on them in a pane of an outer tmux server (the user's terminal) that is 200x50 from its
start, the first row selected, nothing focused. For each N:
- dashboard CPU over two windows: `opened`, 12 s to 32 s after the launch (how issue 33 measured: the start-up's
  git facts of every worktree may still run in it on a loaded machine), and `steady`, the 20 s after it. The
  figure is its process, the children it waited for (the tmux and git calls) and its live children (the
  terminal's `tmux attach` client), from /proc/PID/stat; the sessions' tmux server over the same window is the
  floor (the cost of N sessions printing, paid with no dashboard at all); the repository's watcher (`daintree
  notify watch`, services/watcher.py) over the same window, in a column of its own: a session start runs it
  (started here before any dashboard, as the CLI's first session would), so it is paid with or without a
  dashboard. Before, the first dashboard of a run started it and counted it as its own child (~2% of a core at
  40 busy), and a baseline checkout run after it did not: the first variant of each run looked 2-3 points worse
  than the same code run second; the dashboard's RSS at the end;
- rows on screen: how many busy rows the outer pane shows (at 100, most rows are off screen: their cost is the
  slope of the steady figure from 40 to 100);
- key-to-echo p95, after the windows: `aa-echo`'s terminal focused, a key written to a terminal of our own
  attached to the outer tmux until the output that shows it echoed by `cat` is read (bench.latency's method);
- the slope: extra steady CPU per added busy session (least squares over the N);
- at the largest N, key-to-echo p95 with the busy agents paused and printing, in blocks taken in turn
  (quiet, busy, busy, quiet, ...: ECHO_BLOCKS blocks of LINE_KEYS keys each) on the same dashboard in the same
  minutes. The rounds of the table above are minutes apart at different N, where the machine's load swings more
  than the dashboard does: their ratio was noise (0.81x and 5.13x in one run). Paused (SIGSTOP) agents are idle
  sessions, as many rows, none printing.
Before, the bench made 101 worktrees whatever N was (61 without a session at 40), recorded every status before
the dashboard opened, focused a terminal before the window (the selected row's live preview then stood still)
and measured 15 s once the start-up's facts were on screen: 4.1-4.5 % at 40, where the user's view cost 5-6 %.

`DAINTREE_BENCH_DASHBOARD_PATH=/path/to/other/checkout` also runs that checkout's dashboard, right after this
one's for each N (how the 'before' figures in docs/benchmarks.md were taken); several checkouts, separated by `:`, run
in that order. `DAINTREE_BENCH_BUSY=0,10` and
`DAINTREE_BENCH_WINDOW=5` shorten a run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
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
WINDOW = float(os.environ.get("DAINTREE_BENCH_WINDOW", "20"))
START = 12.0  # seconds from the launch to the `opened` window, as issue 33 measured
KEYS = 48
LINE_KEYS = 24  # keys timed per typed line (after its id), as in bench.latency
ROUNDS = 0  # echo rounds so far in this run: each types lines of its own
ECHO_BLOCKS = int(os.environ.get("DAINTREE_BENCH_ECHO_BLOCKS", "8"))  # per state: 8 x 24 = 192 keys each
SETTLE = 4.0  # seconds after pausing or resuming the agents: their rows' status changes (debounce, hold) pass
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
    from daintree_tui.services.watcher import ensure_watcher, watcher_pid

    ensure_watcher(project)  # what the CLI's session start does; the dashboards find it running
    deadline = time.monotonic() + 30
    while (watcher_pid(project) or 0) <= 0 and time.monotonic() < deadline:  # it locks, then writes its pid
        time.sleep(0.05)
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
    return p95(samples)


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def busy_panes(socket: str) -> list[int]:
    """The busy agents' first processes (unsandboxed `sh` loops: the pane's process is the loop itself)."""
    out = subprocess.run(["tmux", "-L", socket, "list-panes", "-a", "-F", "#{session_name} #{pane_pid}"],
                         capture_output=True, text=True).stdout
    return [int(pid) for name, pid in (line.split() for line in out.splitlines()) if "busy-" in name]


def pause(pids: list[int], paused: bool) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # a loop that ended: nothing to pause
            os.kill(pid, signal.SIGSTOP if paused else signal.SIGCONT)


def echo_interleaved(viewer: Viewer, socket: str, round_no: int) -> tuple[float, float, int]:
    """p95 of key-to-echo with every busy agent paused, and printing, in blocks taken in turn (ABBA, so a drift in
    the machine's load weighs on both alike); (quiet, busy, keys per state). The agents print again after."""
    from bench.latency import OuterTerminal, measure_line

    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    env.pop("TMUX", None)
    pids = busy_panes(socket)
    samples: dict[bool, list[float]] = {True: [], False: []}
    term = OuterTerminal(["tmux", "-L", viewer.socket, "attach"], env, cols=200, rows=50)
    try:
        term.pump(1.0)
        for block in range(2 * ECHO_BLOCKS):
            paused = block % 4 in (0, 3)
            pause(pids, paused)
            time.sleep(SETTLE)
            samples[paused] += measure_line(term, f"i{round_no}b{block}", LINE_KEYS)
    finally:
        pause(pids, False)
        term.close()
    return p95(samples[True]), p95(samples[False]), len(samples[True])


def slope(xs: list[float], ys: list[float]) -> float:
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def window(pids: list[int], server: int, watcher: int) -> tuple[float, float, float]:
    """CPU of `pids` (with the children they waited for), of the tmux `server` and of the `watcher` over WINDOW
    seconds, in % of a core."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = [p for p in pids if p != watcher]
    before = proc_cpu(pids), cpu_ticks(server), cpu_ticks(watcher)
    start = time.perf_counter()
    time.sleep(WINDOW)
    elapsed = time.perf_counter() - start
    after = proc_cpu(pids), cpu_ticks(server), cpu_ticks(watcher)
    dash, floor, watch = ((a - b) / tick / elapsed * 100 for a, b in zip(after, before, strict=True))
    return dash, floor, watch


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def measure(viewer: Viewer, repo: Path, socket: str, busy: int, env: dict[str, str],
            checkout: str | None, interleave: bool = False) -> dict[str, float]:
    command = f"{sys.executable} -m daintree_tui"
    if checkout:
        command = f"env PYTHONPATH={checkout} {command}"
    load_before = loadavg()
    launched = viewer.launch(command, repo, env, size=(200, 50))
    viewer.wait_for("aa-echo", timeout=60)
    server = int(subprocess.run(["tmux", "-L", socket, "display-message", "-p", "#{pid}"],
                                capture_output=True, text=True).stdout.strip())
    time.sleep(max(0.0, launched + START - time.perf_counter()))
    pid = viewer.pane_pid()
    from daintree_tui.core.project import Project
    from daintree_tui.services.watcher import watcher_pid

    watcher = watcher_pid(Project.discover(repo)) or 0
    opened, opened_server, _ = window(descendants(pid), server, watcher)
    # Live children again: the attach client may be new.
    steady, steady_server, steady_watcher = window(descendants(pid), server, watcher)
    screen = viewer.tmux("capture-pane", "-p").stdout
    rows = sum(1 for line in screen.splitlines() if "busy-" in line.split("▕")[0])
    rss = rss_mb(pid)
    focus_terminal(viewer)
    time.sleep(2)
    # A round id of its own per measure: the next checkout's dashboard opens on the same `cat`, whose screen still
    # shows the lines typed before, and a line id typed again was "echoed" before any key (main's 0.1-0.2 ms).
    global ROUNDS
    ROUNDS += 1
    echo = echo_p95(viewer, ROUNDS)
    result = {"busy": busy, "opened": opened, "opened_server": opened_server, "dash": steady,
              "server": steady_server, "watcher": steady_watcher, "rows": rows, "rss": rss, "echo": echo * 1000,
              "load": max(load_before, loadavg())}
    if interleave and busy:
        quiet, printing, keys = echo_interleaved(viewer, socket, ROUNDS)
        result.update(echo_quiet=quiet * 1000, echo_busy=printing * 1000, echo_keys=keys,
                      echo_load=max(result["load"], loadavg()))
    return result


def run() -> str:
    """Measure this checkout's dashboard; with DAINTREE_BENCH_DASHBOARD_PATH also that checkout's, for each N
    right after this one's (same sessions, same minute of machine load)."""
    socket = f"daintree-bench-{uuid.uuid4().hex[:6]}"
    viewer = Viewer()
    data_home = tempfile.mkdtemp(prefix="daintree-bench-data-")  # the trust record: never the user's own
    # The defaults, not the user's own config (a webhook, a sandbox setting) measured with them.
    config_home = os.path.join(data_home, "config")
    os.environ["XDG_DATA_HOME"], os.environ["XDG_CONFIG_HOME"] = data_home, config_home
    env = {"DAINTREE_TMUX_SOCKET": socket, "TERM": "xterm-256color", "XDG_DATA_HOME": data_home,
           "XDG_CONFIG_HOME": config_home}
    others = [path for path in os.environ.get("DAINTREE_BENCH_DASHBOARD_PATH", "").split(os.pathsep) if path]
    variants: list[tuple[str, str | None]] = [("this checkout", None)] + [(path, path) for path in others]
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in variants}
    try:
        with tempfile.TemporaryDirectory(prefix="daintree-bench-", ignore_cleanup_errors=True) as tmp:
            repo, manager = build(Path(tmp), socket)
            started = 0
            from daintree_tui.core.project import Project
            from daintree_tui.core.worktrees import WorktreeService

            service = WorktreeService(Project.discover(repo))
            for count in COUNTS:
                while started < count:
                    service.create(f"busy-{started:03d}")
                    manager.start(f"busy-{started:03d}", "busy", size=(120, 40))  # type: ignore[attr-defined]
                    started += 1
                for label, checkout in variants:
                    results[label].append(measure(viewer, repo, socket, count, env, checkout,
                                                  interleave=count == max(COUNTS)))
                    viewer.close()
    finally:
        viewer.close()
        kill_tmux(socket)
        shutil.rmtree(data_home, ignore_errors=True)
        time.sleep(0.5)  # the sessions' pipe-pane writers end with the server
    return "\n".join(report(label, rows) for label, rows in results.items())


def report(label: str, results: list[dict[str, float]]) -> str:
    base = results[0]
    busy_rows = [r for r in results if r["busy"]]
    targets = {40: ("< 3%", "", ""), 100: ("< 5%", "<= 1.5x", "< 150 MB")}
    rows = []
    for r in results:
        cpu_target, echo_target, rss_target = targets.get(int(r["busy"]), ("", "", ""))
        if "echo_busy" in r:  # the target is judged on the paired row below: this ratio spans the whole run
            echo_target = ""
        rows.append([str(int(r["busy"])), str(int(r["rows"])), f"{r['opened']:.1f}%", f"{r['dash']:.1f}%",
                     cpu_target, f"{r['server']:.1f}%", f"{r['dash'] / r['server']:.1f}x" if r["server"] >= 0.5 else "",
                     f"{r['watcher']:.1f}%",
                     f"{r['rss']:.0f} MB", rss_target, f"{r['echo']:.1f} ms",
                     f"{r['echo'] / base['echo']:.2f}x" if base["echo"] else "", echo_target, f"{r['load']:.1f}"])
    if len(busy_rows) >= 2:  # a slope needs two counts (DAINTREE_BENCH_BUSY=0 or =40 alone has none)
        xs = [r["busy"] for r in busy_rows]
        rows.append(["slope per busy session", "", f"{slope(xs, [r['opened'] for r in busy_rows]):+.3f}%",
                     f"{slope(xs, [r['dash'] for r in busy_rows]):+.3f}%", "",
                     f"{slope(xs, [r['server'] for r in busy_rows]):+.3f}%", "",
                     f"{slope(xs, [r['watcher'] for r in busy_rows]):+.3f}%", "", "", "", "", "", ""])
    paired = [r for r in results if "echo_busy" in r]
    for r in paired:
        rows.append([f"echo p95 at {int(r['busy'])} busy, paused and printing in turn", "", "", "", "", "", "",
                     "", "", "", f"{r['echo_quiet']:.1f} / {r['echo_busy']:.1f} ms ({int(r['echo_keys'])} keys each)",
                     f"{r['echo_busy'] / r['echo_quiet']:.2f}x" if r["echo_quiet"] else "", "<= 1.5x",
                     f"{r['echo_load']:.1f}"])
    return table(f"8. Busy agents (1 line/s each), dashboard at 200x50 in an outer tmux pane as opened, CPU over "
                 f"{WINDOW:.0f} s from {START:.0f} s after the launch (opened) and the {WINDOW:.0f} s after (steady) "
                 f"({label})", rows,
                 ["busy", "rows on screen", "CPU opened", "CPU steady", "target", "tmux server (floor)",
                  "vs floor", "watcher", "RSS", "target", "echo p95", "vs 0 busy", "target", "load"])


if __name__ == "__main__":
    print(run())
