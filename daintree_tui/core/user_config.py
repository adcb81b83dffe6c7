"""The sections only the user's own config may set: `[notify]` (where notices go) and `[serve]` (who may reach
the dashboard in a browser).

Both are read from `~/.config/daintree/config.toml` alone, never merged with a repository's `.daintree.toml`
(`config.load` drops those sections from the repository's file with a warning): a cloned repository that could add
a webhook would receive every agent's status and task text, and one that could open `daintree serve` to the
network would hand its terminal to anyone who can reach the port (docs/design.md 8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from daintree_tui.core.config import read_toml, user_config_dir
from daintree_tui.core.errors import ConfigError
from daintree_tui.core.log import warn

NOTIFY_KINDS = ("waiting", "done", "failed", "over_budget", "train")
_NOTIFY_KEYS = {"desktop", "webhook", "ntfy", "command", "kinds", "quiet_hours"}
_SERVE_KEYS = {"allow_remote"}
_HHMM = re.compile(r"([01]\d|2[0-3]):[0-5]\d")


@dataclass(frozen=True)
class NotifyConfig:
    """`[notify]` of the user's config: the channels (none by default) and which kinds fire."""

    desktop: bool = False
    webhook: str | None = None
    ntfy: str | None = None
    command: tuple[str, ...] = ()
    kinds: frozenset[str] = frozenset(NOTIFY_KINDS)
    quiet_hours: tuple[str, str] | None = None

    @property
    def channels(self) -> list[str]:
        """The channels that are on, by name."""
        return [name for name, on in (("desktop", self.desktop), ("webhook", self.webhook), ("ntfy", self.ntfy),
                                      ("command", self.command)) if on]

    def to_dict(self) -> dict[str, Any]:
        return {"channels": self.channels, "desktop": self.desktop, "webhook": self.webhook, "ntfy": self.ntfy,
                "command": list(self.command), "kinds": sorted(self.kinds), "quiet_hours": self.quiet_hours}


def _user_table(section: str, known: set[str]) -> dict[str, Any]:
    """`[section]` of the user's config; a key it does not know is named in one warning and ignored."""
    raw = read_toml(user_config_dir() / "config.toml").get(section, {})
    if not isinstance(raw, dict):
        raise ConfigError(f"config: [{section}] must be a table (got {raw!r})")
    unknown = sorted(set(raw) - known)
    if unknown:
        warn(f"config: unknown keys ignored: {', '.join(f'{section}.{k}' for k in unknown)}")
    return raw


def _url(value: Any, key: str) -> str:
    if not (isinstance(value, str) and re.match(r"https?://[^\s/]+", value)):
        raise ConfigError(f"config: {key} must be an http:// or https:// URL (got {value!r})")
    return value


def load_notify_config() -> NotifyConfig:
    """`[notify]` of the user's config; raises ConfigError naming the first bad key."""
    raw = _user_table("notify", _NOTIFY_KEYS)
    desktop = raw.get("desktop", False)
    if not isinstance(desktop, bool):
        raise ConfigError(f"config: notify.desktop must be true or false (got {desktop!r})")
    webhook = _url(raw["webhook"], "notify.webhook") if "webhook" in raw else None
    ntfy = _url(raw["ntfy"], "notify.ntfy") if "ntfy" in raw else None
    command = raw.get("command", [])
    if not (isinstance(command, list) and all(isinstance(a, str) and a for a in command)):
        raise ConfigError(f'config: notify.command must be a list of strings, ["prog", "arg"] (got {command!r})')
    kinds = raw.get("kinds", list(NOTIFY_KINDS))
    if not (isinstance(kinds, list) and all(k in NOTIFY_KINDS for k in kinds)):
        raise ConfigError(f"config: notify.kinds must be a list of {', '.join(NOTIFY_KINDS)} (got {kinds!r})")
    quiet = raw.get("quiet_hours")
    if quiet is not None and not (isinstance(quiet, list) and len(quiet) == 2
                                  and all(isinstance(t, str) and _HHMM.fullmatch(t) for t in quiet)):
        raise ConfigError(f'config: notify.quiet_hours must be two times ["HH:MM", "HH:MM"] (got {quiet!r})')
    return NotifyConfig(desktop=desktop, webhook=webhook, ntfy=ntfy, command=tuple(command),
                        kinds=frozenset(kinds), quiet_hours=(quiet[0], quiet[1]) if quiet else None)


def serve_allows_remote() -> bool:
    """`[serve] allow_remote = true` in the user's config: `daintree serve --bind` may take a non-loopback
    address."""
    raw = _user_table("serve", _SERVE_KEYS)
    allow = raw.get("allow_remote", False)
    if not isinstance(allow, bool):
        raise ConfigError(f"config: serve.allow_remote must be true or false (got {allow!r})")
    return allow
