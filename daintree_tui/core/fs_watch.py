"""`watching`: watchfiles' watch that answers now and then when nothing changed and polls where it must.

Where the kernel gives no more inotify instances (128 a user by default; editors, file managers and node-based
agents take their share), watchfiles fails to start. A dashboard whose watch ended there missed every edit from
then on (seen in a loaded test run), and `events --follow` stopped with a traceback: they poll instead.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

QUIET_ANSWER_MS = 1000
"""How long a watch waits for a change before it answers with an empty set (its first answer, whichever it is,
says that its watches are in place)."""

POLL_MS = 1000
"""How often a watch that cannot use inotify looks again."""


def in_place_by(first_answer: Collection[object], answered_at: float) -> float:
    """A time by which a watch was surely in place, from its first answer and when it came: watchfiles sets up
    every watch before it starts waiting, and answers "nothing" only after QUIET_ANSWER_MS of waiting (so does
    `core.tree_watch`)."""
    return answered_at if first_answer else answered_at - QUIET_ANSWER_MS / 1000


def watching(paths: tuple[Path, ...], stop: threading.Event | None = None, *, debounce: int = 150, step: int = 50,
             **options: Any) -> Iterator[set[tuple[Any, str]]]:
    """The changes under `paths` until `stop` is set, and an empty set after each QUIET_ANSWER_MS without one.
    A watch that fails once it runs (a watched folder removed under it) just ends, as one that cannot start for
    any reason but the want of inotify instances."""
    from watchfiles import watch  # here: start-up speed, only what watches imports it

    polling = False
    while True:
        started = False
        try:
            for changes in watch(*paths, debounce=debounce, step=step, stop_event=stop,
                                 rust_timeout=QUIET_ANSWER_MS, yield_on_timeout=True, force_polling=polling,
                                 poll_delay_ms=POLL_MS, **options):
                started = True
                yield changes
            return
        except Exception as exc:
            if started or polling or "creating recommended watcher" not in str(exc):
                return
            polling = True
