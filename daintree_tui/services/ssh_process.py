"""The ssh process of one remote call: what a host prints is data, never trusted in size or shape.

An answer is read by `read_capped` (a byte cap, its timeout, ssh killed past either), a passthrough copied to our
terminal line by line within MAX_LINE_BYTES (`pump_lines`), and a host's own words quoted in one line, its terminal
controls escaped (`host_words`). JSON is typed by services/host_answers.py before anything uses it.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from daintree_tui.core.errors import OperationError
from daintree_tui.core.log import suppressed
from daintree_tui.services.host_answers import clean_text

# What one answer of a host may take (services/host_answers.py types it): a JSON answer of daintree is far smaller
# (1,000 worktrees with their sessions are about 1.5 MB); past the cap ssh is killed and the answer refused.
MAX_ANSWER_BYTES = 4 * 1024 * 1024
MAX_ERROR_BYTES = 256 * 1024  # what a host prints on stderr beside one answer
MAX_LINE_BYTES = 64 * 1024  # one line of a stream (events, a log followed), or one piece of a passthrough line
MAX_REASON = 300  # characters of a host's own words kept in an error message


class HostUnreachable(OperationError):
    """ssh could not reach the host (or the connection broke): one line naming the host and ssh's reason."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"host {host} unreachable: {reason}")
        self.host = host
        self.reason = reason


@contextlib.contextmanager
def forward_sigterm(proc: subprocess.Popen[Any]) -> Iterator[list[int]]:
    """While we wait on ssh, a SIGTERM for us ends ssh too (its remote side then ends with the connection).
    The list it yields receives the signal's number when that happened."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = signal.getsignal(signal.SIGTERM)

    def forward(signum: int, frame: Any) -> None:
        received.append(signum)
        with suppressed(OSError):
            proc.terminate()

    signal.signal(signal.SIGTERM, forward)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def host_words(text: str, limit: int = MAX_REASON) -> str:
    """A host's own words (an error line, ssh's reason) as our messages quote them: one line, its terminal controls
    shown escaped, cut to `limit` characters."""
    return clean_text(" ".join(text.split()), limit)


def size_text(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"


def read_capped(proc: subprocess.Popen[bytes], host: str, what: str, *, input: str | None = None,
                timeout: float | None, limit: int = MAX_ANSWER_BYTES,
                error_limit: int = MAX_ERROR_BYTES) -> tuple[bytes, bytes]:
    """`proc`'s stdout and stderr, read to their end within the caps; `proc` has ended when it returns.

    The one place a host's answer is read: never `communicate()`, which holds whatever a host sends (600 MB gave a
    1.78 GB peak). Past `limit` bytes of stdout, `error_limit` of stderr or `timeout` seconds, `proc` (ssh, which
    closes the channel, so the far side's writer ends too) is killed and the answer refused in one line.

    Raises:
        OperationError: an output passed its cap.
        HostUnreachable: no full answer within `timeout`.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    selector = selectors.DefaultSelector()
    out, err = bytearray(), bytearray()
    caps: dict[int, tuple[bytearray, int, str]] = {}
    for pipe, buffer, cap, label in ((proc.stdout, out, limit, "output"),
                                     (proc.stderr, err, error_limit, "error output")):
        if pipe is not None:
            caps[pipe.fileno()] = (buffer, cap, label)
            selector.register(pipe.fileno(), selectors.EVENT_READ)
    pending = memoryview((input or "").encode("utf-8", "surrogateescape"))
    stdin_fd = -1
    if proc.stdin is not None:
        if pending:
            stdin_fd = proc.stdin.fileno()
            os.set_blocking(stdin_fd, False)
            selector.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
    try:
        while selector.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise HostUnreachable(host, f"no answer within {timeout:g}s")
            for key, _ in selector.select(left):
                if key.fd == stdin_fd:
                    try:
                        pending = pending[os.write(key.fd, pending[:65536]):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(key.fd)
                        if proc.stdin is not None:
                            proc.stdin.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                buffer, cap, label = caps[key.fd]
                if len(buffer) + len(chunk) > cap:
                    raise OperationError(f"host {host} answered more than {size_text(cap)} of {label} to `{what}`: "
                                         "stopped reading there (no answer of daintree is that long)")
                buffer += chunk
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            raise HostUnreachable(host, f"no answer within {timeout:g}s") from None
    finally:
        selector.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with suppressed(OSError):
                    pipe.close()
    return bytes(out), bytes(err)


def pump_lines(source: IO[bytes], target: IO[str], shown: Callable[[str], str]) -> None:
    """Copy a host's output to our terminal line by line, each line as `shown` makes it; a line longer than
    MAX_LINE_BYTES goes in pieces of that size (each piece filtered alone: an escape cut in two is dropped, never
    completed), so no line of a host is held whole."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while raw := source.readline(MAX_LINE_BYTES):
        target.write(shown(decoder.decode(raw)))
        target.flush()
    target.write(shown(decoder.decode(b"", final=True)))
    target.flush()
    source.close()
