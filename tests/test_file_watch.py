"""The dashboard's file watch (`tui/file_watch.py`) on real inotify: the state and tasks folders' own files and
the worktrees are watched; the sessions' logs below the state folder are not (busy agents write them many times a
second)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from daintree_tui.core.project import Project
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
