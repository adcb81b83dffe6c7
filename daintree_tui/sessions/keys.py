"""Key encoding: Textual key names to the bytes a terminal application expects.

Pure functions, table-tested. Encode from the key *name* (not `event.character`): Textual collapses some byte
sequences and `pilot.press("ctrl+a")` carries no character.
"""

from __future__ import annotations

import unicodedata

ESC = "\x1b"
CSI = ESC + "["
SS3 = ESC + "O"

_CURSOR = {"up": "A", "down": "B", "right": "C", "left": "D", "home": "H", "end": "F"}
_TILDE = {"insert": 2, "delete": 3, "pageup": 5, "pagedown": 6, "page_up": 5, "page_down": 6,
          "f5": 15, "f6": 17, "f7": 18, "f8": 19, "f9": 20, "f10": 21, "f11": 23, "f12": 24,
          "f13": 25, "f14": 26, "f15": 28, "f16": 29, "f17": 31, "f18": 32, "f19": 33, "f20": 34}
_SS3_FUNCTION = {"f1": "P", "f2": "Q", "f3": "R", "f4": "S"}
_PLAIN = {"enter": "\r", "tab": "\t", "escape": ESC, "backspace": "\x7f", "space": " "}
_NAME_ALIASES = {"slash": "/", "backslash": "\\", "at": "@", "minus": "-", "plus": "+", "underscore": "_",
                 "space": " "}
_MODIFIERS = ("shift", "alt", "meta", "ctrl", "super", "hyper")


def key_char(name: str) -> str | None:
    """The character a Textual key name stands for (`full_stop` -> '.'), or None for special keys."""
    if len(name) == 1:
        return name
    if name in _NAME_ALIASES:
        return _NAME_ALIASES[name]
    if name.startswith("upper_") and len(name) == 7:
        return name[-1].upper()
    for candidate in (name.replace("_", " "), name.replace("_", "-")):
        try:
            return unicodedata.lookup(candidate.upper())
        except KeyError:
            continue
    return None


def _split(key: str) -> tuple[set[str], str]:
    parts = key.split("+")
    if key.endswith("+") and len(key) > 1:  # "ctrl++"
        parts = [*key[:-2].split("+"), "+"]
    mods = {("alt" if p == "meta" else p) for p in parts[:-1] if p in _MODIFIERS}
    return mods, parts[-1]


def _modifier_param(mods: set[str]) -> int:
    return 1 + ("shift" in mods) + 2 * ("alt" in mods) + 4 * ("ctrl" in mods)


def _ctrl(char: str) -> str | None:
    if char in ("@", " ", "2"):
        return "\x00"
    if char == "?":
        return "\x7f"
    lower = char.lower()
    if "a" <= lower <= "z":
        return chr(ord(lower) & 0x1F)
    controls = {"[": "\x1b", "\\": "\x1c", "]": "\x1d", "^": "\x1e", "_": "\x1f", "3": "\x1b", "4": "\x1c",
                "5": "\x1d", "6": "\x1e", "7": "\x1f", "8": "\x7f", "/": "\x1f", "-": "\x1f"}
    return controls.get(char)


def encode_key(key: str, character: str | None = None, *, app_cursor: bool = False) -> bytes | None:
    """Bytes for a Textual key event, or None when the key has no terminal encoding.

    Args:
        key: the Textual key name (`ctrl+a`, `shift+up`, `f5`, `full_stop`, `alt+x`).
        character: the event's printable character, used for plain text keys (it carries case and non-ASCII).
        app_cursor: the application set DECCKM: unmodified arrows are sent as SS3.
    """
    mods, base = _split(key)
    if "shift" in mods and base == "tab":
        return (CSI + "Z").encode()
    param = _modifier_param(mods)
    if base in _CURSOR:
        final = _CURSOR[base]
        if param > 1:
            return f"{CSI}1;{param}{final}".encode()
        return ((SS3 if app_cursor else CSI) + final).encode()
    if base in _TILDE:
        number = _TILDE[base]
        return (f"{CSI}{number};{param}~" if param > 1 else f"{CSI}{number}~").encode()
    if base in _SS3_FUNCTION:
        final = _SS3_FUNCTION[base]
        return (f"{CSI}1;{param}{final}" if param > 1 else SS3 + final).encode()
    prefix = ESC if "alt" in mods else ""
    if base in _PLAIN and base != "space":
        plain = _PLAIN[base]
        if "ctrl" in mods and base == "backspace":
            plain = "\x08"
        return (prefix + plain).encode()
    if not mods and character and character.isprintable():
        return character.encode()
    char = key_char(base)
    if char is None:
        return None
    if "ctrl" in mods:
        ctrl = _ctrl(char)
        if ctrl is None:
            return None
        return (prefix + ctrl).encode()
    if "shift" in mods and len(char) == 1:
        char = char.upper()
    return (prefix + char).encode()


# ESC and the C1 controls (U+0080-U+009F, among them the one-character CSI U+009B): none belongs in pasted text,
# and each can start the sequence that ends a bracketed paste, after which the rest is typed as keys (Enter, an
# agent's `!` shell escape). Removing the marker alone is not enough: `ESC[20` ESC[201~ `1~` leaves one behind.
_PASTE_CONTROLS = dict.fromkeys([0x1B, *range(0x80, 0xA0)])


def paste_text(text: str) -> str:
    """`text` with nothing in it that could end a bracketed paste (or be a terminal control inside one)."""
    return text.translate(_PASTE_CONTROLS)


def encode_paste(text: str, bracketed: bool) -> bytes:
    """Pasted text: wrapped in bracketed-paste markers when the application asked for them."""
    text = paste_text(text).replace("\r\n", "\r").replace("\n", "\r")
    if bracketed:
        return f"{CSI}200~{text}{CSI}201~".encode()
    return text.encode()


MOUSE_LEFT, MOUSE_MIDDLE, MOUSE_RIGHT, WHEEL_UP, WHEEL_DOWN = 0, 1, 2, 64, 65


def encode_mouse_sgr(button: int, x: int, y: int, *, pressed: bool = True, shift: bool = False,
                     alt: bool = False, ctrl: bool = False, motion: bool = False) -> bytes:
    """An SGR (1006) mouse report; x and y are 0-based cell coordinates."""
    code = button + 4 * shift + 8 * alt + 16 * ctrl + 32 * motion
    return f"{CSI}<{code};{x + 1};{y + 1}{'M' if pressed else 'm'}".encode()
