"""The containment keys of one config tree: `memory`, `pids`, `cpu`, `network` and `network_extra`, in the
`[sandbox]` table, in `[agents.X.sandbox]` and in `[roles.Y.sandbox]` (where `sandbox` may also be a mode string).

Parsed per level and per file: the merged tree gives what applies, the user's file alone what a repository's file
may only lower before `daintree trust` (core/sandbox/containment.py applies both).
"""

from __future__ import annotations

from typing import Any

from daintree_tui.core.allow_list import AllowListError, parse_rule
from daintree_tui.core.config_model import NetworkSetting, SandboxLevel
from daintree_tui.core.errors import ConfigError
from daintree_tui.core.limits import LimitsError, parse_limits

LEVEL_KEYS = ("memory", "pids", "cpu", "network", "network_extra")
TOP_LEVEL = "sandbox"


def _hosts(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f'config: {key}: expected a list of "host[:port]", got {value!r}')
    try:
        return tuple(str(parse_rule(v)) for v in value)
    except AllowListError as exc:
        raise ConfigError(f"config: {key}: {exc}") from None


def _network(value: Any, key: str) -> NetworkSetting:
    if isinstance(value, bool) or value == "agent":
        return value
    if isinstance(value, list):
        return _hosts(value, key)
    raise ConfigError(f'config: {key}: expected false, true, "agent" or a list of "host[:port]", got {value!r}')


def parse_level(table: dict[str, Any], where: str) -> SandboxLevel:
    try:
        limits = parse_limits(table, where)
    except LimitsError as exc:
        raise ConfigError(f"config: {exc}") from None
    network = _network(table["network"], f"{where}.network") if "network" in table else None
    extra = _hosts(table["network_extra"], f"{where}.network_extra") if "network_extra" in table else None
    return SandboxLevel(limits, network, extra)


def sandbox_levels(data: dict[str, Any]) -> dict[str, SandboxLevel]:
    """Every level of `data` that sets a containment key, by its dotted name ("sandbox", "agents.claude", ...)."""
    levels: dict[str, SandboxLevel] = {}
    top = data.get("sandbox")
    if isinstance(top, dict):
        levels[TOP_LEVEL] = parse_level(top, "sandbox")
    for section in ("agents", "roles"):
        tables = data.get(section)
        if not isinstance(tables, dict):
            continue
        for name, value in tables.items():
            inner = value.get("sandbox") if isinstance(value, dict) else None
            if isinstance(inner, dict):
                levels[f"{section}.{name}"] = parse_level(inner, f"{section}.{name}.sandbox")
    return levels


def sandbox_mode_of(value: Any) -> Any:
    """An agent's or role's `sandbox`: the mode string itself, or a table's `mode` (None when it has none)."""
    return value.get("mode") if isinstance(value, dict) else value
