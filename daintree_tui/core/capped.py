"""Reading a command's output up to a bound: what git prints of the agent's files (a diff) is as large as the
agent made them, and a reader that held all of it (the dashboard highlights it on its event loop) froze for
minutes over 40 MiB of lines."""

from __future__ import annotations

import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from daintree_tui.core.errors import OperationError
from daintree_tui.core.spawn import NO_GIT

# The bytes of names and contents are the agent's, not always UTF-8 (`n\xff.txt`): lone surrogates, which
# escape_controls shows as `\xff`, never a UnicodeDecodeError.
BYTES = "surrogateescape"
_STDERR_KEPT = 64 << 10


@dataclass(frozen=True)
class Capped:
    """At most `limit` bytes of a command's output (`cut`: there was more, and the command was stopped)."""

    text: str
    cut: bool
    returncode: int
    stderr: str
    timed_out: bool = False


def read_capped(argv: Sequence[str], env: dict[str, str], limit: int, *, cwd: Path | None = None,
                timeout: float | None = None) -> Capped:
    """Run `argv` and read at most `limit` bytes of its output, killing it past that (or after `timeout` seconds).
    Its stderr goes to a file (a pipe left unread could fill and stall it while its output is read).

    Raises:
        OperationError: the program is not there (git).
    """
    with tempfile.TemporaryFile() as said:
        try:
            proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=said, stdin=subprocess.DEVNULL,
                                    env=env, cwd=cwd)
        except FileNotFoundError:
            raise OperationError(NO_GIT) from None
        expired = threading.Event()

        def stop() -> None:
            expired.set()
            proc.kill()

        timer = threading.Timer(timeout, stop) if timeout is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            assert proc.stdout is not None
            with proc.stdout:
                data = proc.stdout.read(limit + 1)
                cut = len(data) > limit
                if cut:
                    proc.kill()
            proc.wait()
        finally:
            if timer is not None:
                timer.cancel()
        said.seek(0)
        err = said.read(_STDERR_KEPT).decode("utf-8", "replace")
    return Capped(data[:limit].decode("utf-8", BYTES), cut, proc.returncode, err, expired.is_set() and not cut)


def size_text(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 and limit % (1 << 20) == 0 else f"{limit >> 10} KiB"


def cut_at(text: str, limit: int, what: str = "diff", hint: str = "`--stat` lists every file that differs") -> str:
    """`text` (cut at `limit`) up to its last whole line, then a line that says it was cut."""
    return text[:text.rfind("\n") + 1] + f"[{what} cut at {size_text(limit)}" + (f": {hint}]\n" if hint else "]\n")
