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

The parts: the line protocol (sessions/control_protocol.py, pure), the client process with its reader thread
(sessions/control_client.py), the listing of every session (sessions/pane_listing.py), and here the event
source built on them.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from daintree_tui.core.log import suppressed
from daintree_tui.sessions.control_client import ControlClient
from daintree_tui.sessions.control_protocol import (
    TAIL_BYTES,
    TOPOLOGY_NOTIFICATIONS,
    ControlMessage,
    ControlParser,
    Exit,
    Notification,
    Output,
    Reply,
    SubscriptionChanged,
    escaped_tail,
    quote,
    unescape,
)
from daintree_tui.sessions.host import SESSION_PREFIX
from daintree_tui.sessions.pane_listing import PANES_FORMAT, PaneRecord, parse_panes

# The protocol's names, for whoever reads control mode through this module (the tests of the parser do).
__all__ = ["PANES_FORMAT", "TAIL_BYTES", "Activity", "ControlClient", "ControlParser", "Exit", "Exited",
           "Notification", "Output", "PaneRecord", "Reply", "SessionEvent", "SessionEvents", "SessionsChanged",
           "SubscriptionChanged", "escaped_tail", "output_bound", "parse_panes", "quote", "unescape"]

SUBSCRIPTION = "daintree-panes"


# -- session events ----------------------------------------------------------------------------------------


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
        futures = {name: conn.client.capture(f"={name}:", flags) for name in sessions}
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
            with suppressed(Exception):
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
