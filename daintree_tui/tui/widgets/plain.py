"""Text from repositories, agents and hosts, shown in a widget as it is: never read as markup, never obeyed.

A Label or Static given a plain string parses Rich markup in it: a file an agent names `[/x]` crashed the
dashboard when a dialog listed it (MarkupError), and `[white on white]...[/]` in a hook command hid that part of it
in the trust prompt. Terminal controls in the text would reach the user's terminal through Textual.
"""

from __future__ import annotations

from rich.text import Text

from daintree_tui.core.validate import escape_controls


def plain(text: str, style: str = "") -> Text:
    """`text` as a Text: markup stays characters, controls are shown escaped (`\\x1b`)."""
    return Text(escape_controls(text), style=style)


def first_of(names: list[str], shown: int) -> str:
    """The first `shown` of `names`, escaped and joined, then `+N` for the rest: an agent's or a host's names in
    one line (files in conflict, failed checks)."""
    more = f" +{len(names) - shown}" if len(names) > shown else ""
    return ", ".join(escape_controls(n) for n in names[:shown]) + more
