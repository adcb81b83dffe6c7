"""mkdocs hook: the references that must not drift from the code, generated while the site builds.

- `<!-- daintree:cli-reference -->` in a page becomes every command of the argparse parser the `daintree` script
  runs (`daintree_tui.cli.dispatch.build_parser`): its usage, help, aliases, arguments and options with their
  defaults and choices.
- `<!-- daintree:config-reference -->` becomes every key of the configuration model (`daintree_tui.core.config.KEYS`,
  defaults read from `Config()`): its type, default, who may set it, and what it does.
- `screenshots/*.svg` of the repository's top level (made by `make screenshots`, shown by the README too) are
  added to the site, so the pages show the same pictures without a copy in docs/.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CLI_MARKER = "<!-- daintree:cli-reference -->"
CONFIG_MARKER = "<!-- daintree:config-reference -->"


# -- mkdocs events ---------------------------------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for svg in sorted((ROOT / "screenshots").glob("*.svg")):
        files.append(File.generated(config, f"screenshots/{svg.name}", abs_src_path=str(svg)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if CONFIG_MARKER in markdown:
        markdown = markdown.replace(CONFIG_MARKER, config_reference())
    return markdown


# -- the CLI ---------------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text fit for one cell of a Markdown table."""
    return text.replace("|", "\\|").replace("\n", " ")


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, list[str], str, argparse.ArgumentParser]]:
    """(name, aliases, help, parser) of each visible subcommand, in the order `--help` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.help == argparse.SUPPRESS:
                    continue
                sub = action.choices[choice.dest]
                aliases = [name for name, p in action.choices.items() if p is sub and name != choice.dest]
                yield choice.dest, aliases, choice.help or "", sub


def _own_actions(parser: argparse.ArgumentParser, common: set[int]) -> list[argparse.Action]:
    """The arguments a command adds to the common options (those are the very actions of the top parser, shared
    through `parents`; `host add` has a `--repo` of its own): no help, no subcommands, nothing hidden."""
    return [a for a in parser._actions
            if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
            and a.help != argparse.SUPPRESS and id(a) not in common]


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    return action.dest.upper()


def _usage_word(action: argparse.Action) -> str:
    if not action.option_strings:
        word = _metavar(action)
        if action.nargs == "?":
            return f"[{word}]"
        if action.nargs == "*":
            return f"[{word} ...]"
        if action.nargs == "+":
            return f"{word} [{word} ...]"
        return word
    flag = max(action.option_strings, key=len)
    word = flag if action.nargs == 0 else f"{flag} {_metavar(action)}" + (" ..." if action.nargs in ("+", "*") else "")
    return word if action.required else f"[{word}]"


def _describe(action: argparse.Action) -> str:
    text = action.help or ""
    if action.choices is not None:
        text += f" (one of: {', '.join(f'`{c}`' for c in action.choices)})"
    default = action.default
    if (action.option_strings and action.nargs != 0 and default not in (None, argparse.SUPPRESS, False, [], "")
            and "default" not in text):
        text += f" (default: `{default}`)"
    if action.required and action.option_strings:
        text += " (required)"
    return text


def _command(path: list[str], aliases: list[str], help: str, parser: argparse.ArgumentParser,
             common: set[int], depth: int) -> list[str]:
    actions = _own_actions(parser, common)
    subs = list(_subcommands(parser))
    out = [f"{'#' * depth} `{' '.join(path)}`", "", help[:1].upper() + help[1:] + ("." if help else ""), ""]
    if aliases:
        out += [f"Alias: {', '.join(f'`{a}`' for a in aliases)}.", ""]
    if not subs or actions:
        required = any(getattr(a, "required", False) for a in parser._actions
                       if isinstance(a, argparse._SubParsersAction))
        action_word = ["ACTION" if required else "[ACTION]"] if subs else []
        usage = " ".join([*path, *action_word, *(_usage_word(a) for a in actions)])
        out += ["```", usage, "```", ""]
    if actions:
        out += ["| argument | what |", "|---|---|"]
        for action in actions:
            name = ", ".join(action.option_strings) + (f" {_metavar(action)}" if action.option_strings and
                                                       action.nargs != 0 else "")
            out.append(f"| `{name or _metavar(action)}` | {_cell(_describe(action))} |")
        out.append("")
    for name, sub_aliases, sub_help, sub in subs:
        out += _command([*path, name], sub_aliases, sub_help, sub, common, min(depth + 1, 4))
    return out


def cli_reference() -> str:
    """Every command of the parser, as Markdown."""
    os.environ["COLUMNS"] = "120"  # argparse's own wrapping, where it is used, does not follow the builder's terminal
    from daintree_tui.cli.dispatch import build_parser

    parser = build_parser()
    shared = [a for a in parser._actions if a.option_strings and a.dest not in ("help", "version")]
    common = {id(a) for a in shared}
    out = ["## Every command", "", "These options work on every command but `host add` (whose `--repo` is the "
           "repository on the host), before or after it:", "", "| option | what |", "|---|---|"]
    for action in shared:
        if action.help != argparse.SUPPRESS:
            name = ", ".join(action.option_strings) + (f" {_metavar(action)}" if action.nargs != 0 else "")
            out.append(f"| `{name}` | {_cell(action.help or '')} |")
    out += ["| `-h`, `--help` | what the command takes, and its actions |",
            "| `--version` | the version (`daintree --version` only) |", "",
            "`daintree` with no command opens the dashboard of the repository here (or `--repo PATH`).", ""]
    for name, aliases, help, sub in _subcommands(parser):
        out += _command(["daintree", name], aliases, help, sub, common, 2)
    return "\n".join(out)


# -- the configuration -----------------------------------------------------------------------------------------

SCOPES = {
    "either": "either",
    "user": "your config only",
    "trust": "either; the repository's once trusted",
    "tighten": "either; the repository's only stricter",
}


def _toml(value: Any) -> str:
    if value is None or value == {} or value == "":
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '""' if value == "" else f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(getattr(v, "path", v)) for v in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def config_reference() -> str:
    """Every configuration key, as Markdown tables, one per section."""
    from daintree_tui.core.config import KEYS, Config

    defaults = Config()
    sections: dict[str, list[str]] = {}
    for key in KEYS:
        head = key.name.split(".")[0] if "." in key.name else ""
        if key.field is not None:
            default = _toml(getattr(defaults, key.field))
        else:
            default = key.default if key.default is not None else "unset"
        shown = "unset" if default == "unset" else f"`{_cell(default)}`"
        row = f"| `{key.name}` | {_cell(key.type)} | {shown} | {SCOPES[key.scope]} | {_cell(key.help)} |"
        sections.setdefault(head, []).append(row)
    out: list[str] = []
    for head, rows in sections.items():
        out += [f"### {'Top level' if not head else f'`[{head}]`'}", "",
                "| key | type | default | who may set it | what |", "|---|---|---|---|---|", *rows, ""]
    return "\n".join(out)
