"""One tmux control-mode client per server: the event source for session activity, exits and new sessions.

Why control mode and not polling: polling costs a `list-panes` fork plus a `capture-pane` per busy session per
tick, so the dashboard's CPU grew with every agent at work. Here one long-lived `tmux -C attach` client does it:

- The client attaches read-only with `-f no-output,ignore-size`: tmux sends it no `%output` at all (a hundred
  busy agents would otherwise stream every byte they print through this process) and its size never counts.
- Instead it subscribes (`refresh-client -B`) to one format that walks every session of the server
  (`#{S:...}`): pane id, pid, dead flag, exit status, creation time and `window_activity` (the second of the
  window's last output). tmux re-evaluates it at most once a second and reports it only when it changed, so a
  hundred agents each printing a line a second cost one short line a second, and idle ones cost nothing.
- `%sessions-changed`, `%window-add|close` and `%unlinked-window-*` trigger an immediate listing over the same
  connection (`display-message -p`, no fork), so new, killed and exited sessions show at once.
- Commands (listings, screen captures for what is on screen) travel over the same connection: no fork each.
- `%exit` (the session the client was attached to was killed, or the server went away) reconnects to another
  session; the listing after reconnecting reports whatever changed in between.

The argv prefix runs the same client elsewhere (`ssh HOST`), so a remote host gets events, not polling.
Nothing here touches an event loop: a reader thread parses, and events go to a callback or a queue.
"""

from __future__ import annotations

import contextlib
import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

from daintree_tui.sessions.host import SESSION_PREFIX, pane_exit

TAIL_BYTES = 512  # what a `%output` keeps of a chunk: enough for the last screen line, never the whole flood
SUBSCRIPTION = "daintree-panes"

# One record per session, fields joined by ':' (tmux rewrites ':' and '.' in session names, so no field holds
# one); every record ends with ':' so the whole value splits into a flat list.
PANE_FIELDS = ("session_name", "pane_id", "pane_pid", "pane_dead", "pane_dead_status", "pane_dead_signal",
               "session_created", "window_activity", "cursor_x", "cursor_y", "history_size", "pane_width",
               "pane_height")
PANES_FORMAT = "#{pid}:#{S:" + "".join(f"#{{{name}}}:" for name in PANE_FIELDS) + "}"

_ESCAPE = re.compile(rb"\\([0-7]{3})")


# -- the parser --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    """`%output %PANE DATA` (or `%extended-output`): `size` counts escaped bytes; `tail` is the unescaped end."""

    pane: str
    size: int
    tail: bytes


@dataclass(frozen=True)
class Reply:
    """The lines between `%begin` and `%end` (ok) or `%error` (not ok). `own` is false for commands the client
    did not send itself (the initial attach)."""

    number: int
    ok: bool
    own: bool
    lines: tuple[str, ...]


@dataclass(frozen=True)
class SubscriptionChanged:
    name: str
    value: str


@dataclass(frozen=True)
class Notification:
    """Any other `%name args` line (`%sessions-changed`, `%window-add @1`, `%pause %3`, ...)."""

    name: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Exit:
    reason: str


ControlMessage = Output | Reply | SubscriptionChanged | Notification | Exit

# Notifications after which the set of sessions or panes may differ.
TOPOLOGY_NOTIFICATIONS = frozenset({"sessions-changed", "window-add", "window-close", "unlinked-window-add",
                                    "unlinked-window-close", "session-changed"})


def unescape(data: bytes) -> bytes:
    """Undo tmux's octal escaping (`\\ooo`) of non-printable bytes and backslash."""
    return _ESCAPE.sub(lambda m: bytes([int(m.group(1), 8) & 0xFF]), data)


def escaped_tail(data: bytes, limit: int = TAIL_BYTES) -> bytes:
    """The last `limit` escaped bytes unescaped, cut where no `\\ooo` sequence is split."""
    if len(data) <= limit:
        return unescape(data)
    start = len(data) - limit
    for back in (1, 2, 3):
        if data[start - back:start - back + 1] == b"\\":
            start = start - back + 4  # inside an escape: start after it
            break
    return unescape(data[start:])


class ControlParser:
    """Turns control-mode lines (bytes, without the newline) into messages. Stateful only across a block."""

    def __init__(self) -> None:
        self._block: tuple[bytes, int, bool] | None = None  # (the "time number flags" guard, number, own)
        self._lines: list[str] = []

    def feed(self, line: bytes) -> ControlMessage | None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if self._block is not None:
            guard, number, own = self._block
            for end, ok in ((b"%end ", True), (b"%error ", False)):
                if line.startswith(end) and line[len(end):] == guard:
                    self._block = None
                    lines, self._lines = tuple(self._lines), []
                    return Reply(number, ok, own, lines)
            self._lines.append(line.decode("utf-8", "replace"))
            return None
        if not line.startswith(b"%"):
            return None  # stray text outside a block (tmux prints none; an ssh banner might)
        if line.startswith(b"%output "):
            pane, _, data = line[8:].partition(b" ")
            return Output(pane.decode(), len(data), escaped_tail(data))
        if line.startswith(b"%extended-output "):
            head, _, data = line[17:].partition(b" : ")
            return Output(head.split(b" ", 1)[0].decode(), len(data), escaped_tail(data))
        text = line.decode("utf-8", "replace")
        name, _, rest = text[1:].partition(" ")
        if name == "begin":
            parts = rest.split()
            if len(parts) >= 3 and parts[1].isdigit():
                self._block = (rest.encode(), int(parts[1]), parts[2] == "1")
                self._lines = []
            return None
        if name == "subscription-changed":
            sub_name, _, tail = rest.partition(" ")
            _, sep, value = tail.partition(" : ")
            return SubscriptionChanged(sub_name, value if sep else "")
        if name == "exit":
            return Exit(rest)
        return Notification(name, tuple(rest.split()))


# -- the client --------------------------------------------------------------------------------------------


def _fail(future: Future[Reply]) -> None:
    """End a pending command with the client's end. The writer (a broken pipe) and the reader (end of stream)
    can both get there for the same future: the second must not raise, or the reader thread dies before it
    reports the end and the client is never reconnected."""
    with contextlib.suppress(InvalidStateError):
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
        self._pending: queue.SimpleQueue[Future[Reply]] = queue.SimpleQueue()
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
        if "\n" in line:
            future.set_exception(ValueError("a control command is one line"))
            return future
        with self._write_lock:
            if self.closed.is_set() or self._proc.stdin is None:
                future.set_exception(ConnectionError("tmux control client has ended"))
                return future
            self._pending.put(future)
            try:
                self._proc.stdin.write(line.encode() + b"\n")
            except OSError:
                _fail(future)
        return future

    def _read(self) -> None:
        parser = ControlParser()
        stdout = self._proc.stdout
        assert stdout is not None
        try:
            for raw in stdout:
                message = parser.feed(raw.rstrip(b"\n"))
                if message is None:
                    continue
                if isinstance(message, Reply) and message.own:
                    self._resolve(message)
                    continue
                with contextlib.suppress(Exception):  # a consumer's bug must not stop the stream
                    self._on_message(message)
        except (OSError, ValueError):
            pass
        finally:
            self.closed.set()
            self._fail_pending()
            with contextlib.suppress(Exception):
                self._on_message(Exit("eof"))

    def _resolve(self, reply: Reply) -> None:
        try:
            future = self._pending.get_nowait()
        except queue.Empty:
            return
        if not future.done():
            future.set_result(reply)

    def _fail_pending(self) -> None:
        while True:
            try:
                future = self._pending.get_nowait()
            except queue.Empty:
                return
            _fail(future)

    def close(self, timeout: float = 2.0) -> None:
        """Detach (closing stdin ends a control client) and reap the process."""
        with self._write_lock:
            if self._proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self._proc.stdin.close()
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=timeout)
        self._reader.join(timeout=timeout)


# -- session events ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PaneRecord:
    """One session's first pane as the subscription reports it."""

    session: str
    pane: str
    pid: int | None
    dead: bool
    exit_code: int | None
    created: float
    activity: float  # the second of the window's last output (its creation time before any)
    screen_mark: str = ""  # cursor position and history size: moves with output inside one second too
    size: str = ""  # the pane's columns and rows: a resize moves the cursor and the history without output

    @property
    def printed(self) -> bool:
        """Whether the pane has printed anything (its activity second alone cannot tell in the first second)."""
        return self.activity > self.created or self.screen_mark not in ("", "0,0,0")

    @property
    def worktree(self) -> str:
        return self.session[len(SESSION_PREFIX):]


@dataclass(frozen=True)
class Activity:
    """The session printed something since the last report; `ts` is the latest it may have printed (tmux
    records the second of the last output, so output later in that second is seen as this same report)."""

    session: str
    ts: float


@dataclass(frozen=True)
class Exited:
    session: str
    exit_code: int | None
    ts: float


@dataclass(frozen=True)
class SessionsChanged:
    """Sessions appeared or vanished; `sessions` is every daintree session on the server now."""

    sessions: frozenset[str]
    added: frozenset[str]
    removed: frozenset[str]
    ts: float


SessionEvent = Activity | Exited | SessionsChanged


def parse_panes(value: str) -> tuple[int | None, dict[str, PaneRecord], bool]:
    """Parse a PANES_FORMAT value: (server pid, daintree sessions by name, whether a dead pane is unreaped)."""
    parts = value.split(":")
    server_pid = int(parts[0]) if parts and parts[0].isdigit() else None
    records: dict[str, PaneRecord] = {}
    unreaped = False
    width = len(PANE_FIELDS)
    fields = parts[1:]
    for i in range(0, len(fields) - width + 1, width):
        name, pane, pid, dead, status, signal_number, created, activity, cx, cy, history, cols, rows = \
            fields[i:i + width]
        if not name.startswith(SESSION_PREFIX) or name in records:
            continue
        is_dead, exit_code, owed = pane_exit(dead, status, signal_number)
        unreaped = unreaped or owed
        records[name] = PaneRecord(session=name, pane=pane, pid=int(pid) if pid.isdigit() else None,
                                   dead=is_dead, exit_code=exit_code,
                                   created=float(created) if created.isdigit() else 0.0,
                                   activity=float(activity) if activity.isdigit() else 0.0,
                                   screen_mark=f"{cx},{cy},{history}", size=f"{cols}x{rows}")
    return server_pid, records, unreaped


@dataclass
class _Connection:
    client: ControlClient
    target: str
    started: float = field(default_factory=time.monotonic)


class SessionEvents:
    """Activity, exits and new/removed sessions of one tmux server, from one control client.

    Events go to `on_event` (called on this object's threads: keep it short, hand work off) or, without one,
    to `self.events` (a queue). `records()` is the latest picture of every session, with no tmux call.

    Args:
        base_argv: how to run tmux for this server, e.g. `["tmux", "-L", SOCKET, "-f", CONF]`.
        prefix: runs it elsewhere: `["ssh", "HOST"]` (the argv is then passed as one remote command line).
        reconcile_interval: the safety net: a full listing this often even when tmux reported nothing.
        idle_retry: while there is no server or no session to attach to, how often to look again (one fork).
    """

    def __init__(self, base_argv: Sequence[str], prefix: Sequence[str] = (),
                 on_event: Callable[[SessionEvent], None] | None = None, env: Mapping[str, str] | None = None,
                 reconcile_interval: float = 20.0, idle_retry: float = 2.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.base_argv = list(base_argv)
        self.prefix = list(prefix)
        self.env = env
        self.events: queue.SimpleQueue[SessionEvent] = queue.SimpleQueue()
        self._on_event = on_event or self.events.put
        self.reconcile_interval = reconcile_interval
        self.idle_retry = idle_retry
        self.clock = clock
        self._records: dict[str, PaneRecord] = {}
        self._server_pid: int | None = None
        self._known = False  # a listing has been seen since start
        self._lock = threading.Lock()
        self._conn: _Connection | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._listing = threading.Event()  # a listing is in flight: coalesce topology bursts
        self._thread: threading.Thread | None = None
        self.connects = 0  # how many control clients were started (tests and the bench read it)

    # -- public ------------------------------------------------------------------------------------------

    def start(self) -> SessionEvents:
        if self._thread is None:
            self._thread = threading.Thread(target=self._supervise, name="tmux-control", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        conn = self._conn
        if conn is not None:
            conn.client.close()

    def poke(self) -> None:
        """Something changed that tmux may not tell a client that is not connected yet (we started a session):
        connect or list now instead of at the next retry."""
        self._wake.set()

    @property
    def connected(self) -> bool:
        conn = self._conn
        return conn is not None and not conn.client.closed.is_set()

    def records(self) -> dict[str, PaneRecord]:
        with self._lock:
            return dict(self._records)

    @property
    def known(self) -> bool:
        """Whether the records reflect at least one listing (before that, an empty dict means 'not yet')."""
        return self._known

    def command(self, line: str, timeout: float = 5.0) -> Reply | None:
        """Run a command over the control connection (no fork); None when not connected or it timed out."""
        conn = self._conn
        if conn is None:
            return None
        try:
            return conn.client.command(line).result(timeout=timeout)
        except Exception:  # ended or timed out: the caller falls back or skips
            return None

    def capture(self, sessions: Iterable[str], ansi: bool = False, timeout: float = 5.0) -> dict[str, str]:
        """The visible screens of these sessions (names like `dt-x`), over the control connection."""
        conn = self._conn
        if conn is None:
            return {}
        flags = "-p -e" if ansi else "-p"
        futures = {name: conn.client.command(f"capture-pane {flags} -t {quote(f'={name}:')}")
                   for name in sessions}
        screens: dict[str, str] = {}
        deadline = time.monotonic() + timeout
        for name, future in futures.items():
            try:
                reply = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # ended or timed out: leave this one out
                continue
            if reply.ok:
                screens[name] = "\n".join(reply.lines)
        return screens

    # -- the supervisor thread ---------------------------------------------------------------------------

    def _tmux_argv(self, *args: str) -> list[str]:
        argv = [*self.base_argv, *args]
        if self.prefix:
            # ssh joins its arguments into one remote command line: quote each.
            return [*self.prefix, " ".join(quote(a) for a in argv)]
        return argv

    def _supervise(self) -> None:
        next_reconcile = time.monotonic() + self.reconcile_interval
        while not self._stop.is_set():
            if not self.connected:
                self._drop_connection()
                if not self._connect():
                    self._wake.wait(self.idle_retry)
                    self._wake.clear()
                    continue
                next_reconcile = time.monotonic() + self.reconcile_interval
            woke = self._wake.wait(max(0.0, next_reconcile - time.monotonic()))
            self._wake.clear()
            if self._stop.is_set():
                return
            if woke or time.monotonic() >= next_reconcile:
                self._request_listing()
                next_reconcile = time.monotonic() + self.reconcile_interval

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.client.close(timeout=1.0)

    def _connect(self) -> bool:
        """Attach a control client to one of the server's sessions; False when there is none."""
        try:
            proc = subprocess.run(self._tmux_argv("list-sessions", "-F", "#{session_name}"), capture_output=True,
                                  text=True, stdin=subprocess.DEVNULL, timeout=15,
                                  env=dict(self.env) if self.env is not None else None)
        except (OSError, subprocess.TimeoutExpired):
            return False
        names = proc.stdout.split() if proc.returncode == 0 else []
        if not names:
            self._apply_listing(None, {})  # no server or no session: every session we knew is gone
            return False
        # Prefer a daintree session, oldest first: it is the least likely to be killed soon.
        ours = [n for n in names if n.startswith(SESSION_PREFIX)]
        target = (ours or names)[0]
        argv = self._tmux_argv("-C", "attach-session", "-r", "-f", "no-output,ignore-size", "-t", f"={target}")
        try:
            client = ControlClient(argv, self._on_message, self.env)
        except OSError:
            return False
        self._conn = _Connection(client, target)
        client.start()
        self.connects += 1
        # The subscription is sent once tmux says the client is attached (`%session-changed`): sent earlier,
        # it runs before the attach and fails with "no current client".
        self._request_listing()
        return True

    def _subscribe(self, attempt: int = 0) -> None:
        conn = self._conn
        if conn is None:
            return
        future = conn.client.command(f"refresh-client -B {quote(f'{SUBSCRIPTION}::{PANES_FORMAT}')}")

        def done(result: Future[Reply]) -> None:
            try:
                ok = result.result().ok
            except Exception:  # the client ended: the reconnect subscribes again
                return
            if not ok and attempt < 20 and self._conn is conn:
                # Refused while the attach was still settling: without it there is no activity at all.
                retry = threading.Timer(0.1, self._subscribe, (attempt + 1,))
                retry.daemon = True
                retry.start()

        future.add_done_callback(done)

    def _request_listing(self) -> None:
        """List every session now, over the connection, and apply the result off the reader thread."""
        conn = self._conn
        if conn is None or self._listing.is_set():
            return
        self._listing.set()
        future = conn.client.command(f"display-message -p {quote(PANES_FORMAT)}")

        def done(result: Future[Reply]) -> None:
            self._listing.clear()
            with contextlib.suppress(Exception):
                reply = result.result()
                if reply.ok and reply.lines:
                    self._apply_value(reply.lines[0])

        future.add_done_callback(done)

    def _on_message(self, message: ControlMessage) -> None:
        if isinstance(message, SubscriptionChanged) and message.name == SUBSCRIPTION:
            self._apply_value(message.value)
        elif isinstance(message, Notification) and message.name in TOPOLOGY_NOTIFICATIONS:
            if message.name == "session-changed":
                self._subscribe()
            self._wake.set()  # the supervisor lists now (the subscription would tell within a second too)
        elif isinstance(message, Exit):
            self._wake.set()  # reconnect to another session, or learn that the server is gone

    def _apply_value(self, value: str) -> None:
        server_pid, records, unreaped = parse_panes(value)
        if unreaped and server_pid is not None:
            self._nudge(server_pid)
        self._apply_listing(server_pid, records)

    def _nudge(self, server_pid: int) -> None:
        """tmux 3.3a can lose a SIGCHLD when two panes exit together and then never records the exit status:
        another SIGCHLD makes it reap. Sent from inside the server, so it works over ssh too."""
        conn = self._conn
        if conn is not None:
            conn.client.command(f"run-shell -b {quote(f'kill -CHLD {server_pid}')}")

    def _apply_listing(self, server_pid: int | None, records: dict[str, PaneRecord]) -> None:
        now = self.clock()
        events: list[SessionEvent] = []
        with self._lock:
            before = self._records
            first = not self._known
            self._records, self._server_pid, self._known = records, server_pid, True
            for name, record in records.items():
                old = before.get(name)
                replaced = old is not None and old.created != record.created  # same name, new session
                if old is None or replaced:
                    if record.dead:
                        events.append(Exited(name, record.exit_code, now))
                    continue
                # A resize (the dashboard's window, zoom) reflows the screen: the cursor and the scrollback move
                # with no output, and the agent on screen flipped to running and back, with a bell.
                moved = record.screen_mark != old.screen_mark and record.size == old.size
                if record.activity > old.activity or moved:
                    events.append(Activity(name, output_bound(record.activity, now)))
                if record.dead and not old.dead:
                    events.append(Exited(name, record.exit_code, now))
            added = frozenset(n for n in records if n not in before or before[n].created != records[n].created)
            removed = frozenset(n for n in before if n not in records)
            if first or added or removed:
                events.insert(0, SessionsChanged(frozenset(records), added, removed, now))
        for event in events:
            self._on_event(event)


def output_bound(activity_second: float, now: float) -> float:
    """When the session last printed, at the latest: the end of the second tmux recorded, or the moment the
    report reached us if that is later (a busy machine delays it), so quiet is never declared early. A server
    whose clock disagrees with ours (a remote host) gets our arrival time only."""
    if abs(now - activity_second) < 5.0:
        return max(activity_second + 1.0, now)
    return now


def quote(text: str) -> str:
    """Quote one argument for tmux's command parser (and for a shell: the same single-quote rules)."""
    return "'" + text.replace("'", "'\\''") + "'"
