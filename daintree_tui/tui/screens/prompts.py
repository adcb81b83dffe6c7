"""Prompts the dashboard raises on its own: an agent's approval request, trusting the repository's hooks, and
restarting sessions after the tmux server went away. Each is one coroutine run as an async worker."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from daintree_tui.tui.screens.confirm import ConfirmScreen

if TYPE_CHECKING:
    from daintree_tui.tui.screens.dashboard import Dashboard


def settle_for(screen: Dashboard) -> float:
    """How long a prompt nobody asked for ignores keys: only while the user is typing as it appears (keys meant for
    an agent answered it); a prompt that finds the keyboard quiet takes the next key at once."""
    settle = ConfirmScreen.UNASKED_SETTLE
    return settle if screen.dashboard.typing_within(settle) else 0.0


async def approval(screen: Dashboard, request: Mapping[str, object]) -> None:
    argv = request["argv"] if isinstance(request["argv"], list) else []
    body = (f"The agent in {request['worktree']} (role {request.get('role') or '-'}) asks to run:\n\n"
            f"  daintree {' '.join(map(str, argv))}\n")
    request_id = int(str(request["id"]))
    approve = await screen.app.push_screen_wait(
        ConfirmScreen(f"Approve {request['action']} from {request['worktree']}?", body, yes="Approve and run",
                      no="Reject", settle=settle_for(screen)))
    backend = screen.backend
    if approve:
        outcome = await asyncio.to_thread(backend.run_approved, request_id)
        screen.operation_done(f"Approved request {request_id}: {outcome}")
    else:
        await asyncio.to_thread(backend.services.approvals.resolve, request_id, False)
        screen.operation_done(f"Rejected request {request_id}")


async def trust(screen: Dashboard, commands: list[str]) -> None:
    change = await asyncio.to_thread(screen.backend.services.trust_change)
    if change is None:
        title = "Trust this repository's hooks?"
        body = "This repository's .daintree.toml defines hooks that run shell commands:\n\n"
    else:
        # Trusted once, then edited: say so, and show the edit (a bare "not trusted" read as never trusted).
        title = "Its .daintree.toml changed since you trusted it"
        shown = "\n".join(f"  {line}" for line in change[:200]) if change else \
            "  (no copy of the version you trusted was kept: review the whole file)"
        body = f"What changed:\n\n{shown}\n\nIts commands now:\n\n"
    body += ("\n".join(f"  {c}" for c in commands)
             + "\n\nTrust it? (recorded for you only, outside the repository; a change asks again)")
    if await screen.app.push_screen_wait(ConfirmScreen(title, body, yes="Trust",
                                                       no="Not now", settle=settle_for(screen))):
        await asyncio.to_thread(screen.backend.services.trust)
        screen.operation_done("Trusted .daintree.toml: its hooks will run")


async def server_lost(screen: Dashboard, vanished: Mapping[str, float | None]) -> None:
    """Sessions vanished all at once (name -> when the run seen had started): if the tmux server died under
    them, offer to start them again."""
    lost = await asyncio.to_thread(screen.backend.services.lost_sessions, vanished)
    if not lost:
        return
    screen.notify(f"The tmux server stopped: {len(lost)} session(s) ended", severity="error", timeout=10)
    body = ("The sessions' tmux server is gone (killed or crashed). Their worktrees and any uncommitted work "
            "are untouched.\n\n" + "\n".join(f"  {n} ({a})" for n, a in lost.items())
            + "\n\nStart them again with the same agents?")
    if not await screen.app.push_screen_wait(ConfirmScreen("The tmux server stopped", body,
                                                           yes="Restart sessions", no="Not now",
                                                           settle=settle_for(screen))):
        return
    size = screen.terminal_size()

    def restart() -> None:
        for name, agent in lost.items():
            screen.backend.start_session(name, agent, size)

    await asyncio.to_thread(restart)
    screen.operation_done(f"Restarted {len(lost)} session(s)")
