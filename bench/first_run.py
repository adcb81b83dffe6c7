"""Benchmark: `make run` on a fresh clone, to the dashboard's first frame, as a new user meets it.

A fresh `git clone` of a checkout into a temp dir (no `.venv`), then `make run` in a pane of a private tmux
server (120x40), timed until the demo's first worktree row shows in the pane. Everything the pane printed on the
way (pip, uv, setuptools) is kept and searched for warnings. Not part of `make bench`: it installs from the
package index and takes a minute or so.

    python -m bench.first_run [--source PATH] [--installer pip|uv] [--cold-cache] [--runs N]

`--cold-cache` gives pip and uv empty caches of their own (every wheel downloaded again); without it they use
the user's caches, as a second clone on the same machine would.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

FIRST_FRAME = "auth-refactor"  # a row of the demo's worktree table: the dashboard is up
TIMEOUT = 300.0
NOISE = re.compile(r"deprecat|warning", re.IGNORECASE)
# make echoes its own command lines (the uv one with its pip fallback, PYTHONWARNINGS included): not noise
MAKE_ECHO = re.compile(r"^(\{ \[ -x \S+ \] && )?(\w+=\S+ )*\S*(python|uv) ")


def _tmux(socket: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-L", socket, "-f", "/dev/null", *args], capture_output=True, text=True,
                          check=check)


def _stop_demo_sessions(clone: Path, tmp: Path, env: dict[str, str]) -> None:
    """The demo's agents run on the demo repo's own tmux server: stop it (whatever the version under test did)."""
    daintree = clone / ".venv" / "bin" / "daintree"
    for demo in tmp.glob("daintree-demo-*"):
        proc = subprocess.run([str(daintree), "--repo", str(demo), "session", "list", "--json"], capture_output=True,
                              text=True, env=env)
        sockets = {s.get("socket") for s in json.loads(proc.stdout or "[]") if s.get("socket")}
        for socket in sockets:
            subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def measure(source: Path, installer: str, cold_cache: bool, keep_log: Path | None = None,
            phases: list[tuple[float, str]] | None = None) -> tuple[float, list[str]]:
    """Seconds from `make run` to the first frame, and the lines of install output that look like noise. `phases`
    receives (seconds from the start, command) of each line of make's recipes as it began (venv, uv, install,
    start), from a shell wrapper make runs them with."""
    with tempfile.TemporaryDirectory(prefix="daintree-first-run-") as tmp_name:
        tmp = Path(tmp_name)
        clone = tmp / "clone"
        subprocess.run(["git", "clone", "--quiet", str(source), str(clone)], check=True)
        (tmp / "tmp").mkdir()
        env = {**os.environ, "TMPDIR": str(tmp / "tmp"), "XDG_CONFIG_HOME": str(tmp / "config"),
               "XDG_DATA_HOME": str(tmp / "data"), "XDG_STATE_HOME": str(tmp / "state")}
        env.pop("VIRTUAL_ENV", None)
        env.pop("TMUX", None)
        if cold_cache:
            env["PIP_CACHE_DIR"] = str(tmp / "pip-cache")
            env["UV_CACHE_DIR"] = str(tmp / "uv-cache")
        script = tmp / "run.sh"
        exports = "".join(f"export {k}={json.dumps(v)}\n" for k, v in env.items()
                          if k in ("TMPDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                                   "PIP_CACHE_DIR", "UV_CACHE_DIR"))
        stamps = tmp / "stamps.txt"
        wrapper = tmp / "stamped-sh"  # make runs each recipe line as `$(SHELL) -c LINE`: note when, then run it
        wrapper.write_text(f'#!/bin/sh\necho "$(date +%s.%N) $2" >> {stamps}\nexec /bin/sh "$@"\n')
        wrapper.chmod(0o755)
        script.write_text(f"{exports}cd {json.dumps(str(clone))}\necho \"$(date +%s.%N) make run\" > {stamps}\n"
                          f"exec make run INSTALLER={installer} SHELL={wrapper}\n")
        socket = f"daintree-first-run-{os.getpid()}"
        log = tmp / "pane.log"
        start = time.perf_counter()
        _tmux(socket, "new-session", "-d", "-x", "120", "-y", "40", "bash", str(script))
        _tmux(socket, "pipe-pane", "-o", f"cat >> {log}")
        elapsed = None
        try:
            while time.perf_counter() - start < TIMEOUT:
                screen = _tmux(socket, "capture-pane", "-p", check=False).stdout
                if FIRST_FRAME in screen:
                    elapsed = time.perf_counter() - start
                    break
                time.sleep(0.1)
            _tmux(socket, "send-keys", "q", check=False)
            deadline = time.perf_counter() + 20
            while time.perf_counter() < deadline and _tmux(socket, "has-session", check=False).returncode == 0:
                time.sleep(0.2)
        finally:
            _tmux(socket, "kill-server", check=False)
            Path(f"/tmp/tmux-{os.getuid()}/{socket}").unlink(missing_ok=True)  # tmux may leave it behind
            _stop_demo_sessions(clone, tmp / "tmp", env)
        if phases is not None and stamps.exists():
            # A recipe of several lines (`\` continuations) is one command whose text spans lines: its stamp is
            # the first.
            lines = [line.split(" ", 1) for line in stamps.read_text().splitlines()
                     if re.match(r"\d+\.\d+ ", line)]
            phases += [(float(ts) - float(lines[0][0]), command) for ts, command in lines[1:]]
        text = log.read_text(errors="replace") if log.exists() else ""
        if keep_log is not None:
            keep_log.write_text(text)
        before_ui = text.split("\x1b[?1049h", 1)[0]  # what printed before the dashboard took the screen
        noise = [line.strip() for line in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", before_ui).splitlines()
                 if NOISE.search(line) and not MAKE_ECHO.match(line.strip())]
        if elapsed is None:
            raise SystemExit(f"no first frame within {TIMEOUT:.0f} s; the pane printed:\n{before_ui[-3000:]}")
        return elapsed, noise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=str(Path(__file__).resolve().parents[1]), help="checkout to clone")
    parser.add_argument("--installer", choices=("pip", "uv"), default="uv")
    parser.add_argument("--cold-cache", action="store_true", help="empty pip and uv caches")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--log", type=Path, help="keep what the pane printed in this file")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("needs tmux")
    for _ in range(args.runs):
        load = os.getloadavg()  # /proc/loadavg's first three figures
        phases: list[tuple[float, str]] = []
        seconds, noise = measure(Path(args.source), args.installer, args.cold_cache, args.log, phases)
        after = os.getloadavg()
        print(f"make run, {args.installer}, {'cold' if args.cold_cache else 'warm'} cache: first frame after "
              f"{seconds:.1f} s (load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at start, "
              f"{after[0]:.1f} {after[1]:.1f} {after[2]:.1f} at the end); noise lines: {len(noise)}", flush=True)
        for at, command in phases:
            print(f"  +{at:5.1f} s  {command[:100]}")
        print(f"  +{seconds:5.1f} s  first frame")
        for line in noise:
            print(f"  {line}")


if __name__ == "__main__":
    main()
