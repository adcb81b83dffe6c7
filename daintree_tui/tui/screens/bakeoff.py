"""BakeoffScreen: the candidates' terminals side by side, and the scoreboard.

| Key    | Action                                  |
|--------|-----------------------------------------|
| r      | Judge every candidate: score, gate, diff, cost |
| p      | Pick the highlighted candidate (merge)  |
| P      | Pick the best of the last scoring       |
| escape | Back to the dashboard                   |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label

from daintree_tui.tui.widgets.terminal import TerminalView

if TYPE_CHECKING:
    from daintree_tui.tui.app import DaintreeApp


class BakeoffScreen(Screen[None]):
    """One bake-off: live terminals of every candidate, ranked by the last score run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "score", "Score", id="bakeoff_score"),
        Binding("p", "pick", "Pick", id="bakeoff_pick"),
        Binding("P", "pick_best", "Pick best", id="bakeoff_pick_best"),
        Binding("escape", "back", "Back", id="bakeoff_back"),
    ]

    AUTO_FOCUS = "#scoreboard"  # not a terminal: keys here are the screen's until one is clicked

    def __init__(self, record: Mapping[str, Any]) -> None:
        super().__init__()
        self.record = record

    @property
    def dashboard(self) -> DaintreeApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Label(f"Bake-off {self.record['id']} — task {self.record['task_id']}", classes="pane-title")
        with Horizontal(id="candidates"):
            for name in self.record["candidates"]:
                with Vertical(classes="candidate"):
                    yield Label(name, classes="pane-title")
                    yield TerminalView(id=f"cand-{name}")
        yield DataTable(id="scoreboard", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#scoreboard", DataTable)
        for label in ("Rank", "Candidate", "Exit", "Wall", "Score", "Gate", "Diff", "Tokens", "Cost"):
            table.add_column(label, key=label.lower())
        self.show_scores(self.record.get("scores") or [])
        self.call_after_refresh(self.attach_all)

    def attach_all(self) -> None:
        for name in self.record["candidates"]:
            terminal = self.query_one(f"#cand-{name}", TerminalView)
            self.dashboard.attach(terminal, name)

    def show_scores(self, scores: list[dict[str, Any]]) -> None:
        table = self.query_one("#scoreboard", DataTable)
        table.clear()
        ranked = scores or [{"name": n, "exit_code": None, "wall": None, "score": None}
                            for n in self.record["candidates"]]
        for i, s in enumerate(ranked, start=1):
            gate, diff, tokens, cost = (s.get(k) for k in ("gate", "diff_lines", "tokens", "cost"))
            table.add_row(str(i) if scores else "-", s["name"], "-" if s["exit_code"] is None else str(s["exit_code"]),
                          "-" if s["wall"] is None else f"{s['wall']:.2f}s",
                          "-" if s["score"] is None else f"{s['score']:g}", "-" if gate is None else str(gate),
                          "-" if diff is None else str(diff), "-" if tokens is None else str(tokens),
                          "-" if cost is None else f"${cost:.2f}", key=s["name"])

    def action_score(self) -> None:
        self.notify("Scoring every candidate…")
        self.run_score()

    @work(thread=True, exclusive=True, exit_on_error=False, group="bakeoff", description="score")
    def run_score(self) -> None:
        scores = self.dashboard.backend.services.bakeoffs.score(self.record["id"])
        self.app.call_from_thread(self.show_scores, [s.to_dict() for s in scores])

    def action_pick(self) -> None:
        table = self.query_one("#scoreboard", DataTable)
        if not table.row_count:
            return
        name = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        for terminal in self.query(TerminalView):
            terminal.detach()
        self.run_pick(name)

    def action_pick_best(self) -> None:
        for terminal in self.query(TerminalView):
            terminal.detach()
        self.run_pick(None)

    @work(thread=True, exclusive=True, exit_on_error=False, group="bakeoff", description="pick")
    def run_pick(self, name: str | None) -> None:
        backend = self.dashboard.backend
        name = name or backend.services.bakeoffs.best(self.record["id"])
        result = backend.pick(self.record["id"], name)
        kept = f"; kept with uncommitted work: {', '.join(result['kept'])}" if result["kept"] else ""
        self.app.call_from_thread(self.notify, f"Picked {name}: {result['merge']['message']}{kept}")
        self.app.call_from_thread(self.close)

    def close(self) -> None:
        if self.is_current:
            self.app.pop_screen()

    def action_back(self) -> None:
        for terminal in self.query(TerminalView):
            terminal.detach()
        self.app.pop_screen()

    def on_worker_state_changed(self, event: Any) -> None:
        self.dashboard.report_worker_failure(event)
