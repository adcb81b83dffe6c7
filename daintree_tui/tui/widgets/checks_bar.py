"""ChecksBar: under the session title, the CI checks of the current worktree's pull request: which failed (and the
key that sends them to its agent), or that they run or passed, and when gh said so. Hidden for a worktree without
a pull request, and without gh."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from daintree_tui.core.validate import escape_controls
from daintree_tui.tui.widgets.plain import first_of

if TYPE_CHECKING:
    from daintree_tui.services.ci import ChecksReport

NAMES_SHOWN = 4
STATE_WORDS = {"fail": ("✗ failed", "bold red"), "pending": ("… running", "yellow"), "pass": ("✓ passed", "green"),
               "none": ("no checks", "dim")}


def describe(report: ChecksReport, send_key: str) -> Text:
    word, style = STATE_WORDS[report.state]
    text = Text(" CI ", style="bold").append(word, style=style)
    failed = report.failed
    if failed:
        # Check names are the repository's CI configuration's, which the agent's branch can change: text only.
        text.append(f": {first_of([c.name for c in failed], NAMES_SHOWN)}", style="bold")
        text.append(f"  {send_key} sends them to the agent", style="italic")
    elif report.checks:
        text.append(f" ({len(report.checks)} check{'s' if len(report.checks) != 1 else ''})", style="dim")
    said = time.strftime("%H:%M", time.localtime(report.checked_at)) if report.checked_at else "?"
    text.append(f"  gh at {said}" + (" (no answer since)" if report.stale else ""), style="dim")
    text.append(f"  {escape_controls(report.pr)}", style="dim")
    return text


class ChecksBar(Static):
    """One line with the current worktree's CI checks."""

    DEFAULT_CSS = """
    ChecksBar { height: 1; width: 1fr; display: none; }
    ChecksBar.-checks { display: block; }
    """

    checks: reactive[dict[str, ChecksReport]] = reactive(dict, init=False, repaint=False)
    """The CI checks of every worktree with a pull request."""
    selected: reactive[str | None] = reactive(None, init=False, repaint=False)

    def __init__(self, *, send_key: str = "P", id: str | None = None) -> None:
        """Args:
            send_key: The key that sends the failed checks to the agent, as the user set it.
        """
        super().__init__(id=id)
        self.send_key = send_key
        self._shown: ChecksReport | None = None

    def _changed(self) -> None:
        report = self.checks.get(self.selected or "")
        if report == self._shown:
            return
        self._shown = report
        self.set_class(report is not None, "-checks")  # a class, not `display`: the screen's layouts may hide it
        if report is not None:
            self.update(describe(report, self.send_key))

    watch_checks = watch_selected = _changed
