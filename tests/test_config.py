"""Configuration: repo over user, key by key; unknown keys warned; bad values name the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from daintree_tui.core import config
from daintree_tui.core.errors import ConfigError
from tests.conftest import CLI


def write_user_config(text: str) -> Path:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_repo_overrides_user_key_by_key(repo: Path) -> None:
    write_user_config('branch_prefix = "agent/"\n[ports]\nrange = [4000, 4100]\nper_worktree = 5\n')
    (repo / ".daintree.toml").write_text("[ports]\nper_worktree = 2\n")
    cfg = config.load(repo)
    assert cfg.branch_prefix == "agent/"
    assert cfg.ports_range == (4000, 4100)
    assert cfg.ports_per_worktree == 2


def test_user_config_honours_xdg(repo: Path, cli: CLI) -> None:
    write_user_config('branch_prefix = "mine/"\n')
    entry = cli.json("worktree", "create", "x")
    assert entry["branch"] == "mine/x"


@pytest.mark.parametrize(("text", "key"), [
    ("[ports]\nrange = [10, 5]\n", "ports.range"),
    ("[ports]\nper_worktree = 0\n", "ports.per_worktree"),
    ('[deps]\ninclude = "x"\n', "deps.include"),
    ('[deps]\nlink = [{path = "a", mode = "hard"}]\n', "deps.link.mode"),
    ("[hooks]\npost_create = 3\n", "hooks.post_create"),
    ("worktree_dir = 3\n", "worktree_dir"),
    ("[agents.x]\ncommand = 1\n", "agents.x.command"),
])
def test_bad_values_name_the_key(repo: Path, cli: CLI, text: str, key: str) -> None:
    (repo / ".daintree.toml").write_text(text)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        config.load(repo)
    proc = cli("worktree", "create", "x")
    assert proc.returncode == 2 and key in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_invalid_toml_is_a_clear_error(repo: Path, cli: CLI) -> None:
    (repo / ".daintree.toml").write_text("[ports\n")
    proc = cli("worktree", "create", "x")
    assert proc.returncode == 2 and "not valid TOML" in proc.stderr


def test_unknown_keys_warned(repo: Path, cli: CLI) -> None:
    (repo / ".daintree.toml").write_text('colour = "red"\n[ports]\nspeed = 3\n')
    proc = cli("worktree", "create", "x")
    assert proc.returncode == 0
    assert "unknown keys" in proc.stderr and "colour" in proc.stderr and "ports.speed" in proc.stderr
