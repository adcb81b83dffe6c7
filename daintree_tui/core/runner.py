"""Run a command in a worktree: exit code, capped output, a timeout, and no hang on inherited pipes.

Output goes to anonymous temp files rather than pipes: once the command exits we read what it wrote and return,
even when it left a background child that still holds the file open (a pipe would wait for that child's EOF).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from daintree_tui.core.log import suppressed

OUTPUT_CAP = 256 * 1024
TIMEOUT_EXIT = 124


@dataclass(frozen=True)
class RunResult:
    """What a command did: its exit code (124 on timeout), its capped output, and how long it took."""

    exit_code: int
    stdout: str
    stderr: str
    duration: float
    timed_out: bool = False

    def to_dict(self) -> dict[str, object]:
        return {"exit_code": self.exit_code, "stdout": self.stdout, "stderr": self.stderr,
                "duration": round(self.duration, 3), "timed_out": self.timed_out}


def read_capped(fh: IO[bytes], cap: int = OUTPUT_CAP) -> str:
    """The whole stream when it fits in `cap`, else its head and tail with a marker naming the cut."""
    size = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    if size <= cap:
        data = fh.read()
        return data.decode("utf-8", errors="replace")
    half = cap // 2
    head = fh.read(half)
    fh.seek(size - half)
    tail = fh.read(half)
    cut = size - 2 * half
    return (head.decode("utf-8", errors="replace") + f"\n[output truncated: {cut} bytes]\n"
            + tail.decode("utf-8", errors="replace"))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with suppressed(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        with suppressed(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_command(argv: Sequence[str] | str, cwd: Path, env: Mapping[str, str], timeout: float | None,
                shell: bool = False, cap: int = OUTPUT_CAP) -> RunResult:
    """Run `argv` (or a shell string) in `cwd`; never raises for the command's own failure.

    Returns:
        exit code 127 when the program does not exist, 124 when the timeout killed it.
    """
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=out, stderr=err, shell=shell,
                start_new_session=True,  # a process group we can kill whole on timeout
            )
        except FileNotFoundError as exc:
            return RunResult(127, "", f"command not found: {exc.filename}\n", time.monotonic() - start)
        except PermissionError as exc:
            return RunResult(126, "", f"permission denied: {exc.filename}\n", time.monotonic() - start)
        timed_out = False
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            timed_out, code = True, TIMEOUT_EXIT
        except BaseException:
            _kill_group(proc)
            raise
        if code < 0:
            code = 128 - code  # killed by a signal: the shell's convention
        return RunResult(code, read_capped(out, cap), read_capped(err, cap), time.monotonic() - start, timed_out)
