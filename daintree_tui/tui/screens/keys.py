"""The main screen's table of keys, made of its parts' methods.

`MainScreen` lists its `action_*` one a line, each the method of the part that does the work, so the table reads
like the bindings (`bindings.DASHBOARD_BINDINGS`). An action on the current worktree is marked `needs_worktree`
(the screen's `check_action`, the help and the palette read the mark); on a remote row it goes to the hosts part,
or is refused there with the `--host` command to run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Protocol

from textual.binding import BindingType

from daintree_tui.tui.bindings import KeyRow, key_rows, needs_worktree
from daintree_tui.tui.hosts import is_remote
from daintree_tui.tui.screens.actions import WorktreeActions, every_binding
from daintree_tui.tui.screens.hosts import HostRows
from daintree_tui.tui.screens.layout import DashboardLayout

if TYPE_CHECKING:
    from daintree_tui.tui.app import DaintreeApp


class Parts(Protocol):
    """The screen, as its key table sees it: the current worktree and the parts that act."""

    @property
    def selected(self) -> str | None: ...

    @property
    def actions(self) -> WorktreeActions: ...

    @property
    def remote(self) -> HostRows: ...

    @property
    def layout_part(self) -> DashboardLayout: ...


Action = Callable[[Parts], None]


def on_worktree(local: Callable[[WorktreeActions, str], None],
                remote: Callable[[HostRows, str], None] | None = None, *, remote_too: bool = False) -> Action:
    """The action of a key that acts on the current worktree: `local`, of the actions part; on a remote row,
    `remote` of the hosts part, `local` as well (`remote_too`), or a notice naming the `--host` command to run
    there (the others: commit, merge... are the host's own to do)."""

    @needs_worktree
    def action(screen: Parts) -> None:
        name = str(screen.selected)
        if screen.remote.unreached(name):
            return
        if remote is not None and is_remote(name):
            remote(screen.remote, name)
        elif remote_too or not screen.remote.refuse(local.__name__, name):
            local(screen.actions, name)

    action.__doc__ = local.__doc__
    return action


def on_local_view(method: Callable[[DashboardLayout], None], action: str) -> Action:
    """The action of a key that shows the current worktree another way (its diff): refused on a remote row as
    `action` is (a host's worktree is shown by its own CLI)."""

    @needs_worktree
    def act(screen: Parts) -> None:
        if not screen.remote.unreached(screen.selected) and not screen.remote.refuse(action, screen.selected):
            method(screen.layout_part)

    act.__doc__ = method.__doc__
    return act


def on_actions(method: Callable[[WorktreeActions], None]) -> Action:
    """The action of a key the actions part does as it is (the tasks list's, the auto queue's)."""

    def action(screen: Parts) -> None:
        method(screen.actions)

    action.__doc__ = method.__doc__
    return action


def on_layout(method: Callable[[DashboardLayout], None]) -> Action:
    """The action of a key that changes the layout (zoom, the filter box, the tabs)."""

    def action(screen: Parts) -> None:
        method(screen.layout_part)

    action.__doc__ = method.__doc__
    return action


class KeyTable(Protocol):
    """The screen, as its help sees it: its bindings and the app's."""

    BINDINGS: ClassVar[list[BindingType]]

    @property
    def dashboard(self) -> DaintreeApp: ...

    def every_binding(self) -> list[BindingType]: ...

    def help_rows(self) -> list[KeyRow]: ...


def screen_bindings(screen: KeyTable) -> list[BindingType]:
    """Every key of the dashboard: the terminal's, the screen's, the palette's and the app's, in help order."""
    app = screen.dashboard
    return every_binding(screen.BINDINGS, app.BINDINGS, app.COMMAND_PALETTE_BINDING)


def help_rows(screen: KeyTable) -> list[KeyRow]:
    """Every key of the dashboard as the help screen and the palette list it (the user's keymap applied)."""
    app = screen.dashboard
    return key_rows(screen.every_binding(), app.keymap, screen, app.get_key_display)


def show_help(screen: KeyTable) -> None:
    """The help screen: every key, as the user has them."""
    from daintree_tui.tui.screens.help import HelpScreen  # a dialog: imported when first opened

    screen.dashboard.push_screen(HelpScreen(screen.help_rows()))
