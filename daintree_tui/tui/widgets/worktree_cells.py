"""What each cell of a worktree's row says: the session's status (and its limits, budget, cost), the latest output,
the predicted conflicts, the CI checks, the disk use. Pure functions of what the screen knows (the session title
shows the same status cell)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from daintree_tui.sessions.last_words import telling

if TYPE_CHECKING:
    from daintree_tui.services.ci import ChecksReport
    from daintree_tui.sessions.manager import SessionInfo

SESSION_GLYPH = {
    "starting": Text("◌ starting", style="dim"),
    "running": Text("▶ running", style="green"),
    "waiting": Text("● WAITING", style="bold black on yellow"),
    "stalled": Text("◌ STALLED", style="bold yellow"),
    "exited": Text("■ exited", style="red"),
}


# The Status column's word for what stopped a session (`■ exited 137 oom-killed` was cut to `■ exited …`).
SHORT_LIMIT = {"oom-killed": "oom", "pids limit": "pids"}


def session_cell(info: SessionInfo | None, short: bool = False) -> Text:
    """The session's status; `short`: the Status column's form, which keeps what stopped it (`■ oom 137`)."""
    if info is None:
        return Text("-", style="dim")
    if short and str(info.status) == "exited" and info.limit:
        cell = Text(f"■ {SHORT_LIMIT.get(info.limit, info.limit)}", style="bold red")
        if info.exit_code is not None:
            cell.append(f" {info.exit_code}", style="red")
        return cell
    cell = SESSION_GLYPH[str(info.status)].copy()
    if str(info.status) == "exited" and info.exit_code is not None:
        cell.append(f" {info.exit_code}")
    if info.limit:
        cell.append(f" {info.limit}", style="bold red")
    if info.over_budget:
        cell.append(" over budget", style="bold red")
    elif info.usage and info.usage.get("cost"):
        cell.append(f" ${info.usage['cost']:.2f}", style="dim")  # estimated from the agent's own records
    if info.usage and info.usage.get("trusted") is False:
        cell.append(" ?", style="bold yellow")  # counted from records that cannot be trusted (`daintree usage`)
    return cell


def disk_text(size: int | None) -> str:
    if size is None:
        return "…"
    # Imported once a size is known: the hygiene module brings the session manager, which the first frame, drawn
    # before any size is, does without.
    from daintree_tui.services.hygiene import human

    return human(size)


def last_output_line(screen: str, width: int = 48) -> str:
    """Of the last lines of a session's screen, the one that says most (an error over words over a URL over a
    border: `last_words.telling`), for the latest-output column."""
    line = telling([line for line in screen.splitlines() if line.strip()])
    return line if len(line) <= width else line[: width - 1] + "…"


CI_GLYPH = {"fail": ("✗", "bold red"), "pending": ("…", "yellow"), "pass": ("✓", "green"), "none": ("-", "dim")}


def ci_cell(report: ChecksReport | None) -> Text:
    """The CI column: ✗ and how many checks failed, … while some run, ✓ all passed (dim: gh did not answer the
    latest read, these are an earlier one's)."""
    if report is None:
        return Text("")
    glyph, style = CI_GLYPH[report.state]
    failed = len(report.failed)
    return Text(f"{glyph}{failed if failed else ''}", style="dim" if report.stale else style)


def conflicts_cell(found: tuple[tuple[str, tuple[str, ...]], ...]) -> Text:
    """How many worktrees (or branches) the radar predicts this one's work conflicts with."""
    return Text(f"⚠{len(found)}", style="bold red") if found else Text("")


# What the latest-output column says of a session that has drawn nothing visible since it started (status.py).
NOTHING_YET = {"starting": Text("no output yet", style="dim italic"),
               "stalled": Text("nothing drawn since it started", style="yellow")}


def activity_cell(info: SessionInfo | None, screen: str) -> Text:
    """The latest-output column: the line of the screen that says most, or, with nothing on it, why not."""
    line = last_output_line(screen)
    if not line and info is not None and str(info.status) in NOTHING_YET:
        return NOTHING_YET[str(info.status)].copy()
    return Text(line, style="dim")
