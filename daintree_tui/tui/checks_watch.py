"""ChecksWatch: the CI checks of each worktree's pull request, read from `gh pr checks` off the event loop.

A non-visual widget of the main screen. Every `tick` seconds a thread worker looks at which live worktrees have a
pull request (`worktree pr` keeps its URL in the worktree's review: local files, cheap), and reads the checks of
those not read in the last `interval` seconds, of a pull request new since, or asked for (`read_now`, right after
the dashboard's `p`). gh is a network call: one pass at a time, each read bounded (`timeout`); a read that gets no
answer keeps the last checks, marked stale. Without gh on PATH it reads nothing, and posts nothing: the row and the
detail show no CI. What it found goes to the screen as `ChecksLoaded`.
"""

from __future__ import annotations

import shutil
import time
from typing import TYPE_CHECKING

from textual import on, work
from textual.timer import Timer
from textual.widget import Widget
from textual.worker import Worker, WorkerState, get_current_worker

from daintree_tui.core.errors import DaintreeError
from daintree_tui.tui.messages import ChecksLoaded

if TYPE_CHECKING:
    from daintree_tui.services.ci import ChecksReport
    from daintree_tui.tui.backend import Backend


class ChecksWatch(Widget):
    """Reads the CI checks of the worktrees with a pull request, one pass at a time, on one timer."""

    DEFAULT_CSS = "ChecksWatch { display: none; }"

    tick = 10.0
    """Seconds between the end of one pass and the next look at which worktrees have a pull request."""
    interval = 60.0
    """Seconds between two reads of one pull request's checks."""
    timeout = 10.0
    """Seconds one read waits for gh."""

    def __init__(self, backend: Backend, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.backend = backend
        self.passes = 0
        """How many passes ended (a test waits on it)."""
        self.reads = 0
        """How many times gh was asked (a test counts them)."""
        self._checks: dict[str, ChecksReport] = {}
        self._read_at: dict[str, tuple[str, float]] = {}
        """Per worktree: the pull request last read, and when (monotonic). Only the pass's thread writes it."""
        self._due: set[str] = set()
        self._timer: Timer | None = None
        self._in_pass = False
        self._pass_again = False
        self._begun = False

    def start(self) -> None:
        """The first pass (the screen starts it once its first useful frame is out), then one every `tick`."""
        self._begun = True
        self.read_now()

    def read_now(self, name: str | None = None) -> None:
        """A pass now, reading `name`'s checks whatever their age (its pull request was just opened, or the user
        asked to send its failures); folded into the pass that runs, if one does."""
        if name is not None:
            self._due.add(name)
        if not self._begun:
            return
        if self._in_pass:
            self._pass_again = True
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._in_pass = True
        due, self._due = frozenset(self._due), set()
        self.look(due)

    @work(thread=True, exit_on_error=False, exclusive=True, group="checks", description="CI checks")
    def look(self, due: frozenset[str]) -> None:
        if shutil.which("gh") is None:
            if self._checks:  # gh went away: what it said is no longer shown
                self._checks = {}
                self.post_message(ChecksLoaded({}))
            return
        loop = self.backend.services.reviews
        root = self.backend.project.root
        worker = get_current_worker()
        try:
            prs = loop.prs()
        except DaintreeError:
            return  # no git, or no index to read: nothing has a pull request (and no toast every tick)
        found: dict[str, ChecksReport] = {}
        for name, pr in prs.items():
            if worker.is_cancelled:
                return
            last = self._read_at.get(name)
            known = self._checks.get(name)
            if known is not None and last is not None and last[0] == pr and name not in due \
                    and time.monotonic() - last[1] < self.interval:
                found[name] = known
                continue
            self.reads += 1
            report = loop.ci.read(root, pr, timeout=self.timeout)
            self._read_at[name] = (pr, time.monotonic())
            if report is not None:
                found[name] = report
        for name in [n for n in self._read_at if n not in prs]:
            del self._read_at[name]
        if found != self._checks:
            self._checks = found
            self.post_message(ChecksLoaded(dict(found)))

    @on(Worker.StateChanged)
    def pass_finished(self, event: Worker.StateChanged) -> None:
        # Worker.StateChanged does not bubble: a failed pass is told from here, and the next one still comes.
        report = getattr(self.app, "report_worker_failure", None)
        if report is not None:
            report(event)
        if event.worker.group != "checks" or event.state not in (WorkerState.SUCCESS, WorkerState.ERROR,
                                                                 WorkerState.CANCELLED):
            return
        self._in_pass = False
        self.passes += 1
        if self._pass_again:
            self._pass_again = False
            self.read_now()
        elif self.is_mounted:
            self._timer = self.set_timer(self.tick, self.read_now, name="checks")

    def on_unmount(self) -> None:
        if self._timer is not None:
            self._timer.stop()
