"""The dashboard's tables do work only for rows on screen (issue 17 item 2): 200 worktrees cost what 20 do, and a
changed cell repaints its own row, not the table, while every line on screen still shows what its row holds."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual.app import App, ComposeResult
from textual.strip import Strip

from daintree_tui.core.models import WorktreeEntry
from daintree_tui.sessions.manager import SessionInfo
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.tui.widgets.rows import compose_line
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.helpers.dashboard import until

ROWS = 200


class CountingTable(WorktreeTable):
    """Counts the lines it renders (what a repaint costs) and the rows it builds cells for, and keeps the text
    last painted on each line (a line not repainted keeps showing it)."""

    def __init__(self) -> None:
        super().__init__(id="worktrees")
        self.lines_rendered: list[int] = []
        self.rows_built: list[str] = []
        self.painted: dict[int, str] = {}

    def render_line(self, y: int) -> Strip:
        self.lines_rendered.append(y)
        strip = super().render_line(y)
        self.painted[y] = strip.text
        return strip

    def _build_cells(self, entry: WorktreeEntry, numbers: dict[str, int],
                     keys: tuple[str, ...]) -> tuple[Text | str, ...]:
        self.rows_built.append(entry.name)
        return super()._build_cells(entry, numbers, keys)


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CountingTable()


def entry(i: int) -> WorktreeEntry:
    return WorktreeEntry(name=f"wt-{i:03d}", path=f"/nowhere/wt-{i:03d}", branch=f"wt-{i:03d}", base_ref="main",
                         base_commit="0" * 40)


def session(name: str, status: SessionStatus) -> SessionInfo:
    return SessionInfo(name=name, session=f"dt-{name}", agent="busy", status=status, exit_code=None, pid=1,
                       started_at=0.0, log="", persistent=True)


async def test_two_hundred_rows_build_and_repaint_only_what_is_on_screen() -> None:
    app = TableApp()
    async with app.run_test(size=(120, 24)) as pilot:
        table = app.query_one(CountingTable)
        entries = tuple(entry(i) for i in range(ROWS))
        table.entries = entries
        table.sessions = {e.name: session(e.name, SessionStatus.RUNNING) for e in entries}
        await until(pilot, lambda: table.row_count == ROWS and "running" in table.cell_text("wt-000", "session"))
        await pilot.pause()
        on_screen = table.scrollable_content_region.height
        assert len(set(table.rows_built)) <= on_screen + 4, "cells were built for rows off screen"
        assert table.cell_text("wt-199", "session") == ""  # a placeholder until it is on screen

        # A poll that changes one visible row's status rebuilds that row only and repaints only its line.
        table.rows_built.clear()
        table.lines_rendered.clear()
        table.sessions = {**table.sessions, "wt-003": replace(table.sessions["wt-003"],
                                                             status=SessionStatus.WAITING)}
        await until(pilot, lambda: "WAITING" in table.cell_text("wt-003", "session"))
        await until(pilot, lambda: bool(table.lines_rendered))
        await pilot.pause()
        assert table.rows_built == ["wt-003"]
        assert set(table.lines_rendered) == {table.header_height + 3}, table.lines_rendered
        # What the screen shows is right: the repainted line has the new status (no stale render of the row),
        # and the lines left alone still match their rows.
        painted = [table.painted[table.header_height + i] for i in range(on_screen - table.header_height)]
        assert "WAITING" in painted[3] and "wt-003" in painted[3], painted[3]
        for i, line in enumerate(painted):
            if i != 3:
                assert f"wt-{i:03d}" in line and "running" in line and "WAITING" not in line, (i, line)

        # A poll that changes nothing builds and repaints nothing.
        table.rows_built.clear()
        table.lines_rendered.clear()
        table.sessions = dict(table.sessions)
        table.previews = {"wt-190": "off screen output"}
        await pilot.pause()
        await pilot.pause()
        assert table.rows_built == [] and table.lines_rendered == []

        # Rows that scroll into view get their cells (the cursor, filter and order are the table's own).
        table.select_name("wt-199")
        await until(pilot, lambda: "running" in table.cell_text("wt-199", "session"))
        assert "off screen output" in table.cell_text("wt-190", "activity")
        assert table.cursor_name() == "wt-199"
        table.filter_text = "19"
        await until(pilot, lambda: table.row_count == 12)  # wt-019, wt-119 and wt-190..199, in order
        assert [str(k.value) for k in table.rows][:3] == ["wt-019", "wt-119", "wt-190"]
        assert all("running" in table.cell_text(str(k.value), "session") for k in table.rows)


def test_a_row_is_one_line_of_columns_cut_and_padded_to_their_widths() -> None:
    badge = Text("● WAITING", style="bold black on yellow")
    cells = ["7", "a-name-far-too-long", badge, "日本語のブランチ", "two\nlines\tand a tab"]
    line = compose_line(cells, [2, 8, 10, 7, 30])
    assert line.plain == "7   a-name-…  ● WAITING   日本語…  two lines and a tab           "
    assert line.cell_len == 2 + 8 + 10 + 7 + 30 + 2 * 4  # every column exactly its width, two cells apart
    # A cell's style covers its own text, not the padding after it (the badge is as wide as its word).
    styled = [line.plain[span.start:span.end] for span in line.spans if "yellow" in str(span.style)]
    assert styled == ["● WAITING"]
