"""What the command modules share: the parser class, the handler and registration types, argument parsing, and
the one factory that builds a command's services."""

from __future__ import annotations

import argparse
import itertools
import shlex
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from daintree_tui.cli.output import error
from daintree_tui.core.errors import InputError
from daintree_tui.core.project import Project
from daintree_tui.services import Services

if TYPE_CHECKING:
    import threading

Handler = Callable[[argparse.Namespace, Services], int]


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and exit code 2; an error caused by a word that starts with a dash says
    where such text goes (`daintree task create -v` only said that a subject was required)."""

    given: Sequence[str] = ()
    """The words this parser was handed (a command's parser gets what follows its command words)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.has_commands = False
        self.commands: Any = None
        self.option_words: set[str] = set()  # its options' words (`-m`, `--message`), read by the dash hint
        for parent in kwargs.get("parents", ()):  # options taken from parents are not added one by one
            self.option_words |= getattr(parent, "option_words", set())
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if args and not args[0].startswith("-") and "metavar" not in kwargs:
            # `usage: daintree worktree diff [...] name`, and "required: name": the README writes NAME, ID, TEXT.
            kwargs["metavar"] = args[0].upper()
        action = super().add_argument(*args, **kwargs)
        self.option_words.update(action.option_strings)
        return action

    def add_subparsers(self, **kwargs: Any) -> Any:
        self.has_commands = True
        self.commands = super().add_subparsers(**kwargs)  # its `choices`: the actions, read by `error`
        return self.commands

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self.given = list(args) if args is not None else []
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and self._is_command():
            extras = self._late_positionals(parsed, extras)
        strays = [word for word in extras if _dashed(word)]
        if strays and self._is_command():  # here, not in the top parser: this one knows the command's name
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        actions = self._actions_named()
        if actions and "required: ACTION" in message:
            # argparse said only "the following arguments are required: ACTION", naming neither the command nor
            # its actions: `daintree task` alone is what a newcomer types first.
            command = self.prog.removeprefix("daintree ")
            error(f"{command} needs an action: {', '.join(actions)} (see daintree {command} --help)")
        elif self.prog != "daintree":
            # "daintree: error: the following arguments are required: NAME" said neither which command nor where
            # to look.
            command = self.prog.removeprefix("daintree ")
            hint = self._dash_hint(message) or f" (see daintree {command} --help)"
            error(f"{command}: {message}{hint}")
        else:
            error(f"error: {message}{self._dash_hint(message)}")
        raise SystemExit(2)

    def _actions_named(self) -> list[str]:
        """The actions under this command, each once (an alias is the same parser again)."""
        first: dict[int, str] = {}
        for name, sub in (self.commands.choices.items() if self.commands is not None else ()):
            first.setdefault(id(sub), name)
        return list(first.values())

    def _late_positionals(self, parsed: argparse.Namespace, extras: list[str]) -> list[str]:
        """Fill an optional positional (`session send NAME [TEXT]`) from the words left over. argparse takes every
        positional at the first one it meets, so in `session send NAME --paste TEXT` TEXT had already been taken
        as absent, and the text was refused as an unrecognized argument."""
        left = list(extras)
        for action in self._actions:
            if action.option_strings or action.nargs != "?" or not left or _dashed(left[0]) or left[0] == "--":
                continue
            if getattr(parsed, action.dest, None) == action.default:
                word = left.pop(0)
                setattr(parsed, action.dest, action.type(word) if callable(action.type) else word)
        return left

    def _is_command(self) -> bool:
        return not self.has_commands

    def _dash_hint(self, message: str) -> str:
        if not self._is_command():
            return ""
        words = list(self.given)
        if "expected one argument" in message:
            for option, value in itertools.pairwise(words):
                if option in self.option_words and _dashed(value):
                    return f" (a value that starts with a dash takes =: {option}={value})"
            return ""
        if "required" not in message and "unrecognized arguments" not in message:
            return ""
        # A word like `-v` may be text; `--restart` is a mistyped option, which `--` would turn into text.
        at = next((i for i, w in enumerate(words) if _dashed(w) and not w.startswith("--")
                   and w not in self.option_words), None)
        if at is None:
            return ""
        before = shlex.join(words[:at])
        example = " ".join(part for part in (self.prog, before, "--", shlex.quote(words[at])) if part)
        return f" (text that starts with a dash goes after --: {example})"


def _dashed(word: str) -> bool:
    """Looks like an option to argparse: a dash, then not a number (`-1` is a value)."""
    if not word.startswith("-") or word == "--" or " " in word:
        return False
    try:
        float(word)
    except ValueError:
        return True
    return False


class AddCommand(Protocol):
    """Adds one command (with the common --repo/--json options) under a subparsers action."""

    def __call__(self, parent: Any, name: str, handler: Handler | None, help: str,
                 aliases: Sequence[str] = ()) -> Parser: ...


def _apply_mcp_call(services: Services, owner: str, payload: dict[str, Any]) -> dict[str, Any]:
    from daintree_tui.mcp.inbox import apply_call  # imported only when a sandboxed session's MCP call arrives

    return apply_call(services, owner, payload)


# The inbox request kinds the interfaces above the services apply: a sandboxed session's MCP tool calls.
INBOX_KINDS = {"mcp": _apply_mcp_call}


def build_services(project: Project, *, pty_fallback: bool = False) -> Services:
    """The one place a daintree process builds its services: with what the interfaces add to them, so every
    process that applies inbox requests (the dashboard's poll, `session watch`, doctor) knows the same kinds.

    Args:
        pty_fallback: sessions on a PTY of this process without tmux (the dashboard; the CLI's would die with it).
    """
    return Services(project, pty_fallback=pty_fallback, inbox_kinds=INBOX_KINDS)


def services_for(args: argparse.Namespace) -> Services:
    """The services of the repository a parsed command names (--repo, else the current directory). Sessions need
    tmux here: without it the CLI has no session host (a PTY session would die with this process)."""
    repo = getattr(args, "repo", None)
    if repo == "":  # `--repo "$REPO"` with the variable unset: not the current directory's repository
        raise InputError("--repo is empty: give the repository's path")
    return build_services(Project.discover(repo))


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


@contextmanager
def ctrl_c_stops() -> Iterator[threading.Event]:
    """For a command that loops until interrupted: Ctrl-C sets the event, and the loop ends between two steps
    (a KeyboardInterrupt raised anywhere inside one could leave a lock taken or an operation half done). A second
    Ctrl-C interrupts at once."""
    import signal
    import threading

    stop = threading.Event()

    def interrupted(signum: int, frame: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)
