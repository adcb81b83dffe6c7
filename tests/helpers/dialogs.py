"""A dialog on its own, in a bare App styled as the dashboard styles it."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.screen import ModalScreen

from daintree_tui.tui.app import DIALOG_BREAKPOINTS, STYLES


class Host(App[None]):
    """Pushes one dialog, styled as the dashboard styles it, and keeps what it was dismissed with."""

    CSS_PATH = STYLES

    def __init__(self, dialog: ModalScreen[Any]) -> None:
        super().__init__()
        self.dialog = dialog
        self.results: list[Any] = []

    def on_mount(self) -> None:
        self.push_screen(self.dialog, self.results.append)


class DashboardHost(Host):
    """A dialog alone, with the dashboard's styles and its breakpoints (a short window gets `-short`)."""

    VERTICAL_BREAKPOINTS = DIALOG_BREAKPOINTS
