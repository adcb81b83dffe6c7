"""The session events of tmux control mode."""

from __future__ import annotations

from daintree_tui.sessions.control import SessionEvents


def drain(source: SessionEvents) -> list[object]:
    out: list[object] = []
    while not source.events.empty():
        out.append(source.events.get())
    return out
