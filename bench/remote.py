"""Benchmark: `worktree list --host` over a warm master connection vs the local command plus one round trip.

The far side is this machine over a private sshd on 127.0.0.1 (tests/sshd.py), so "one round trip" is ssh's own
cost (a mux client over the master, a remote shell starting `true`); the target is within 1.5x.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import generated_repo, median_times, table

RUNS = 9
WORKTREES = 5
FEED_INTERVAL = 2.0
FEED_SECONDS = 20.0


def _feed_cpu(hosts: list[object]) -> float:
    """Local CPU (this process and its ssh clients) of a HostsFeed polling `hosts`, in % of one core."""
    import resource
    import time

    from daintree_tui.services.hosts_feed import HostsFeed

    feed = HostsFeed(hosts, interval=FEED_INTERVAL)  # type: ignore[arg-type]
    feed.poll()  # warm: masters up

    def cpu() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    began, wall = cpu(), time.perf_counter()
    feed.start()
    time.sleep(FEED_SECONDS)
    feed.stop()
    return (cpu() - began) / (time.perf_counter() - wall) * 100


def run() -> str:
    from tests.sshd import Sshd, sshd_available

    title = f"Remote hosts: worktree list over ssh ({WORKTREES} worktrees), median of {RUNS}"
    if not sshd_available():
        return f"## {title}\nskipped: OpenSSH server not installed (/usr/sbin/sshd)\n"
    from daintree_tui.services.remote import HostConfig, RemoteHost

    daintree = str(Path(sys.executable).parent / "daintree")
    with tempfile.TemporaryDirectory(prefix="daintree-bench-") as tmp, \
            tempfile.TemporaryDirectory(prefix="dt-ssh-") as controls:
        base = Path(tmp)
        (base / "ssh").mkdir(mode=0o700)
        repo = generated_repo(base / "repo", 1000)
        env = {**os.environ, "XDG_CONFIG_HOME": str(base / "config"), "XDG_DATA_HOME": str(base / "data"),
               "DAINTREE_SSH_CONTROL_DIR": controls}
        for i in range(WORKTREES):
            subprocess.run([daintree, "worktree", "create", f"wt{i}", "--repo", str(repo)], check=True,
                           capture_output=True, env=env)
        sshd = Sshd(base / "ssh", base / "remote-home")
        sshd.start()
        host = RemoteHost(HostConfig("far", "dt-far", str(repo), daintree=daintree,
                                     ssh_config=str(sshd.client_config)), controls=Path(controls))
        try:
            host.start_master()
            from daintree_tui.services.remote import save_host

            os.environ["XDG_CONFIG_HOME"] = env["XDG_CONFIG_HOME"]
            save_host(host.config)
            trip = host.command_argv("true")
            local, round_trip, remote = median_times([
                lambda i: subprocess.run([daintree, "worktree", "list", "--json", "--repo", str(repo)], check=True,
                                         capture_output=True, env=env),
                lambda i: subprocess.run(trip, check=True, capture_output=True, stdin=subprocess.DEVNULL),
                lambda i: subprocess.run([daintree, "worktree", "list", "--json", "--host", "far"], check=True,
                                         capture_output=True, env=env, stdin=subprocess.DEVNULL),
            ], RUNS)
            feed_cpu = _feed_cpu([host, RemoteHost(HostConfig("other", "dt-other", str(repo), daintree=daintree,
                                                              ssh_config=str(sshd.client_config)),
                                                   controls=Path(controls))])
        finally:
            host.stop_master()
            sshd.kill()
    baseline = local + round_trip
    rows = [
        ["local `daintree worktree list --json`", f"{local * 1000:.0f} ms", "", ""],
        ["`ssh host true` over the master", f"{round_trip * 1000:.0f} ms", "", ""],
        ["local + one round trip (baseline)", f"{baseline * 1000:.0f} ms", "1.00x", ""],
        ["`daintree worktree list --json --host far`", f"{remote * 1000:.0f} ms", f"{remote / baseline:.2f}x",
         "<= 1.5x"],
        [f"HostsFeed, 2 hosts polled every {FEED_INTERVAL:g} s: local CPU", f"{feed_cpu:.1f} % of a core", "", ""],
    ]
    return table(title, rows, ["what", "median", "ratio", "target"])


if __name__ == "__main__":
    print(run())
