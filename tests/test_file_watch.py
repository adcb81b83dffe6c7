"""The dashboard's file watch (`tui/file_watch.py`) on real inotify: the state and tasks folders' own files and
the worktrees are watched; the sessions' logs below the state folder are not (busy agents write them many times a
second)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from daintree_tui.core.project import Project
from daintree_tui.core.store import remove_tree
from daintree_tui.tui.file_watch import FileWatch
from tests.conftest import CLI, wait_for


def test_logs_are_not_watched_and_what_is_shown_is(repo: Path, cli: CLI) -> None:
    cli.ok("worktree", "create", "one")
    project = Project.discover(repo)
    told: list[tuple[bool, bool, frozenset[str]]] = []
    lock = threading.Lock()

    def changed(state: bool, events: bool, touched: frozenset[str]) -> None:
        with lock:
            told.append((state, events, touched))

    watch = FileWatch(project, changed)
    watch.start()
    watch.watch_worktrees([("one", str(repo / ".worktrees" / "one"))])
    try:
        # Ready when a file in the worktree is seen (inotify is set up in the watches' own threads).
        probe = repo / ".worktrees" / "one" / "probe.txt"
        wait_for(lambda: probe.write_text(str(time.time())) and any(t[2] == {"one"} for t in told), timeout=20)
        logs = project.state_dir / ".logs"
        logs.mkdir(exist_ok=True)
        for i in range(20):
            with (logs / "one.log").open("a") as out:
                out.write(f"step {i}\n")
        (project.state_dir / ".sessions").mkdir(exist_ok=True)
        (project.state_dir / ".sessions" / "one.json").write_text("{}")
        project.events.append("session.running", worktree={"name": "one"})
        wait_for(lambda: any(t[1] for t in told), timeout=20)
        cli.ok("task", "create", "seen")
        wait_for(lambda: any(t[0] for t in told), timeout=20)
        assert not [p for p in watch.seen if "/.logs/" in p or "/.sessions/" in p], list(watch.seen)
    finally:
        watch.close()


def test_what_changed_before_the_watch_was_in_place_is_read(repo: Path, cli: CLI) -> None:
    """A recursive watch takes a moment to be set up; an edit in between was never told (the dashboard missed a
    conflict in a loaded run). Once in place, the watch tells of every worktree it covers, once."""
    cli.ok("worktree", "create", "one")
    project = Project.discover(repo)
    told: list[frozenset[str]] = []
    watch = FileWatch(project, lambda state, events, touched: told.append(touched))
    watch.watch_worktrees([("one", str(repo / ".worktrees" / "one"))])
    try:
        wait_for(lambda: frozenset({"one"}) in told, timeout=20)  # with nothing written at all
    finally:
        watch.close()


def test_given_in_place_the_watch_says_by_when_it_was_in_place_and_touches_nothing(repo: Path, cli: CLI) -> None:
    """Its first answer says a time by which every watch was in place (the one who read the worktrees reads again
    only what it read before then), instead of counting every worktree touched."""
    cli.ok("worktree", "create", "one")
    told: list[tuple[frozenset[str], float]] = []
    in_place: list[tuple[float, frozenset[str], float]] = []
    began = time.monotonic()
    watch = FileWatch(Project.discover(repo), lambda state, events, touched: told.append((touched, time.monotonic())),
                      lambda by, names: in_place.append((by, names, time.monotonic())))
    watch.watch_worktrees([("one", str(repo / ".worktrees" / "one"))])
    try:
        wait_for(lambda: in_place, timeout=20)
        (by, names, answered), = in_place
        assert names == {"one"} and began <= by <= answered, (began, in_place)
        edited = time.monotonic()
        (repo / ".worktrees" / "one" / "edit.txt").write_text("edited\n")
        wait_for(lambda: told, timeout=20)
        assert [touched for touched, _ in told] == [{"one"}] and told[0][1] > edited, told  # the edit, not the start
    finally:
        watch.close()


def test_a_commit_made_from_outside_daintree_is_told(repo: Path, cli: CLI) -> None:
    """A commit made in a worktree with the user's own git changes none of its files: the row kept its dirty count
    and its ahead for good (seen by a new user after hours). Git's admin dir of the worktree tells of it, and the
    main checkout's HEAD moving tells of every worktree (their behind)."""
    from tests.conftest import git

    cli.ok("worktree", "create", "one")
    cli.ok("worktree", "create", "two")
    told: list[frozenset[str]] = []
    in_place: list[float] = []
    watch = FileWatch(Project.discover(repo), lambda state, events, touched: told.append(touched),
                      lambda by, names: in_place.append(by))
    one = repo / ".worktrees" / "one"
    (one / "work.txt").write_text("work\n")
    watch.watch_worktrees([("one", str(one)), ("two", str(repo / ".worktrees" / "two"))])
    try:
        wait_for(lambda: in_place, timeout=20)
        cli.ok("worktree", "list")  # the outside's own reads (the sandbox touches each config.worktree) tell nothing
        git(one, "add", "-A")
        wait_for(lambda: told, timeout=20)
        assert set().union(*told) == {"one"}, told
        del told[:]
        git(one, "commit", "-q", "-m", "from outside")
        wait_for(lambda: told, timeout=20)
        assert set().union(*told) == {"one"}, told
        del told[:]
        git(repo, "commit", "-q", "--allow-empty", "-m", "the user's own, on main")
        wait_for(lambda: set().union(*told) == {"one", "two"}, timeout=20)
    finally:
        watch.close()


def test_edits_in_folders_nested_deep_are_told_without_the_watch_falling_behind(repo: Path, cli: CLI) -> None:
    """Which worktree a path is in was found among the path's parents, each a Path made and hashed: at 1,800
    folders deep (an agent's `mkdir -p a/a/a/...`) that took 28 ms a path, the watch's thread held the GIL (the
    dashboard's) for seconds a batch, and a thousand files made there were told after half a minute."""
    import os

    cli.ok("worktree", "create", "one")
    one = repo / ".worktrees" / "one"
    deep = one
    for _ in range(1800):  # not os.makedirs: it recurses, a frame a folder
        deep = deep / "a"
        deep.mkdir()
    told: list[frozenset[str]] = []
    in_place: list[float] = []
    watch = FileWatch(Project.discover(repo), lambda state, events, touched: told.append(touched),
                      lambda by, names: in_place.append(by))
    watch.watch_worktrees([("one", str(one))])
    try:
        wait_for(lambda: in_place, timeout=20)
        for i in range(1000):
            os.close(os.open(deep / f"f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
        wait_for(lambda: told, timeout=20)
        assert set().union(*told) == {"one"}, told
    finally:
        watch.close()
        remove_tree(one / "a")  # pytest's own clean-up of old temporary folders recurses, and fails on it


def test_a_commit_in_a_worktree_named_logs_is_told(repo: Path, cli: CLI) -> None:
    """Its admin dir is `.git/worktrees/logs`: only the common dir's own `logs/` is watched alone (the watch
    chose that by the folder's name, and missed this worktree's HEAD log, below its admin dir's `logs/`)."""
    from tests.conftest import git

    cli.ok("worktree", "create", "logs")
    told: list[frozenset[str]] = []
    in_place: list[float] = []
    watch = FileWatch(Project.discover(repo), lambda state, events, touched: told.append(touched),
                      lambda by, names: in_place.append(by))
    worktree = repo / ".worktrees" / "logs"
    watch.watch_worktrees([("logs", str(worktree))])
    try:
        wait_for(lambda: in_place, timeout=20)
        git(worktree, "commit", "-q", "--allow-empty", "-m", "from outside, nothing staged")
        wait_for(lambda: told, timeout=20)
        assert set().union(*told) == {"logs"}, told
    finally:
        watch.close()


NO_INOTIFY = r"""
import sys, threading, time
from pathlib import Path
from daintree_tui.core.follow import follow_lines
from daintree_tui.core.project import Project
from daintree_tui.core.store import remove_tree
from daintree_tui.tui.file_watch import FileWatch

Path("/proc/sys/user/max_inotify_instances").write_text("0")  # this user namespace's: no inotify at all
repo = Path(sys.argv[1])
told = []
watch = FileWatch(Project.discover(repo), lambda state, events, touched: told.append(touched))
watch.watch_worktrees([("one", str(repo / ".worktrees" / "one"))])
deadline = time.monotonic() + 30
while frozenset({"one"}) not in told and time.monotonic() < deadline:
    time.sleep(0.05)
del told[:]
(repo / ".worktrees" / "one" / "edit.txt").write_text("edited\n")
while frozenset({"one"}) not in told and time.monotonic() < deadline:
    time.sleep(0.05)
print("WORKTREE-SEEN" if told else "WORKTREE-MISSED")
log = repo / "followed.log"
lines = follow_lines(log, from_end=False)
threading.Timer(0.5, lambda: log.write_text("a line\n")).start()
print("FOLLOWED", next(lines))
watch.close()
"""


def test_without_inotify_the_watches_poll(repo: Path, cli: CLI) -> None:
    """The kernel's inotify instances are 128 a user by default: where they are used up, watchfiles cannot start.
    The dashboard's watch ended silently and missed every edit after; `events --follow` stopped with a traceback.
    In a user namespace whose limit is 0, both poll instead."""
    import shutil
    import subprocess
    import sys

    import pytest

    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-U", "-r", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs user namespaces (unshare -U -r)")
    cli.ok("worktree", "create", "one")
    done = subprocess.run([unshare, "-U", "-r", sys.executable, "-c", NO_INOTIFY, str(repo)],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["WORKTREE-SEEN", "FOLLOWED a line"], done.stdout + done.stderr
