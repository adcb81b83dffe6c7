"""Where the user's own files live: their config (trusted) and their data (the trust record, secrets, the demo's
registry), never inside a repository."""

from __future__ import annotations

from pathlib import Path


def user_config_dir() -> Path:
    """The user's config directory (platformdirs; honours XDG_CONFIG_HOME)."""
    from platformdirs import user_config_dir as _dir  # here: start-up speed, most commands never ask

    return Path(_dir("daintree", appauthor=False))


def user_data_dir() -> Path:
    """Where per-user records (trusted configs) live: never inside a repository."""
    from platformdirs import user_data_dir as _dir  # here, as above

    return Path(_dir("daintree", appauthor=False))
