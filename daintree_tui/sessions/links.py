"""The links an agent shows on its screen, whole: a sign-in URL is longer than the pane is wide.

An agent's sign-in screen shows a URL of a few hundred characters (claude's OAuth link) that its own layout or the
terminal breaks over several lines; selecting it in the dashboard's terminal is not possible (the mouse goes to
the agent) and selecting it in the user's terminal copies the line breaks and the dashboard's borders with it.
`links_in` reads the screen's text and puts each URL back together: a URL that reaches the pane's right edge goes
on with the next line when that line holds nothing but URL characters (and spaces or a border around them).

The screen is the agent's (and whatever text it prints, a hostile repository's included): `copyable` is what may
go to the clipboard, an http(s) link to a plain host, in URL characters only.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

# URL characters (RFC 3986's, and letters and digits of other scripts, percent-encoded when copied); a quote, a
# backtick, `<>`, `|`, a space, a control or an invisible character (U+200B, U+202E) ends a URL.
_CHAR = r"[A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=%]|[^\W_\x00-\x7f]"
URL = re.compile(rf"https?://(?:{_CHAR})+")
URL_CHARS = re.compile(rf"(?:{_CHAR})+")
EDGE_SLACK = 4
"""A URL whose last character is this close to the right edge is taken as broken there (a layout's padding or a
box's border can stand between the two)."""
REST = re.compile(r"[\s│┃|]*")
"""What may follow the rest of a broken URL on its line: nothing but spaces and a border (else it is text)."""
TRAILING = ".,;:!?)]}"
LONGEST = 8192
"""The longest link copied (claude's sign-in URL is some 300 characters); a longer one is the screen's noise."""
_HOST = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?")
_SAFE = "-._~:/?#[]@!&()*+,;=%"
"""What a copied link keeps as it is; anything else (`$`, letters of other scripts) is percent-encoded: pasted
between double quotes in a shell, `$(...)` would run."""


def links_in(text: str, columns: int) -> list[str]:
    """Every http(s) URL on a screen `columns` wide, in screen order, each once, its broken lines joined."""
    lines = text.split("\n")
    found: dict[str, None] = {}
    y = 0
    while y < len(lines):
        line = lines[y]
        after = y
        for match in URL.finditer(line):
            url = match.group()
            end = match.end()
            row = y
            while end >= columns - EDGE_SLACK and row + 1 < len(lines) and len(url) <= LONGEST:
                following = lines[row + 1]
                stripped = following.lstrip(" │┃")
                more = URL_CHARS.match(stripped)
                if not more or more.group().startswith(("http://", "https://")) \
                        or not REST.fullmatch(stripped[more.end():]):
                    break
                url += more.group()
                row += 1
                end = len(following) - len(stripped) + more.end()
            after = max(after, row)
            found.setdefault(url.rstrip(TRAILING), None)
        y = after + 1  # a row that went on a URL above is that URL's: read once, not again as a URL of its own
    return list(found)


def copyable(url: str) -> str | None:
    """`url` as it may go to the clipboard, or None: longer than LONGEST, not http(s), a host that is not plain
    ASCII letters, digits, dots and dashes (a look-alike letter), or a user part (`https://claude.ai...@evil/`,
    whose host is evil)."""
    if len(url) > LONGEST:
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - a port that is not a number raises
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or "@" in parts.netloc or not _HOST.fullmatch(host):
        return None
    return quote(url, safe=_SAFE)


def host_of(url: str) -> str:
    """The host a `copyable` link goes to."""
    return urlsplit(url).hostname or ""
