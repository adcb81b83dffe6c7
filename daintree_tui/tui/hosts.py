"""Remote hosts in the dashboard: a poller widget and the rows it turns into.

`HostsWatch` (non-visual, mounted by the main screen) loads the user's `[hosts.*]`, and only when there are any
polls them with a `HostsFeed` in a thread worker; each change becomes a `HostsChanged` message (coalesced).

A remote worktree or session is keyed `NAME@HOST` on the screen: `@` is in no worktree name, so a remote row can
never be mistaken for (or act on) a local worktree of the same name. Its entry carries the host and the host's
reachability in `extra`, so the worktree table can show a host column and grey out what it last knew.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.message import Message
from textual.widget import Widget
from textual.worker import Worker, get_current_worker

from daintree_tui.core.errors import DaintreeError
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.worktrees import Facts
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.tui.messages import Notice

if TYPE_CHECKING:
    # Imported by the poller's thread when it starts: not a start-up import of the dashboard.
    from daintree_tui.services.host_queue import HostQueue, HostStepReport
    from daintree_tui.services.hosts_feed import HostsFeed, HostState
    from daintree_tui.services.remote import RemoteHost
    from daintree_tui.sessions.manager import SessionInfo

SEPARATOR = "@"
LOCAL = "local"
HOST_FILTER = "host:"


def remote_key(host: str, name: str) -> str:
    return f"{name}{SEPARATOR}{host}"


def split_key(key: str | None) -> tuple[str | None, str | None]:
    """(host, worktree name) of a row key; the host is None for a local row."""
    if key is None or SEPARATOR not in key:
        return None, key
    name, host = key.rsplit(SEPARATOR, 1)
    return host, name


def is_remote(key: str | None) -> bool:
    return key is not None and SEPARATOR in key


def is_host_row(key: str | None) -> bool:
    """The row of a host that does not answer, with no worktree known there (`@HOST`): nothing acts on it."""
    return is_remote(key) and split_key(key)[1] == ""


def last_update(state: HostState) -> str:
    if state.updated_at is None:
        return "never reached"
    return "last update " + time.strftime("%H:%M:%S", time.localtime(state.updated_at))


def since(state: HostState) -> str:
    """A greyed row's words, the time first: the output column is cut from its end, and at 200 columns with a
    conflict column it was 18 cells wide, which cut "no answer since HH:MM:SS" to "no answer since 05:46"."""
    if state.updated_at is None:
        return "never reached"
    return "since " + time.strftime("%H:%M:%S", time.localtime(state.updated_at)) + ", no answer"


def host_label(name: str, state: HostState | None) -> str:
    """A host as the new-task dialog offers it: its name and how many sessions may still start there."""
    if state is None or state.status == "unknown":
        return f"host {name}"
    if state.status != "ok":
        return f"host {name} ({state.status})"
    return f"host {name} ({state.free_slots} of {state.max_sessions} free)"


# -- rows --------------------------------------------------------------------------------------------------------


NOT_REACHED = "(no answer)"
"""The name shown on the one row of a host that does not answer and of which nothing is known."""


def remote_entries(state: HostState) -> list[WorktreeEntry]:
    """A host's worktrees as the table shows them (what it last told us, marked with its reachability). A host
    that does not answer and of which no worktree is known (down when the dashboard started) has one greyed row
    of its own, `@HOST`, that says so: a host that went missing from the lists was the worse surprise."""
    if not state.worktrees and state.status in ("unreachable", "error"):
        extra = {"host": state.name, "remote_name": NOT_REACHED, "reachable": False, "updated": since(state),
                 "facts": None, "disk_bytes": None, "host_row": True}
        return [WorktreeEntry(name=remote_key(state.name, ""), path="", branch="", base_ref="", base_commit="",
                              extra=extra)]
    entries = []
    for raw in state.worktrees:
        try:
            entry = WorktreeEntry.from_dict(raw)
        except ValueError:
            continue  # a record the far side should not have sent: not shown, never acted on
        if not entry.live:
            continue
        extra = {"host": state.name, "remote_name": entry.name, "reachable": state.status == "ok",
                 "updated": since(state), "facts": remote_facts(raw.get("facts")),
                 "disk_bytes": _count(raw.get("disk_bytes"))}
        entries.append(replace(entry, name=remote_key(state.name, entry.name), extra=extra))
    return entries


def remote_facts(raw: Any) -> Facts | None:
    """The git facts a host's `worktree list --json` reported for one worktree (None when it sent none)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("exists"), bool):
        return None
    counts = [_count(raw.get(key)) for key in ("dirty", "ahead", "behind")]
    if any(count is None for count in counts):
        return None
    dirty, ahead, behind = (int(count or 0) for count in counts)
    return Facts(exists=raw["exists"], dirty=dirty, ahead=ahead, behind=behind)


def remote_facts_and_disk(entries: Sequence[WorktreeEntry]) -> tuple[dict[str, Facts], dict[str, int]]:
    """Git facts and disk use of remote rows, keyed like the rows: from the host's poll, no extra round trip."""
    facts: dict[str, Facts] = {}
    disk: dict[str, int] = {}
    for entry in entries:
        fact, size = entry.extra.get("facts"), entry.extra.get("disk_bytes")
        if isinstance(fact, Facts):
            facts[entry.name] = fact
        if isinstance(size, int):
            disk[entry.name] = size
    return facts, disk


def remote_sessions(state: HostState) -> dict[str, SessionInfo]:
    from daintree_tui.sessions.manager import SessionInfo  # loaded by the first poll long before a host answers

    sessions = {}
    for raw in state.sessions:
        try:
            info = SessionInfo(
                name=remote_key(state.name, str(raw["name"])), session=str(raw["session"]), agent=str(raw["agent"]),
                status=SessionStatus(str(raw["status"])), exit_code=_int(raw.get("exit_code")),
                # Its log is a path on the host: nothing here may read a local file a host names.
                pid=_int(raw.get("pid")), started_at=float(raw.get("started_at") or 0), log="",
                persistent=True, socket=_str(raw.get("socket")), tmux_conf=_str(raw.get("tmux_conf")),
                usage=raw.get("usage") if isinstance(raw.get("usage"), dict) else None)
        except (KeyError, TypeError, ValueError):
            continue
        sessions[info.name] = info
    return sessions


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_COUNT_MAX = 2**63 - 1  # a host's count or byte size beyond this is not a fact (and `human` would overflow)


def _count(value: Any) -> int | None:
    """A count or size a host reported: a non-negative int no larger than an int64, else None."""
    number = _int(value)
    return number if number is not None and 0 <= number <= _COUNT_MAX else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def row_host(entry: WorktreeEntry) -> str:
    return str(entry.extra.get("host") or LOCAL) if is_remote(entry.name) else LOCAL


def matches(filter_text: str, entry: WorktreeEntry) -> bool:
    """The `/` filter: `host:NAME` words keep that host's rows (`host:local` the local ones); the other words
    must all appear in the name, branch or task id."""
    hosts: list[str] = []
    words: list[str] = []
    for word in filter_text.lower().split():
        (hosts if word.startswith(HOST_FILTER) else words).append(word.removeprefix(HOST_FILTER))
    if hosts and not any(row_host(entry).lower().startswith(h) for h in hosts):
        return False
    text = f"{shown_name(entry)} {entry.branch} {entry.task_id or ''}".lower()
    return all(word in text for word in words)


def task_filter(filter_text: str) -> str:
    """What the tasks list filters by: the filter without its `host:` words (tasks are local)."""
    return " ".join(w for w in filter_text.split() if not w.lower().startswith(HOST_FILTER))


# -- the poller --------------------------------------------------------------------------------------------------


class HostsChanged(Message):
    """Some host's state changed; carries every host's current state (so a newer one replaces an older)."""

    def __init__(self, states: dict[str, HostState]) -> None:
        super().__init__()
        self.states = states

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, HostsChanged)


class HostsWatch(Widget):
    """Polls the user's remote hosts in a thread worker (none configured: it does nothing)."""

    DEFAULT_CSS = "HostsWatch { display: none; }"

    interval = 2.0
    """Seconds between the end of one poll of every host and the next."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.hosts: dict[str, RemoteHost] = {}
        self.states: dict[str, HostState] = {}
        self.feed: HostsFeed | None = None
        self.last_host: str | None = None
        """Where the last new task went (None: here): the new-task dialog offers it first next time."""
        self.queue_project: Project | None = None
        """While the dashboard's auto queue is on: the project whose ready tasks each pass places on the hosts'
        free slots."""
        self.passes = 0
        """How many passes over the hosts ended (a test waits on it)."""
        self._wake = threading.Event()
        self._stopped = False

    def start(self) -> None:
        """Load the hosts and poll them (the screen starts this once its first useful frame is out)."""
        self.watch_hosts()

    def poll_now(self) -> None:
        """After a remote operation: poll at once instead of at the next interval."""
        self._wake.set()

    def poll_host(self, name: str) -> HostState | None:
        """Poll one host now, in the calling thread (never the event loop's): `states` holds the answer when it
        returns, so what was just made there can be shown and attached at once."""
        feed, host = self.feed, self.hosts.get(name)
        if feed is None or host is None:
            return None
        state = feed.poll_host(host)
        self.states = feed.states
        self.post_message(HostsChanged(self.states))
        return state

    @work(thread=True, exit_on_error=False, exclusive=True, group="hosts", description="poll remote hosts")
    def watch_hosts(self) -> None:
        from daintree_tui.services.remote import RemoteHost, load_hosts

        configs = load_hosts()
        if not configs:
            return
        from daintree_tui.services.host_queue import HostQueue
        from daintree_tui.services.hosts_feed import HostsFeed

        self.hosts = {name: RemoteHost(config) for name, config in configs.items()}
        feed = HostsFeed(list(self.hosts.values()), interval=self.interval)

        def changed(_: HostState) -> None:
            self.states = feed.states
            self.post_message(HostsChanged(self.states))

        feed.on_change = changed
        self.feed = feed
        queue: HostQueue | None = None
        worker = get_current_worker()
        while not (self._stopped or worker.is_cancelled):
            project = self.queue_project
            if project is not None:
                # The same pass as `queue run --hosts` (it polls every host first, through this feed).
                if queue is None or queue.project is not project:
                    queue = HostQueue(project, list(self.hosts.values()), feed)
                try:
                    self.tell(queue.step())
                except DaintreeError as exc:  # this pass failed (a lock held too long...): the next one tries
                    self.post_message(Notice(f"Auto: {exc}", title="host queue"))
                except Exception as exc:  # a host's odd answer must not end polling for all hosts
                    self.post_message(Notice(f"Auto: {type(exc).__name__}: {exc}", title="host queue"))
            else:
                feed.poll()
            self.passes += 1
            self._wake.wait(self.interval)
            self._wake.clear()

    def tell(self, report: HostStepReport) -> None:
        """What an auto-queue pass did, for the user to read (nothing when it did nothing)."""
        placed = "; ".join(f"{', '.join(f'task {i}' for i in ids)} on {host}" for host, ids in report.placed.items())
        if placed:
            self.post_message(Notice(f"Auto: placed {placed}"))
        for error in report.errors:
            self.post_message(Notice(f"Auto: {error}", title="host queue"))

    @on(Worker.StateChanged)
    def worker_changed(self, event: Worker.StateChanged) -> None:
        # Worker.StateChanged does not bubble: a bad [hosts] table or a failed poll loop is told from here.
        report = getattr(self.app, "report_worker_failure", None)
        if report is not None:
            report(event)

    def attach_argv(self, key: str) -> list[str] | None:
        """The command that shows remote session `key` in a PTY; None while its host does not answer."""
        host_name, _ = split_key(key)
        host = self.hosts.get(host_name or "")
        state = self.states.get(host_name or "")
        if host is None or state is None or state.status != "ok":
            return None
        name = split_key(key)[1]
        info = next((s for s in state.sessions if s.get("name") == name), None)
        if info is None or not info.get("session") or not info.get("socket"):
            return None
        return host.attach_argv(str(info["session"]), str(info["socket"]), _str(info.get("tmux_conf")))

    def on_unmount(self) -> None:
        self._stopped = True
        self._wake.set()


def shown_name(entry: WorktreeEntry) -> str:
    """The name a row shows (a remote row's host is in its own column)."""
    return str(entry.extra.get("remote_name", entry.name)) if is_remote(entry.name) else entry.name


def remote_cells(entry: WorktreeEntry, cells: dict[str, Any]) -> None:
    """A remote row's cells: its git facts and disk use as its host reported them, and all of it greyed, with the
    time of the host's last answer, while its host does not answer."""
    if not isinstance(entry.extra.get("facts"), Facts):  # a host whose daintree does not report them
        cells["dirty"] = cells["ab"] = Text("-", style="dim")
    if not isinstance(entry.extra.get("disk_bytes"), int):
        cells["disk"] = Text("-", style="dim")
    if entry.extra.get("reachable") is not False:
        return
    cells["activity"] = Text(str(entry.extra.get("updated", "")))
    cells["host"] = Text(f"{entry.extra.get('host')} ✗")  # the activity column is the first to go when narrow
    for key, cell in cells.items():
        text = cell.copy() if isinstance(cell, Text) else Text(str(cell))
        text.stylize("grey42")
        cells[key] = text
