"""Stand-in agents and what real ones print: a recording agent that takes bracketed paste, claude's last words
offline."""

from __future__ import annotations

# A stand-in agent that asks for bracketed paste (as Claude Code and Codex do) and records every byte it is sent;
# its input box shows a paste as they do ("[Pasted text]"), unless it is a dialog (argv[2]) that swallows one.
RECORDER = """\
import os, sys, tty
tty.setraw(0)
dialog = len(sys.argv) > 2
os.write(1, b"\\x1b[?2004h" + (b"Trust this folder?\\r\\n> 1. Yes\\r\\n  2. No\\r\\n" if dialog else b"ready\\r\\n"))
seen = b""
with open(os.path.join(sys.argv[1], "got-" + os.environ["DAINTREE_WORKTREE"]), "ab") as out:
    while chunk := os.read(0, 4096):
        out.write(chunk)
        out.flush()
        seen += chunk
        if b"\\x1b[201~" in seen and not dialog:
            seen = b""
            os.write(1, b"[Pasted text]\\r\\n")
"""


# The end of a real claude 2.1 session log with no route to its API: words placed by cursor moves, then the
# terminal modes it resets on exit (a charset pick `ESC ( B`, `SI`, cursor save/restore `ESC 7`/`ESC 8`).
CLAUDE_OFFLINE_TAIL = (
    b"\r\r\n\x1b[2GPlease\x1b[9Gcheck\x1b[15Gyour\x1b[20Ginternet\x1b[29Gconnection\x1b[40Gand\x1b[44Gnetwork"
    b"\x1b[52Gsettings.\r\r\n\r\r\n\x1b[2GNote:\x1b[8GClaude\x1b[15GCode\x1b[20Gmight\x1b[26Gnot\x1b[30Gbe"
    b"\x1b[33Gavailable\x1b[43Gin\x1b[46Gyour\x1b[51Gcountry.\x1b[60GCheck\r\r\n\x1b[2Gsupported\x1b[12Gcountries"
    b"\x1b[22Gat\x1b[25G\x1b[38;5;153mhttps://anthropic.com/supported-countries\x1b[39m\r\r\n\x1b[?2026$p\x1b[c"
    b"\x1b[?25h\x1b[?1006l\x1b[?1003l\x1b[?1002l\x1b[?1000l\x1b(B\x0f\x1b[>4m\x1b[<u\x1b[?1004l\x1b[?2031l"
    b"\x1b[?2004l\x1b[?25h\x1b7\x1b[r\x1b8\x1b[?25h\x1b[>4m\x1b[<u\x1b[?1004l\x1b[?2031l\x1b[?2004l"
)
