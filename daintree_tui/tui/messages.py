"""Messages the dashboard's feed posts to the screen. High-rate ones coalesce (`can_replace`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from textual.message import Message

from daintree_tui.core.worktrees import Facts
from daintree_tui.tui.backend import Snapshot

if TYPE_CHECKING:
    from daintree_tui.services.ci import ChecksReport
    from daintree_tui.sessions.manager import SessionInfo


class SnapshotLoaded(Message):
    """Tasks and worktrees as on disk now."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotLoaded)


class FactsLoaded(Message):
    """Live git facts (dirty count, ahead/behind) for worktrees."""

    def __init__(self, facts: dict[str, Facts]) -> None:
        super().__init__()
        self.facts = facts

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FactsLoaded)


class SessionsPolled(Message):
    """Every session's status, and previews of those not on screen."""

    def __init__(self, sessions: list[SessionInfo], previews: dict[str, str],
                 approvals: Sequence[Mapping[str, object]] | None = None,
                 today: Mapping[str, object] | None = None) -> None:
        super().__init__()
        self.sessions = sessions
        self.previews = previews
        self.approvals = approvals or []
        self.today = today
        """Tokens and cost since midnight, when read in this poll (every `DashboardFeed.today_interval`)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SessionsPolled)


class FilesChanged(Message):
    """Something under .tasks/ or .worktrees/ changed (debounced by watchfiles)."""

    def __init__(self, state_changed: bool, worktrees_touched: frozenset[str], events_changed: bool = False) -> None:
        super().__init__()
        self.state_changed = state_changed
        self.worktrees_touched = worktrees_touched
        self.events_changed = events_changed
        """Only the event log grew (each status change of each session appends to it): no list to read again."""

    def can_replace(self, message: Message) -> bool:
        # A newer notice absorbs an older one that was not handled yet: nothing it said is lost.
        if not isinstance(message, FilesChanged):
            return False
        self.state_changed = self.state_changed or message.state_changed
        self.events_changed = self.events_changed or message.events_changed
        self.worktrees_touched = self.worktrees_touched | message.worktrees_touched
        return True


class WatchInPlace(Message):
    """The worktrees' file watch is in place (`ReadsBeforeWatch` knows since when): read what it may have missed."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, WatchInPlace)


class EventsAppended(Message):
    """New lines of events.jsonl."""

    def __init__(self, records: list[dict[str, object]]) -> None:
        super().__init__()
        self.records = records


class Notice(Message):
    """Something the user should read (auto queue started a task, reconcile repaired things)."""

    def __init__(self, text: str, title: str = "") -> None:
        super().__init__()
        self.text = text
        self.title = title


class TrustNeeded(Message):
    """The repository's config defines hooks the user has not trusted yet."""

    def __init__(self, commands: list[str]) -> None:
        super().__init__()
        self.commands = commands


class DiskLoaded(Message):
    """Disk use per worktree, measured in the background (cached for minutes)."""

    def __init__(self, disk: dict[str, int]) -> None:
        super().__init__()
        self.disk = disk

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DiskLoaded)


class RadarLoaded(Message):
    """The conflict radar's last prediction: per worktree, (the other worktree or branch, the files)."""

    def __init__(self, found: dict[str, tuple[tuple[str, tuple[str, ...]], ...]]) -> None:
        super().__init__()
        self.found = found

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RadarLoaded)


class ChecksLoaded(Message):
    """The CI checks of every worktree with a pull request, as gh last said (`ChecksWatch`)."""

    def __init__(self, checks: dict[str, ChecksReport]) -> None:
        super().__init__()
        self.checks = checks

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ChecksLoaded)
