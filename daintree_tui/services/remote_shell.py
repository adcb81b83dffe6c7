"""Remote command lines: every word quoted for the remote POSIX shell, whatever the login shell there is.

ssh hands the remote side one string, which sshd runs with the user's login shell: each argument is quoted
(`remote_word`, `remote_command`), the whole line is wrapped so that fish or tcsh parse it as sh would
(`for_any_login_shell`), and a streaming command runs under a watchdog that ends it when our side goes away
(`watched`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from daintree_tui.core.errors import InputError


def remote_word(text: str) -> str:
    """`text` as one word for the remote POSIX shell; a leading `~/` still means the remote home."""
    if text == "~":
        return '"$HOME"'
    if text.startswith("~/"):
        return '"$HOME"/' + shlex.quote(text[2:])
    return shlex.quote(text)


def remote_command(argv: Sequence[str]) -> str:
    """A remote command line: ssh hands the remote shell one string, so every argument is quoted."""
    return " ".join(shlex.quote(arg) for arg in argv)


# Bytes left as they are by `for_any_login_shell`: the same inside every shell's single quotes (fish reads a
# backslash there, tcsh `!` and a newline), sh's double quotes (`$`, backquote, `"`, backslash) and printf's format
# (backslash, `%`). Bytes of non-ASCII text (0x80 and up) are none of these in any shell, so they pass too: UTF-8 text
# costs one byte a byte, not four.
_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 ,._+:@/=-()[]{};&|<>*?#~^")
# Linux takes one argument of at most 128 KiB (MAX_ARG_STRLEN), and sshd hands the whole line to the login shell
# as one argument: a longer line fails there (and in our own exec of ssh) with "Argument list too long".
MAX_REMOTE_LINE = 128 * 1024 - 1


def for_any_login_shell(command: str) -> str:
    """POSIX `command` wrapped so that whatever the remote login shell is, `sh` parses it.

    sshd runs the command string with the user's login shell, and fish or tcsh read POSIX quoting differently:
    in fish, `\\'` inside single quotes is a quote, so an argument ending in a backslash would end its quotes early
    and let the next argument run as code. The wrapper is `sh -c 'eval "$(printf "...")"'` whose only ASCII
    characters are letters, digits, punctuation no shell reads inside single quotes, and octal escapes (`\\ddd`);
    sh's printf turns them back into the command, byte for byte. Non-ASCII bytes pass as they are (UTF-8 text
    would otherwise grow fourfold and a 40 KB description would no longer fit in one command line), and text
    that is not UTF-8 (arguments read with surrogateescape) is sent as the bytes it was.

    Raises:
        InputError: the line would pass Linux's limit of one argument (MAX_REMOTE_LINE).
    """
    parts: list[bytes] = []
    previous_raw_high = False
    for i, byte in enumerate(command.encode("utf-8", "surrogateescape")):
        if byte >= 0x80 or (byte in _PLAIN and not (i == 0 and byte == ord("-"))):
            parts.append(bytes([byte]))
            previous_raw_high = byte >= 0x80
            continue
        # In a double-byte locale (GBK, Big5, Shift_JIS) a lead byte followed by a backslash is one character and would
        # swallow the escape: an empty "" between them changes nothing for sh and keeps them apart.
        parts.append(b'""\\%03o' % byte if previous_raw_high else b"\\%03o" % byte)
        previous_raw_high = False
    line = b"sh -c 'eval \"$(printf \"" + b"".join(parts) + b"\")\"'"
    if len(line) > MAX_REMOTE_LINE:
        raise InputError(f"command too long for a remote host: {len(line)} bytes once quoted, the limit of one "
                         f"command line is {MAX_REMOTE_LINE} (send less text)")
    return line.decode("utf-8", "surrogateescape")


# Runs a command and ends it when our side goes away: sshd closes the channel's stdin when the client or the
# connection dies, and without a terminal nothing else would tell a `--follow` that nobody reads it any more.
_WATCHDOG = (
    'exec 3<&0; "$@" 3<&- & child=$!; '
    '{ read -r _ <&3; kill "$child"; } >/dev/null 2>&1 & watcher=$!; '
    'exec 3<&-; wait "$child"; status=$?; kill "$watcher" 2>/dev/null; exit "$status"'
)


def watched(command: str) -> str:
    """`command` under the watchdog: it ends when our side of the connection goes away."""
    # `exec`, so the pid the watchdog kills is the command itself, not a shell that would leave it orphaned.
    return f"sh -c {shlex.quote(_WATCHDOG)} daintree-remote sh -c {shlex.quote('exec ' + command)}"
