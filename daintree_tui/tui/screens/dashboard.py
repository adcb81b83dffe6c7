"""What the dashboard's flows, prompts and action parts see of the main screen (`MainScreen` is the one that has it).

A narrow interface, not a base class: the screen's state read-only (the screen and its own parts set it), the
services, the terminal, and the few calls an operation makes as it goes (release the session it is about to stop,
say it is done, show its diff). Nothing of the screen's layout, widgets or other parts.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.app import App
    from textual.notifications import SeverityLevel

    from daintree_tui.core.models import Task, WorktreeEntry
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.tui.app import DaintreeApp
    from daintree_tui.tui.backend import Backend
    from daintree_tui.tui.widgets.terminal import TerminalView


class Dashboard(Protocol):
    """The main screen, as an operation sees it."""

    @property
    def app(self) -> App[object]: ...

    @property
    def dashboard(self) -> DaintreeApp:
        """The app, with what the dashboard adds (attach, announce, what it has told the user)."""
        ...

    @property
    def backend(self) -> Backend: ...

    @property
    def terminal(self) -> TerminalView:
        """The terminal of the current worktree."""
        ...

    @property
    def tasks(self) -> tuple[Task, ...]: ...

    @property
    def entries(self) -> tuple[WorktreeEntry, ...]: ...

    @property
    def sessions(self) -> dict[str, SessionInfo]: ...

    @property
    def selected(self) -> str | None:
        """The current worktree."""
        ...

    def entry(self, name: str | None) -> WorktreeEntry | None: ...

    def terminal_size(self) -> tuple[int, int]:
        """The size a session started now should have: the terminal's."""
        ...

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...

    def run_flow(self, flow: Coroutine[Any, Any, None], description: str) -> None:
        """Run a flow as an async worker; its failure becomes one notification."""
        ...

    def operation_done(self, message: str, focus: str | None = None, removed: str | None = None) -> None:
        """Say `message`, read the project again, and make `focus` the current worktree (and type into it)."""
        ...

    def attach_and_focus(self, name: str) -> None:
        """Make `name` the current worktree and give its session the keys."""
        ...

    def release(self, name: str) -> None:
        """Stop showing `name` (before its session is stopped or its worktree removed)."""
        ...

    def reattach(self, name: str) -> None:
        """Show `name` again after an operation that released it was refused."""
        ...

    def checks_now(self, name: str) -> None:
        """Read `name`'s CI checks now, whatever their age (its pull request was just opened)."""
        ...

    def show_diff(self, name: str, text: str) -> None:
        """Show `name`'s diff in the diff tab (if it is still the current worktree)."""
        ...
