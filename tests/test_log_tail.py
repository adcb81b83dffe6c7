"""`session log -n N` of a hostile log: the end of megabytes of cursor moves, found without a Python step for each."""

from __future__ import annotations

import os
import random
import re
import resource
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from daintree_tui.cli.output import replayable
from daintree_tui.core.follow import LINE_START, LastLines
from daintree_tui.sessions.last_words import could_hold_lines, readable_lines

# The CPU a run may take: generous (the runs below take a few tenths of a second; before, the one on a terminal
# took half a minute).
CPU_LIMIT = 10.0


def _log(repo: Path, name: str, data: bytes) -> None:
    path = repo / ".worktrees" / ".logs" / f"{name}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _run(repo: Path, *args: str, terminal: bool) -> tuple[bytes, float]:
    """`daintree ARGS`, its stdout a pipe or a real PTY: what it wrote there, and the CPU it took."""
    if terminal:
        leader, follower = os.openpty()
        out_fd = follower
    else:
        leader, out_fd = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", *args], cwd=repo, stdout=out_fd,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    os.close(out_fd)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the writer closed the PTY
            chunk = b""
        if not chunk:
            break
        out += chunk
    os.close(leader)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0
    return out, usage.ru_utime + usage.ru_stime


def test_the_end_of_megabytes_of_cursor_moves_is_found_without_a_step_for_each(repo: Path) -> None:
    """An agent's log of 18 MB of `ESC [ H` (a screen redrawn from its top, over and over, with no text) made
    `session log NAME -n 5` on a terminal take half a minute of CPU: each tail read backwards, twice as long as
    the last, was turned into text again, a Python step for each cursor move, up to 16 MB."""
    _log(repo, "home", b"\x1b[2;1Hgone\n" + b"\x1b[H" * (6 * 1024 * 1024) + b"\x1b[5;1Hlast words")
    shown, cpu = _run(repo, "session", "log", "home", "-n", "5", terminal=True)
    assert shown.decode().splitlines() == ["last words"]
    assert cpu < CPU_LIMIT, cpu
    piped, cpu = _run(repo, "session", "log", "home", "-n", "5", terminal=False)
    assert piped == b"\x1b[H" * 4 + b"\x1b[5;1Hlast words"  # a cursor move to a row begins a line
    assert cpu < CPU_LIMIT, cpu
    # A last line of megabytes after them: the line starts before it are not each a Python step either.
    _log(repo, "home", b"\x1b[H" * (3 * 1024 * 1024) + b"\x1b[7;1H" + b"x" * (9 * 1024 * 1024))
    piped, cpu = _run(repo, "session", "log", "home", "-n", "2", terminal=False)
    assert piped == b"\x1b[H\x1b[7;1H" + b"x" * (9 * 1024 * 1024)
    assert cpu < CPU_LIMIT, cpu
    # Cursor moves to two rows in turn: a line each, all blank; what a terminal shows is the last megabyte's text.
    _log(repo, "home", b"\x1b[1H\x1b[2H" * (2 * 1024 * 1024) + b"\x1b[3Hend")
    shown, cpu = _run(repo, "session", "log", "home", "-n", "5", terminal=True)
    assert shown.decode().splitlines() == ["end"]
    assert cpu < CPU_LIMIT, cpu


def test_a_log_of_megabytes_of_lines_shows_its_last(repo: Path) -> None:
    line = b"\x1b[32mok\x1b[0m a normal line of output, number %d\r\n"
    _log(repo, "lines", b"".join(line % n for n in range(300_000)))
    shown, cpu = _run(repo, "session", "log", "lines", "-n", "3", terminal=True)
    assert shown.decode().splitlines() == [f"ok a normal line of output, number {n}" for n in range(299_997, 300_000)]
    assert cpu < CPU_LIMIT, cpu
    piped, cpu = _run(repo, "session", "log", "lines", "-n", "3", terminal=False)
    assert piped == b"".join(line % n for n in range(299_997, 300_000))
    assert cpu < CPU_LIMIT, cpu


def _line_starts(data: bytes) -> list[int]:
    """Where each line of `data` begins, read forwards: what `last_line_starts` finds from the end."""
    starts = [0]
    for match in LINE_START.finditer(data):
        starts.append(match.end() if match.group() == b"\n" else match.start())
    if starts[-1] == len(data) and len(starts) > 1:  # after a last line break: no line yet
        starts.pop()
    return sorted(set(starts))


def test_the_last_lines_found_from_the_end_chunk_by_chunk_are_those_found_from_the_start() -> None:
    """`LastLines` scans each chunk of a tail read backwards once: a cursor move cut between two chunks, or a line
    break at the cut, still begins a line, once."""
    pieces = [b"\n", b"\r", b"\x1b", b"[", b"H", b"f", b"1", b";", b"x", b"\x1b[H", b"\x1b[2;5H", b"\n\x1b[3H"]
    rng = random.Random(11)
    for _ in range(20_000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        cuts = sorted({rng.randint(0, len(data)) for _ in range(rng.randint(0, 4))} | {0}, reverse=True)
        for count in range(1, 5):
            last = LastLines(count)
            for cut in cuts:  # the tails read_tail reads, each longer than the last
                tail = data[cut:]
                if last(tail, cut == 0):
                    break
            starts = _line_starts(tail)
            expected = tail[starts[-count]:] if count < len(starts) else tail
            assert last.of(tail) == expected, (data, cuts, count)


def test_readable_lines_keep_their_spacing_and_are_never_more_than_could_hold_lines_says() -> None:
    # Moves to the same row one after another are a space each, as one move across the row is.
    assert readable_lines("a\x1b[3;1H\x1b[3;4H\x1b[3;9Hb\x1b[3;1H\x1b[3Hc") == ["a", "  b  c"]
    assert readable_lines("\x1b[H" * 1000 + "x\x1b[2H\x1b[1Hy") == [" " * 999 + "x", "y"]
    pieces = ["\x1b[1H", "\x1b[H", "\x1b[2;3H", "\x1b[;5H", "\x1b]0;t\x07", "\x1b]", "\x1b[31m", "\x1b[5C", "\x1b[A",
              "\x1b[1;", "\x1b", "x", " ", "\n", "\r", "\t", "\x07", "\u200b"]
    rng = random.Random(12)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        lines = readable_lines(text)
        assert could_hold_lines(text, len(lines)), text
        assert all(re.sub(r"[ -~]", "", line) == "" for line in lines), text


def test_a_line_of_megabytes_growing_while_followed_is_read_once_and_replayed_at_once(repo: Path) -> None:
    """`session log NAME --follow` of an agent writing megabytes of `ESC [ H` with no line break: the line begun
    was copied and split again whole at each change of the file, and its replay into a pipe was a Python call for
    each cursor move; the follower spent more CPU than the agent's whole run took and printed nothing for long."""
    _log(repo, "grows", b"start\n")
    reader, writer = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "daintree_tui", "session", "log", "grows", "--follow"], cwd=repo,
                            stdout=writer, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    os.close(writer)
    os.set_blocking(reader, False)
    out = bytearray()

    def read_out(wait: float = 0.0) -> None:
        # Woken by the pipe itself: a sleep between reads let 64 KB through a pipe each time, so the 18 MB took
        # longer than the deadline on a loaded machine (seen at load 7), and the follower, blocked on the full
        # pipe at the end, never got to its exit.
        select.select([reader], [], [], wait)
        while True:
            try:
                chunk = os.read(reader, 1 << 20)
            except BlockingIOError:
                return
            if not chunk:
                return
            out.extend(chunk)

    try:
        deadline = time.monotonic() + 30
        while b"start" not in out and time.monotonic() < deadline:
            read_out(0.05)
        with (repo / ".worktrees" / ".logs" / "grows.log").open("ab") as log:
            for _ in range(256):  # 18 MB in 256 writes, as an agent's output grows
                log.write(b"\x1b[H" * 24 * 1024)
                log.flush()
                time.sleep(0.005)
                read_out()
            log.write(b"\ndone\n")
        deadline = time.monotonic() + 90
        while not out.endswith(b"done\n") and time.monotonic() < deadline:
            read_out(0.05)
    finally:
        proc.send_signal(signal.SIGINT)
        os.close(reader)  # a follower still writing gets a broken pipe, not a wait for a reader that is gone
        usage = _reaped(proc, timeout=30, seen=len(out))
    assert out.endswith(b"\x1b[H" * 3 + b"\ndone\n") and len(out) == 6 + 256 * 24 * 1024 * 3 + 6
    assert usage.ru_utime + usage.ru_stime < CPU_LIMIT / 2, usage  # (it takes under one; it took over ten)


def _reaped(proc: subprocess.Popen[bytes], timeout: float, seen: int) -> resource.struct_rusage:
    """The rusage of `proc` once it ended, or a failure naming where it hung (it hung twice on a loaded machine,
    and the test then waited for pytest's timeout, which names nothing of the follower)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid, _, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            return usage
        time.sleep(0.05)
    threads = {task.name: (task / "stat").read_text().split(") ")[-1].split()[0] + " "
               + (task / "wchan").read_text() for task in Path(f"/proc/{proc.pid}/task").iterdir()}
    proc.kill()
    proc.wait()
    raise AssertionError(f"the follower did not end within {timeout:.0f}s of SIGINT, {seen} bytes shown; "
                         f"its threads (state, kernel wait): {threads}")


# `replayable` as it was: a Python call for each sequence, to tell which to keep.
_OLD_SEQUENCES = re.compile(
    r"\x1b\[([0-?]*)([ -/]*)([@-~])|\x1b[\]PX^_][\s\S]*?(?:\x07|\x1b\\|\x18|\x1a|\Z)|\x1b[ -/]*[0-~]?"
    r"|[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _old_replayable(text: str) -> str:
    def keep(match: re.Match[str]) -> str:
        params, intermediates, final = match.group(1, 2, 3)
        kept = final is not None and not intermediates and final in "@ABCDEFGHJKLMPSTXZ`adefm"
        return match.group() if kept and all(c in "0123456789;:" for c in params) else ""

    return _OLD_SEQUENCES.sub(keep, text)


def test_replay_keeps_and_drops_what_it_did() -> None:
    pieces = ["\x1b", "[", "]", "P", "_", "1", ";", ":", "?", " ", "!", "m", "H", "J", "h", "q", "\x07", "\x18", "\\",
              "x", "\n", "\r", "\t", "\x08", "\x00", "\x7f", "\x85", "\x9b", "\x1b[31m", "\x1b[?1049h",
              "\x1b]52;c;x\x07", "\x1bP", "\x1b(B", "`", "\x1b[1;2H", "\x1b[1 q", "\x1b\\"]
    rng = random.Random(13)
    for _ in range(50_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert replayable(text) == _old_replayable(text), text
