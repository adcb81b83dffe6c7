"""tmux control mode's line protocol: the lines a `tmux -C` client reads, parsed into messages, and the quoting of
the commands it writes.

Pure: no process, no thread. `ControlParser` is fed one line at a time (bytes, without the newline) and returns a
message when the line completes one: `%output` (only its size and unescaped tail are kept), a command's reply
(the lines between `%begin` and `%end`/`%error`), a subscription's new value, `%exit`, or any other notification.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TAIL_BYTES = 512  # what a `%output` keeps of a chunk: enough for the last screen line, never the whole flood

_ESCAPE = re.compile(rb"\\([0-7]{3})")


@dataclass(frozen=True)
class Output:
    """`%output %PANE DATA` (or `%extended-output`): `size` counts escaped bytes; `tail` is the unescaped end."""

    pane: str
    size: int
    tail: bytes


@dataclass(frozen=True)
class Reply:
    """The lines between `%begin` and `%end` (ok) or `%error` (not ok). `own` is false for commands the client
    did not send itself (the initial attach)."""

    number: int
    ok: bool
    own: bool
    lines: tuple[str, ...]


@dataclass(frozen=True)
class SubscriptionChanged:
    name: str
    value: str


@dataclass(frozen=True)
class Notification:
    """Any other `%name args` line (`%sessions-changed`, `%window-add @1`, `%pause %3`, ...)."""

    name: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Exit:
    reason: str


ControlMessage = Output | Reply | SubscriptionChanged | Notification | Exit

# Notifications after which the set of sessions or panes may differ.
TOPOLOGY_NOTIFICATIONS = frozenset({"sessions-changed", "window-add", "window-close", "unlinked-window-add",
                                    "unlinked-window-close", "session-changed"})


def unescape(data: bytes) -> bytes:
    """Undo tmux's octal escaping (`\\ooo`) of non-printable bytes and backslash."""
    return _ESCAPE.sub(lambda m: bytes([int(m.group(1), 8) & 0xFF]), data)


def escaped_tail(data: bytes, limit: int = TAIL_BYTES) -> bytes:
    """The last `limit` escaped bytes unescaped, cut where no `\\ooo` sequence is split."""
    if len(data) <= limit:
        return unescape(data)
    start = len(data) - limit
    for back in (1, 2, 3):
        if data[start - back:start - back + 1] == b"\\":
            start = start - back + 4  # inside an escape: start after it
            break
    return unescape(data[start:])


class ControlParser:
    """Turns control-mode lines (bytes, without the newline) into messages. Stateful only across a block."""

    def __init__(self) -> None:
        # (the "time number flags" guard, number, own, how many lines it has when that is known)
        self._block: tuple[bytes, int, bool, int | None] | None = None
        self._lines: list[str] = []
        self._expected: int | None = None

    def expect_lines(self, count: int) -> None:
        """The next reply to our own commands has exactly `count` lines (a capture framed by its pane's height):
        they are taken whatever they read, and the guard must follow them. A screen's lines are an agent's,
        and one of them may read like the guard."""
        self._expected = count

    def feed(self, line: bytes) -> ControlMessage | None:
        """Raises:
            ValueError: a framed reply did not end after its lines (the stream is out of step: the client ends)."""
        if line.endswith(b"\r"):
            line = line[:-1]
        if self._block is not None:
            guard, number, own, count = self._block
            if count is None or len(self._lines) >= count:
                for end, ok in ((b"%end ", True), (b"%error ", False)):
                    if line.startswith(end) and line[len(end):] == guard:
                        self._block = None
                        lines, self._lines = tuple(self._lines), []
                        return Reply(number, ok, own, lines)
                if count is not None:
                    raise ValueError(f"control stream out of step: reply {number} went on past its {count} lines")
            self._lines.append(line.decode("utf-8", "replace"))
            return None
        if not line.startswith(b"%"):
            return None  # stray text outside a block (tmux prints none; an ssh banner might)
        if line.startswith(b"%output "):
            pane, _, data = line[8:].partition(b" ")
            return Output(pane.decode(), len(data), escaped_tail(data))
        if line.startswith(b"%extended-output "):
            head, _, data = line[17:].partition(b" : ")
            return Output(head.split(b" ", 1)[0].decode(), len(data), escaped_tail(data))
        text = line.decode("utf-8", "replace")
        name, _, rest = text[1:].partition(" ")
        if name == "begin":
            parts = rest.split()
            if len(parts) >= 3 and parts[1].isdigit():
                own = parts[2] == "1"
                count, self._expected = (self._expected, None) if own else (None, self._expected)
                self._block = (rest.encode(), int(parts[1]), own, count)
                self._lines = []
            return None
        if name == "subscription-changed":
            sub_name, _, tail = rest.partition(" ")
            _, sep, value = tail.partition(" : ")
            return SubscriptionChanged(sub_name, value if sep else "")
        if name == "exit":
            return Exit(rest)
        return Notification(name, tuple(rest.split()))


def quote(text: str) -> str:
    """Quote one argument for tmux's command parser (and for a shell: the same single-quote rules)."""
    return "'" + text.replace("'", "'\\''") + "'"
