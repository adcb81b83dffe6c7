"""What every command prints: one JSON document with --json, else human text; tables; one-line errors."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from daintree_tui.core.log import on_first_warning, set_debug
from daintree_tui.core.validate import escape_controls


def printable(text: str) -> str:
    """`text` with every terminal control shown as an escape (`\\x1b`), never sent to the terminal: names, task
    text, event fields and errors come from repositories and agents."""
    return escape_controls(text)


# A terminal log replayed on the user's terminal (`session log`): the agent's output, and so whatever the repository
# made it print (`cat` of a committed file, a hostile commit message). Colours and cursor moves are kept, so the
# replay reads as the pane did; everything else a terminal obeys is dropped: OSC, DCS, APC, PM and SOS strings
# (`ESC ] 52` writes the user's clipboard, `ESC ] 0` the title, DCS passes through tmux), mode switches (mouse
# reporting, key encodings), queries whose answers the terminal types into the user's shell (DSR, DA, window
# reports), C1 controls and the C0 controls but tab, newline, carriage return and backspace. The pattern is what is
# dropped: a CSI that edits, moves the cursor or sets colours (parameters of digits, ";" and ":", no intermediates)
# is passed over by the lookahead and so kept, with no Python call for each sequence (megabytes of `ESC [ H` took
# seconds to replay).
_REPLAY_DROPPED = re.compile(
    r"\x1b(?!\[[0-9;:]*[@A-HJKLMPSTXZ`adefm])(?:"
    r"\[[0-?]*[ -/]*[@-~]"  # any other CSI: parameters, intermediates, final
    r"|[\]PX^_][\s\S]*?(?:\x07|\x1b\\|\x18|\x1a|\Z)"  # a string, to BEL, ST, CAN, SUB or the end
    r"|[ -/]*[0-~]?)"  # any other escape (or a lone ESC)
    r"|[\x00-\x07\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f]")


def replayable(text: str) -> str:
    """`text` (a terminal log) without what it would make the user's terminal do beyond colours and cursor
    moves: see _REPLAY_DROPPED."""
    return _REPLAY_DROPPED.sub("", text)


def write_line(stream: TextIO, line: str) -> None:
    stream.write(printable(line) + "\n")


def wants_json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False))


def emit(args: argparse.Namespace, data: Any, text: str | Callable[[], str]) -> None:
    """Print `data` as JSON with --json, else the human text (computed only when needed)."""
    if wants_json(args):
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    else:
        out = text() if callable(text) else text
        if out:
            write_line(sys.stdout, out.rstrip("\n"))


def error(message: str) -> None:
    """One line on stderr, the way every failure is reported (a newline inside it, say in a name a config
    gave, is shown as `\\n`)."""
    write_line(sys.stderr, one_line(f"daintree: {message}"))


def ago(ts: float | None) -> str:
    if not ts:
        return "-"
    delta = max(0.0, time.time() - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= size:
            return f"{int(delta // size)}{unit} ago"
    return f"{int(delta)}s ago"


def table(rows: list[list[str]], header: list[str]) -> str:
    """Left-aligned columns under a header; empty when there are no rows (the caller says "no ...")."""
    if not rows:
        return ""
    # Escaped before measuring, so columns stay aligned; a cell is one line: a newline or tab in a name or task
    # text (data, never layout) would start a forged row of its own or push the columns after it.
    rows = [[one_line(printable(str(c))) for c in r] for r in rows]
    width = _display_width if any(not c.isascii() for r in rows for c in r) else len
    widths = [max(width(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c + " " * (w - width(c)) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


# The bidi marks that `escape_controls` leaves in free text (Arabic and Hebrew text uses them): on a line that
# other cells share, an RLM turns the neutral characters around it (spaces, digits, `-`) right to left, so a
# subject's mark moves the ID, STATUS or WORKTREE cells of its row to where another value's should be.
_LINE_MARKS = str.maketrans({"\t": "\\t", "\n": "\\n", "\u200e": "\\u200e", "\u200f": "\\u200f",
                             "\u061c": "\\u061c"})


def one_line(text: str) -> str:
    """`text` as one line: a newline or tab in it (from a name, task text or a config value) shown escaped, and
    the bidi marks too."""
    return text.translate(_LINE_MARKS)


def _display_width(text: str) -> int:
    """Terminal cells `text` takes: a CJK character or an emoji takes two."""
    from wcwidth import wcswidth  # only for a table with text beyond ASCII

    cells = wcswidth(text)
    return cells if cells >= 0 else len(text)


def configure_logging() -> None:
    """Warnings from the layers below as `warning: ...` lines on stderr (the handler is set up by the first)."""
    on_first_warning(_install_warning_handler)


def _install_warning_handler() -> None:
    import logging

    class WarningHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            write_line(sys.stderr, f"warning: {record.getMessage()}")

    logger = logging.getLogger("daintree")
    logger.handlers = [h for h in logger.handlers if type(h).__name__ != "WarningHandler"]
    logger.addHandler(WarningHandler())
    logger.setLevel(logging.WARNING)
    logger.propagate = False


DEBUG_LOGGER = "daintree.debug"
"""Where `core.log.suppressed` logs what it swallows: a logger of its own, so that the dashboard's toasts (which
take over the `daintree` logger's handlers) leave it alone."""


def configure_debug_log(verbose: bool, screen: bool) -> None:
    """`--verbose` and `DAINTREE_LOG=FILE`: log at debug level what the code swallows on purpose (`suppressed`).

    `DAINTREE_LOG` names a file that the records are appended to (made 0600); without it, `--verbose` writes them
    on stderr, or, for the dashboard (`screen`: it draws on the terminal), into `daintree.log` of the user's log
    directory, named on stderr before the dashboard opens. A `DAINTREE_LOG` that cannot be written is a warning,
    not an error: the variable reaches every daintree an agent runs too, where the file may be read-only."""
    path = os.environ.get("DAINTREE_LOG", "")
    set_debug(False)  # until a destination is set up (a second `main` in one process starts afresh)
    if not verbose and not path:
        return
    import logging

    stream: TextIO | None = None
    if path:
        stream = _append_private(os.path.expanduser(path))
    if stream is None and verbose:
        if screen:
            from platformdirs import user_log_path

            log_file = user_log_path("daintree", appauthor=False) / "daintree.log"
            stream = _append_private(str(log_file))
            if stream is not None:
                write_line(sys.stderr, f"daintree: logging to {log_file}")
        else:
            stream = sys.stderr
    if stream is None:
        return
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s pid %(process)d %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger(DEBUG_LOGGER)
    logger.handlers = [handler]
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    set_debug(True)


def _append_private(path: str) -> TextIO | None:
    """`path` opened for appending, created 0600 (in a 0700 folder) if new; None, with a warning, if it cannot be."""
    try:
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        write_line(sys.stderr, f"warning: cannot write the debug log {path}: {exc.strerror or exc}")
        return None
    return os.fdopen(fd, "a", encoding="utf-8", buffering=1)
