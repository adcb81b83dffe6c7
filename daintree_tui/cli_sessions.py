"""CLI commands of the sessions layer (filled in by the sessions issue)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def register(sub: Any, add: Callable[..., Any]) -> None:
    return None
