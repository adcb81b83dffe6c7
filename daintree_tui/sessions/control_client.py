"""One running `tmux -C` process: a reader thread parses what it prints, and commands written to it return
futures that its replies resolve, in order (tmux answers a client's commands in the order it sent them).

Nothing here touches an event loop: messages go to a callback on the reader thread.
"""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError

from daintree_tui.core.log import suppressed
from daintree_tui.sessions.control_protocol import ControlMessage, ControlParser, Exit, Reply, quote


def _fail(future: Future[Reply]) -> None:
    """End a pending command with the client's end. The writer (a broken pipe) and the reader (end of stream)
    can both get there for the same future: the second must not raise, or the reader thread dies before it
    reports the end and the client is never reconnected."""
    with suppressed(InvalidStateError):
        future.set_exception(ConnectionError("tmux control client has ended"))


class ControlClient:
    """A running `tmux -C` process: a reader thread parses its output; commands return futures.

    `on_message` runs on the reader thread for every message except replies to our own commands (those resolve
    the futures `command` returned, in order: tmux answers a client's commands in the order it sent them).
    """

    def __init__(self, argv: Sequence[str], on_message: Callable[[ControlMessage], None],
                 env: Mapping[str, str] | None = None) -> None:
        self.argv = list(argv)
        self._on_message = on_message
        # Each command's future, in the order sent; True marks a capture's frame (the pane's height first).
        self._pending: queue.SimpleQueue[tuple[Future[Reply], bool]] = queue.SimpleQueue()
        self._parser = ControlParser()
        self._write_lock = threading.Lock()
        self.closed = threading.Event()
        self._proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, env=dict(env) if env is not None else None,
                                      bufsize=0)
        self._reader = threading.Thread(target=self._read, name="tmux-control-reader", daemon=True)

    def start(self) -> ControlClient:
        """Start reading (separate from creating, so the owner can store the client before a message arrives)."""
        if not self._reader.is_alive() and self._reader.ident is None:
            self._reader.start()
        return self

    @property
    def pid(self) -> int:
        return self._proc.pid

    def command(self, line: str) -> Future[Reply]:
        """Send one command line; the future resolves with its reply (or an exception when the client ends)."""
        future: Future[Reply] = Future()
        self._send(line, future)
        return future

    def capture(self, target: str, flags: str = "-p") -> Future[Reply]:
        """The screen of pane `target` (`capture-pane FLAGS`), framed: tmux is asked the pane's height first, in
        the same command line, and the capture's reply is then exactly that many lines, whatever they read. The
        lines are the agent's own: one reading `%end TIME NUMBER 1` (the reply's guard, guessable but for its
        command number) ended the reply there, and the screen's next lines were taken as tmux's: a forged reply
        to the next command in flight (another session's screen, a listing)."""
        frame: Future[Reply] = Future()
        future: Future[Reply] = Future()
        pane = quote(target)
        self._send(f"display-message -p -t {pane} '#{{pane_height}}' ; capture-pane {flags} -t {pane}",
                   frame, future)
        return future

    def _send(self, line: str, future: Future[Reply], captured: Future[Reply] | None = None) -> None:
        """Write one command line; `future` resolves with its (first) reply; `captured`, when given, with the
        capture that follows it (`future` is then its frame)."""
        futures = [future] if captured is None else [future, captured]
        if "\n" in line:
            for f in futures:
                f.set_exception(ValueError("a control command is one line"))
            return
        with self._write_lock:
            if self.closed.is_set() or self._proc.stdin is None:
                for f in futures:
                    f.set_exception(ConnectionError("tmux control client has ended"))
                return
            self._pending.put((future, captured is not None))
            if captured is not None:
                self._pending.put((captured, False))
            try:
                self._proc.stdin.write(line.encode() + b"\n")
            except OSError:
                for f in futures:
                    _fail(f)

    def _read(self) -> None:
        parser = self._parser
        assert self._proc.stdout is not None
        # The pipe is unbuffered (bufsize=0, for stdin's sake), and line iteration over an unbuffered file reads
        # one byte per system call: at 40 busy sessions the subscription line and the rows' captures were ~7000
        # reads a second, most of this thread's CPU. A buffer takes whatever the pipe holds per read, and
        # returns a line as soon as its newline is in: no wait for a full buffer.
        try:
            with open(self._proc.stdout.fileno(), "rb", buffering=1 << 16, closefd=False) as stdout:
                for raw in stdout:
                    message = parser.feed(raw.rstrip(b"\n"))
                    if message is None:
                        continue
                    if isinstance(message, Reply) and message.own:
                        self._resolve(message)
                        continue
                    with suppressed(Exception):  # a consumer's bug must not stop the stream
                        self._on_message(message)
        except (OSError, ValueError):
            pass
        finally:
            self.closed.set()
            self._fail_pending()
            with suppressed(Exception):
                self._on_message(Exit("eof"))

    def _resolve(self, reply: Reply) -> None:
        try:
            future, frame = self._pending.get_nowait()
        except queue.Empty:
            return
        if frame and not reply.ok:
            # An error ends a command line: tmux runs no capture after it, and sends no reply for one.
            with suppressed(queue.Empty, InvalidStateError):
                self._pending.get_nowait()[0].set_exception(ValueError(f"not captured: {' '.join(reply.lines)}"))
        elif frame:
            height = reply.lines[0] if len(reply.lines) == 1 else ""
            # No such pane: an empty height, and the capture then fails with tmux's own message.
            if height.isascii() and height.isdigit():
                self._parser.expect_lines(int(height))
        if not future.done():
            future.set_result(reply)

    def _fail_pending(self) -> None:
        while True:
            try:
                future, _ = self._pending.get_nowait()
            except queue.Empty:
                return
            _fail(future)

    def close(self, timeout: float = 2.0) -> None:
        """Detach (closing stdin ends a control client) and reap the process."""
        with self._write_lock:
            if self._proc.stdin is not None:
                with suppressed(OSError):
                    self._proc.stdin.close()
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
