"""Dialog flows of the dashboard, each one coroutine run as an async worker.

A flow asks (`await app.push_screen_wait(Dialog(...))`), does the blocking work off the event loop
(`await asyncio.to_thread(...)`) and reports through `screen.operation_done`. Failures raise; the screen's
`Worker.StateChanged` handler turns them into one notification.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from textual.screen import ModalScreen

from daintree_tui.core.errors import DaintreeError, OperationError
from daintree_tui.core.validate import files as count_files
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.tui.screens.confirm import ConfirmScreen

if TYPE_CHECKING:
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.tui.screens.agent_picker import AgentChoice
    from daintree_tui.tui.screens.bakeoff_new import BakeoffRequest
    from daintree_tui.tui.screens.dashboard import Dashboard
    from daintree_tui.tui.screens.new_task import NewTask

T = TypeVar("T")
FAILED_LINES = 8
"""How many of a failed agent's last lines the restart question shows."""


def ask(screen: Dashboard, dialog: ModalScreen[T]) -> asyncio.Future[T | None]:
    """Push `dialog` now and return its answer to await. Pushing in the key's own handler, not once a worker
    has started, means keys typed right after it (`n` then the subject) land in the dialog, never in the
    dashboard's bindings."""
    answer: asyncio.Future[T | None] = asyncio.get_running_loop().create_future()

    def done(result: T | None) -> None:
        if not answer.done():
            answer.set_result(result)

    screen.app.push_screen(dialog, done)
    return answer


async def new_task(screen: Dashboard, dialog: asyncio.Future[NewTask | None]) -> None:
    backend = screen.backend
    new = await dialog
    if new is None:
        return
    if not new.start:
        task = await asyncio.to_thread(backend.create_task, new.subject, new.description)
        screen.operation_done(f"Created task {task.id}")
        return
    size = screen.terminal_size()
    created = await asyncio.to_thread(backend.quick_create, new.subject, new.description, new.agent, new.base, size)
    assert created.task is not None
    task, entry, info = created.task, created.entry, created.session
    screen.operation_done(f"Task {task.id} → worktree {entry.name}" + (f" with {info.agent}" if info else ""),
                          focus=entry.name)
    chose_default = new.agent in (None, "", backend.default_agent())
    if info is not None and chose_default and not screen.dashboard.told_default_agent:
        # Said once, and only when the agent was the default, not one picked in the dialog.
        screen.dashboard.told_default_agent = True
        source = "default_agent in config" if backend.project.config.default_agent else \
            "no agent CLI is installed" if info.agent == "shell" else \
            "the first installed of claude, codex, gemini, opencode, aider"
        screen.notify(f"Quick-create started {info.agent} ({source}). To change it: set default_agent in "
                      ".daintree.toml, or pick an agent in the n dialog; s restarts with another.",
                      title="Agent", timeout=12)


async def start_for_task(screen: Dashboard, task_id: int) -> None:
    created = await asyncio.to_thread(screen.backend.start_for_task, task_id, screen.terminal_size())
    name, agent = created.entry.name, created.session.agent if created.session else "?"
    screen.operation_done(f"Task {task_id} → worktree {name} with {agent}", focus=name)


async def start_session(screen: Dashboard, name: str, agent: str | None, restart: bool,
                        resume: bool = False) -> None:
    size = screen.terminal_size()
    if restart:
        if agent is not None:  # checked before the terminal lets go: it stays on the running agent on error
            await asyncio.to_thread(screen.backend.check_agent, agent)
        screen.release(name)
    try:
        info = await asyncio.to_thread(screen.backend.start_session, name, agent, size, restart, resume)
    except Exception:
        if restart:  # refused before the old session was stopped: show it again
            screen.reattach(name)
        raise
    screen.operation_done(f"{'Resumed' if resume else 'Started'} {info.agent} in {name}", focus=name)


async def restart_failed(screen: Dashboard, name: str, info: SessionInfo) -> None:
    """Enter on an agent that failed again after enter restarted it: its exit code and last lines, then start it
    again only if asked (Cancel is focused, so a second enter does not restart it)."""
    from daintree_tui.sessions.last_words import last_output_lines

    lines = await asyncio.to_thread(last_output_lines, Path(info.log), FAILED_LINES) if info.log else []
    code = f"exited ({info.exit_code})" if info.exit_code is not None else "exited"
    said = "\n".join(f"  {line}" for line in lines) or "  (it printed nothing)"
    body = (f"Its last lines:\n\n{said}\n\nStarting it again runs the same command; s picks another agent, and "
            f"`daintree session log {name}` has all it printed.")
    again = await screen.app.push_screen_wait(ConfirmScreen(f"{info.agent} {code} in {name}", body,
                                                            yes=f"Start {info.agent} again"))
    if again:
        await start_session(screen, name, info.agent, restart=True)


async def pick_agent(screen: Dashboard, name: str, restart: bool,
                     dialog: asyncio.Future[AgentChoice | None]) -> None:
    choice = await dialog
    if choice is None:
        return
    live = screen.sessions.get(name)
    if restart and live is not None and live.status != SessionStatus.EXITED:
        what = f"resume {choice.agent}'s last conversation" if choice.resume else f"start {choice.agent}"
        body = (f"{live.agent} is {live.status} in {name}. Stop it and {what}? Whatever it is doing now is "
                "interrupted; the worktree's files stay as they are.")
        if not await screen.app.push_screen_wait(ConfirmScreen(f"Replace the running {live.agent}?", body,
                                                               yes=f"Stop {live.agent}")):
            return
    await start_session(screen, name, choice.agent, restart, resume=choice.resume)


async def stop_session(screen: Dashboard, name: str) -> None:
    info = screen.sessions.get(name)
    if info is None or info.status == SessionStatus.EXITED:
        screen.notify(f"No agent runs in {name}", severity="warning")
        return
    body = (f"{info.agent} is {info.status} in {name}. Whatever it is doing now is interrupted; the worktree and its "
            "files stay as they are, and enter starts it again.")
    if not await screen.app.push_screen_wait(ConfirmScreen(f"Stop {info.agent}?", body, yes=f"Stop {info.agent}")):
        return
    left = await asyncio.to_thread(screen.backend.stop_session, name, info.started_at)
    if left is None:
        screen.operation_done(f"Stopped {info.agent} in {name}")
        return
    ended = "had already exited" if left.status == SessionStatus.EXITED else "is not the one asked about"
    code = f" ({left.exit_code})" if left.status == SessionStatus.EXITED and left.exit_code is not None else ""
    screen.notify(f"Not stopped: {name}'s {info.agent} {ended}{code}", severity="warning")


def keep_question(name: str, host: str | None = None) -> ConfirmScreen:
    """Keeping cannot be undone (`active -> kept`): `k` is also where a vim user's hand goes to move up."""
    where = f" on host {host}" if host else ""
    return ConfirmScreen(
        f"Keep {name}{where}?",
        "A kept worktree stays as it is, its files, branch, ports and session, and is no longer active; this "
        "cannot be undone. `daintree gc` may remove it later, once it is clean and old enough (14 days unless "
        "--older-than says otherwise); uncommitted work is never removed.",
        yes="Keep")


async def keep(screen: Dashboard, name: str) -> None:
    if not await screen.app.push_screen_wait(keep_question(name)):
        return
    await asyncio.to_thread(screen.backend.keep, name)
    screen.operation_done(f"Kept {name}")


async def remove(screen: Dashboard, name: str) -> None:
    dirty = await asyncio.to_thread(screen.backend.dirty_files, name)
    entry = screen.entry(name)
    from daintree_tui.tui.screens.remove import RemoveScreen  # a dialog: imported when first opened

    info = screen.sessions.get(name)
    agent = info.agent if info is not None and str(info.status) != "exited" else None
    choice = await screen.app.push_screen_wait(RemoveScreen(name, dirty, entry is not None and
                                                            entry.task_id is not None, agent))
    if choice is None:
        return
    screen.release(name)
    try:
        # Forced, it discards only the files the dialog listed: what the agent wrote while it was open refuses it.
        result = await asyncio.to_thread(screen.backend.remove, name, choice.force, choice.complete_task, dirty)
    except BaseException:
        screen.reattach(name)  # refused (a hook, dirty work): the session is still there, show it again
        raise
    warnings = "; ".join(result.warnings)
    screen.operation_done(result.message + (f" ({warnings})" if warnings else ""), removed=name)


async def commit(screen: Dashboard, name: str) -> None:
    dirty = await asyncio.to_thread(screen.backend.dirty_files, name)
    if not dirty:
        screen.notify(f"Nothing to commit in {name}: no file changed")
        return
    entry = screen.entry(name)
    task = next((t for t in screen.tasks if entry and t.id == entry.task_id), None)
    from daintree_tui.tui.screens.commit import CommitScreen  # a dialog: imported when first opened

    choice = await screen.app.push_screen_wait(CommitScreen(name, dirty, task.subject if task else ""))
    if choice is None:
        return
    result = await asyncio.to_thread(screen.backend.commit, name, choice.message, choice.all_changes)
    files = result["files"]
    screen.operation_done(f"Committed {count_files(len(files) if isinstance(files, list) else 0)} in {name}")


async def refuse_uncommitted(screen: Dashboard, name: str) -> None:
    """Refuse a merge of a worktree with uncommitted work in the dashboard's words: the key that commits, not the
    CLI command the services name (`daintree worktree commit`)."""
    dirty = await asyncio.to_thread(screen.backend.dirty_files, name)
    if dirty:
        from daintree_tui.tui.keymap import shown_key

        key = shown_key(screen.backend.project.config.keys, "commit")
        shown = ", ".join(dirty[:5]) + (", …" if len(dirty) > 5 else "")
        raise OperationError(f"{name} has uncommitted changes ({shown}): press {key} to commit them, then merge")


async def merge(screen: Dashboard, name: str) -> None:
    await refuse_uncommitted(screen, name)  # before the dialog: its choices would be for nothing
    await asyncio.to_thread(screen.backend.ops.review.require_approved, name)  # the role's review or checks of the head
    target = await asyncio.to_thread(screen.backend.merge_target, name)
    from daintree_tui.tui.screens.merge import MergeScreen  # a dialog: imported when first opened

    choice = await screen.app.push_screen_wait(MergeScreen(name, target))
    if choice is None:
        return
    screen.notify(f"Merging {name} ({choice.strategy})…")
    if choice.remove:
        screen.release(name)
    try:
        result = await asyncio.to_thread(screen.backend.merge, name, choice.strategy, choice.into, choice.remove,
                                         choice.complete_task)
    except OperationError:
        screen.reattach(name)  # the merge failed: nothing was removed, the session is still there
        await refuse_uncommitted(screen, name)  # the agent wrote while the dialog was open
        raise
    except BaseException:
        screen.reattach(name)
        raise
    if not result.removed:
        screen.reattach(name)
    screen.operation_done(result.message + (f"; removed {name}" if result.removed else ""),
                          removed=name if result.removed else None)


async def review_comment(screen: Dashboard, name: str, path: str, line: int,
                         dialog: asyncio.Future[str | None]) -> None:
    """A comment on `path`:`line` (new side) of `name`'s diff, kept in its review until sent."""
    text = await dialog
    if text is None:
        return
    made = await asyncio.to_thread(screen.backend.ops.review.comment, name, [(path, line, text)])
    from daintree_tui.tui.keymap import shown_key

    key = shown_key(screen.backend.project.config.keys, "review_send")
    screen.notify(f"Comment #{made[0].id} on {path}:{line} kept: {key} sends the comments to {name}'s agent")


async def review_send(screen: Dashboard, name: str) -> None:
    """Every unsent comment to `name`'s agent, as one paste (its agent started with them when none runs)."""
    result = await asyncio.to_thread(screen.backend.ops.review.send, name)
    count = len(result["sent"])
    how = "" if result["how"] == "pasted" else " (its agent started with them)"
    screen.operation_done(f"Sent {count} comment{'s' if count != 1 else ''} to {name}{how}")


async def review_send_ci(screen: Dashboard, name: str) -> None:
    """The failed checks of `name`'s pull request, with their log tails, to its agent as one paste."""
    result = await asyncio.to_thread(screen.backend.ops.review.send_ci, name)
    failed = result["failed"]
    how = "" if result["how"] == "pasted" else " (its agent started with them)"
    screen.operation_done(f"Sent {len(failed)} failed check{'s' if len(failed) != 1 else ''} to {name}: "
                          f"{', '.join(failed)}{how}")


async def pull_request(screen: Dashboard, name: str) -> None:
    body = f"Push {name}'s branch and open a pull request with gh?"
    if not await screen.app.push_screen_wait(ConfirmScreen("Open a pull request", body, yes="Push and open PR")):
        return
    screen.notify(f"Pushing {name}…")
    result = await asyncio.to_thread(screen.backend.pr, name)
    screen.operation_done(f"Opened {result['url']}")
    screen.checks_now(name)  # its CI checks show from now on


async def inject_task(screen: Dashboard, name: str) -> None:
    await asyncio.to_thread(screen.backend.services.inject_task, name)
    screen.operation_done(f"Sent the task to {name}")


async def bakeoff(screen: Dashboard, task_id: int, dialog: asyncio.Future[BakeoffRequest | None]) -> None:
    backend = screen.backend
    request = await dialog
    if not request:
        return
    record = await asyncio.to_thread(backend.bakeoff, task_id, request.agents, request.score)
    screen.operation_done(f"Bake-off {record['id']}: {', '.join(record['candidates'])}")
    from daintree_tui.tui.screens.bakeoff import BakeoffScreen  # a dialog: imported when first opened

    await screen.app.push_screen(BakeoffScreen(record))


async def diff(screen: Dashboard, name: str) -> None:
    text = await asyncio.to_thread(screen.backend.diff, name)
    screen.show_diff(name, text)  # if it is still the current worktree: the user may have moved on while git ran


async def copy_path(screen: Dashboard, path: str) -> None:
    await copy_text(screen, path, path)


async def copy_link(screen: Dashboard, name: str) -> None:
    """Copy the last link the agent's screen shows (a sign-in URL), put back together over its broken lines.

    The screen is the agent's: only an http(s) link to a plain host goes to the clipboard (see `copyable`), and
    the toast names that host whole (a link's first characters can look like any host)."""
    from daintree_tui.sessions.links import copyable, host_of, links_in

    terminal = screen.terminal
    if not (terminal.attached and terminal.worktree == name):
        screen.notify(f"No agent's screen in {name}: enter starts one", severity="warning")
        return
    # tmux's copy of the pane, with its scrollback: at 80x24 the view is shorter than claude's sign-in URL.
    try:
        text = await asyncio.to_thread(screen.backend.screen_and_history, name)
    except DaintreeError:  # a remote host's session: what the view shows
        text = terminal.screen_text()
    links = await asyncio.to_thread(links_in, text, terminal.emulator.screen.columns)
    if not links:
        screen.notify(f"No link on {name}'s screen", severity="warning")
        return
    link = copyable(links[-1])
    if link is None:
        screen.notify(f"Not copied: the last link on {name}'s screen is not a plain http(s) link (a user part, "
                      "a host in other letters, or too long)", severity="warning")
        return
    await copy_text(screen, link, f"the link to {host_of(link)}: {link[:LINK_SHOWN]}"
                                  f"{'…' if len(link) > LINK_SHOWN else ''}")


LINK_SHOWN = 48
"""How much of a copied link its toast shows: a sign-in URL of 300 characters filled the toast."""


async def copy_text(screen: Dashboard, text: str, shown: str) -> None:
    import pyperclip

    try:
        await asyncio.to_thread(pyperclip.copy, text)
    except pyperclip.PyperclipException:
        screen.app.copy_to_clipboard(text)
        screen.notify(f"No system clipboard; sent to the terminal's clipboard: {shown}")
        return
    screen.notify(f"Copied {shown}")
