"""The user's own config (~/.config/daintree/config.toml of the test's private home)."""

from __future__ import annotations

import os
from pathlib import Path


def write_user_config(text: str) -> None:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
