"""Names asked for and not yet taken, shared by the threads that ask and the worker that takes them."""

from __future__ import annotations

import threading
from collections.abc import Iterable


class PendingNames:
    """A set of worktree names, or every worktree (None), that requests add to and a worker takes whole.

    The feed's git facts and radar run in an exclusive worker group: a newer load cancels one not yet started.
    A request handed to the load as its argument was lost with it (a load for c cancelled by a load for d left
    c's facts unread); kept here, every request is taken by the next load that runs."""

    def __init__(self, everything: bool = False) -> None:
        self._lock = threading.Lock()
        self._names: set[str] | None = None if everything else set()

    def add(self, names: Iterable[str] | None) -> None:
        """Ask for `names` (None: every worktree)."""
        with self._lock:
            if names is None or self._names is None:
                self._names = None
            else:
                self._names.update(names)

    def take(self) -> frozenset[str] | None:
        """What was asked for since the last take (None: every worktree), leaving nothing asked for."""
        with self._lock:
            names, self._names = self._names, set()
        return None if names is None else frozenset(names)
