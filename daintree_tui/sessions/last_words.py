"""The last line an agent printed, read from its session log: why a session that died at once died.

tmux writes "Pane is dead" on the pane's bottom line by scrolling the screen up one line, so an agent that printed
one line and died (`bwrap: execvp claude: No such file or directory`) shows a blank pane; the log still has it.
"""

from __future__ import annotations

import re
from pathlib import Path

TAIL_BYTES = 4096
LONGEST = 200
# CSI sequences, OSC strings (ended by BEL or ST) and two-byte escapes: what a terminal obeys, not text.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")
_LINE_BREAKS = re.compile(r"[\r\n]+")


def last_output_line(log: Path) -> str:
    """The last non-blank line of `log`, without terminal controls, at most LONGEST characters; "" when none."""
    try:
        with log.open("rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - TAIL_BYTES))
            data = fh.read()
    except OSError:
        return ""
    text = _ESCAPES.sub("", data.decode("utf-8", "replace"))
    for line in reversed(_LINE_BREAKS.split(text)):
        shown = "".join(ch for ch in line if ch.isprintable()).strip()
        if shown:
            return shown[:LONGEST]
    return ""
