"""The one listing of every session of a tmux server: its format (a single `#{S:...}` that walks the sessions)
and its parser. The control client subscribes to it and asks for it; its value is all the event source knows."""

from __future__ import annotations

from dataclasses import dataclass

from daintree_tui.sessions.host import SESSION_PREFIX, pane_exit

# One record per session, fields joined by ':' (tmux rewrites ':' and '.' in session names, so no field holds
# one); every record ends with ':' so the whole value splits into a flat list.
PANE_FIELDS = ("session_name", "pane_id", "pane_pid", "pane_dead", "pane_dead_status", "pane_dead_signal",
               "session_created", "window_activity", "cursor_x", "cursor_y", "history_size", "pane_width",
               "pane_height")
PANES_FORMAT = "#{pid}:#{S:" + "".join(f"#{{{name}}}:" for name in PANE_FIELDS) + "}"


@dataclass(frozen=True)
class PaneRecord:
    """One session's first pane as the subscription reports it."""

    session: str
    pane: str
    pid: int | None
    dead: bool
    exit_code: int | None
    created: float
    activity: float  # the second of the window's last output (its creation time before any)
    screen_mark: str = ""  # cursor position and history size: moves with output inside one second too
    size: str = ""  # the pane's columns and rows: a resize moves the cursor and the history without output

    @property
    def printed(self) -> bool:
        """Whether the pane has printed anything (its activity second alone cannot tell in the first second)."""
        return self.activity > self.created or self.screen_mark not in ("", "0,0,0")

    @property
    def worktree(self) -> str:
        return self.session[len(SESSION_PREFIX):]


def parse_panes(value: str) -> tuple[int | None, dict[str, PaneRecord], bool]:
    """Parse a PANES_FORMAT value: (server pid, daintree sessions by name, whether a dead pane is unreaped)."""
    parts = value.split(":")
    server_pid = int(parts[0]) if parts and parts[0].isdigit() else None
    records: dict[str, PaneRecord] = {}
    unreaped = False
    width = len(PANE_FIELDS)
    fields = parts[1:]
    for i in range(0, len(fields) - width + 1, width):
        name, pane, pid, dead, status, signal_number, created, activity, cx, cy, history, cols, rows = \
            fields[i:i + width]
        if not name.startswith(SESSION_PREFIX) or name in records:
            continue
        is_dead, exit_code, owed = pane_exit(dead, status, signal_number)
        unreaped = unreaped or owed
        records[name] = PaneRecord(session=name, pane=pane, pid=int(pid) if pid.isdigit() else None,
                                   dead=is_dead, exit_code=exit_code,
                                   created=float(created) if created.isdigit() else 0.0,
                                   activity=float(activity) if activity.isdigit() else 0.0,
                                   screen_mark=f"{cx},{cy},{history}", size=f"{cols}x{rows}")
    return server_pid, records, unreaped

