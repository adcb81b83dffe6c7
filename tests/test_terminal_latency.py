"""Key to echo: the embedded terminal draws the answer to a key at once, and paces everything else; a poll does not
repaint what reads the same.

Real PTYs running real programs inside a real Textual app (Pilot); only the repaint pacing is given an interval
of its own (a frame a minute), so "drawn at once" and "waits for the frame" cannot be confused by timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import messages
from textual.app import App, ComposeResult
from textual.message import Message

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.sessions.manager import SessionInfo
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.tui.widgets.frame_pacer import FramePacer
from daintree_tui.tui.widgets.session_title import SessionTitle
from daintree_tui.tui.widgets.terminal import TerminalView

A_MINUTE = 60.0


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_first_output_after_a_quiet_spell_is_drawn_at_once() -> None:
    clock = Clock()
    pacer = FramePacer(interval=0.02, echo_window=0.1, clock=clock)
    assert pacer.delay() == 0.0
    pacer.flushed()
    clock.now += 0.05
    assert pacer.delay() == 0.0


def test_streaming_output_waits_for_the_rest_of_the_frame() -> None:
    clock = Clock()
    pacer = FramePacer(interval=0.02, echo_window=0.1, clock=clock)
    pacer.flushed()
    clock.now += 0.005
    assert abs(pacer.delay() - 0.015) < 1e-9


def test_the_answer_to_a_key_is_drawn_at_once_even_right_after_a_frame() -> None:
    clock = Clock()
    pacer = FramePacer(interval=0.02, echo_window=0.1, clock=clock)
    pacer.flushed()
    pacer.key_sent()
    clock.now += 0.001
    assert pacer.delay() == 0.0
    clock.now += 0.1  # long after the key: output is streaming again, paced by the frame
    pacer.flushed()
    assert pacer.delay() > 0.0


class OneTerminal(App[None]):
    def compose(self) -> ComposeResult:
        yield TerminalView()


async def until(pilot: Any, predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := predicate()):
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await pilot.pause(0.02)
    return value


def lines_with(view: TerminalView, text: str) -> set[int]:
    return {y for y in range(view.emulator.screen.lines) if text in view.emulator.line_text(y)}


async def test_an_echo_is_handed_to_textual_without_waiting_for_a_frame() -> None:
    app = OneTerminal()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(TerminalView)
        view.pacer = FramePacer(interval=A_MINUTE)
        view.attach_command("cat", ["sh", "-c", "exec cat"])
        view.focus()
        await pilot.pause()
        view.pacer.flushed()  # a frame was just drawn: anything not answering a key would wait a minute now
        await pilot.press("x")
        await until(pilot, lambda: lines_with(view, "x"))
        # The read that brought the echo also asked Textual to repaint its line: nothing is left for a timer.
        assert not view.emulator.screen.dirty


async def test_output_nobody_typed_for_waits_for_the_frame(tmp_path: Path) -> None:
    go_on = tmp_path / "go-on"
    script = f"echo one; while [ ! -e {go_on} ]; do sleep 0.02; done; echo two; exec sleep 60"
    app = OneTerminal()
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(TerminalView)
        view.pacer = FramePacer(interval=A_MINUTE)
        view.attach_command("stream", ["sh", "-c", script])
        await until(pilot, lambda: lines_with(view, "one"))
        assert not view.emulator.screen.dirty  # the first output after a quiet spell is drawn at once
        go_on.touch()
        await until(pilot, lambda: lines_with(view, "two"))
        await pilot.pause(0.1)
        # A flood is bounded: within the frame interval its lines wait, dirty, for the frame.
        assert lines_with(view, "two") <= view.emulator.screen.dirty


class TitleOnly(App[None]):
    def compose(self) -> ComposeResult:
        yield SessionTitle(id="session-title")


def session(status: SessionStatus, name: str = "typing") -> SessionInfo:
    return SessionInfo(name, f"dt-{name}", "echo", status, None, 1, 0.0, "", True)


async def test_a_poll_repaints_the_title_only_when_it_reads_differently() -> None:
    """Every poll hands the title a new `sessions`; while typing, a repaint (let alone a layout pass of the whole
    screen) for a line that reads the same is a frame the echo waits behind."""
    seen: list[tuple[str, object]] = []

    def record(message: Message) -> None:
        if isinstance(message, messages.Layout | messages.Update):
            seen.append((type(message).__name__, message.widget))

    app = TitleOnly()
    async with app.run_test(size=(80, 5), message_hook=record) as pilot:
        title = app.query_one(SessionTitle)
        title.entries = (WorktreeEntry("typing", "/repo/.worktrees/typing", "wt/typing", "main", "0" * 40),)
        title.selected = "typing"
        idle = session(SessionStatus.RUNNING, "idle")
        title.sessions = {"typing": session(SessionStatus.RUNNING), "idle": idle}
        await until(pilot, lambda: "RUNNING" in str(title.content).upper())
        await pilot.pause(0.1)
        seen.clear()
        # The next poll: another session changed, the line about this one reads the same.
        title.sessions = {"typing": session(SessionStatus.RUNNING), "idle": session(SessionStatus.WAITING, "idle")}
        await pilot.pause(0.1)
        assert [kind for kind, widget in seen if widget is title] == []
        title.sessions = {"typing": session(SessionStatus.WAITING), "idle": idle}
        await until(pilot, lambda: "WAITING" in str(title.content).upper())
        await pilot.pause(0.1)
        assert [kind for kind, widget in seen if widget is title] == ["Update"]
