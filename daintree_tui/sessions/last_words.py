"""The last line an agent printed, read from its session log: why a session that died at once died.

tmux writes "Pane is dead" on the pane's bottom line by scrolling the screen up one line, so an agent that printed
one line and died (`bwrap: execvp claude: No such file or directory`) shows a blank pane; the log still has it.
"""

from __future__ import annotations

import re
from pathlib import Path

TAIL_BYTES = 4096
LONGEST = 200
# A cursor moved right or to a column (CSI C, CSI G) stands between words: Ink apps such as Claude Code place every
# word so ("Please\x1b[9Gcheck"), and dropping the move glued the words together.
_CURSOR_ACROSS = re.compile(r"\x1b\[[0-9;]*[CG]")
# CSI sequences, OSC strings (ended by BEL or ST) and the other escapes (ESC, intermediates, a final byte: `ESC ( B`
# picks a charset, `ESC 7`/`ESC 8` save and restore the cursor): what a terminal obeys, not text. Left in, their
# letters and digits were "the last line": claude's exit toast read "(B78".
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]")
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
    text = _ESCAPES.sub("", _CURSOR_ACROSS.sub(" ", data.decode("utf-8", "replace")))
    for line in reversed(_LINE_BREAKS.split(text)):
        shown = " ".join("".join(ch for ch in line if ch.isprintable()).split())
        if shown:
            return shown[:LONGEST]
    return ""
