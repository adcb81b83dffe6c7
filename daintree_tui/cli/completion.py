"""`daintree completion bash|zsh|fish`: the shell's completion script, made by shtab from the parser itself, so
every command, alias and option completes as `--help` lists it, and a new command completes without a change here.
"""

from __future__ import annotations

import argparse
from typing import Any

from daintree_tui.cli.common import AddCommand
from daintree_tui.cli.output import emit
from daintree_tui.services import Services

SHELLS = ("bash", "zsh", "fish")

def script(shell: str) -> str:
    """The completion script for `shell`, over the full parser (every command group)."""
    import shtab

    from daintree_tui.cli.dispatch import build_parser

    return str(shtab.complete(build_parser(), shell=shell))


def cmd_completion(args: argparse.Namespace, services: Services) -> int:
    text = script(args.shell)
    emit(args, {"shell": args.shell, "script": text}, text.rstrip("\n"))
    return 0


def register(sub: Any, add: AddCommand, common: argparse.ArgumentParser) -> None:
    p = add(sub, "completion", cmd_completion, "print the shell completion script for bash, zsh or fish")
    p.add_argument("shell", choices=SHELLS, help="the shell: bash, zsh or fish")
