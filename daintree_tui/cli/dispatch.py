"""The parser and the dispatch of one command: its group's module, the services it runs on, the sandbox's route
and the policy gate, then its handler; errors as one line and an exit code (`daintree_tui.cli`)."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any

from daintree_tui.cli import changes_state, command_path, command_word, orchestrate, resume_collector, sandbox
from daintree_tui.cli.common import AddCommand, Handler, Parser, services_for
from daintree_tui.cli.output import configure_debug_log, configure_logging, error
from daintree_tui.core import state_files
from daintree_tui.core.errors import DaintreeError
from daintree_tui.services import Services

__all__ = ["build_parser", "main"]


def _common() -> Parser:
    common = Parser(add_help=False)
    common.add_argument("--repo", metavar="PATH", default=argparse.SUPPRESS, help="the repository (default: cwd)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print one JSON document on stdout")
    common.add_argument("--host", metavar="NAME", default=argparse.SUPPRESS,
                        help="run the command on a remote host (see `daintree host list`)")
    common.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="log what is skipped over on purpose (a file gone, a process already ended) at debug "
                             "level: on stderr, or appended to the file DAINTREE_LOG names")
    return common


Registrar = Callable[[Any, AddCommand, Parser], None]

# The top-level commands each group registers (module, function), in the order `daintree --help` lists them.
# A command imports only its own group's module: the others' imports would be most of a short command's time.
GROUPS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("task",), "task", "register"),
    (("worktree", "wt"), "worktree", "register"),
    (("doctor", "trust"), "system", "register"),
    (("session",), "session", "register"),
    (("demo",), "system", "register_demo"),
    (("bakeoff", "queue", "policy", "approvals", "approve", "reject", "gc"), "orchestrate", "register"),
    (("train",), "train", "register"),
    (("review",), "review", "register"),
    (("checkpoint",), "checkpoint", "register"),
    (("host",), "host", "register"),
    (("mcp",), "mcp", "register"),
    (("sandbox",), "sandbox", "register"),
    (("agents", "usage"), "agents", "register"),
    (("notify",), "notify", "register"),
    (("serve",), "serve", "register"),
    (("completion",), "completion", "register"),
)


def _from_group(module: str, name: str) -> Any:
    """A function of a command group's module, importing only that module."""
    return getattr(import_module(f"daintree_tui.cli.{module}"), name)


# The commands that open the dashboard: they load Textual with the collector still off (`cli.run`), which it swept
# ~100 times while loading (~60 ms of the dashboard's first frame), and resume it themselves.
_LOADS_THE_DASHBOARD = frozenset({"cmd_dashboard", "cmd_demo"})

# What works outside a git repository: tasks (by design: a plain folder can hold a task list), and the commands
# that need no repository. Everything else, the dashboard included, is refused there in one line, rather than
# half working (doctor said "all consistent", the dashboard opened and could create nothing).
_NO_REPO_COMMANDS = ("task", "demo", "host", "agents", "usage", "sandbox", "mcp", "completion")


def build_parser(argv: Sequence[str] | None = None) -> Parser:
    """The parser; given the arguments to parse, only the groups their command needs (each subparser costs
    about a quarter of a millisecond of argparse and gettext, and a command runs once)."""
    word = command_word(argv) if argv is not None else None
    # The dashboard (no command) needs no group: not one group's module is imported before Textual's.
    dashboard = argv is not None and word is None and not {"-h", "--help"} & set(argv)
    groups: list[Registrar] = [] if dashboard else [
        _from_group(module, fn) for names, module, fn in GROUPS if word is None or word in names]
    if not groups and not dashboard:  # not one of ours: the full parser, whose error lists the choices
        groups = [_from_group(module, fn) for _, module, fn in GROUPS]
    common = _common()
    parser = Parser(prog="daintree", parents=[common],
                    description="Parallel AI coding agents, each in its own git worktree. Without a COMMAND: the "
                                "dashboard of the repository here (or --repo PATH); `daintree demo` opens it on a "
                                "throwaway repository with demo agents.")
    parser.add_argument("--version", action="version", version=f"daintree {__import__('daintree_tui').__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(parent: Any, name: str, handler: Handler | None, help: str, aliases: Sequence[str] = ()) -> Parser:
        p: Parser = parent.add_parser(name, parents=[common], help=help, aliases=list(aliases), description=help)
        p.set_defaults(handler=handler)
        return p

    for registrar in groups:
        registrar(sub, add, common)
    return parser


def _no_process(exc: BaseException) -> bool:
    """Whether `exc` is the kernel refusing a new process or thread (EAGAIN, ENOMEM; a thread's RuntimeError)."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.EAGAIN, errno.ENOMEM)
    return isinstance(exc, RuntimeError) and str(exc) == "can't start new thread"


def _draws_on_screen(args: argparse.Namespace, handler: Handler | None) -> bool:
    """Whether the command opens the dashboard (which owns the terminal: nothing may be written on stderr)."""
    if handler is None:
        return not args.command
    return handler.__name__ in _LOADS_THE_DASHBOARD and not (getattr(args, "no_ui", False)
                                                             or getattr(args, "clean", False))


def main(argv: Sequence[str] | None = None) -> int:
    """One command: its exit code (`daintree_tui.cli.main`)."""
    configure_logging()
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    # For `worktree run`, everything after the first `--` is the command to run, never options of ours (argparse
    # would mix them). For any other command `--` keeps its usual meaning: what follows is positional, so a task's
    # subject may start with a dash (`daintree task create -- "-v is broken"`).
    after: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, after = argv[:cut], argv[cut + 1:]
    if after and command_path(argv) != ("worktree", "run"):
        argv, after = [*argv, "--", *after], []
    try:
        args = parser.parse_args(argv)
        args.after_dashes = after
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 2
    handler: Handler | None = getattr(args, "handler", None)
    configure_debug_log(bool(getattr(args, "verbose", False)), screen=_draws_on_screen(args, handler))
    services: Services | None = None
    try:
        if "host" in args:  # one dispatch point: the whole command runs on that host, by its own daintree
            from daintree_tui.cli.host import run_on_host

            return run_on_host(args, argv, after)
        services = services_for(args)
        state_changes = handler is not None and changes_state(argv) and services.project.is_git
        if state_changes:
            # Its first step (the torn-index check below) asks what git tracks in the state dir: git lists it
            # while the command's own modules import.
            state_files.start_tracked_state(services.project)
        if handler is None:
            if args.command:  # `daintree task` without an action
                parser.error(f"{args.command} needs an action (see daintree {args.command} --help)")
            handler = _from_group("system", "cmd_dashboard")
        if not services.project.is_git and args.command not in _NO_REPO_COMMANDS:
            services.project.require_git()
        # Inside a sandbox, state changes go through the session inbox; outside, pending requests are applied.
        stop = sandbox.route(args, services)
        if stop is not None:
            return stop
        stop = orchestrate.policy_gate(args, services, [*argv, *(["--", *after] if after else [])])
        if stop is not None:
            return stop
        if state_changes and not getattr(args, "dry_run", False):
            services.index.heal_if_torn()  # docs/design.md 3: a torn index is recovered before any change
        if handler.__name__ not in _LOADS_THE_DASHBOARD:  # those resume it once Textual has loaded
            resume_collector()
        return handler(args, services)
    except DaintreeError as exc:
        error(str(exc))
        return exc.exit_code
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 2
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT) \
                and not os.environ.get("DAINTREE_DEBUG"):
            # A full disk (an agent can fill the one its worktree shares with the state): every state write is
            # whole or not made, so this is one line to act on, not a bug of ours.
            where = f": {exc.filename}" if exc.filename else ""
            error(f"{exc.strerror or 'no space left on device'}{where} (free some space and try again)")
            return 1
        if _no_process(exc) and not os.environ.get("DAINTREE_DEBUG"):
            # A fork or a thread the kernel refused (a process limit reached, e.g. by a fork storm in a session):
            # the steps so far were rolled back like any failed step's; nothing here is a bug of ours.
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            error(f"cannot start a process: {why} (too many processes running; try again when they have ended)")
            return 1
        if os.environ.get("DAINTREE_DEBUG"):
            raise
        error(f"internal error: {type(exc).__name__}: {exc} (DAINTREE_DEBUG=1 for details)")
        return 1
    finally:
        if services is not None:
            services.close()  # hooks of the transitions this command recorded finish before it exits

