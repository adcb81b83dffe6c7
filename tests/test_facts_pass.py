"""The dashboard's facts pass (`tui/facts_pass.py`) with the worktrees' file watch on real inotify and real git:
what it reads again once the watch is in place."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

from textual.message import Message

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.worktrees import Facts, WorktreeService
from daintree_tui.services import Services
from daintree_tui.tui.backend import Backend
from daintree_tui.tui.facts_pass import FactsPass
from daintree_tui.tui.file_watch import FileWatch
from daintree_tui.tui.messages import FactsLoaded, RadarLoaded
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


class EditsWhileFactsAreRead:
    """The dashboard's backend, with an agent's edit told (as the watch tells it, from its thread) just after a
    pass read the git facts and before it reads the files: the race of a busy machine, made certain."""

    def __init__(self, backend: Backend, edit: Callable[[], None]) -> None:
        self.backend = backend
        self.services = backend.services
        self.edit: Callable[[], None] | None = edit

    def facts(self, entries: tuple[WorktreeEntry, ...]) -> dict[str, Facts]:
        facts = self.backend.facts(entries)
        if self.edit is not None:
            self.edit, edit = None, self.edit
            edit()
        return facts


def test_an_edit_told_while_a_pass_reads_the_facts_is_read_by_the_next_pass(repo: Path, cli: CLI) -> None:
    """The pass that was reading c's facts (clean) when c's edit was told took that request for its radar, which
    then stood c's branch tip for its files, as its count said; the next pass, asked for c's facts by the same
    change, saw c dirty but had no request left to read its files: the conflict c's edit makes was never found
    (a dashboard test failed so on a loaded machine)."""
    wts = setup_repo(repo, cli)
    commit(wts / "d", "app.py", three_lines("D"))
    project = Project.discover(repo)
    entries = tuple(WorktreeService(project).entries())
    posted: list[Message] = []
    facts_pass = FactsPass()

    def edit() -> None:
        (wts / "c" / "app.py").write_text(three_lines("C"))
        facts_pass.touched(frozenset({"c"}))
        facts_pass.want(frozenset({"c"}))

    backend = Backend(Services(project))
    facts_pass.run(entries, backend, posted.append)  # the first pass: every worktree
    facts_pass.want(None)  # an event in the log asks for every worktree's facts
    facts_pass.run(entries, cast(Backend, EditsWhileFactsAreRead(backend, edit)), posted.append)
    posted.clear()
    facts_pass.run(entries, backend, posted.append)  # the pass the edit asked for
    facts = [m for m in posted if isinstance(m, FactsLoaded)]
    radar = [m for m in posted if isinstance(m, RadarLoaded)]
    assert facts and facts[-1].facts["c"].dirty == 1, posted
    assert radar and radar[-1].found.get("c") == (("d", ("app.py",)),), posted
