"""The main screen's layout: the lists, the zoomed terminal or the full-screen diff, and the parts mounted after
the first frame (the events and diff tabs and the footer, see later.py).

A part the main screen holds (`MainScreen.layout_part`). The screen's `zoom` reactive names the layout (its watcher
sets the CSS classes `zoomed` and `full-diff`); this part decides it, moves the focus where it is useful, keeps
the diff tab on the current worktree, and mounts the tabs and the footer once (`mount`), at the latest when a key
needs one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from textual.widget import AwaitMount, MountError, Widget

if TYPE_CHECKING:
    from textual.css.query import DOMQuery
    from textual.geometry import Size
    from textual.reactive import Reactive
    from textual.widgets import Footer

    from daintree_tui.tui.widgets.diff_view import Place
    from daintree_tui.tui.widgets.session_pane import SessionPane
    from daintree_tui.tui.widgets.sidebar import Sidebar

ZOOMED = "zoomed"
FULL_DIFF = "full-diff"


class LayoutView(Protocol):
    """What the layout part arranges on its screen."""

    zoom: str

    @property
    def selected(self) -> str | None: ...

    @property
    def size(self) -> Size: ...

    @property
    def sidebar(self) -> Sidebar: ...

    @property
    def pane(self) -> SessionPane: ...

    def mount(self, *widgets: Widget) -> AwaitMount: ...

    def query(self, selector: str) -> DOMQuery[Widget]: ...

    def call_later(self, callback: Callable[..., Any]) -> bool: ...

    def set_focus(self, widget: Widget | None) -> None: ...

    def refresh_bindings(self) -> None: ...


class DashboardLayout:
    """Zoom, the full-screen diff and the later parts of one main screen."""

    def __init__(self, view: LayoutView, selected: Reactive[str | None], diff: Callable[[str], None],
                 clock_format: Callable[[float], str] | None) -> None:
        """Args:
            view: The screen.
            selected: The screen's reactive the tabs follow (bound with `data_bind` as they mount).
            diff: Reads a worktree's diff into the diff tab (a flow: `WorktreeActions.diff`).
            clock_format: How the events log shows a time (tests freeze it).
        """
        self.view = view
        self.selected = selected
        self.diff = diff
        self.clock_format = clock_format
        self.mounted = False
        """Whether the events and diff tabs and the footer are mounted."""
        self.early_events: list[dict[str, object]] = []
        """Event records that came before the events log was mounted."""
        self.footer: Footer | None = None

    # -- the parts after the first frame ----------------------------------------------------------------------------

    async def mount(self) -> None:
        """Mount the events and diff tabs and the footer in their slots (once). Run from the screen's own message
        loop (a timer, `call_later`, `call_after_refresh`): the tabs bind to the screen's `selected`."""
        if self.mounted:
            return
        self.mounted = True
        from daintree_tui.tui.screens import later  # not a start-up import: see later.py

        view = self.view
        tabs = later.bottom_tabs(self.selected, self.clock_format, self.early_events)
        self.early_events = []
        self.footer = later.footer(view.size.width)
        try:
            mounting = [view.pane.mount(tabs, after="#terminal"), view.mount(self.footer)]
            view.query("#bottom-slot, #footer-slot").remove()
            for mounted in mounting:
                await mounted
        except MountError:
            return  # the dashboard is closing
        view.refresh_bindings()  # the footer shows the keys once told they are there

    def then(self, do: Callable[[], object]) -> None:
        """Run `do` with the tabs and the footer mounted: now, or once `mount` has run on the screen's own message
        loop (a key's action runs on the app's)."""
        if self.mounted:
            do()
            return
        self.view.call_later(self.mount)
        self.view.call_later(do)

    def add_events(self, records: list[dict[str, object]]) -> None:
        if not self.mounted:
            self.early_events.extend(records)
            return
        from daintree_tui.tui.screens import later  # loaded with the events log

        log = later.events_log(self.view.pane)
        if log is not None:
            log.add(records)

    def fit_footer(self, width: int) -> None:
        if self.footer is not None:
            from daintree_tui.tui.screens import later  # loaded with the footer

            later.fit_footer(self.footer, width)

    def follow(self, name: str | None) -> None:
        """The current worktree changed: a diff tab on screen shows its diff."""
        if name and self.mounted:
            from daintree_tui.tui.screens import later  # loaded with the tabs

            if later.bottom_tab(self.view.pane) == "diff-tab":
                self.diff(name)

    def show_diff(self, name: str, text: str) -> None:
        """`name`'s diff in the diff tab, if it is still the current worktree (the user may have moved on while
        git ran)."""
        from daintree_tui.tui.screens import later  # loaded with the tabs

        if self.view.selected == name:
            later.diff_view(self.view.pane).show(name, text)

    def diff_place(self, name: str) -> Place | None:
        """The new-side line under the diff's cursor, while the diff shows `name` (None: no such line)."""
        if not self.mounted:
            return None
        from daintree_tui.tui.screens import later  # loaded with the tabs

        view = later.diff_view(self.view.pane)
        return view.place() if view.worktree == name else None

    def diff_shows(self, name: str) -> bool:
        """Whether the diff view holds `name`'s diff now."""
        if not self.mounted:
            return False
        from daintree_tui.tui.screens import later  # loaded with the tabs

        return later.diff_view(self.view.pane).worktree == name

    def diff_tab(self) -> None:
        """The diff tab, with the current worktree's diff (`d`)."""
        self.then(self._diff_tab)

    def _diff_tab(self) -> None:
        from daintree_tui.tui.screens import later  # loaded with the tabs (called through `then`)

        name = self.view.selected
        if name:
            later.show_tab(self.view.pane, "diff-tab")
            self.diff(name)

    def events_tab(self) -> None:
        """The events tab (`e`)."""
        from daintree_tui.tui.screens import later  # loaded with the tabs (called through `then`)

        self.then(lambda: later.show_tab(self.view.pane, "events-tab"))

    # -- zoom and the full-screen diff ---------------------------------------------------------------------------

    def full_diff(self) -> None:
        """The current worktree's diff takes the whole window, or gives it back (`D`)."""
        if self.view.zoom == FULL_DIFF:
            self.unzoom()
            return
        self.then(self._full_diff)

    def _full_diff(self) -> None:
        from daintree_tui.tui.screens import later  # loaded with the tabs (called through `then`)

        self._diff_tab()
        self.view.zoom = FULL_DIFF
        # Focus goes where it is useful, not wherever Textual moves it from the hidden lists.
        later.diff_view(self.view.pane).focus()

    def toggle_zoom(self) -> None:
        """The terminal takes the whole window, or gives it back."""
        view = self.view
        if view.zoom == ZOOMED:
            self.unzoom()
            return
        view.zoom = ZOOMED
        terminal = view.pane.terminal
        if terminal.attached:
            terminal.focus()
        else:
            view.set_focus(None)

    def unzoom(self) -> None:
        """Back from the zoomed terminal or the full-screen diff, to the lists."""
        self.view.zoom = ""
        self.view.sidebar.worktree_table.focus()

    def open_filter(self) -> None:
        self.view.sidebar.open_filter()

    def escape(self) -> None:
        """esc: out of the zoomed terminal or the full-screen diff, else the filter box cleared and closed."""
        if self.view.zoom:
            self.unzoom()
        else:
            self.view.sidebar.close_filter()
