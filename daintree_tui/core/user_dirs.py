"""Where the user's own files live: their config (trusted) and their data (the trust record, secrets, the demo's
registry), never inside a repository."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

# What platformdirs derives these folders from: the answer is kept per value of these, so a changed variable (a
# test's XDG_CONFIG_HOME, a `HOME=... daintree`) is honoured as before. Asked at every access to a project's
# config (its change check), several times per session per poll: platformdirs' object, built afresh each time, was
# about half of that check, itself a sixth of the dashboard's poll at 40 busy sessions (py-spy).
_ENV = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "APPDATA", "LOCALAPPDATA")


def _env_key() -> tuple[str | None, ...]:
    return tuple(os.environ.get(name) for name in _ENV)


def user_config_dir() -> Path:
    """The user's config directory (platformdirs; honours XDG_CONFIG_HOME)."""
    return _config_dir(_env_key())


def user_data_dir() -> Path:
    """Where per-user records (trusted configs) live: never inside a repository."""
    return _data_dir(_env_key())


@lru_cache(maxsize=16)
def _config_dir(_env: tuple[str | None, ...]) -> Path:
    from platformdirs import user_config_dir as _dir  # here: start-up speed, most commands never ask

    return Path(_dir("daintree", appauthor=False))


@lru_cache(maxsize=16)
def _data_dir(_env: tuple[str | None, ...]) -> Path:
    from platformdirs import user_data_dir as _dir  # here, as above

    return Path(_dir("daintree", appauthor=False))
