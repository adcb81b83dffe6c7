"""The order the main screen starts in: the lists first, then each session's status, then everything else.

A part the main screen holds (`MainScreen.startup`). The first frame shows the tasks and worktrees as on disk (read
on the event loop before it, `mount`); the session poll starts with the screen. What the first useful screen (the
lists with each session's status) does not need waits for that status (`first_status`, or `REST_AT_THE_LATEST`
seconds after the first frame, however late it is): reconciling, the trust check and the events; the git facts and
the file watcher (slow on a big repository); the remote hosts' and the CI checks' pollers; the tabs and the footer.
Nothing of it competes with that screen for the CPU.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from daintree_tui.tui.keymap import warn_unknown_ids

if TYPE_CHECKING:
    from textual.binding import BindingType
    from textual.timer import Timer
    from textual.worker import Worker

    from daintree_tui.tui.app import DaintreeApp
    from daintree_tui.tui.backend import Snapshot
    from daintree_tui.tui.checks_watch import ChecksWatch
    from daintree_tui.tui.feed import DashboardFeed
    from daintree_tui.tui.hosts import HostsWatch
    from daintree_tui.tui.screens.intake import FeedIntake
    from daintree_tui.tui.screens.layout import DashboardLayout
    from daintree_tui.tui.widgets.session_pane import SessionPane
    from daintree_tui.tui.widgets.sidebar import Sidebar

REST_AT_THE_LATEST = 2.0
"""Seconds after the first frame by which what waits for the first status starts, however late it is."""


class StartView(Protocol):
    """What the start-up part starts on its screen."""

    started: bool
    rest_started: bool
    title: str | None
    sub_title: str | None

    @property
    def dashboard(self) -> DaintreeApp: ...

    @property
    def feed(self) -> DashboardFeed: ...

    @property
    def hosts_watch(self) -> HostsWatch: ...

    @property
    def checks_watch(self) -> ChecksWatch: ...

    @property
    def sidebar(self) -> Sidebar: ...

    @property
    def pane(self) -> SessionPane: ...

    @property
    def intake(self) -> FeedIntake: ...

    @property
    def layout_part(self) -> DashboardLayout: ...

    def every_binding(self) -> list[BindingType]: ...

    def after_first_paint(self) -> None: ...

    async def after_first_status(self) -> None: ...

    def set_timer(self, delay: float, callback: Callable[[], Any] | None = None) -> Timer: ...

    def call_after_refresh(self, callback: Callable[..., Any]) -> bool: ...

    def run_worker(self, work: Callable[[], Any], *, thread: bool = False, group: str = "default",
                   description: str = "") -> Worker[Any]: ...


class DashboardStartup:
    """Starts one main screen's parts, each when its turn comes."""

    def __init__(self, view: StartView) -> None:
        self.view = view

    def mount(self) -> None:
        """The lists as on disk, for the first frame, and the session poll."""
        view = self.view
        view.title = "daintree"
        view.sub_title = str(view.dashboard.backend.project.root)
        feed, table, pane = view.feed, view.sidebar.worktree_table, view.pane
        table.focus()
        feed.rows_on_screen = table.visible_names
        feed.shown_session = lambda: pane.terminal.worktree
        self.snapshot(feed.first_snapshot().snapshot)
        feed.start_polling()

    def snapshot(self, snapshot: Snapshot) -> None:
        """Tasks and worktrees as on disk: the first of them is the first frame's."""
        view = self.view
        view.intake.snapshot(snapshot)
        if not view.started:
            view.started = True
            # The first frame shows the lists (read before it, see `mount`). The session poll started with the
            # screen; the rest waits for its status (`first_status`).
            view.call_after_refresh(view.after_first_paint)

    def first_paint(self) -> None:
        # Everything built so far lives as long as the app: move it out of the collector's reach so a full
        # collection during an output flood stays short.
        gc.freeze()
        self.view.set_timer(REST_AT_THE_LATEST, self.view.after_first_status)  # should the status be late

    def status_painted(self) -> None:
        """A poll brought the sessions' status: the rest once the worktree table has painted it (it renders on its
        own loop; a callback it is asked for runs after its pending render and the next frame)."""
        if not self.view.rest_started:
            self.view.sidebar.worktree_table.call_after_refresh(self.view.after_first_status)

    async def first_status(self) -> None:
        """The first useful screen is out: what it did not need starts now (see the module's docstring)."""
        view = self.view
        if view.rest_started:
            return
        view.rest_started = True
        view.feed.startup()
        view.feed.start_reads()
        view.hosts_watch.start()
        view.checks_watch.start()
        keymap = view.dashboard.keymap
        if keymap:
            view.run_worker(partial(warn_unknown_ids, keymap, view.every_binding()), thread=True, group="keymap",
                            description="keys in the config")
        await view.layout_part.mount()
