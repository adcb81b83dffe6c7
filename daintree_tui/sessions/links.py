"""The links an agent shows on its screen, whole: a sign-in URL is longer than the pane is wide.

An agent's sign-in screen shows a URL of a few hundred characters (claude's OAuth link) that its own layout or the
terminal breaks over several lines; selecting it in the dashboard's terminal is not possible (the mouse goes to
the agent) and selecting it in the user's terminal copies the line breaks and the dashboard's borders with it.
`links_in` reads the screen's text and puts each URL back together: a URL that reaches the pane's right edge goes
on with the next line when that line holds nothing but URL characters (and spaces or a border around them).
"""

from __future__ import annotations

import re

URL = re.compile(r"https?://[^\s\"'<>`│┃|]+")
URL_CHARS = re.compile(r"[^\s\"'<>`│┃|]+")
EDGE_SLACK = 4
"""A URL whose last character is this close to the right edge is taken as broken there (a layout's padding or a
box's border can stand between the two)."""
REST = re.compile(r"[\s│┃|]*")
"""What may follow the rest of a broken URL on its line: nothing but spaces and a border (else it is text)."""
TRAILING = ".,;:!?)]}"


def links_in(text: str, columns: int) -> list[str]:
    """Every http(s) URL on a screen `columns` wide, in screen order, each once, its broken lines joined."""
    lines = text.split("\n")
    found: list[str] = []
    y = 0
    while y < len(lines):
        line = lines[y]
        for match in URL.finditer(line):
            url = match.group()
            end = match.end()
            row = y
            while end >= columns - EDGE_SLACK and row + 1 < len(lines):
                following = lines[row + 1]
                stripped = following.lstrip(" │┃")
                more = URL_CHARS.match(stripped)
                if not more or more.group().startswith(("http://", "https://")) \
                        or not REST.fullmatch(stripped[more.end():]):
                    break
                url += more.group()
                row += 1
                end = len(following) - len(stripped) + more.end()
            url = url.rstrip(TRAILING)
            if url not in found:
                found.append(url)
        y += 1
    return found
