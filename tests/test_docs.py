"""The docs site: it builds strictly, its references are generated from the code and cover all of it, and the
README stays a front door that links into it."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "hooks"))

import reference  # noqa: E402  (the mkdocs hook: a script of docs/, not a package)


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """`mkdocs build --strict` (as `make docs` and CI run it): a broken link or anchor, a page missing from the
    nav, or a reference that fails to generate fails the build. The generated pages hold what the code has."""
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "daintree worktree create" in cli and "--complete-task" in cli and "daintree completion" in cli
    config = (site / "reference" / "configuration" / "index.html").read_text()
    assert "hosts.&lt;name&gt;.ssh" in config and "sandbox.network" in config
    assert (site / "screenshots" / "dashboard.svg").is_file()
    assert not (site / "hooks").exists(), "the hook is code, not a page of the site"


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    found = []
    for name, _aliases, _help, sub in reference._subcommands(parser):
        found.append((*path, name))
        found += _commands(sub, (*path, name))
    return found


def test_the_cli_reference_has_every_command_and_option() -> None:
    from daintree_tui.cli.dispatch import build_parser

    text = reference.cli_reference()
    parser = build_parser()
    commands = _commands(parser, ("daintree",))
    assert len(commands) > 40
    for command in commands:
        assert f"`{' '.join(command)}`" in text, f"{' '.join(command)} is missing from the CLI reference"
        sub = parser
        for word in command[1:]:
            sub = next(p for n, _a, _h, p in reference._subcommands(sub) if n == word)
        for action in sub._actions:
            if action.help != argparse.SUPPRESS:
                for option in action.option_strings:
                    assert option in text, f"{' '.join(command)} {option} is missing from the CLI reference"


def _accepted_keys() -> set[str]:
    """Every dotted key `config.parse` (and the hosts table) accepts, with `<name>` for a table of tables."""
    from daintree_tui.core import config, config_parse, user_config
    from daintree_tui.services.host_config import HOST_KEYS

    tables = set(config_parse._SECTION_KEYS) | {"agents", "roles", "sandbox", "pricing", "budget", "hosts", "keys",
                                                "notify", "serve", "checkpoints"}
    keys = {k for k in config_parse._TOP_KEYS if k not in tables} | {"sandbox"}  # `sandbox = "on"` too
    keys |= {f"{section}.{k}" for section, names in config_parse._SECTION_KEYS.items() for k in names}
    keys |= {f"agents.<name>.{k}" for k in config_parse._AGENT_KEYS}
    keys |= {f"roles.<name>.{k}" for k in config.ROLE_KEYS}
    keys |= {f"sandbox.{k}" for k in config_parse._SANDBOX_KEYS}
    keys |= {f'pricing."<model>".{k}' for k in config.PRICE_KEYS}
    keys |= {f"budget.{k}" for k in (*config.BUDGET_KEYS, "warn_at")}
    keys |= {f"hosts.<name>.{k}" for k in HOST_KEYS}
    keys |= {f"notify.{k}" for k in user_config._NOTIFY_KEYS} | {f"serve.{k}" for k in user_config._SERVE_KEYS}
    keys |= {f"checkpoints.{k}" for k in user_config._CHECKPOINTS_KEYS}
    return keys | {"keys.<binding id>"}


def test_the_configuration_reference_has_every_key_the_parser_accepts() -> None:
    """No drift either way: a key the parser takes is in the table (so in the docs), and the table names no key
    the parser would call unknown."""
    from daintree_tui.core.config import KEYS

    names = [key.name for key in KEYS]
    assert len(names) == len(set(names))
    assert set(names) == _accepted_keys()
    text = reference.config_reference()
    for name in names:
        assert f"`{name}`" in text


def test_the_configuration_defaults_are_the_codes() -> None:
    """The defaults the table states in words (those without a `Config` field) are the ones the code uses."""
    from daintree_tui.core.config import KEYS, Config, parse
    from daintree_tui.services.host_config import HostConfig
    from daintree_tui.sessions.presets import DEFAULT_PROMPT

    stated = {key.name: key.default for key in KEYS}
    fields = {f.name: f.default for f in dataclasses.fields(HostConfig)}
    assert stated["hosts.<name>.max_sessions"] == str(fields["max_sessions"])
    assert stated["hosts.<name>.daintree"] == f'"{fields["daintree"]}"'
    assert stated["agents.<name>.prompt"] == '"' + DEFAULT_PROMPT.replace("\n", "\\n") + '"'
    role = parse({"roles": {"r": {}}}).roles["r"]
    assert stated["roles.<name>.approval"] == f'"{role.approval}"' and len(role.allow) == 5
    assert Config().notify_on == {"waiting": True, "exited": True}
    assert stated["notifications.on_waiting"] == stated["notifications.on_exited"] == "true"
    from daintree_tui.core.user_config import NOTIFY_KINDS, NotifyConfig

    assert stated["notify.desktop"] == ("true" if NotifyConfig().desktop else "false")
    assert NotifyConfig().kinds == frozenset(NOTIFY_KINDS) and NotifyConfig().command == ()
    for key in KEYS:
        if key.field is not None:
            assert hasattr(Config(), key.field), key


def test_the_readme_is_a_front_door() -> None:
    """Under 200 lines: the pitch, the screenshot, install, the two commands of the Quick start, links. Every
    link into docs/ reaches a page, and every page of the site is linked from it (nothing is out of reach)."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    quick = readme.split("## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```\n(.*?)```", quick, flags=re.S)
    assert block and [line.split()[:2] for line in block.group(1).splitlines()] == [["make", "run"], ["make", "test"]]
    assert "(screenshots/dashboard.svg)" in readme
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    for link in links:
        assert (ROOT / link).is_file(), link
    pages = {str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md") if p.name != "index.md"}
    assert pages <= set(links), f"pages the README does not link: {sorted(pages - set(links))}"


def test_the_code_cites_the_design_page_that_is_in_the_repository() -> None:
    """Comments cite the design by section (`docs/design.md 2a, rule 9`): the page has each section cited, and no
    comment cites a DESIGN.md the repository does not have."""
    design = (DOCS / "design.md").read_text()
    sections = set(re.findall(r"^## (\d+a?)\. ", design, flags=re.M))
    assert {"1", "2", "2a", "3", "4", "5", "6", "7"} <= sections
    assert len(re.findall(r"^\d\. ", design.split("## 2a. Trust", 1)[1].split("\n## ", 1)[0], flags=re.M)) == 9
    for path in (ROOT / "daintree_tui").rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"(?<![A-Z_/])DESIGN(\.md| \d)", text), f"{path}: cites a DESIGN.md not in the repo"
        for cited in re.findall(r"docs/design\.md,? (?:section )?(\d+a?)", text):
            assert cited in sections, f"{path}: cites section {cited}, which docs/design.md does not have"
