"""The main screen's parts that are not on its first frame: the events and diff tabs, and the footer.

The first useful screen is the lists with each session's status, the session title and the terminal. Built with
it, the tabs and the footer cost it about a third of its time (bench 2 and 2b): their imports (a `RichLog` pulls
in `rich.pretty` and attrs), their widget classes' CSS, and the footer's one widget per key, each styled again as
it mounts. The main screen holds their places with empty slots of their size, so nothing moves when they come, and
mounts them (`DashboardLayout.mount`) once the first status is on screen, or at once when a key needs one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from textual.reactive import Reactive
from textual.widget import Widget
from textual.widgets import Footer, TabbedContent, TabPane

from daintree_tui.tui.widgets.diff_view import DiffView
from daintree_tui.tui.widgets.events_log import EventsLog


def bottom_tabs(selected: Reactive[str | None], clock_format: Callable[[float], str] | None,
                early_events: Iterable[dict[str, Any]]) -> TabbedContent:
    """The events and diff tabs, both following the screen's `selected`; the events log starts with the records
    that arrived before it. Called from the screen's own message loop: `data_bind` binds to the screen running."""
    events = EventsLog(id="events", clock_format=clock_format).data_bind(selected)
    events.add(early_events)
    # No `initial`: the first pane (events) is shown, as it would be; an initial tab is looked up as the tabs
    # mount, which fails (an error on screen) when the dashboard quits in the middle of mounting them.
    tabs = TabbedContent(id="bottom")
    # What `with TabbedContent(): with TabPane(...)` does in a compose method.
    tabs.compose_add_child(TabPane("Events", events, id="events-tab"))
    tabs.compose_add_child(TabPane("Diff", DiffView(id="diff").data_bind(selected), id="diff-tab"))
    return tabs


def footer_style(width: int) -> tuple[bool, bool]:
    """(compact, with the palette hint) for a window `width` cells wide. Narrow windows get a compact footer
    without the palette hint (ctrl+p still works; help lists it)."""
    return width < 120, width >= 100


def footer(width: int) -> Footer:
    compact, palette = footer_style(width)
    return Footer(compact=compact, show_command_palette=palette)


def fit_footer(bar: Footer, width: int) -> None:
    """Restyle the footer for a new window width."""
    compact, palette = footer_style(width)
    if (bar.compact, bar.show_command_palette) != (compact, palette):
        bar.compact = compact
        bar.show_command_palette = palette
        bar.refresh(recompose=True)  # the palette hint only changes when the footer composes again


def bottom_tab(pane: Widget) -> str:
    """The active tab's id (`events-tab` or `diff-tab`) of the tabs mounted in `pane`."""
    return pane.query_one("#bottom", TabbedContent).active


def show_tab(pane: Widget, tab: str) -> None:
    pane.query_one("#bottom", TabbedContent).active = tab


def diff_view(pane: Widget) -> DiffView:
    return pane.query_one(DiffView)


def events_log(pane: Widget) -> EventsLog | None:
    """The events log; None while the screen is being torn down (its children go before its last messages)."""
    return next(iter(pane.query(EventsLog)), None)
