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


def test_user_folders_follow_the_environment_of_each_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folders are kept per value of the variables they come from (they are asked at every config access):
    another XDG_CONFIG_HOME or XDG_DATA_HOME later in the same process is still honoured."""
    from daintree_tui.core.user_dirs import user_config_dir, user_data_dir

    for name in ("a", "b", "a"):
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / name / "config"))
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / name / "data"))
        assert user_config_dir() == tmp_path / name / "config" / "daintree"
        assert user_data_dir() == tmp_path / name / "data" / "daintree"


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


@pytest.mark.parametrize("content", [b"[ports\n", b'x = "\xff"\n'], ids=["syntax", "not-utf8"])
def test_invalid_toml_is_a_clear_error(repo: Path, cli: CLI, content: bytes) -> None:
    (repo / ".daintree.toml").write_bytes(content)
    proc = cli("worktree", "create", "x")
    assert proc.returncode == 2 and "not valid TOML" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_config_broken_later_is_its_own_error_not_the_index_entrys(repo: Path, cli: CLI) -> None:
    """Found in a trial: with a typo in your config, `review NAME` and `worktree status NAME` said
    "worktree NAME: config: ... (the index is not trusted on its own; `daintree doctor --fix` drops such entries)":
    a hint to drop a worktree from the index over a config typo."""
    cli.ok("worktree", "create", "w")
    (repo / ".daintree.toml").write_text("[ports\n")
    for args in (("review", "w"), ("worktree", "status", "w"), ("review", "w", "--approve")):
        proc = cli(*args)
        assert proc.returncode == 2 and "not valid TOML" in proc.stderr, (args, proc.stderr)
        assert "index" not in proc.stderr and "doctor" not in proc.stderr, proc.stderr


def test_a_broken_config_in_the_worktree_list_is_said_not_shown_as_no_sessions(repo: Path, cli: CLI) -> None:
    """Found in a trial: with a typo in .daintree.toml, `worktree list` still listed the worktrees (it should) but
    showed every running agent's session as "-", with exit 0 and not a word of why."""
    cli.ok("worktree", "create", "w")
    (repo / ".daintree.toml").write_text("[ports\n")
    proc = cli("worktree", "list")
    assert proc.returncode == 0 and "w " in proc.stdout, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "sessions not shown" in lines[0] and "not valid TOML" in lines[0], proc.stderr


def test_unknown_keys_warned(repo: Path, cli: CLI) -> None:
    (repo / ".daintree.toml").write_text('colour = "red"\n[ports]\nspeed = 3\n')
    proc = cli("worktree", "create", "x")
    assert proc.returncode == 0
    assert "unknown keys" in proc.stderr and "colour" in proc.stderr and "ports.speed" in proc.stderr


@pytest.mark.parametrize(("quiet", "now", "expected"), [
    (("22:00", "07:00"), "23:30", True),
    (("22:00", "07:00"), "06:59", True),
    (("22:00", "07:00"), "07:00", False),
    (("09:00", "17:00"), "12:00", True),
    (("09:00", "17:00"), "18:00", False),
    (None, "12:00", False),
])
def test_quiet_hours_window(quiet: tuple[str, str] | None, now: str, expected: bool) -> None:
    assert config.in_quiet_hours(quiet, now) is expected


def test_notification_switches_parse(repo: Path) -> None:
    (repo / ".daintree.toml").write_text(
        '[notifications]\nbell = false\ndesktop = false\non_exited = false\nquiet_hours = ["22:00", "07:00"]\n')
    cfg = config.load(repo)
    assert (cfg.bell, cfg.desktop, cfg.notify_on["exited"], cfg.notify_on["waiting"]) == (False, False, False, True)
    assert cfg.quiet_hours == ("22:00", "07:00")
    (repo / ".daintree.toml").write_text('[notifications]\nquiet_hours = ["25:00", "07:00"]\n')
    with pytest.raises(ConfigError, match=r"notifications\.quiet_hours"):
        config.load(repo)


def test_containment_keys_parse_per_level(tmp_path: Path) -> None:
    from daintree_tui.core.config import parse
    from daintree_tui.core.errors import ConfigError
    from daintree_tui.core.limits import Limits
    from daintree_tui.core.sandbox.containment import effective

    cfg = parse({"sandbox": {"memory": "2G", "pids": 100, "network": ["a.example", "b.example:8443"],
                             "network_extra": ["c.example"]},
                 "agents": {"claude": {"sandbox": {"mode": "on", "memory": "4G", "network": "agent"}}},
                 "roles": {"worker": {"sandbox": {"pids": 50, "cpu": 0.5}}}}, None)
    assert cfg.agents["claude"].sandbox == "on"
    top = effective(cfg)
    assert top.limits == Limits(2 << 30, 100, None) and top.allow == ("a.example", "b.example:8443", "c.example")
    claude = effective(cfg, agent="claude", role="worker", api_hosts=("api.anthropic.com",))
    assert claude.limits == Limits(4 << 30, 50, 0.5)  # role over agent over top level, key by key
    assert claude.allow == ("api.anthropic.com", "c.example")
    assert effective(parse({"sandbox": {"network": False}}, None)).network is False
    for bad in ({"sandbox": {"memory": "lots"}}, {"sandbox": {"network": "some"}},
                {"sandbox": {"network": ["a b"]}}, {"roles": {"w": {"sandbox": {"pids": 0}}}},
                {"agents": {"x": {"command": "x", "sandbox": {"mode": "sometimes"}}}}):
        with pytest.raises(ConfigError):
            parse(bad, None)
