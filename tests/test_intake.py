"""What a poll of the sessions means for the dashboard (`PollReader`), read without starting the UI."""

from __future__ import annotations

import time

from daintree_tui.sessions.manager import SessionInfo
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.tui.messages import SessionsPolled
from daintree_tui.tui.screens.intake import PollReader


def session(name: str, status: SessionStatus, started_at: float = 1.0) -> SessionInfo:
    return SessionInfo(name=name, session=f"dt-{name}", agent="shell", status=status, exit_code=None, pid=None,
                       started_at=started_at, log="", persistent=True)


def test_a_waiting_session_is_announced_once_and_never_to_the_one_typing_into_it() -> None:
    reader = PollReader(since=time.time())
    waiting = SessionsPolled([session("a", SessionStatus.WAITING), session("b", SessionStatus.WAITING)], {})
    first = reader.take(waiting, {}, typing_in="b")
    assert [name for name, _ in first.announce] == ["a"]
    assert reader.take(waiting, first.sessions, typing_in=None).announce == []  # said once per change


def test_the_session_on_screen_previews_what_the_terminal_shows() -> None:
    reader = PollReader(since=time.time())
    poll = reader.take(SessionsPolled([session("a", SessionStatus.RUNNING)], {"a": "captured"}), {},
                       shown="a", shown_text=lambda: "on screen")
    assert poll.previews == {"a": "on screen"}


def test_an_approval_request_is_new_once() -> None:
    reader = PollReader(since=time.time())
    request = {"id": 7, "worktree": "a", "action": "merge", "argv": ["worktree", "merge", "a"]}
    message = SessionsPolled([session("a", SessionStatus.RUNNING)], {}, approvals=[request])
    assert reader.take(message, {}).approvals == [request]
    assert reader.take(message, {}).approvals == []


def test_sessions_that_all_vanish_at_once_are_said_lost_with_their_runs() -> None:
    reader = PollReader(since=time.time())
    before = {"a": session("a", SessionStatus.RUNNING, 5.0), "b": session("b", SessionStatus.WAITING, 6.0)}
    assert reader.take(SessionsPolled([], {}), before).lost == {"a": 5.0, "b": 6.0}
    one_left = SessionsPolled([session("a", SessionStatus.RUNNING, 5.0)], {})
    assert reader.take(one_left, before).lost == {}  # one went: removed or stopped, not the server
