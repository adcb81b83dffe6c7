"""CheckpointsScreen: a worktree's checkpoints as a timeline (one row a turn of its agent), the diff of the step
under the cursor, and a restore of it after a question (core/checkpoints.py).

| Key    | Action                                                        |
|--------|---------------------------------------------------------------|
| r      | Restore the checkpoint under the cursor (asks first)          |
| c      | Take a checkpoint of the files now                            |
| escape | Back to the dashboard                                         |
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label
from textual.worker import Worker

from daintree_tui.core.validate import files as count_files
from daintree_tui.tui.screens.confirm import ConfirmScreen
from daintree_tui.tui.widgets.checkpoint_timeline import CheckpointTimeline
from daintree_tui.tui.widgets.diff_view import DiffView

if TYPE_CHECKING:
    from daintree_tui.core.checkpoints import Checkpoint
    from daintree_tui.services.operations import Operations
    from daintree_tui.tui.app import DaintreeApp

# Of each step's diff, what the timeline shows (highlighting takes the event loop about 2.5 s a MiB): the rest is
# `daintree checkpoint diff`'s.
STEP_DIFF_BYTES = 256 << 10


class CheckpointsScreen(Screen[None]):
    """The checkpoints of worktree `name`: pick a step to see what it changed, restore one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "restore", "Restore", id="checkpoint_restore",
                tooltip="Make the worktree's files this checkpoint's (asks; what is there now is checkpointed "
                        "first, so restoring that undoes it)"),
        Binding("c", "create", "Checkpoint now", id="checkpoint_create",
                tooltip="Take a checkpoint of the worktree's files now"),
        Binding("escape", "back", "Back", id="checkpoints_back", tooltip="Back to the dashboard"),
    ]

    AUTO_FOCUS = "#timeline"

    def __init__(self, name: str) -> None:
        super().__init__()
        self.worktree = name

    @property
    def dashboard(self) -> DaintreeApp:
        return self.app  # type: ignore[return-value]

    @property
    def ops(self) -> Operations:
        return self.dashboard.backend.ops

    def compose(self) -> ComposeResult:
        yield Label(f"Checkpoints of {self.worktree}", id="checkpoints-title", classes="pane-title")
        yield CheckpointTimeline(id="timeline")
        yield DiffView(id="step-diff")
        yield Footer()

    def on_mount(self) -> None:
        self.load()

    @property
    def timeline(self) -> CheckpointTimeline:
        return self.query_one(CheckpointTimeline)

    # -- reading ---------------------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, exit_on_error=False, group="checkpoints", description="checkpoints")
    def load(self, select: int | None = None) -> None:
        found = self.ops.checkpoints.list(self.worktree)
        self.app.call_from_thread(self.show_timeline, found, select)

    def show_timeline(self, found: list[Checkpoint], select: int | None) -> None:
        self.timeline.show(found, select)
        title = self.query_one("#checkpoints-title", Label)
        if not found:
            title.update(f"Checkpoints of {self.worktree}: none yet (one is taken each time its agent's turn "
                         "ends; c takes one now)")
            self.query_one(DiffView).clear()
        else:
            shown = f"the newest {len(found)} of {found[-1].id}" if found[0].id > 1 else str(len(found))
            title.update(f"Checkpoints of {self.worktree}: {shown} (r restores the one under the cursor)")

    @on(DataTable.RowHighlighted, "#timeline")
    def step_highlighted(self) -> None:
        chosen = self.timeline.selected
        if chosen is not None:
            self.load_step(chosen.id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="checkpoint-step", description="checkpoint diff")
    def load_step(self, ident: int) -> None:
        step = self.ops.checkpoints.diff(self.worktree, str(ident), step=True, limit=STEP_DIFF_BYTES)
        self.app.call_from_thread(self.show_step, ident, step.start, step.patch)

    def show_step(self, ident: int, start: str, patch: str) -> None:
        chosen = self.timeline.selected
        if chosen is not None and chosen.id == ident:  # the cursor may have moved on while git ran
            since = "its base" if start == "base" else f"checkpoint {start}"
            self.query_one(DiffView).show(f"{self.worktree} checkpoint {ident} (since {since})", patch)

    # -- acting ----------------------------------------------------------------------------------------------

    def action_restore(self) -> None:
        chosen = self.timeline.selected
        if chosen is None:
            self.notify("No checkpoint to restore yet", severity="warning")
            return
        self.run_worker(self.restore(chosen), group="checkpoint-restore", exclusive=True, exit_on_error=False,
                        description="restore checkpoint")

    async def restore(self, chosen: Checkpoint) -> None:
        """Ask, then restore: one coroutine (the question, then the work off the event loop)."""
        question = ConfirmScreen(
            f"Restore checkpoint {chosen.id} of {self.worktree}?",
            f"The worktree's files become exactly what they were at checkpoint {chosen.id} ({chosen.reason}): "
            "files added since are deleted, files changed since go back. Ignored files are left alone, and HEAD, "
            "the branch and the index stay. What is there now is checkpointed first: restoring that undoes this.",
            yes="Restore")
        if not await self.app.push_screen_wait(question):
            return
        result = await asyncio.to_thread(self.ops.checkpoints.restore, self.worktree, str(chosen.id))
        if result.files:
            self.notify(f"{self.worktree}: restored checkpoint {chosen.id} ({count_files(len(result.files))}); "
                        f"the files before are checkpoint {result.before.id}")
        else:
            self.notify(f"{self.worktree}: its files are checkpoint {chosen.id}'s already")
        self.load(chosen.id)

    def action_create(self) -> None:
        self.run_worker(self.create(), group="checkpoint-create", exclusive=True, exit_on_error=False,
                        description="checkpoint")

    async def create(self) -> None:
        made, newest = await asyncio.to_thread(self.ops.checkpoints.create, self.worktree)
        if made is None:
            self.notify(f"{self.worktree}: nothing changed since " + (f"checkpoint {newest.id}" if newest
                                                                      else "its base"))
        else:
            self.notify(f"{self.worktree}: checkpoint {made.id} ({count_files(made.files)} changed)")
        self.load(made.id if made else None)

    def action_back(self) -> None:
        self.app.pop_screen()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.dashboard.report_worker_failure(event)
