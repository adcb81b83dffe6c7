"""What the dashboard does for a person who was away: the terminal's own notification for a notice the watcher left
(where no desktop session exists), and the sessions lost with their tmux server (a reboot), resumed or offered.

The feed's workers call `look_after_restart` and `terminal_notices`; their messages are handled by the app (the
terminal notification) and the main screen (the offer, a flow of `offer_resume`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from textual.message import Message

from daintree_tui.services import resume
from daintree_tui.services.notify import claim_terminal_notices
from daintree_tui.tui.messages import Notice
from daintree_tui.tui.screens.confirm import ConfirmScreen

if TYPE_CHECKING:
    from daintree_tui.tui.backend import Backend
    from daintree_tui.tui.screens.dashboard import Dashboard


class TerminalNotices(Message):
    """Notices this dashboard took to show as its terminal's own notifications (OSC 777 / OSC 9)."""

    def __init__(self, notices: Sequence[dict[str, Any]]) -> None:
        super().__init__()
        self.notices = list(notices)


class ResumeOffered(Message):
    """Sessions that vanished with their tmux server before this dashboard started (a reboot)."""

    def __init__(self, lost: Sequence[resume.LostSession]) -> None:
        super().__init__()
        self.lost = list(lost)


def terminal_notices(backend: Backend) -> TerminalNotices | None:
    notices = claim_terminal_notices(backend.project)
    return TerminalNotices(notices) if notices else None


def _said(results: Sequence[resume.Resumed]) -> str:
    done = [r.lost.name for r in results if r.error is None]
    failed = [f"{r.lost.name}: {r.error}" for r in results if r.error is not None]
    text = f"Resumed {len(done)} session(s) lost with the tmux server: {', '.join(done)}" if done else ""
    return "\n".join([text, *failed]).strip()


def _poke(backend: Backend) -> None:
    if backend.live is not None:
        backend.live.events.poke()  # the first session of a server has no control client to tell yet


def look_after_restart(backend: Backend) -> Message | None:
    """With `sessions.resume_after_restart`, resume the lost sessions now (a notice says so); else offer it."""
    lost = resume.lost_sessions(backend.services)
    if not lost:
        return None
    if not backend.project.config.resume_after_restart:
        return ResumeOffered(lost)
    results = resume.resume(backend.services, lost)
    _poke(backend)
    return Notice(_said(results), title="After a restart") if results else None


async def offer_resume(screen: Dashboard, lost: Sequence[resume.LostSession]) -> None:
    from daintree_tui.tui.screens.prompts import settle_for

    lines = "\n".join(f"  {item.name} ({item.agent}{'' if item.can_resume else ', starts over: no resume'})"
                      for item in lost)
    body = ("These sessions ended with their tmux server (the machine restarted, or the server was killed). "
            "Their worktrees and any uncommitted work are untouched.\n\n" + lines
            + "\n\nStart them again, each continuing its agent's last conversation in its own worktree? "
              "(`sessions.resume_after_restart = true` does this without asking)")
    backend = screen.backend
    if not await screen.app.push_screen_wait(ConfirmScreen("Resume after a restart?", body, yes="Resume",
                                                           no="Not now", settle=settle_for(screen))):
        await asyncio.to_thread(resume.decline, backend.services, lost)
        return
    size = screen.terminal_size()
    results = await asyncio.to_thread(resume.resume, backend.services, lost, size)
    _poke(backend)
    screen.operation_done(_said(results))
