"""The merge train in the dashboard: `TrainScreen` asks what to land and how, `TrainProgressScreen` shows each
step as it happens and the result per worktree; `run_train` is the flow that joins them (one coroutine).

| Key    | Action (progress)           |
|--------|-----------------------------|
| escape | Close (the train goes on)   |
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, Select

from daintree_tui.core.validate import escape_controls
from daintree_tui.tui.widgets.ticks import TickBox

if TYPE_CHECKING:
    from daintree_tui.services.train import TrainProgress, TrainResult
    from daintree_tui.tui.screens.dashboard import Dashboard

RESULT_STYLE = {"merged": "green", "conflict": "bold red", "failed": "bold red", "skipped": "yellow"}
STAGE_WORDS = {"checking": "checking…", "building": "building the candidate…", "gating": "running the checks…",
               "landing": "landing…"}


@dataclass(frozen=True)
class TrainChoice:
    names: tuple[str, ...]
    strategy: str
    test: str | None
    remove: bool
    complete_task: bool


class TrainScreen(ModalScreen[TrainChoice | None]):
    """What to land (the current worktree, or every finished one) and how."""

    AUTO_FOCUS = ""
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="dialog_cancel")]

    def __init__(self, current: str | None, finished: list[str]) -> None:
        super().__init__()
        self.current = current
        self.finished = finished

    def compose(self) -> ComposeResult:
        choices: list[tuple[str, str]] = []
        if self.finished:
            shown = ", ".join(self.finished[:4]) + (f" +{len(self.finished) - 4}" if len(self.finished) > 4 else "")
            choices.append((f"every finished worktree ({len(self.finished)}: {shown})", "finished"))
        if self.current:
            choices.append((f"the current worktree ({self.current})", "current"))
        with Vertical(id="dialog", classes="dialog"):
            yield Label("Merge train", classes="dialog-title")
            with Horizontal(classes="dialog-row"):
                yield Label("Land", classes="field-label")
                yield Select(choices, value=choices[0][1], allow_blank=False, id="scope")
            with Horizontal(classes="dialog-row"):
                yield Label("Strategy", classes="field-label")
                yield Select([("squash", "squash"), ("rebase", "rebase"), ("merge commit", "merge")],
                             value="squash", allow_blank=False, id="strategy")
            with Horizontal(classes="dialog-row"):
                yield Label("Test", classes="field-label")
                yield Input(placeholder="a command run in each candidate (optional)", id="test")
            yield TickBox("Remove each worktree that lands", value=False, id="remove")
            yield TickBox("Mark its task completed", value=True, id="complete")
            yield Label("Fewest predicted conflicts first. Each is built and checked in a temporary worktree; "
                        "the target moves only to a tested commit; a conflict or a failed check is told to its "
                        "agent.", classes="dim")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Start", variant="primary", id="start")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#start", Button).focus(scroll_visible=False)

    @on(Input.Submitted, "#test")
    @on(Button.Pressed, "#start")
    def start(self) -> None:
        scope = self.query_one("#scope", Select).value
        names = tuple(self.finished) if scope == "finished" else (str(self.current),)
        test = self.query_one("#test", Input).value.strip() or None
        self.dismiss(TrainChoice(names, str(self.query_one("#strategy", Select).value), test,
                                 self.query_one("#remove", TickBox).value, self.query_one("#complete", TickBox).value))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class TrainProgressScreen(ModalScreen[None]):
    """One row per worktree of the train: where its step is, then what became of it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close", id="train_close")]

    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__()
        self.names = names
        self.results: dict[str, TrainResult] = {}
        self.done = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(f"Merge train: {len(self.names)} worktree(s)", classes="dialog-title", id="train-title")
            yield DataTable(id="train-steps", cursor_type="row")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Close", id="close")

    def on_mount(self) -> None:
        table = self.query_one("#train-steps", DataTable)
        table.add_column("Worktree", key="worktree")
        table.add_column("Step", key="step")
        for name in self.names:
            table.add_row(escape_controls(name), Text("waiting", style="dim"), key=name)

    def report(self, progress: TrainProgress) -> None:
        """One step (called on the event loop, from the train's thread)."""
        table = self.query_one("#train-steps", DataTable)
        name = progress.worktree
        if name not in table.rows:
            table.add_row(escape_controls(name), "", key=name)
        result = progress.result
        if result is None:
            cell = Text(f"{progress.index}/{progress.total} {STAGE_WORDS.get(progress.stage, progress.stage)}")
        else:
            self.results[name] = result
            cell = Text(result.result, style=RESULT_STYLE.get(result.result, ""))
            detail = ", ".join(result.files[:3]) if result.files else (result.reason or "")
            if result.commit:
                cell.append(f" {result.commit[:10]}", style="dim")
            if detail:
                cell.append(f" {escape_controls(detail)}", style="dim")
        table.update_cell(name, "step", cell, update_width=True)

    def finish(self, results: list[TrainResult]) -> None:
        self.done = True
        merged = sum(r.result == "merged" for r in results)
        self.query_one("#train-title", Label).update(f"Merge train: landed {merged} of {len(results)}")

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)


async def run_train(screen: Dashboard) -> None:
    """Ask, then run the train off the event loop, its progress shown as it comes; the lists are read again at
    the end."""
    backend = screen.backend
    finished = await asyncio.to_thread(backend.services.train.finished)
    current = screen.selected if screen.entry(screen.selected) is not None else None
    if not finished and current is None:
        screen.notify("Nothing to land: no finished worktree has commits its target lacks", severity="warning")
        return
    choice = await screen.app.push_screen_wait(TrainScreen(current, finished))
    if choice is None:
        return
    if choice.remove and screen.terminal.worktree in choice.names:
        screen.release(str(screen.terminal.worktree))  # its session may go with its worktree
    progress = TrainProgressScreen(choice.names)
    await screen.app.push_screen(progress)
    app = screen.app

    def report(step: TrainProgress) -> None:
        if progress.is_attached:
            app.call_from_thread(progress.report, step)

    results = await asyncio.to_thread(backend.ops.landing.train, list(choice.names), strategy=choice.strategy,
                                      test=choice.test, remove=choice.remove, complete_task=choice.complete_task,
                                      on_progress=report)
    if progress.is_attached:
        progress.finish(results)
    merged = sum(r.result == "merged" for r in results)
    screen.operation_done(f"Merge train: landed {merged} of {len(results)}")
