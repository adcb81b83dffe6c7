"""Warnings from the layers below (a junk record skipped, an unknown config key) as toasts while the dashboard
runs. The CLI prints them on stderr, and a line written there lands on top of the dashboard's screen, or, before
it starts, behind it."""

from __future__ import annotations

import sys
from typing import Any

from textual.app import App

from daintree_tui.core.log import on_first_warning
from daintree_tui.core.validate import escape_controls


class WarningToasts:
    """From the first warning on, each distinct one is a toast of `app` (once: a bad record is met again at every
    read). Those from before the app runs wait for `show_pending`; those after it stopped go to stderr."""

    def __init__(self, app: App[Any]) -> None:
        self.app = app
        self.shown: set[str] = set()
        self.pending: list[str] = []
        self.started = False
        on_first_warning(self._install)

    def show_pending(self) -> None:
        """The app runs now: the warnings that came before it, as toasts."""
        self.started = True
        for message in self.pending:
            self._toast(message)
        self.pending.clear()

    def show(self, message: str) -> None:
        if message in self.shown:
            return
        self.shown.add(message)
        if not self.started:
            self.pending.append(message)
        elif self.app.is_running:
            self._toast(message)  # notify posts a message: safe from the workers' threads too
        else:
            print(f"warning: {escape_controls(message)}", file=sys.stderr)

    def _toast(self, message: str) -> None:
        self.app.notify(message, title="warning", severity="warning", timeout=10, markup=False)

    def _install(self) -> None:
        import logging

        show = self.show

        class ToastHandler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                show(record.getMessage())

        logger = logging.getLogger("daintree")
        logger.handlers = [ToastHandler()]
        logger.setLevel(logging.WARNING)
        logger.propagate = False
