"""The worktrees' recursive watch (`core/tree_watch.py`) on real inotify: what an agent writes in its worktree is
told, and a link it makes there is an entry, never a way for the outside's watch to go elsewhere."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from daintree_tui.core.tree_watch import Root, SkipDir, tree_changes
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
def watched(*roots: Root, skip_dir: SkipDir = lambda name: False) -> Iterator[Told]:
    told, stop = Told(), threading.Event()

    def run() -> None:
        for changes in tree_changes(roots, stop, skip_dir=skip_dir):
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


def inotify_watched_inodes() -> set[int]:
    """The inodes every inotify instance of this process watches, as the kernel lists them."""
    inodes: set[int] = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                lines = info.read().splitlines()
        except OSError:
            continue
        inodes.update(int(word[4:], 16) for line in lines if line.startswith("inotify ")
                      for word in line.split() if word.startswith("ino:"))
    return inodes


def test_a_folder_swapped_for_a_link_while_it_is_walked_is_not_followed(tmp_path: Path) -> None:
    """IN_DONT_FOLLOW guards a path's last name only: the walk watched `a/n1` by its path after listing `a`, and
    an agent that swapped `a` for a link to a folder elsewhere in between had the outside's watch go there (and
    walk it all: `ln -s / a`). The agent times it at will: it moves `a` in from a folder the watch skips."""
    worktree, elsewhere = tmp_path / "worktree", tmp_path / "elsewhere"
    staging = worktree / "node_modules" / "a"
    names = [f"n{i}" for i in range(3000)]
    for name in names:
        (staging / name).mkdir(parents=True)
        (elsewhere / name).mkdir(parents=True)
    outside = {os.stat(elsewhere / name).st_ino for name in names} | {os.stat(elsewhere).st_ino}
    with watched(Root(worktree), skip_dir=lambda name: name == "node_modules") as told:
        a = worktree / "a"
        inode = os.stat(staging).st_ino
        staging.rename(a)
        wait_for(lambda: inode in inotify_watched_inodes(), timeout=20, interval=0.0001)
        a.rename(worktree / "node_modules" / "a-real")
        a.symlink_to(elsewhere)
        wait_for(lambda: told.saw(a), timeout=20)
        assert not outside & inotify_watched_inodes()


def test_a_folder_made_in_a_watched_folder_moved_away_is_not_looked_for_through_a_link(tmp_path: Path) -> None:
    """A watched folder moved where the watch does not go keeps its watch, under the path it had: the agent put a
    link to a folder elsewhere at that path, made `x` in the folder moved, and the watch added `a/x` by its path,
    through the link: the folder `x` elsewhere, and all below it."""
    worktree, elsewhere = tmp_path / "worktree", tmp_path / "elsewhere"
    (worktree / "a").mkdir(parents=True)
    (worktree / "node_modules").mkdir()
    (elsewhere / "x" / "deep").mkdir(parents=True)
    outside = {os.stat(path).st_ino for path in (elsewhere, elsewhere / "x", elsewhere / "x" / "deep")}
    with watched(Root(worktree), skip_dir=lambda name: name == "node_modules") as told:
        (worktree / "a").rename(worktree / "node_modules" / "b")
        (worktree / "a").symlink_to(elsewhere)
        (worktree / "node_modules" / "b" / "x").mkdir()
        wait_for(lambda: told.saw(worktree / "a" / "x"), timeout=20)  # its making, told under the old path
        (worktree / "mine.txt").write_text("written here\n")
        wait_for(lambda: told.saw(worktree / "mine.txt"), timeout=20)
        assert not outside & inotify_watched_inodes()
        assert not told.under(worktree / "a" / "x"), told.paths


def test_a_folder_made_while_the_kernel_dropped_events_is_watched(tmp_path: Path) -> None:
    """When the kernel's queue overflowed, the making of a folder could be among the events dropped: that folder
    was never watched, and no edit in it was told again. The consumer's pause (the dashboard busy) fills the
    queue: the watch reads it only when asked for its next answer."""
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    stop = threading.Event()
    answers = tree_changes([Root(worktree)], stop)
    told: set[str] = set()

    def told_of(path: Path) -> bool:
        told.update(next(answers))
        return str(path) in told

    try:
        next(answers)  # in place
        for i in range(limit + 100):
            os.close(os.open(worktree / f"f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
        (worktree / "late").mkdir()
        wait_for(lambda: told_of(worktree), timeout=20)  # the overflow tells of the root
        (worktree / "late" / "x.txt").write_text("in a folder whose making was dropped\n")
        wait_for(lambda: told_of(worktree / "late" / "x.txt"), timeout=20)
    finally:
        stop.set()
        answers.close()


def test_a_watch_whose_descriptor_is_past_1023_runs(tmp_path: Path) -> None:
    """select() takes no descriptor past 1023 (ValueError): in a dashboard with that many open (forty agents'
    terminals, pipes and logs; a soft limit above 1024), the watch's thread died at its first wait, silently, and
    no edit was told again."""
    import resource

    import pytest

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("needs a limit of open files above 1200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    fillers = [os.open(os.devnull, os.O_RDONLY)]
    while fillers[-1] < 1030:
        fillers.append(os.open(os.devnull, os.O_RDONLY))
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    try:
        with watched(Root(worktree)) as told:
            (worktree / "mine.txt").write_text("written here\n")
            wait_for(lambda: told.saw(worktree / "mine.txt"), timeout=20)
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
