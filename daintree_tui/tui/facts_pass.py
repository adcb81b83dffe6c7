"""FactsPass: one pass of the dashboard's git facts, conflict radar and disk use, and what the next one reads.

The feed (`DashboardFeed`) runs `run` in its exclusive `facts` worker and posts what it finds; requests come from
any thread (a file change, an operation, the file watch once it is in place) and wait in `PendingNames` until a
pass takes them, one pass at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from textual.message import Message

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.tui.messages import DiskLoaded, FactsLoaded, RadarLoaded
from daintree_tui.tui.pending_names import PendingNames

if TYPE_CHECKING:
    from daintree_tui.tui.backend import Backend


class ReadsBeforeWatch:
    """Which worktrees were read before the file watch that covers them was in place: an edit made between the
    read and that moment was told to no one, so those are read again, and only those (the whole first pass at
    start-up, a second time, was the dashboard's largest cost there with many worktrees)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read_at: dict[str, float] = {}
        self._watches: list[tuple[float, frozenset[str]]] = []

    def read(self, read_at: Mapping[str, float]) -> None:
        """These worktrees were read, each from the time given (`time.monotonic()`)."""
        with self._lock:
            self._read_at.update(read_at)

    def watch_in_place(self, by: float, names: frozenset[str]) -> None:
        """A watch of `names` tells of every change after `by` (from the watch's thread)."""
        with self._lock:
            self._watches.append((by, names))

    def take(self) -> frozenset[str]:
        """The worktrees to read again: covered by a watch now in place, last read before it was (or never)."""
        with self._lock:
            watches, self._watches = self._watches, []
            return frozenset(name for by, names in watches for name in names
                             if self._read_at.get(name, float("-inf")) < by)


class FactsPass:
    """What the next pass reads: the git facts of the worktrees asked for (`want`), then the radar over every
    worktree, which reads again only those whose files changed (`touched`) and the branches: all a pass costs
    when nothing changed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wanted = PendingNames()
        """Worktrees whose git facts the next pass reads."""
        self._changed = PendingNames(everything=True)
        """Worktrees whose files changed since the radar last read them (every one, as at the start)."""
        self._before_watch = ReadsBeforeWatch()

    def want(self, names: frozenset[str] | None) -> None:
        """Read the git facts of `names` (None: all) in the next pass."""
        self._wanted.add(names)

    def touched(self, names: frozenset[str] | None) -> None:
        """Worktrees whose files changed (None: all), for the radar's next pass."""
        self._changed.add(names)

    def watch_in_place(self, by: float, names: frozenset[str]) -> None:
        """The file watch of `names` tells of every change after `by`: the next pass reads again those read
        before it."""
        self._before_watch.watch_in_place(by, names)

    def run(self, entries: tuple[WorktreeEntry, ...], backend: Backend, post: Callable[[Message], object]) -> None:
        """One pass over `entries` (the worktrees listed now), posting FactsLoaded, RadarLoaded and DiskLoaded."""
        with self._lock:  # one pass at a time: a newer one follows this one and takes what came since
            missed = self._before_watch.take()  # after the pass before: it counts that pass's reads
            if missed:
                self._wanted.add(missed)
                self._changed.add(missed)
            wanted = self._wanted.take()
            # Taken before the facts are read: a change told while they are read waits for the next pass. Taken
            # after, its worktree's dirty count here could be from before the change: a count of 0 lets the radar
            # take the branch's tip for its files, and the request was used up on that.
            changed = self._changed.take()
            if wanted is not None and not wanted and changed is not None and not changed:
                return  # an earlier pass took every request
            read = entries if wanted is None else tuple(e for e in entries if e.name in wanted)
            try:
                facts = backend.facts(read)
            except BaseException:
                self._wanted.add(wanted)  # the next pass reads them
                self._changed.add(changed)
                raise
            post(FactsLoaded(facts))
            dirty = {name: f.dirty for name, f in facts.items() if f.exists}
            try:
                report = backend.services.radar.scan(entries, dirty=dirty, changed=changed)
            except BaseException:
                self._changed.add(changed)  # read them at the next pass
                raise
            # Read, for a watch in place later, only where the radar read the files too: one whose facts alone
            # were read keeps the files the radar read before, which may miss an edit the watch never told of.
            self._before_watch.read({name: f.read_at for name, f in facts.items()
                                     if changed is None or name in changed})
            post(RadarLoaded(report.by_worktree()))
        post(DiskLoaded(backend.services.disk.measure(list(entries))))
