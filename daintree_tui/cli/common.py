"""What the command modules share: the parser class, the handler and registration types, argument parsing, and
the one factory that builds a command's services."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Protocol

from daintree_tui.cli.output import error
from daintree_tui.core.errors import InputError
from daintree_tui.core.project import Project
from daintree_tui.services import Services

Handler = Callable[[argparse.Namespace, Services], int]


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code 2."""

    def error(self, message: str) -> NoReturn:
        error(f"error: {message}")
        raise SystemExit(2)


class AddCommand(Protocol):
    """Adds one command (with the common --repo/--json options) under a subparsers action."""

    def __call__(self, parent: Any, name: str, handler: Handler | None, help: str,
                 aliases: Sequence[str] = ()) -> Parser: ...


def services_for(args: argparse.Namespace) -> Services:
    """The services of the repository a parsed command names (--repo, else the current directory). Sessions need
    tmux here: without it the CLI has no session host (a PTY session would die with this process)."""
    return Services(Project.discover(getattr(args, "repo", None)))


def task_ids(text: str | None, flag: str) -> list[int]:
    if text is None or text.strip() == "":
        return []
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"{flag} takes task ids separated by commas (got {text!r})") from None
    if any(i <= 0 for i in ids):
        raise InputError(f"{flag} takes positive task ids (got {text!r})")
    return ids


def task_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"invalid task id {text!r}: expected a positive integer") from None
    if value <= 0:
        raise InputError(f"invalid task id {text!r}: expected a positive integer")
    return value
