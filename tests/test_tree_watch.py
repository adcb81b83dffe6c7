"""The worktrees' recursive watch (`core/tree_watch.py`) on real inotify: what an agent writes in its worktree is
told, and a link it makes there is an entry, never a way for the outside's watch to go elsewhere."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from daintree_tui.core.tree_watch import Root, tree_changes
from tests.conftest import wait_for


class Told:
    """Every path a watch of `roots` told of, from its own thread; `in_place` once it first answered."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.in_place = threading.Event()
        self.lock = threading.Lock()

    def saw(self, path: Path) -> bool:
        with self.lock:
            return str(path) in self.paths

    def under(self, folder: Path) -> list[str]:
        with self.lock:
            return [p for p in self.paths if p.startswith(f"{folder}/")]


@contextmanager
def watched(*roots: Root) -> Iterator[Told]:
    told, stop = Told(), threading.Event()

    def run() -> None:
        for changes in tree_changes(roots, stop):
            with told.lock:
                told.paths.extend(changes)
            told.in_place.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        wait_for(told.in_place.is_set, timeout=20)
        yield told
    finally:
        stop.set()
        thread.join(timeout=10)


def test_a_link_to_a_folder_elsewhere_is_not_followed(tmp_path: Path) -> None:
    """watchfiles followed it: `ln -s / x` in a worktree made the dashboard's watch walk the whole machine (29 s
    before it was in place) and tell of every change in /proc."""
    worktree, elsewhere = tmp_path / "worktree", tmp_path / "elsewhere"
    worktree.mkdir()
    elsewhere.mkdir()
    (worktree / "to-elsewhere").symlink_to(elsewhere)
    (worktree / "to-root").symlink_to("/")
    with watched(Root(worktree)) as told:
        (elsewhere / "secret.txt").write_text("written elsewhere\n")
        (worktree / "mine.txt").write_text("written here\n")
        wait_for(lambda: told.saw(worktree / "mine.txt"), timeout=20)  # after the one elsewhere, in order
        assert not told.under(worktree / "to-elsewhere") and not told.under(worktree / "to-root"), told.paths


def test_folders_made_later_are_watched_and_links_made_later_are_not_followed(tmp_path: Path) -> None:
    worktree, elsewhere = tmp_path / "worktree", tmp_path / "elsewhere"
    worktree.mkdir()
    elsewhere.mkdir()
    with watched(Root(worktree)) as told:
        deep = worktree / "a" / "b" / "c"
        deep.mkdir(parents=True)
        (deep / "made.txt").write_text("in a folder made after the start\n")
        wait_for(lambda: told.saw(deep / "made.txt"), timeout=20)
        (deep / "later.txt").write_text("and once it is watched\n")
        wait_for(lambda: told.saw(deep / "later.txt"), timeout=20)
        (worktree / "link").symlink_to(elsewhere)
        wait_for(lambda: told.saw(worktree / "link"), timeout=20)  # the link itself is an entry like any other
        (elsewhere / "secret.txt").write_text("written elsewhere\n")
        (worktree / "mine.txt").write_text("written here\n")
        wait_for(lambda: told.saw(worktree / "mine.txt"), timeout=20)
        assert not told.under(worktree / "link"), told.paths


def test_a_root_not_recursive_tells_of_its_own_entries_only(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "refs" / "heads").mkdir(parents=True)
    with watched(Root(logs, recursive=False)) as told:
        (logs / "refs" / "heads" / "main").write_text("below\n")
        (logs / "HEAD").write_text("moved\n")
        wait_for(lambda: told.saw(logs / "HEAD"), timeout=20)
        assert not told.under(logs / "refs"), told.paths
