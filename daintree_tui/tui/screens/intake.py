"""What the dashboard's feed found, taken into the main screen's state: the local rows, the sessions, the events.

A part the main screen holds (`MainScreen.intake`); the screen hands it the feed's messages. A poll of the
sessions is read apart from the screen (`PollReader`, no widget involved): each session's status settled
(`StatusHysteresis`), the rows' previews (an exited agent's with why it ended), which sessions to announce, which
approval requests are new, whether every session vanished at once. Then it is applied: the state set, the
announcements made, the prompts raised. The remote hosts' rows are `HostRows`' (screens/hosts.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from textual.css.query import NoMatches
from textual.notifications import SeverityLevel

from daintree_tui.core.models import Task, WorktreeEntry
from daintree_tui.sessions.last_words import telling_line, with_last_words
from daintree_tui.sessions.status import SessionStatus, StatusHysteresis
from daintree_tui.tui.agents_view import BudgetAlerts, unsandboxed_notice, usage_text
from daintree_tui.tui.hosts import is_remote
from daintree_tui.tui.screens import prompts
from daintree_tui.tui.screens.dashboard import Dashboard

if TYPE_CHECKING:
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.tui.backend import Snapshot
    from daintree_tui.tui.messages import SessionsPolled
    from daintree_tui.tui.screens.hosts import HostRows
    from daintree_tui.tui.screens.layout import DashboardLayout


@dataclass(frozen=True)
class Poll:
    """One poll, as the screen takes it in."""

    sessions: dict[str, SessionInfo]
    """Every local session, its status settled."""
    previews: dict[str, str]
    """New screen texts of sessions (the one on display: as the terminal shows it)."""
    announce: list[tuple[str, SessionInfo]] = field(default_factory=list)
    """Sessions that started waiting, stalled or exited since last said."""
    approvals: list[Mapping[str, object]] = field(default_factory=list)
    """Approval requests not seen before."""
    lost: dict[str, float | None] = field(default_factory=dict)
    """When every session vanished at once (the tmux server may have died): name -> when its run started."""
    title: str | None = None
    """The header, with what all agents spent today, when this poll read it."""


@dataclass(frozen=True)
class EventNotice:
    text: str
    title: str
    severity: SeverityLevel


class IntakeView(Dashboard, Protocol):
    """What the intake sets on its screen."""

    tasks: tuple[Task, ...]
    entries: tuple[WorktreeEntry, ...]
    sessions: dict[str, SessionInfo]
    sessions_known: bool
    previews: dict[str, str]
    title: str | None

    @property
    def terminal_focused(self) -> bool: ...


class FeedIntake:
    """Takes the feed's findings into the screen's state; what it keeps between polls is per session."""

    def __init__(self, view: IntakeView, remote: HostRows, layout: DashboardLayout, since: float) -> None:
        """Args:
            view: The screen.
            remote: The remote rows, kept after the local ones.
            layout: Where the events log is (once mounted).
            since: When the dashboard started: budget and sandbox notices are for events after it.
        """
        self.view = view
        self.remote = remote
        self.layout = layout
        self.reader = PollReader(since)

    @property
    def hysteresis(self) -> StatusHysteresis:
        return self.reader.hysteresis

    def snapshot(self, snapshot: Snapshot) -> None:
        self.view.tasks = snapshot.tasks
        self.view.entries = self.remote.merged_entries(snapshot.entries)

    def events(self, records: list[dict[str, object]]) -> None:
        self.layout.add_events(records)
        for notice in self.reader.event_notices(records):
            self.view.notify(notice.text, title=notice.title, severity=notice.severity, timeout=15)

    def sessions_polled(self, message: SessionsPolled) -> bool:
        """A poll taken in; False when the app is closing (its widgets went before the feed's last poll arrived:
        seen under load)."""
        view = self.view
        try:
            terminal = view.terminal
        except NoMatches:
            return False
        before = {name: info for name, info in view.sessions.items() if not is_remote(name)}
        poll = self.reader.take(message, before, shown=terminal.worktree if terminal.attached else None,
                                shown_text=terminal.screen_text,
                                typing_in=terminal.worktree if view.terminal_focused else None)
        view.sessions = self.remote.merged_sessions(poll.sessions)
        view.sessions_known = True  # after the sessions: the terminal then says whether this worktree has one
        if poll.previews:
            view.previews = {**view.previews, **poll.previews}
        if poll.title is not None:
            view.title = poll.title
        view.dashboard.announce(poll.announce)
        for request in poll.approvals:
            view.run_flow(prompts.approval(view, request), "approval")
        if poll.lost:
            view.run_flow(prompts.server_lost(view, poll.lost), "check the tmux server")
        return True


class PollReader:
    """What polls and event records mean, read without the screen (tests give it messages); it keeps, per
    session, what that needs from one poll to the next."""

    def __init__(self, since: float) -> None:
        self.hysteresis = StatusHysteresis()
        self.budget_alerts = BudgetAlerts(since=since)
        self._announced: dict[str, SessionStatus] = {}
        self._seen_requests: set[int] = set()
        self._last_words: dict[tuple[str, float], str] = {}

    def take(self, message: SessionsPolled, before: Mapping[str, SessionInfo], *, shown: str | None = None,
             shown_text: Callable[[], str] = str, typing_in: str | None = None) -> Poll:
        """A poll's sessions against `before` (the local sessions shown until now). `shown` is the session the
        terminal shows (`shown_text` reads its screen); `typing_in` the one the user types into, if any."""
        now = time.monotonic()
        settled = {}
        for info in message.sessions:
            status = self.hysteresis.settle(info.name, info.status, now)
            settled[info.name] = info if status == info.status else replace(info, status=status)
        self.hysteresis.forget(set(before) - set(settled))
        previews = dict(message.previews)
        if shown is not None and shown in settled:
            # The session on screen is not captured (the terminal shows it): its row follows the terminal.
            previews[shown] = shown_text()
        for name, text in previews.items():
            ended = settled.get(name)
            if ended is not None and ended.status == SessionStatus.EXITED and ended.log:
                previews[name] = with_last_words(text, self.last_words(name, ended))
        title = None
        if message.today is not None:  # the header: what all agents spent today
            spent = usage_text(message.today)
            title = f"daintree · today {spent}" if spent else "daintree"
        vanished = [n for n in before if n not in settled]
        return Poll(
            sessions=settled, previews=previews, title=title,
            announce=[(name, info) for name, info in settled.items() if self.to_announce(name, info, typing_in)],
            approvals=[request for request in message.approvals if self.first_sight(request)],
            lost={n: before[n].started_at for n in vanished} if vanished and not settled else {},
        )

    def last_words(self, name: str, info: SessionInfo) -> str:
        """The line that says why an exited agent ended, of its last ones (its log is read once per run: it ends
        with the agent)."""
        run = (name, info.started_at)
        if run not in self._last_words:
            self._last_words[run] = telling_line(Path(info.log))
        return self._last_words[run]

    def to_announce(self, name: str, info: SessionInfo, typing_in: str | None) -> bool:
        """Waiting, stalled or exited, once per change, including a session already waiting when first seen; never
        for the session being typed into."""
        status = info.status
        if status not in (SessionStatus.WAITING, SessionStatus.EXITED, SessionStatus.STALLED):
            self._announced.pop(name, None)
            return False
        if self._announced.get(name) == status:
            return False
        self._announced[name] = status
        return not (status == SessionStatus.WAITING and typing_in == name)

    def first_sight(self, request: Mapping[str, object]) -> bool:
        request_id = int(str(request["id"]))
        if request_id in self._seen_requests:
            return False
        self._seen_requests.add(request_id)
        return True

    def event_notices(self, records: list[dict[str, object]]) -> list[EventNotice]:
        """What new event records tell the user: budgets crossed, and sessions started without a sandbox (only
        those since the dashboard started: the first read brings the last 200 records)."""
        notices = [EventNotice(text, "Budget", severity) for text, severity in self.budget_alerts.new(records)]
        for record in records:
            ts = record.get("ts")
            unsandboxed = unsandboxed_notice(record) if isinstance(ts, int | float) and \
                ts >= self.budget_alerts.since else None
            if unsandboxed:
                notices.append(EventNotice(unsandboxed, "Sandbox", "warning"))
        return notices
