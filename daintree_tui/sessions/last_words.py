"""An agent's session log as text: its last line (why a session that died at once died), or all of it to read.

tmux writes "Pane is dead" on the pane's bottom line by scrolling the screen up one line, so an agent that printed
one line and died (`bwrap: execvp claude: No such file or directory`) shows a blank pane; the log still has it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

TAIL_BYTES = 4096
LONGEST = 200
# A cursor moved right or to a column (CSI C, CSI G) stands between words: Ink apps such as Claude Code place every
# word so ("Please\x1b[9Gcheck"), and dropping the move glued the words together.
_CURSOR_ACROSS = re.compile(r"\x1b\[[0-9;]*[CG]")
# A cursor sent to a place (CSI H, f) or up and down (A, B, E, F): full-screen agents draw their lines so, and
# Codex places every word of a line with its own CSI row;col H.
_CURSOR_TO_ROW = re.compile(r"\x1b\[([0-9]*)(?:;[0-9]*)?[Hf]|\x1b\[[0-9]*[ABEF]")
# CSI sequences, OSC strings (ended by BEL or ST) and the other escapes (ESC, intermediates, a final byte: `ESC ( B`
# picks a charset, `ESC 7`/`ESC 8` save and restore the cursor): what a terminal obeys, not text. Left in, their
# letters and digits were "the last line": claude's exit toast read "(B78".
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]")
_LINE_BREAKS = re.compile(r"[\r\n]+")


# The same move to a row again and again (a screen redrawn from `ESC [ H`, over and over): each after the first is
# a space, as `readable_lines` makes it, without a Python step each (a log of megabytes of them took seconds).
_SAME_MOVE_AGAIN = re.compile(r"(\x1b\[[0-9]*(?:;[0-9]*)?[Hf])\1+")
# What a person does not read: the C0 and C1 controls and DEL (a tab is four spaces).
_CONTROLS = dict.fromkeys([*range(0x20), 0x7F, *range(0x80, 0xA0)], None) | {ord("\t"): "    "}


def readable_lines(text: str) -> list[str]:
    """An agent's terminal output as the lines a person reads: a cursor sent to another row starts a line, a cursor
    moved across a row is a space, every other control is dropped; blank lines go."""
    row = ""

    def to_row(move: re.Match[str]) -> str:
        nonlocal row
        to = move.group(1)
        if to is None:  # up, down: another row
            row = ""
            return "\n"
        same_row, row = (to or "1") == row, to or "1"
        return " " if same_row else "\n"

    text = _SAME_MOVE_AGAIN.sub(lambda run: run.group(1) + " " * (run.group().count("\x1b") - 1), text)
    text = _ESCAPES.sub("", _CURSOR_ACROSS.sub(" ", _CURSOR_TO_ROW.sub(to_row, text)))
    lines = (_printable(line).rstrip() for line in _LINE_BREAKS.split(text))
    return [line for line in lines if line.strip()]


def _printable(line: str) -> str:
    if line.isprintable():
        return line
    line = line.translate(_CONTROLS)
    return line if line.isprintable() else "".join(ch for ch in line if ch.isprintable())


_BLANK = _CONTROLS | {ord(" "): None, ord("\t"): None}


def could_hold_lines(text: str, count: int) -> bool:
    """Whether `readable_lines(text)` may hold `count` lines, told at the regex engine's speed: not without as many
    characters to read nor as many line breaks and cursor moves between them. Megabytes of cursor moves and no
    text, or of text and no line, took seconds each time to turn into none or one."""
    breaks = text.count("\n") + text.count("\r") + 1
    if breaks + text.count("\x1b[") < count or len(_ESCAPES.sub("", text).translate(_BLANK)) < count:
        return False
    return breaks + len(_CURSOR_TO_ROW.findall(text)) >= count


def last_output_line(log: Path) -> str:
    """The last non-blank line of `log`, without terminal controls, at most LONGEST characters; "" when none."""
    lines = last_output_lines(log, 1)
    return lines[-1] if lines else ""


def last_output_lines(log: Path, count: int) -> list[str]:
    """The last `count` non-blank lines of `log` (from its last TAIL_BYTES), as `last_output_line` reads one."""
    try:
        with log.open("rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - TAIL_BYTES))
            data = fh.read()
    except OSError:
        return []
    return [" ".join(line.split())[:LONGEST] for line in readable_lines(data.decode("utf-8", "replace"))[-count:]]


# Strings a terminal obeys and never shows, which `_ESCAPES` leaves the body of: DCS, SOS, PM and APC (ESC P, X, ^,
# _ ... ST). opencode asks the terminal what it can do so before it draws anything.
_STRINGS = re.compile(r"\x1b[PX^_].*?(?:\x1b\\|\x07|$)", re.DOTALL)
DRAWN_LOOK = (64 * 1024, 1024 * 1024)  # how much of a run's output is read for a visible character: first, at most


def drew_since(log: Path, offset: int) -> bool | None:
    """Whether the agent has printed a visible character into `log` since byte `offset` (its run's start): not when
    it printed only controls (a blank screen: the alternate screen, a clear, a hidden cursor) or nothing. None when
    the log cannot be read, or holds more than DRAWN_LOOK's most without one (not known: believed drawn)."""
    try:
        with log.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < offset:  # cut since the run started (by hand): what it printed is not known
                return None
            if size == offset:
                return False
            for most in DRAWN_LOOK:
                fh.seek(offset)
                data = fh.read(most).decode("utf-8", "replace")
                text = _ESCAPES.sub("", _STRINGS.sub("", data))
                if text.translate(_BLANK):
                    return True
                if size - offset <= most:
                    return False
    except OSError:
        return None
    return None


# What says why an agent stopped or is stuck, in the words agents use: an error over everything else.
_TELLS_WHY = re.compile(
    r"\b(?:errors?|fail(?:ed|ure|s)?|fatal|denied|refused|forbidden|unauthori[sz]ed|exception|traceback|panic(?:ked)?"
    r"|invalid|unable|cannot|can't|could ?n[o']t|not found|no such|no space|not allowed|permission|read-only"
    r"|timed? ?out|crash(?:ed)?|abort(?:ed)?|missing)\b", re.IGNORECASE)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
# A frame's sides: box drawing and block elements (gemini's `│ text │`), and ASCII's `|`.
_FRAME = "".join(chr(c) for c in range(0x2500, 0x25A0)) + " \t|"
TELLING_WINDOW = 8  # of the last lines, how many are weighed: older ones speak of another moment


def _weight(line: str) -> int:
    """How well `line` says what happened: an error (3), plain words (2), a pointer to a web page (1), a border, a
    spinner or punctuation (0)."""
    if not any(ch.isalnum() for ch in line):
        return 0
    if _TELLS_WHY.search(_URL.sub(" ", line)):
        return 3
    return 1 if _URL.search(line) else 2


def unframed(line: str) -> str:
    """`line` without the box it is drawn in (gemini's `│ text │`), its spaces collapsed."""
    return " ".join(line.strip(_FRAME).split()) if any(ch.isalnum() for ch in line) else " ".join(line.split())


def telling(lines: list[str], window: int = TELLING_WINDOW) -> str:
    """Of the last `window` of `lines`, the one that says why: an error line over plain words over a URL over a
    border or a blank (claude, offline, ends with `https://anthropic.com/supported-countries` four lines below
    `Failed to connect to api.anthropic.com`; gemini's last line is its box's bottom). The latest of the best;
    without its frame; "" when none has a word."""
    best, chosen = 0, ""
    for line in lines[-window:]:
        weight = _weight(line)
        if weight and weight >= best:
            best, chosen = weight, unframed(line)
    return chosen


def telling_line(log: Path) -> str:
    """Of the last lines of `log`, the one that says why the agent stopped (`telling`), at most LONGEST characters."""
    return telling(last_output_lines(log, TELLING_WINDOW))[:LONGEST]


# tmux's line on a pane whose program ended (remain-on-exit's default format): "Pane is dead (status 1, <date>)".
_DEAD_PANE = re.compile(r"^Pane is dead \((?:status|signal) [^)]*\)\s*$")


def with_last_words(screen: str, last_line: str) -> str:
    """An exited pane's screen text with tmux's "Pane is dead" line replaced by the agent's own last line (from its
    log, `last_output_line`), when tmux scrolled that away to write its own: a preview of the pane then read "Pane
    is dead (status 1, ...)" where the reason the agent died belonged."""
    lines = [line for line in screen.splitlines() if not _DEAD_PANE.match(line)]
    shown = [line for line in lines if line.strip()]
    if last_line and (not shown or " ".join(shown[-1].split()) != last_line):
        lines.append(last_line)
    return "\n".join(lines)
