"""The sections only the user's own config may set: `[notify]` (where notices go), `[serve]` (who may reach the
dashboard in a browser) and `[checkpoints]` (whether each agent's turn end is checkpointed).

They are read from `~/.config/daintree/config.toml` alone, never merged with a repository's `.daintree.toml`
(`config.load` drops those sections from the repository's file with a warning): a cloned repository that could add
a webhook would receive every agent's status and task text, and one that could open `daintree serve` to the
network would hand its terminal to anyone who can reach the port (docs/design.md 8). One that could turn
checkpoints off would leak nothing and run nothing, but would take away, unasked, the undo of an agent's steps a
person counts on (and turning them on is the default already): that too is the person's to say.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from daintree_tui.core.config import read_toml, user_config_dir
from daintree_tui.core.errors import ConfigError
from daintree_tui.core.log import warn

NOTIFY_KINDS = ("waiting", "done", "failed", "over_budget", "train")
_NOTIFY_KEYS = {"desktop", "webhook", "ntfy", "command", "kinds", "quiet_hours"}
_SERVE_KEYS = {"allow_remote"}
_CHECKPOINTS_KEYS = {"auto"}
# For the test suite only (tests/conftest.py sets it to "0"): the default of `[checkpoints] auto` when the user's
# config does not say. Hundreds of test sessions would each start a watcher for their checkpoints; the tests of
# checkpoints and notices say `auto = true` in their config. A config that says either way wins over it.
AUTO_CHECKPOINTS_TEST_DEFAULT = "DAINTREE_TEST_AUTO_CHECKPOINTS_DEFAULT"
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


def user_config_stamp() -> tuple[int, int] | None:
    """The user's config file's (mtime, size), None when there is none: a long-running reader (the watcher, the
    dashboard's observer) reads the file again only when this changed (each read would repeat its warnings)."""
    try:
        st = (user_config_dir() / "config.toml").stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def auto_checkpoints() -> bool:
    """`[checkpoints] auto` of the user's config (default true): a checkpoint at each end of an agent's turn,
    taken by whatever records it (the repository's watcher starts with the first session for this alone)."""
    raw = _user_table("checkpoints", _CHECKPOINTS_KEYS)
    auto = raw.get("auto", os.environ.get(AUTO_CHECKPOINTS_TEST_DEFAULT) != "0")
    if not isinstance(auto, bool):
        raise ConfigError(f"config: checkpoints.auto must be true or false (got {auto!r})")
    return auto


def auto_checkpoints_or_on() -> bool:
    """`auto_checkpoints()` for what runs in the background and cannot stop at a bad value: it is warned of and
    checkpoints stay on (a typo must not lose the undo)."""
    try:
        return auto_checkpoints()
    except ConfigError as exc:
        warn(f"{exc}: checkpoints stay on")
        return True


def serve_allows_remote() -> bool:
    """`[serve] allow_remote = true` in the user's config: `daintree serve --bind` may take a non-loopback
    address."""
    raw = _user_table("serve", _SERVE_KEYS)
    allow = raw.get("allow_remote", False)
    if not isinstance(allow, bool):
        raise ConfigError(f"config: serve.allow_remote must be true or false (got {allow!r})")
    return allow
