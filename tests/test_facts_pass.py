"""The dashboard's facts pass (`tui/facts_pass.py`) with the worktrees' file watch on real inotify and real git:
what it reads again once the watch is in place."""

from __future__ import annotations

from pathlib import Path

from textual.message import Message

from daintree_tui.core.project import Project
from daintree_tui.core.worktrees import WorktreeService
from daintree_tui.services import Services
from daintree_tui.tui.backend import Backend
from daintree_tui.tui.facts_pass import FactsPass
from daintree_tui.tui.file_watch import FileWatch
from daintree_tui.tui.messages import RadarLoaded
from tests.conftest import CLI, wait_for
from tests.conftest import commit_file as commit
from tests.helpers.radar import setup_repo, three_lines


def test_a_worktree_whose_facts_alone_were_read_after_the_watch_came_has_its_files_read_by_the_radar(
        repo: Path, cli: CLI) -> None:
    """An agent edits right after the first pass read its worktree, before the watch is in place. A pass that
    read every worktree's git facts (an event in the log asks for that) but no worktree's files (none was told
    changed) began after the watch's `by` (its first answer, "nothing", comes a second after `by`) and took its
    requests before that answer: its facts' read said nothing of the radar's, which still held the files from
    before the edit. The conflict it makes must be found once the watch is in place, not never."""
    wts = setup_repo(repo, cli)
    commit(wts / "d", "app.py", three_lines("D"))
    project = Project.discover(repo)
    backend = Backend(Services(project))
    entries = tuple(WorktreeService(project).entries())
    posted: list[Message] = []
    facts_pass = FactsPass()
    facts_pass.run(entries, backend, posted.append)  # the first pass: every worktree's facts and files
    (wts / "a" / "app.py").write_text(three_lines("A"))  # now a and d conflict on app.py
    told: list[tuple[float, frozenset[str]]] = []
    watch = FileWatch(project, lambda state, events, touched: None, lambda by, names: told.append((by, names)))
    watch.watch_worktrees([(e.name, e.path) for e in entries if e.live])
    try:
        wait_for(lambda: told, timeout=20)
        facts_pass.want(None)  # took its requests before the watch's answer, read after its `by`
        facts_pass.run(entries, backend, posted.append)
        (by, names), = told
        facts_pass.watch_in_place(by, names)
        posted.clear()
        facts_pass.run(entries, backend, posted.append)  # the pass the watch's answer asks for
    finally:
        watch.close()
    radar = [m for m in posted if isinstance(m, RadarLoaded)]
    assert radar and radar[-1].found.get("a") == (("d", ("app.py",)),), posted
