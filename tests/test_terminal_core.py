"""Terminal emulation core and key encoding: pure functions, table-driven."""

from __future__ import annotations

import pytest

from daintree_tui.sessions.emulator import TerminalEmulator
from daintree_tui.sessions.keys import (
    WHEEL_DOWN,
    WHEEL_UP,
    encode_key,
    encode_mouse_sgr,
    encode_paste,
    key_char,
)

ESC = "\x1b"


@pytest.mark.parametrize(("data", "expected"), [
    ("ok ✔️ tests passed", "ok ✔️ tests passed"),                     # U+FE0F used to drop the rest
    ("family 👨‍👩‍👧 done", "family 👨‍👩‍👧 done"),                            # U+200D joins
    ("thumb 👍🏽 end", "thumb 👍🏽 end"),
    ("flag 🇩🇪 end", "flag 🇩🇪 end"),
    ("e\u0301 accent", "é accent"),
])
def test_emoji_and_combining_survive(data: str, expected: str) -> None:
    emu = TerminalEmulator(40, 3)
    emu.feed(data.encode())
    assert emu.line_text(0) == expected


def test_emoji_sequences_take_two_cells() -> None:
    emu = TerminalEmulator(20, 2)
    emu.feed("👍🏽x🇩🇪y".encode())
    cells = [emu.screen.buffer[0][x].data for x in range(6)]
    assert cells == ["👍🏽", "", "x", "🇩🇪", "", "y"]


def _rows(emu: TerminalEmulator) -> list[str]:
    return [emu.line_text(y).rstrip() for y in range(emu.screen.lines)]


@pytest.mark.parametrize(("sequence", "expected"), [
    # tmux scrolls with SU (`indn` in xterm-256color's terminfo) when lines come faster than it draws: pyte
    # 0.8.2 ignored it, and each line lost was written over the one it should have pushed up.
    (f"{ESC}[2S", ["c", "d", "e", "", ""]),
    (f"{ESC}[S", ["b", "c", "d", "e", ""]),
    (f"{ESC}[9S", ["", "", "", "", ""]),
    (f"{ESC}[2T", ["", "", "a", "b", "c"]),
    (f"{ESC}[2;4r{ESC}[1S", ["a", "c", "d", "", "e"]),  # within the margins only
    (f"{ESC}[2;4r{ESC}[1T", ["a", "", "b", "c", "e"]),
    (f"{ESC}[?2S", ["a", "b", "c", "d", "e"]),  # XTSMGRAPHICS, not SU
    (f"{ESC}[1;2;3;4;5T", ["a", "b", "c", "d", "e"]),  # xterm's mouse highlight tracking, not SD
])
def test_scroll_up_and_down_move_the_lines_within_the_margins(sequence: str, expected: list[str]) -> None:
    emu = TerminalEmulator(10, 5)
    emu.feed(b"a\r\nb\r\nc\r\nd\r\ne")
    emu.take_dirty()
    emu.feed(sequence.encode())
    assert _rows(emu) == expected
    if _rows(emu) != ["a", "b", "c", "d", "e"]:
        assert emu.take_dirty() == set(range(5))  # every line is drawn again


def test_repeat_draws_the_last_character_again_and_at_most_a_line() -> None:
    emu = TerminalEmulator(10, 3)
    emu.feed(f"ab{ESC}[3b|".encode())
    assert emu.line_text(0).rstrip() == "abbbb|"
    emu.feed(f"{ESC}[H{ESC}[2J-{ESC}[999999999b".encode())  # an agent's count: 11 drawn, not 10**9
    assert emu.errors == 0 and [_rows(emu)[0], _rows(emu)[1]] == ["-" * 10, "-"]
    fresh = TerminalEmulator(10, 1)
    fresh.feed(f"{ESC}[5bx".encode())  # nothing drawn yet: nothing to repeat
    assert fresh.line_text(0).rstrip() == "x"


def test_unknown_private_sgr_does_not_lose_the_chunk() -> None:
    emu = TerminalEmulator(40, 3)
    emu.feed(b"\x1b[?4mafter\x1b[?1h")
    assert emu.line_text(0) == "after"
    assert emu.app_cursor and emu.errors == 0


def test_multibyte_split_across_reads() -> None:
    emu = TerminalEmulator(40, 3)
    data = "héllo ✔ wörld".encode()
    for i in range(len(data)):
        emu.feed(data[i:i + 1])
    assert emu.line_text(0) == "héllo ✔ wörld"


def test_feed_never_raises_on_garbage() -> None:
    emu = TerminalEmulator(80, 5)
    emu.feed(bytes(range(256)) * 4 + b"\x1b[999999;99999H\x1b[38;2;999;-1;xm\x1b]0;\x07")
    emu.feed(b"\x1b[2J\x1b[Hstill ok")
    assert "still ok" in emu.text()


def test_device_attribute_query_is_answered() -> None:
    answers: list[bytes] = []
    emu = TerminalEmulator(10, 3, respond=answers.append)
    emu.feed(b"\x1b[c")
    assert answers and answers[0].startswith(b"\x1b[?")


def test_modes_and_resize() -> None:
    emu = TerminalEmulator(10, 3)
    emu.feed(b"\x1b[?2004h\x1b[?1000h\x1b[?1006h")
    assert emu.bracketed_paste and emu.mouse_tracking
    emu.resize(20, 5)
    assert (emu.screen.columns, emu.screen.lines) == (20, 5)
    assert emu.take_dirty() >= set(range(5)) and emu.take_dirty() == set()


KEY_TABLE = [
    ("a", "a", False, b"a"),
    ("A", "A", False, b"A"),
    ("ctrl+a", None, False, b"\x01"),
    ("ctrl+c", None, False, b"\x03"),
    ("ctrl+q", None, False, b"\x11"),
    ("ctrl+z", None, False, b"\x1a"),
    ("ctrl+@", None, False, b"\x00"),
    ("ctrl+space", None, False, b"\x00"),
    ("ctrl+left_square_bracket", None, False, b"\x1b"),
    ("ctrl+backslash", None, False, b"\x1c"),
    ("alt+x", None, False, b"\x1bx"),
    ("alt+ctrl+a", None, False, b"\x1b\x01"),
    ("enter", "\r", False, b"\r"),
    ("tab", "\t", False, b"\t"),
    ("shift+tab", None, False, b"\x1b[Z"),
    ("escape", "\x1b", False, b"\x1b"),
    ("backspace", "\x7f", False, b"\x7f"),
    ("ctrl+backspace", None, False, b"\x08"),
    ("alt+backspace", None, False, b"\x1b\x7f"),
    ("space", " ", False, b" "),
    ("up", None, False, b"\x1b[A"),
    ("up", None, True, b"\x1bOA"),
    ("left", None, True, b"\x1bOD"),
    ("shift+up", None, False, b"\x1b[1;2A"),
    ("alt+up", None, False, b"\x1b[1;3A"),
    ("ctrl+right", None, True, b"\x1b[1;5C"),
    ("ctrl+shift+left", None, False, b"\x1b[1;6D"),
    ("home", None, False, b"\x1b[H"),
    ("end", None, True, b"\x1bOF"),
    ("insert", None, False, b"\x1b[2~"),
    ("delete", None, False, b"\x1b[3~"),
    ("pageup", None, False, b"\x1b[5~"),
    ("pagedown", None, False, b"\x1b[6~"),
    ("ctrl+delete", None, False, b"\x1b[3;5~"),
    ("f1", None, False, b"\x1bOP"),
    ("f4", None, False, b"\x1bOS"),
    ("shift+f1", None, False, b"\x1b[1;2P"),
    ("f5", None, False, b"\x1b[15~"),
    ("f12", None, False, b"\x1b[24~"),
    ("ctrl+f5", None, False, b"\x1b[15;5~"),
    ("full_stop", ".", False, b"."),
    ("full_stop", None, False, b"."),
    ("slash", None, False, b"/"),
    ("question_mark", "?", False, b"?"),
    ("ü", "ü", False, "ü".encode()),
    ("unknown_key_name", None, False, None),
]


@pytest.mark.parametrize(("key", "char", "app", "expected"), KEY_TABLE)
def test_key_table(key: str, char: str | None, app: bool, expected: bytes | None) -> None:
    assert encode_key(key, char, app_cursor=app) == expected


def test_key_char_names() -> None:
    assert key_char("left_square_bracket") == "["
    assert key_char("underscore") == "_"
    assert key_char("circumflex_accent") == "^"


def test_paste_and_mouse() -> None:
    assert encode_paste("a\nb", bracketed=True) == b"\x1b[200~a\rb\x1b[201~"
    assert encode_paste("a\nb", bracketed=False) == b"a\rb"
    assert encode_paste("x\x1b[201~y", bracketed=True) == b"\x1b[200~x[201~y\x1b[201~"  # no ESC: it cannot end
    assert encode_mouse_sgr(WHEEL_UP, 0, 0) == b"\x1b[<64;1;1M"
    assert encode_mouse_sgr(WHEEL_DOWN, 9, 4, ctrl=True) == b"\x1b[<81;10;5M"
    assert encode_mouse_sgr(0, 2, 3, pressed=False) == b"\x1b[<0;3;4m"
