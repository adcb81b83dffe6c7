"""FileWatch: what changed on disk that the dashboard shows, told to the feed (`DashboardFeed`) as it happens.

Two watches, each a thread of its own: the state and tasks folders' own files (the index, the event log, the task
files), not recursively, and the worktrees, each recursively (their files make the dirty counts and the radar),
with git's side of them (each one's admin dir, the main checkout's HEAD log: a commit made with the user's own git
changes no file of the worktree). The worktrees are an agent's to write: their watch never follows a link
(`core.tree_watch`). The
folders below the state folder are not watched at all: the sessions' logs there grow with every line an agent
prints, and with forty busy agents the watch of them woke ~190 times a second to be told of nothing to show.
The worktrees' watch is started again when the list of worktrees changes (`watch_worktrees`).

A watch tells only of changes after its watches are in place, which takes a moment after its start (a recursive
one walks every worktree): once it is (its first answer), every worktree it covers counts as touched, so that an
edit made in between is read after all; or, given `in_place`, it tells by when it was in place, and the one who
read the worktrees reads again only what it read before then (at start-up, the dashboard read every worktree's
git facts twice). A watch polls where inotify is used up (`core.fs_watch`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from daintree_tui.core.admin_dirs import git_admin_dir
from daintree_tui.core.errors import OperationError
from daintree_tui.core.fs_watch import in_place_by, watching
from daintree_tui.core.project import Project
from daintree_tui.core.tree_watch import Root, tree_changes

IGNORED_STATE_DIRS = (".logs", ".tmp", ".trash", ".sessions", ".journal", ".sandbox-home", ".locks", ".ui.json",
                      ".inbox", ".agent-git", ".cache", ".train")
"""What is left alone: the sessions' logs and records, and the bookkeeping the poll itself writes (the inboxes and
git quarantines it looks into for every worktree, caches, the dashboard's own .ui.json): when those counted, every
poll reloaded the lists and painted the screen again."""

Changed = Callable[[bool, bool, frozenset[str]], None]
"""Told `(state_changed, events_changed, worktrees_touched)`, from a watch's thread."""


InPlace = Callable[[float, frozenset[str]], None]
"""Told `(by, worktrees)` once the worktrees' watch is in place: every change to them after `by` (a
`time.monotonic()`) is told; one before it may not have been."""

Stamp = tuple[tuple[int, int, int] | None, ...]


def state_stamp(project: Project) -> Stamp:
    """What the lists are read from, as the poll sees it in three `stat`s: the index, the event log and the tasks
    folder. A change the watch did not tell of (a watch that ended, a change in the moment it was set up) is
    read at the next poll instead of never."""
    stamps: list[tuple[int, int, int] | None] = []
    for path in (project.index_path, project.events.path, project.tasks_dir):
        try:
            st = path.stat()
        except OSError:
            stamps.append(None)
        else:
            stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(stamps)


def watched(path: str) -> bool:
    """Whether a change at `path` (under the state or tasks folder) can change what the lists show. The temporary
    file of an atomic write (`.NAME.RANDOM.tmp`) counts as its target."""
    return not any(f"/{d}/" in path or path.endswith(f"/{d}") or f"/.{d}." in path for d in IGNORED_STATE_DIRS)


GIT_TELLS = ("HEAD", "index", "logs")
"""What, in a worktree's admin dir or the common dir's `logs/`, changes when a commit, `git add`, a reset or a
checkout is made there: not the rest (the sandbox touches `config.worktree` before each of its git calls)."""


def git_moved(root: str, path: str) -> bool:
    """Whether a change at `path`, in the git folder `root` watched, is one of those GIT_TELLS of."""
    return path[len(root) + 1:].split("/", 1)[0] in GIT_TELLS


class Owners:
    """Which of the watched roots a changed path is in (the deepest one), in as many steps as there are depths of
    roots, whatever the path's: its parents, each a Path made and hashed, took 28 ms a path 1,800 folders deep
    (an agent's `mkdir -p a/a/a/...`), and a batch of those held the GIL, the dashboard's, for seconds."""

    def __init__(self, roots: Iterable[str]) -> None:
        self.roots = set(roots)
        self.depths = sorted({root.count("/") for root in self.roots}, reverse=True)

    def of(self, path: str) -> str | None:
        pieces = path.split("/", self.depths[0] + 1) if self.depths else []
        for depth in self.depths:
            if len(pieces) > depth and (root := "/".join(pieces[:depth + 1])) in self.roots:
                return root
        return None


class FileWatch:
    """The project's two watches; `close` ends both."""

    def __init__(self, project: Project, changed: Changed, in_place: InPlace | None = None) -> None:
        self.project = project
        self.changed = changed
        self.in_place = in_place
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._worktrees_stop: threading.Event | None = None
        self._worktrees: frozenset[tuple[str, str]] = frozenset()
        self._state_ready = threading.Event()
        self._worktrees_ready = threading.Event()
        self.seen: deque[str] = deque(maxlen=256)
        """The last paths the state watch was told of, before any filter (what the watch cost, for the tests)."""

    def start(self) -> None:
        project = self.project
        project.tasks_dir.mkdir(exist_ok=True)
        project.state_dir.mkdir(exist_ok=True)
        threading.Thread(target=self._watch_state, name="watch-state", daemon=True).start()

    def watch_worktrees(self, worktrees: Iterable[tuple[str, str]]) -> None:
        """Watch these worktrees (name, path), in place of those watched until now (nothing when they are the
        same)."""
        wanted = frozenset((name, path) for name, path in worktrees if Path(path).is_dir())
        with self._lock:
            if self._closed.is_set() or wanted == self._worktrees:
                return
            if self._worktrees_stop is not None:
                self._worktrees_stop.set()
            self._worktrees, self._worktrees_stop = wanted, threading.Event()
            self._worktrees_ready = threading.Event()
            if not wanted:
                self._worktrees_ready.set()
            else:
                threading.Thread(target=self._watch_worktrees,
                                 args=(wanted, self._worktrees_stop, self._worktrees_ready),
                                 name="watch-worktrees", daemon=True).start()

    @property
    def ready(self) -> bool:
        """Whether both watches are in place and have told of what changed while they were being set up."""
        return self._state_ready.is_set() and self._worktrees_ready.is_set()

    def close(self) -> None:
        with self._lock:
            self._closed.set()
            if self._worktrees_stop is not None:
                self._worktrees_stop.set()

    def _shown(self, path: str) -> bool:
        self.seen.append(path)
        return watched(path)

    def _watch_state(self) -> None:
        project = self.project
        folders = (project.tasks_dir, project.state_dir)
        events_log = project.events.path.name
        ready = self._state_ready
        for changes in watching(folders, self._closed, recursive=False,
                                 watch_filter=lambda _, path: self._shown(path)):
            # In place now: what changed while it was being set up is read once.
            state = events = not ready.is_set()
            for _, raw in changes:
                path = Path(raw)
                if path.parent not in folders:
                    continue
                if path.parent == project.state_dir and path.name.startswith(events_log):
                    events = True  # events.jsonl and its rotation: the log to read on, not the lists
                else:
                    state = True
            if state or events:
                self.changed(state, events, frozenset())
            ready.set()

    def _watch_worktrees(self, worktrees: frozenset[tuple[str, str]], stop: threading.Event,
                         ready: threading.Event) -> None:
        from watchfiles import Change, DefaultFilter  # here: start-up speed, as in core.fs_watch

        names = frozenset(name for name, _ in worktrees)
        roots = [Root(Path(path)) for _, path in worktrees]
        told_by = {str(root.path): frozenset({name}) for root, (name, _) in zip(roots, worktrees, strict=True)}
        git_roots = self._git_roots(worktrees, names)
        roots += [root for root, _ in git_roots]
        told_by.update((str(root.path), of) for root, of in git_roots)
        git_folders = {str(root.path) for root, _ in git_roots}
        within = Owners(told_by)
        shown = DefaultFilter()
        for changes in tree_changes(roots, stop, skip_dir=lambda name: name in DefaultFilter.ignore_dirs):
            touched: set[str] = set()
            if not ready.is_set():  # in place now: what changed while it was being set up is read once
                if self.in_place is not None:
                    self.in_place(in_place_by(changes, time.monotonic()), names)
                else:
                    touched.update(names)
            for raw in changes:
                root = within.of(raw)
                if root is not None and (git_moved(root, raw) if root in git_folders
                                         else shown(Change.modified, raw)):
                    touched.update(told_by[root])
            if touched:
                self.changed(False, False, frozenset(touched))
            ready.set()

    def _git_roots(self, worktrees: frozenset[tuple[str, str]],
                   names: frozenset[str]) -> list[tuple[Root, frozenset[str]]]:
        """Where git, not the worktree's files, tells of a commit, a `git add` or a checkout made from outside
        daintree (the user's own git in a worktree or in the main checkout), with the worktrees each tells of:
        each worktree's admin dir (its HEAD, its index, its HEAD's log) and the log of the main checkout's HEAD,
        alone (its moving may move every worktree's ahead and behind). Found from git's side, as the sandbox's
        guards find them."""
        common = self.project.common_dir
        if common is None:
            return []
        roots: list[tuple[Root, frozenset[str]]] = []
        for name, path in worktrees:
            try:
                roots.append((Root(git_admin_dir(common, Path(path))), frozenset({name})))
            except OperationError:
                continue
        if (common / "logs").is_dir():
            roots.append((Root(common / "logs", recursive=False), names))
        return roots
