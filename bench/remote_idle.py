"""Benchmark: dashboard idle CPU with two remote hosts of ten idle sessions each (target < 3 % of a core).

The hosts are this machine over a private sshd on 127.0.0.1 (tests/sshd.py): two host entries, each its own
repository and ssh alias, each with ten idle shell sessions in its own tmux. The dashboard runs at 200x50 in a
pane of an outer tmux server (the user's terminal) and polls both hosts over their master connections; its first
row (a remote session) is attached in its terminal over `ssh -t`. Sampled from /proc over the window: the
dashboard's process and the children it waited for (each poll's ssh client), plus its live descendants (the
attach client). The far side's cost (sshd and the `daintree ... --json` each poll runs there) is shown apart: on a
real host it is that machine's CPU, not this one's.

Baseline in the same run: the same dashboard with no hosts configured. `DAINTREE_BENCH_WINDOW=10` (seconds) and
`DAINTREE_BENCH_ROUNDS=3` set the window and how many times each is measured.
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

from bench.common import small_repo, table
from bench.dashboard import Viewer, cpu_ticks, descendants

SESSIONS = 10
WINDOW = float(os.environ.get("DAINTREE_BENCH_WINDOW", "10"))
ROUNDS = int(os.environ.get("DAINTREE_BENCH_ROUNDS", "3"))
WARMUP = 8.0
HOSTS = (("a", "dt-far"), ("b", "dt-other"))


def measure(viewer: Viewer, repo: Path, env: dict[str, str], far_pid: int | None, marker: str) -> tuple[float, float]:
    """(dashboard CPU, far side CPU) in % of a core, the dashboard started afresh and settled first."""
    viewer.launch(f"{sys.executable} -m daintree_tui", repo, env)
    viewer.tmux("resize-window", "-x", "200", "-y", "50")
    viewer.wait_for(marker, timeout=90)
    time.sleep(WARMUP)  # start-up work (first polls, masters, the attach) is a one-off
    pid = viewer.pane_pid()
    far = descendants(far_pid) if far_pid is not None else []
    tick = os.sysconf("SC_CLK_TCK")
    dash = descendants(pid)
    before_dash, before_far = [cpu_ticks(p) for p in dash], [cpu_ticks(p) for p in far]
    start = time.perf_counter()
    time.sleep(WINDOW)
    elapsed = time.perf_counter() - start
    dash_cpu = sum(cpu_ticks(p) - b for p, b in zip(dash, before_dash, strict=True) if Path(f"/proc/{p}").exists())
    far_cpu = sum(cpu_ticks(p) - b for p, b in zip(far, before_far, strict=True) if Path(f"/proc/{p}").exists())
    viewer.close()
    return dash_cpu / tick / elapsed * 100, far_cpu / tick / elapsed * 100


def run() -> str:
    from tests.sshd import Sshd, sshd_available

    title = (f"Remote hosts: dashboard idle CPU, 2 hosts x {SESSIONS} idle sessions over ssh, {WINDOW:.0f} s window, "
             f"{ROUNDS} rounds")
    if not sshd_available():
        return f"## {title}\nskipped: OpenSSH server not installed (/usr/sbin/sshd)\n"
    from daintree_tui.services.remote import HostConfig, RemoteHost, save_host

    daintree = str(Path(sys.executable).parent / "daintree")
    socket = f"daintree-bench-{uuid.uuid4().hex[:6]}"
    viewer = Viewer()
    results: dict[str, list[tuple[float, float]]] = {"none": [], "hosts": []}
    with tempfile.TemporaryDirectory(prefix="daintree-bench-", ignore_cleanup_errors=True) as tmp, \
            tempfile.TemporaryDirectory(prefix="dt-ssh-") as controls:
        base = Path(tmp)
        (base / "ssh").mkdir(mode=0o700)
        repo = small_repo(base / "repo")
        (repo / ".daintree.toml").write_text("[notifications]\nbell = false\ndesktop = false\n")
        sshd = Sshd(base / "ssh", base / "remote-home")
        no_hosts = {"XDG_CONFIG_HOME": str(base / "config-none"), "XDG_DATA_HOME": str(base / "data"),
                    "DAINTREE_TMUX_SOCKET": socket, "TERM": "xterm-256color"}
        with_hosts = {**no_hosts, "XDG_CONFIG_HOME": str(base / "config"),
                      "DAINTREE_SSH_CONFIG": str(sshd.client_config), "DAINTREE_SSH_CONTROL_DIR": controls}
        hosts = [RemoteHost(HostConfig(name, alias, str(small_repo(base / f"far-repo-{name}")),
                                       max_sessions=SESSIONS, daintree=daintree), controls=Path(controls))
                 for name, alias in HOSTS]
        saved = os.environ.get("XDG_CONFIG_HOME")
        os.environ["XDG_CONFIG_HOME"] = with_hosts["XDG_CONFIG_HOME"]
        os.environ["DAINTREE_SSH_CONFIG"] = str(sshd.client_config)
        try:
            for host in hosts:
                save_host(host.config)
            sshd.start()
            for host in hosts:
                for i in range(SESSIONS):
                    host.run_json(["worktree", "create", f"idle-{host.name}-{i}", "--agent", "shell"])
            marker = f"idle-b-{SESSIONS - 1}"
            for _ in range(ROUNDS):  # interleaved: both variants see the same minute of machine load
                results["none"].append(measure(viewer, repo, no_hosts, None, "Worktrees"))
                assert sshd.proc is not None
                results["hosts"].append(measure(viewer, repo, with_hosts, sshd.proc.pid, marker))
        finally:
            viewer.close()
            for host in hosts:
                host.stop_master()
                # The far side's tmux servers (this machine's, here): one per repository, named from its path.
                subprocess.run(["tmux", "-L", f"daintree-{_socket_suffix(host.config.repo)}", "kill-server"],
                               capture_output=True)
            sshd.kill()
            subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
            if saved is None:
                os.environ.pop("XDG_CONFIG_HOME", None)
            else:
                os.environ["XDG_CONFIG_HOME"] = saved
            os.environ.pop("DAINTREE_SSH_CONFIG", None)
    load = os.getloadavg()[0]

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.1f}% ({min(values):.1f}-{max(values):.1f})"

    rows = [
        ["no hosts (baseline)", cell([d for d, _ in results["none"]]), "", ""],
        [f"2 hosts x {SESSIONS} idle sessions, polled every 2 s, one attached",
         cell([d for d, _ in results["hosts"]]), "< 3%", cell([f for _, f in results["hosts"]])],
    ]
    return table(f"{title}, load {load:.1f}", rows,
                 ["dashboard", "dashboard CPU, median (range)", "target", "far side (sshd + its daintree)"])


def _socket_suffix(repo: str) -> str:
    import hashlib

    return hashlib.sha1(str(Path(repo).resolve()).encode()).hexdigest()[:10]


if __name__ == "__main__":
    print(run())
