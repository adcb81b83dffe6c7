"""The dashboard's start-up: what its first frame loads, and what it leaves for after the first useful screen."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.project import Project
from daintree_tui.tui.app import make_app
from daintree_tui.tui.screens.main import MainScreen
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.conftest import CLI, events, wait_for
from tests.helpers.dashboard import main_screen, until

pytestmark = pytest.mark.usefixtures("tmux_socket")

LATER = ("pyte", "wcwidth", "rich.pretty", "rich._emoji_codes", "attr", "textual.widgets._text_area",
         "textual.widgets._tabbed_content", "textual.widgets._footer", "textual.widgets._rich_log",
         "daintree_tui.services.host_queue", "daintree_tui.tui.screens.new_task")
"""Modules the dashboard loads once they are used (a terminal attached, a dialog, the tabs): each costs the first
frame milliseconds (bench 2). Not the sessions layer: the first poll starts with the screen, in its own thread, and
may have loaded it by the first frame."""

FIRST_FRAME = """
import asyncio, sys
from daintree_tui.core.project import Project
from daintree_tui.tui.app import make_app
from daintree_tui.tui.screens.main import MainScreen
from daintree_tui.tui.screens.main import MainScreen

loaded = []
after_first_paint = MainScreen.after_first_paint

def spy(self):
    loaded.extend(name for name in sys.argv[2:] if name in sys.modules)
    after_first_paint(self)
    self.app.exit()

MainScreen.after_first_paint = spy

async def main():
    app = make_app(Project.discover(sys.argv[1]))
    async with app.run_test(size=(120, 40)) as pilot:
        while app.is_running:
            await pilot.pause(0.05)

asyncio.run(main())
print(" ".join(loaded) or "none")
"""


def test_the_first_frame_loads_none_of_what_comes_later(repo: Path, cli: CLI) -> None:
    """Imports and the first frame's own work (a disk size formatted, a str cell parsed as markup) alike."""
    cli.ok("task", "create", "Something to list")
    cli.ok("worktree", "create", "listed")
    run = subprocess.run([sys.executable, "-c", FIRST_FRAME, str(repo), *LATER], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1:] == ["none"], run.stdout


async def test_events_from_before_the_start_are_each_shown_once(repo: Path, cli: CLI) -> None:
    """The events log is mounted after the first status; the records read before or as it mounts are all in it,
    each once (the start-up read and a file change's read share one offset)."""
    cli.ok("worktree", "create", "one")
    cli.ok("worktree", "create", "two")
    written = events(repo)
    assert written
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.later_mounted and screen.query("EventsLog"))
        from daintree_tui.tui.widgets.events_log import EventsLog

        log = screen.query_one(EventsLog)
        await until(pilot, lambda: len(log.records) >= len(written))
        assert [(r["ts"], r["event"]) for r in log.records] == [(r["ts"], r["event"]) for r in written]
        assert screen.query("Footer") and screen.query("#bottom") and not screen.query("#bottom-slot, #footer-slot")


async def test_the_diff_key_mounts_the_tabs_when_they_are_not_there_yet(repo: Path, cli: CLI,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`d` before the tabs came (the first status not out yet) mounts them and shows the diff."""
    cli.ok("worktree", "create", "changed")
    (repo / ".worktrees" / "changed" / "new.txt").write_text("new\n")

    async def status_not_out_yet(self: MainScreen) -> None:
        return None

    monkeypatch.setattr(MainScreen, "after_first_status", status_not_out_yet)  # nothing mounts the tabs by itself
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.selected == "changed" and screen.sessions == {} and screen.started)
        assert not screen.later_mounted and screen.query("#bottom-slot")
        await pilot.press("d")
        from daintree_tui.tui.widgets.diff_view import DiffView

        diff = await until(pilot, lambda: screen.query(DiffView))
        await until(pilot, lambda: diff.first(DiffView).worktree == "changed")
        assert screen.later_mounted and not screen.query("#bottom-slot")


def shown_text(app: Any) -> str:
    """The screen as the user reads it: the text of the app's own screenshot."""
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


async def test_the_first_frame_shows_no_placeholder_names_and_no_session_is_said_missing_before_the_poll(
        repo: Path, cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tried for real: the first frame showed `Widget#bottom-slot` and `Widget#footer-slot` (the bare widgets
    keeping the places of the tabs and the footer draw their own names) for about a second, and "no session" for a
    worktree whose agent was starting, before the first poll had said which sessions there are."""
    from tests.helpers.dashboard import configure

    configure(repo)
    cli.ok("worktree", "create", "busy")
    cli.ok("session", "start", "busy")
    cli.ok("worktree", "create", "idle")
    first: list[tuple[str, bool]] = []
    after_first_paint = MainScreen.after_first_paint

    def spy(self: MainScreen) -> None:
        first.append((shown_text(self.app), getattr(self, "sessions_known", False)))
        after_first_paint(self)

    monkeypatch.setattr(MainScreen, "after_first_paint", spy)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        text, polled = (await until(pilot, lambda: first))[0]
        assert "Widget#" not in text, text
        assert screen.selected == "busy"
        if not polled:  # the first poll may beat the first frame on a quiet machine
            assert "no session" not in text.lower(), text
            assert "looking for its session" in text and "Looking for this worktree's session" in text, text
        await until(pilot, lambda: screen.terminal.worktree == "busy" and "agent ready" in shown_text(app))
        screen.query_one(WorktreeTable).select_name("idle")  # a worktree that has none says so, once known
        await until(pilot, lambda: "No session here" in shown_text(app) and " idle  no session" in shown_text(app))


async def test_status_events_read_no_git_facts_and_another_process_merge_reads_them_all(
        repo: Path, cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every session's status change appends to events.jsonl: that is the log to read on, not every worktree's
    git facts again (a few confined git calls each: with 40 busy agents that was the dashboard's largest cost).
    An event of another process that can move branches (a merge, a worktree made) reads them all again."""
    from daintree_tui.tui.backend import Backend
    from daintree_tui.tui.widgets.events_log import EventsLog

    cli.ok("worktree", "create", "one")
    cli.ok("worktree", "create", "two")
    passes: list[tuple[str, ...]] = []
    facts = Backend.facts

    def counted(self: Backend, entries: tuple[Any, ...]) -> Any:
        passes.append(tuple(e.name for e in entries))
        return facts(self, entries)

    monkeypatch.setattr(Backend, "facts", counted)
    project = Project.discover(repo)
    app = make_app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.later_mounted and screen.query("EventsLog") and passes)
        log = screen.query_one(EventsLog)
        await until(pilot, lambda: len(log.records) >= len(events(repo)))
        # The watch, once in place, reads every worktree once (what changed while it was set up): then quiet.
        await until(pilot, lambda: screen.feed.watch_ready)
        await until(pilot, lambda: not [w for w in app.workers if w.group == "facts" and not w.is_finished])
        before = len(passes)
        for status in ("running", "waiting", "running"):
            project.events.append(f"session.{status}", worktree={"name": "one"}, agent="busy")
        await until(pilot, lambda: [r["event"] for r in log.records][-3:] == ["session.running", "session.waiting",
                                                                              "session.running"])
        await pilot.pause(0.5)
        assert len(passes) == before, passes[before:]
        project.events.append("worktree.merged", worktree={"name": "two"})
        await until(pilot, lambda: len(passes) > before and set(passes[-1]) == {"one", "two"})


async def test_a_change_the_watch_never_told_of_is_read_at_the_next_poll(
        repo: Path, cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lists followed the disk only through the file watch: one that ended (a watched folder removed under
    it) or missed a change left the dashboard showing a worktree removed long ago. The poll stats the index, the
    event log and the tasks folder, and reads them again when they changed."""
    from daintree_tui.tui.file_watch import FileWatch

    monkeypatch.setattr(FileWatch, "start", lambda self: None)  # a watch that tells of nothing at all
    monkeypatch.setattr(FileWatch, "watch_worktrees", lambda self, worktrees: None)
    cli.ok("worktree", "create", "one")
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: [e.name for e in screen.entries] == ["one"] and screen.feed.watching)
        cli.ok("worktree", "create", "two")
        cli.ok("task", "create", "seen later")
        await until(pilot, lambda: [e.name for e in screen.entries] == ["one", "two"], timeout=20)
        await until(pilot, lambda: any(t.subject == "seen later" for t in screen.tasks), timeout=20)


async def test_worktrees_read_after_the_watch_was_in_place_are_not_read_again(
        repo: Path, cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first git facts pass and the worktrees' file watch start together; once the watch was in place, every
    worktree counted as touched, and the dashboard read all their facts a second time (1.4 CPU-s of its first
    seconds with 100 worktrees). Only those read before the watch was in place are read again: here the first
    pass waits until it is, so none is."""
    from daintree_tui.tui.backend import Backend
    from daintree_tui.tui.file_watch import FileWatch

    for name in ("one", "two", "three"):
        cli.ok("worktree", "create", name)
    in_place = FileWatch.__init__
    told: list[float] = []

    def noted(self: FileWatch, project: Project, changed: Any, on_in_place: Any = None) -> None:
        def seen(by: float, worktrees: frozenset[str]) -> None:
            told.append(by)
            on_in_place(by, worktrees)

        in_place(self, project, changed, seen if on_in_place is not None else None)

    passes: list[tuple[str, ...]] = []
    facts = Backend.facts

    def after_the_watch(self: Backend, entries: tuple[Any, ...]) -> Any:
        if not passes:
            wait_for(lambda: told, timeout=30)
        passes.append(tuple(e.name for e in entries))
        return facts(self, entries)

    monkeypatch.setattr(FileWatch, "__init__", noted)
    monkeypatch.setattr(Backend, "facts", after_the_watch)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: screen.feed.watch_ready and passes)
        await until(pilot, lambda: not [w for w in app.workers if w.group == "facts" and not w.is_finished])
        assert sorted(passes[0]) == ["one", "three", "two"]
        assert passes[1:] == [], passes  # none read again
        # The watch tells of what changes after: an edit is read, for that worktree alone.
        (repo / ".worktrees" / "two" / "new.txt").write_text("edited\n")
        await until(pilot, lambda: screen.facts.get("two") is not None and screen.facts["two"].dirty == 1)
        assert passes[1:] == [("two",)], passes


async def test_an_edit_right_after_the_first_read_is_shown_whenever_the_watch_came(
        repo: Path, cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other side: a worktree edited just after its first read, the watch in place then or not yet: the
    dashboard shows the edit (told by the watch, or read again because it was read before the watch was in
    place)."""
    from daintree_tui.tui.backend import Backend

    cli.ok("worktree", "create", "one")
    facts = Backend.facts
    edited: list[bool] = []

    def then_edit(self: Backend, entries: tuple[Any, ...]) -> Any:
        read = facts(self, entries)
        if not edited:
            (repo / ".worktrees" / "one" / "new.txt").write_text("edited\n")
            edited.append(True)
        return read

    monkeypatch.setattr(Backend, "facts", then_edit)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: edited and screen.feed.watch_ready)
        await until(pilot, lambda: screen.facts.get("one") is not None and screen.facts["one"].dirty == 1)
