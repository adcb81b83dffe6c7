"""The remote hosts of the user's config: `[hosts.<name>]` tables, checked, read and written.

Trust: hosts come only from the user's own config (`~/.config/daintree/config.toml`), never from a repository's
`.daintree.toml` (a cloned repo must not make us connect anywhere). An ssh target can never be read as an option
(no leading `-`), and a name becomes a TOML key, so both are checked before anything is written or run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daintree_tui.core.config import read_toml, user_config_dir
from daintree_tui.core.errors import ConfigError, InputError, OperationError
from daintree_tui.core.store import atomic_write_text

DEFAULT_MAX_SESSIONS = 3
HOST_KEYS = ("ssh", "repo", "max_sessions", "daintree", "ssh_config")

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_CONTROL_RE = re.compile(r"[\x00-\x20\x7f]")


# -- validation -------------------------------------------------------------------------------------------------


def validate_host_name(name: str) -> str:
    """A host name: letters, digits, `.`, `_`, `-`, starting with a letter or digit (it becomes a TOML key)."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or name.endswith("."):
        raise InputError(f"invalid host name {name!r}: use letters, digits, '.', '_' or '-' (max 63), "
                         "starting with a letter or digit")
    return name


def validate_target(target: str) -> str:
    """An ssh destination (`user@box`, `box`, an ~/.ssh/config alias, `ssh://user@box:2222`).

    A leading `-` would make ssh read it as an option (`-oProxyCommand=...` runs a local command), and
    whitespace or control characters have no place in a host name.
    """
    if not isinstance(target, str) or not target:
        raise InputError("ssh target must not be empty")
    if target.startswith("-"):
        raise InputError(f"invalid ssh target {target!r}: it must not start with '-'")
    if _CONTROL_RE.search(target):
        raise InputError(f"invalid ssh target {target!r}: no spaces or control characters")
    return target


def validate_remote_path(path: str, what: str) -> str:
    """A path on the remote host: absolute or under `~/`, without control characters."""
    if not isinstance(path, str) or not (path.startswith("/") or path == "~" or path.startswith("~/")):
        raise InputError(f"invalid {what} {path!r}: give an absolute path or one under ~/")
    if re.search(r"[\x00-\x1f\x7f]", path):
        raise InputError(f"invalid {what} {path!r}: no control characters")
    return path


def validate_program(program: str) -> str:
    """The remote daintree program: a bare command name found on the remote PATH, or a remote path."""
    if not isinstance(program, str) or not program or program.startswith("-") or re.search(r"[\x00-\x1f\x7f]",
                                                                                             program):
        raise InputError(f"invalid daintree program {program!r}")
    return program


# -- configuration ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostConfig:
    """One `[hosts.<name>]` table of the user's config."""

    name: str
    ssh: str
    repo: str
    max_sessions: int = DEFAULT_MAX_SESSIONS
    daintree: str = "daintree"
    ssh_config: str | None = None

    def __post_init__(self) -> None:
        validate_host_name(self.name)
        validate_target(self.ssh)
        validate_remote_path(self.repo, f"hosts.{self.name}.repo")
        validate_program(self.daintree)
        if isinstance(self.max_sessions, bool) or not isinstance(self.max_sessions, int) or self.max_sessions < 1:
            raise ConfigError(f"config: hosts.{self.name}.max_sessions must be a positive integer "
                              f"(got {self.max_sessions!r})")

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "ssh": self.ssh, "repo": self.repo,
                                "max_sessions": self.max_sessions, "daintree": self.daintree}
        if self.ssh_config:
            data["ssh_config"] = self.ssh_config
        return data

    def table(self) -> dict[str, Any]:
        """The TOML table that stores it (defaults left out)."""
        data = {k: v for k, v in self.to_dict().items() if k != "name"}
        if self.daintree == "daintree":
            del data["daintree"]
        return data


def user_config_path() -> Path:
    return user_config_dir() / "config.toml"


def parse_hosts(raw: Any) -> dict[str, HostConfig]:
    """Validate the `hosts` table of the user's config; a bad entry is one error naming its key."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config: hosts must be a table of [hosts.NAME] tables (got {raw!r})")
    hosts: dict[str, HostConfig] = {}
    for name, value in raw.items():
        key = f"hosts.{name}"
        if not isinstance(value, Mapping):
            raise ConfigError(f"config: {key} must be a table (got {value!r})")
        unknown = sorted(set(value) - set(HOST_KEYS))
        if unknown:
            raise ConfigError(f"config: unknown keys in {key}: {', '.join(unknown)} (known: {', '.join(HOST_KEYS)})")
        for required in ("ssh", "repo"):
            if not isinstance(value.get(required), str):
                raise ConfigError(f"config: {key}.{required} must be a string")
        ssh_config = value.get("ssh_config")
        if ssh_config is not None and (not isinstance(ssh_config, str) or not ssh_config):
            raise ConfigError(f"config: {key}.ssh_config must be a path")
        try:
            hosts[str(name)] = HostConfig(
                name=str(name), ssh=str(value["ssh"]), repo=str(value["repo"]),
                max_sessions=value.get("max_sessions", DEFAULT_MAX_SESSIONS),
                daintree=value.get("daintree", "daintree"), ssh_config=ssh_config)
        except InputError as exc:
            raise ConfigError(f"config: {key}: {exc}") from None
    return hosts


def _read_user_config(path: Path) -> Any:
    # tomlkit here and below, not at the top: only writing the config needs its round trip (start-up speed).
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise ConfigError(f"config: cannot read {path}: {exc.strerror}") from None
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ConfigError(f"config: {path} is not valid TOML: {exc}") from None


def load_hosts(path: Path | None = None) -> dict[str, HostConfig]:
    """The hosts of the user's config (never of a repository's). Read with tomllib: every `--host` command
    starts here, and only writing needs tomlkit's round trip."""
    data = read_toml(path or user_config_path())
    return parse_hosts(data.get("hosts"))


def get_host(name: str, path: Path | None = None) -> HostConfig:
    validate_host_name(name)
    hosts = load_hosts(path)
    if name not in hosts:
        known = ", ".join(sorted(hosts)) or "none configured"
        raise InputError(f"unknown host {name!r} (known: {known}; add one with `daintree host add`)")
    return hosts[name]


def save_host(host: HostConfig, path: Path | None = None, replace: bool = False) -> Path:
    """Write `[hosts.<name>]` into the user's config, keeping everything else in the file as it was."""
    import tomlkit

    path = path or user_config_path()
    doc = _read_user_config(path)
    hosts = doc.get("hosts")
    if hosts is None:
        hosts = tomlkit.table(is_super_table=True)
        doc["hosts"] = hosts
    elif not isinstance(hosts, Mapping):
        raise ConfigError(f"config: hosts in {path} must be a table")
    if host.name in hosts and not replace:
        raise InputError(f"host {host.name!r} already exists in {path} (use --replace to change it)")
    table = tomlkit.table()
    for key, value in host.table().items():
        table[key] = value
    hosts[host.name] = table
    parse_hosts(doc.unwrap().get("hosts"))  # what we write must read back
    try:
        atomic_write_text(path, tomlkit.dumps(doc))
    except OSError as exc:
        raise OperationError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def delete_host(name: str, path: Path | None = None) -> bool:
    """Remove `[hosts.<name>]` from the user's config; False when there was none."""
    import tomlkit

    validate_host_name(name)
    path = path or user_config_path()
    doc = _read_user_config(path)
    hosts = doc.get("hosts")
    if not isinstance(hosts, MutableMapping) or name not in hosts:
        return False
    del hosts[name]
    atomic_write_text(path, tomlkit.dumps(doc))
    return True
