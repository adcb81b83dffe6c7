"""One config tree validated into a `Config`: every key checked here, so that a bad value is one clear error naming
the key, never a traceback later."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from daintree_tui.core.config_model import (
    APPROVALS,
    BUDGET_KEYS,
    HOOK_NAMES,
    LINK_MODES,
    MCP_LEVELS,
    PRICE_KEYS,
    ROLE_ACTIONS,
    ROLE_KEYS,
    SANDBOX_MODES,
    AgentConfig,
    Config,
    HookSpec,
    LinkSpec,
    Role,
)
from daintree_tui.core.config_sandbox import sandbox_levels, sandbox_mode_of
from daintree_tui.core.errors import ConfigError
from daintree_tui.core.log import warn
from daintree_tui.core.validate import escape_controls

_TOP_KEYS = {
    "worktree_dir", "branch_prefix", "base", "deps", "ports", "hooks", "agents", "default_agent", "keys",
    "notifications", "sessions", "max_sessions", "roles", "default_role", "bakeoff", "hosts", "sandbox", "events",
    "pricing", "budget", "notify", "serve", "checkpoints",
}
_SECTION_KEYS = {
    "deps": {"include", "link"},
    "ports": {"range", "per_worktree"},
    "hooks": {*HOOK_NAMES, "timeout"},
    "notifications": {"bell", "desktop", "quiet_hours", "on_waiting", "on_exited"},
    "sessions": {"waiting_debounce", "stalled_after", "resume_after_restart"},
    "bakeoff": {"score"},
    "events": {"max_mb"},
}
_AGENT_KEYS = {"command", "prompt", "prompt_mode", "waiting_pattern", "max_minutes", "role", "sandbox"}
_SANDBOX_KEYS = {"mode", "network", "writable", "memory", "pids", "cpu", "network_extra"}


MAX_CONFIG_BYTES = 1024 * 1024


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file as a table ({} when absent); a bad file is one `ConfigError` naming it."""
    try:
        # Following a symlink is fine (dotfiles), but only to a regular file of sane size: a repository's
        # `.daintree.toml -> /dev/zero` was read until memory ran out, and one to a FIFO blocked every command.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise ConfigError(f"config: {path} is not a regular file")
            raw = fh.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"config: {path} is larger than {MAX_CONFIG_BYTES // 1024} KB")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"config: cannot read {path}: {exc.strerror}") from None
    import tomllib  # only when there is a file to parse (most runs have no user config)

    try:
        return tomllib.loads(raw.decode())
    except UnicodeDecodeError:
        raise ConfigError(f"config: {path} is not valid TOML: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config: {path} is not valid TOML: {exc}") from None


def tag_hooks(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Remember which file each hook list came from: repo hooks need trust, the user's own do not."""
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        for name, value in list(hooks.items()):
            if name in HOOK_NAMES:
                hooks[name] = {"__source__": source, "items": value}
    return data


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Merge two config trees key by key; `over` wins on every leaf it sets."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and "__source__" not in value:
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _warn_unknown(data: dict[str, Any]) -> None:
    unknown = [k for k in data if k not in _TOP_KEYS]
    for section, allowed in _SECTION_KEYS.items():
        value = data.get(section)
        if isinstance(value, dict):
            unknown += [f"{section}.{k}" for k in value if k not in allowed]
    sandbox = data.get("sandbox")
    if isinstance(sandbox, dict):
        unknown += [f"sandbox.{k}" for k in sandbox if k not in _SANDBOX_KEYS]
    agents = data.get("agents")
    if isinstance(agents, dict):
        for name, value in agents.items():
            if isinstance(value, dict):
                unknown += [f"agents.{name}.{k}" for k in value if k not in _AGENT_KEYS]
    if unknown:
        warn(f"config: unknown keys ignored: {', '.join(sorted(unknown))}")


def _expect(cond: bool, key: str, what: str, value: Any) -> None:
    if not cond:
        raise ConfigError(f"config: {key} must be {what} (got {value!r})")


def _str(data: dict[str, Any], key: str, default: str) -> str:
    value = data.get(key, default)
    _expect(isinstance(value, str) and value != "", key, "a non-empty string", value)
    return str(value)


def _str_list(value: Any, key: str) -> list[str]:
    _expect(isinstance(value, list) and all(isinstance(v, str) for v in value), key, "a list of strings", value)
    return list(value)


def _number(value: Any, key: str, positive: bool = True) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and (value > 0 or not positive)
    _expect(ok, key, "a positive number", value)
    return float(value)


def _parse_links(value: Any) -> list[LinkSpec]:
    _expect(isinstance(value, list), "deps.link", "a list", value)
    links = []
    for item in value:
        if isinstance(item, str):
            links.append(LinkSpec(item))
            continue
        _expect(isinstance(item, dict) and isinstance(item.get("path"), str), "deps.link",
                "a list of paths or {path, mode} tables", item)
        mode = item.get("mode", "symlink")
        _expect(mode in LINK_MODES, "deps.link.mode", f"one of {', '.join(LINK_MODES)}", mode)
        links.append(LinkSpec(item["path"], mode))
    for link in links:
        _expect(not Path(link.path).is_absolute() and ".." not in Path(link.path).parts, "deps.link",
                "paths inside the repository", link.path)
    return links


def _parse_hooks(raw: Any) -> tuple[dict[str, list[HookSpec]], float]:
    hooks: dict[str, list[HookSpec]] = {}
    if raw is None:
        return hooks, 120.0
    _expect(isinstance(raw, dict), "hooks", "a table", raw)
    timeout = _number(raw.get("timeout", 120), "hooks.timeout")
    for name in HOOK_NAMES:
        tagged = raw.get(name)
        if tagged is None:
            continue
        source, items = tagged["__source__"], tagged["items"]
        key = f"hooks.{name}"
        if isinstance(items, str):
            items = [items]
        _expect(isinstance(items, list), key, "a list of commands", items)
        specs = []
        for item in items:
            if isinstance(item, str):
                specs.append(HookSpec(item, source))
                continue
            _expect(isinstance(item, dict) and isinstance(item.get("command"), str), key,
                    "a list of commands or {command, background, optional, timeout} tables", item)
            hook_timeout = item.get("timeout")
            specs.append(HookSpec(
                item["command"], source, bool(item.get("background", False)), bool(item.get("optional", False)),
                None if hook_timeout is None else _number(hook_timeout, f"{key}.timeout"),
            ))
        hooks[name] = specs
    return hooks, timeout


def _expect_name(section: str, name: str) -> None:
    """An agent's or a role's name is shown as it is (the dashboard's agent picker, its title bar, an approval):
    a repository's `[agents."\u001b]52;c;..."]` wrote the user's clipboard through the dashboard."""
    _expect(escape_controls(name) == name and name.strip() == name and name != "", f"{section}.{escape_controls(name)}",
            "named without control characters or surrounding blanks", name)


def _parse_agents(raw: Any) -> dict[str, AgentConfig]:
    if raw is None:
        return {}
    _expect(isinstance(raw, dict), "agents", "a table", raw)
    agents = {}
    for name, value in raw.items():
        _expect_name("agents", name)
        key = f"agents.{name}"
        _expect(isinstance(value, dict), key, "a table", value)
        for sub in ("command", "prompt", "waiting_pattern", "role"):
            if sub in value:
                _expect(isinstance(value[sub], str), f"{key}.{sub}", "a string", value[sub])
        mode = value.get("prompt_mode")
        _expect(mode is None or (isinstance(mode, str) and (mode in ("arg", "type", "none") or
                                                            (mode.startswith("flag:") and len(mode) > 5))),
                f"{key}.prompt_mode", 'one of "arg", "type", "none" or "flag:--FLAG"', mode)
        max_minutes = value.get("max_minutes")
        agent_mode = sandbox_mode_of(value.get("sandbox"))
        _expect(agent_mode is None or agent_mode in SANDBOX_MODES, f"{key}.sandbox",
                'one of "auto", "on", "off", or a table', value.get("sandbox"))
        agents[name] = AgentConfig(
            command=value.get("command"), prompt=value.get("prompt"), prompt_mode=mode,
            waiting_pattern=value.get("waiting_pattern"),
            max_minutes=None if max_minutes is None else _number(max_minutes, f"{key}.max_minutes"),
            role=value.get("role"), sandbox=agent_mode,
        )
    return agents


def parse_roles(raw: Any) -> dict[str, Role]:
    if raw is None:
        return {}
    _expect(isinstance(raw, dict), "roles", "a table of roles", raw)
    roles = {}
    for name, value in raw.items():
        _expect_name("roles", name)
        key = f"roles.{name}"
        _expect(isinstance(value, dict), key, "a table", value)
        allow = value.get("allow", list(ROLE_ACTIONS))
        _expect(isinstance(allow, list) and all(a in ROLE_ACTIONS for a in allow), f"{key}.allow",
                f"a list drawn from {', '.join(ROLE_ACTIONS)}", allow)
        approval = value.get("approval", "none")
        _expect(approval in APPROVALS, f"{key}.approval", f"one of {', '.join(APPROVALS)}", approval)
        # `mcp`: the MCP tool set its sessions get wired with ("lead" or "worker"); absent: none is wired.
        mcp = value.get("mcp")
        _expect(mcp is None or mcp in MCP_LEVELS, f"{key}.mcp", f"one of {', '.join(MCP_LEVELS)}", mcp)
        sandbox = sandbox_mode_of(value.get("sandbox"))
        _expect(sandbox is None or sandbox in SANDBOX_MODES, f"{key}.sandbox",
                'one of "auto", "on", "off", or a table', value.get("sandbox"))
        unknown = [k for k in value if k not in ROLE_KEYS]
        if unknown:
            warn(f"config: unknown keys ignored: {', '.join(f'{key}.{k}' for k in unknown)}")
        roles[name] = Role(name, tuple(allow), approval, mcp=mcp, sandbox=sandbox)
    return roles


def parse(data: dict[str, Any], repo_config_path: Path | None = None) -> Config:
    """Validate a merged config tree into a `Config`; raise `ConfigError` naming the first bad key."""
    _warn_unknown(data)
    cfg = Config(repo_config_path=repo_config_path)
    cfg.worktree_dir = _str(data, "worktree_dir", cfg.worktree_dir)
    cfg.branch_prefix = _str(data, "branch_prefix", cfg.branch_prefix)
    cfg.base = _str(data, "base", cfg.base)
    if "default_agent" in data:
        cfg.default_agent = _str(data, "default_agent", cfg.default_agent)
    deps = data.get("deps", {})
    _expect(isinstance(deps, dict), "deps", "a table", deps)
    if "include" in deps:
        cfg.deps_include = _str_list(deps["include"], "deps.include")
    if "link" in deps:
        cfg.deps_link = _parse_links(deps["link"])
    ports = data.get("ports", {})
    _expect(isinstance(ports, dict), "ports", "a table", ports)
    if "range" in ports:
        rng = ports["range"]
        ok = (isinstance(rng, list) and len(rng) == 2 and all(isinstance(p, int) for p in rng)
              and 1 <= rng[0] <= rng[1] <= 65535)
        _expect(ok, "ports.range", "two port numbers [low, high] with low <= high", rng)
        cfg.ports_range = (rng[0], rng[1])
    if "per_worktree" in ports:
        per = ports["per_worktree"]
        _expect(isinstance(per, int) and not isinstance(per, bool) and 1 <= per <= 100,
                "ports.per_worktree", "an integer from 1 to 100", per)
        cfg.ports_per_worktree = per
    cfg.hooks, cfg.hook_timeout = _parse_hooks(data.get("hooks"))
    cfg.agents = _parse_agents(data.get("agents"))
    keys = data.get("keys", {})
    _expect(isinstance(keys, dict) and all(isinstance(v, str) for v in keys.values()), "keys",
            "a table of binding id = key", keys)
    cfg.keys = dict(keys)
    notifications = data.get("notifications", {})
    _expect(isinstance(notifications, dict), "notifications", "a table", notifications)
    for key in ("bell", "desktop", "on_waiting", "on_exited"):
        if key in notifications:
            _expect(isinstance(notifications[key], bool), f"notifications.{key}", "true or false",
                    notifications[key])
    cfg.bell = notifications.get("bell", cfg.bell)
    cfg.desktop = notifications.get("desktop", cfg.desktop)
    cfg.notify_on = {"waiting": notifications.get("on_waiting", True), "exited": notifications.get("on_exited", True)}
    if "quiet_hours" in notifications:
        quiet = notifications["quiet_hours"]
        ok = (isinstance(quiet, list) and len(quiet) == 2
              and all(isinstance(t, str) and re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d", t) for t in quiet))
        _expect(ok, "notifications.quiet_hours", 'two times ["HH:MM", "HH:MM"]', quiet)
        cfg.quiet_hours = (quiet[0], quiet[1])
    sessions = data.get("sessions", {})
    _expect(isinstance(sessions, dict), "sessions", "a table", sessions)
    if "waiting_debounce" in sessions:
        cfg.waiting_debounce = _number(sessions["waiting_debounce"], "sessions.waiting_debounce")
    if "stalled_after" in sessions:
        cfg.stalled_after = _number(sessions["stalled_after"], "sessions.stalled_after")
    if "resume_after_restart" in sessions:
        resume = sessions["resume_after_restart"]
        _expect(isinstance(resume, bool), "sessions.resume_after_restart", "true or false", resume)
        cfg.resume_after_restart = resume
    bakeoff = data.get("bakeoff", {})
    _expect(isinstance(bakeoff, dict), "bakeoff", "a table", bakeoff)
    if "score" in bakeoff:
        _expect(isinstance(bakeoff["score"], str) and bakeoff["score"].strip() != "", "bakeoff.score",
                "a command", bakeoff["score"])
        cfg.bakeoff_score = bakeoff["score"]
    cfg.roles = parse_roles(data.get("roles"))
    _parse_sandbox(cfg, data.get("sandbox"))
    cfg.sandbox_levels = sandbox_levels(data)
    cfg.sandbox_user_levels = cfg.sandbox_levels  # config.load puts the user's own file's here
    if "default_role" in data:
        role = data["default_role"]
        _expect(isinstance(role, str) and role in cfg.roles, "default_role", "the name of a [roles.*] table", role)
        cfg.default_role = role
    events = data.get("events", {})
    _expect(isinstance(events, dict), "events", "a table", events)
    if "max_mb" in events:
        value = events["max_mb"]
        _expect(isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 100_000
                and value == value, "events.max_mb", "a size in MB from 0 to 100000", value)
        cfg.events_max_mb = float(value)
    if "max_sessions" in data:
        value = data["max_sessions"]
        _expect(isinstance(value, int) and not isinstance(value, bool) and value >= 1, "max_sessions",
                "a positive integer", value)
        cfg.max_sessions = value
    cfg.pricing = _parse_pricing(data.get("pricing"))
    cfg.budget, cfg.budget_warn_at = _parse_budget(data.get("budget"))
    return cfg


def _parse_sandbox(cfg: Config, raw: Any) -> None:
    """`sandbox = "auto"|"on"|"off"`, or a `[sandbox]` table with `mode`, `network` and `writable`."""
    if raw is None:
        return
    if isinstance(raw, str):
        raw = {"mode": raw}
    _expect(isinstance(raw, dict), "sandbox", 'one of "auto", "on", "off", or a table', raw)
    mode = raw.get("mode", cfg.sandbox_mode)
    _expect(mode in SANDBOX_MODES, "sandbox.mode", 'one of "auto", "on", "off"', mode)
    cfg.sandbox_mode = mode
    if "network" in raw:  # a list or "agent": a network, through the allow-list (config_sandbox checks it)
        cfg.sandbox_network = raw["network"] is not False
    if "writable" in raw:
        paths = _str_list(raw["writable"], "sandbox.writable")
        _expect(all(p.startswith(("/", "~")) for p in paths), "sandbox.writable",
                "absolute paths (or ~/...)", paths)
        cfg.sandbox_writable = paths


def _parse_pricing(raw: Any) -> dict[str, dict[str, float]]:
    """`[pricing."<model>"]` input / output / cache_read / cache_write, per million tokens."""
    if raw is None:
        return {}
    _expect(isinstance(raw, dict), "pricing", "a table of models", raw)
    prices = {}
    for model, value in raw.items():
        key = f"pricing.{model}"
        _expect(isinstance(value, dict), key, "a table (input, output, cache_read, cache_write)", value)
        unknown = [k for k in value if k not in PRICE_KEYS]
        if unknown:
            warn(f"config: unknown keys ignored: {', '.join(f'{key}.{k}' for k in unknown)}")
        for need in ("input", "output"):
            _expect(need in value, f"{key}.{need}", "set (price per million tokens)", None)
        prices[model] = {k: _number(value[k], f"{key}.{k}", positive=False) for k in PRICE_KEYS if k in value}
        for k, v in prices[model].items():
            _expect(v >= 0, f"{key}.{k}", "zero or more", v)
    return prices


def _parse_budget(raw: Any) -> tuple[dict[str, float], float]:
    """`[budget]` per_session / per_task / daily in currency, or the same with `_tokens` in tokens."""
    if raw is None:
        return {}, 0.8
    _expect(isinstance(raw, dict), "budget", "a table", raw)
    unknown = [k for k in raw if k not in (*BUDGET_KEYS, "warn_at")]
    if unknown:
        warn(f"config: unknown keys ignored: {', '.join(f'budget.{k}' for k in unknown)}")
    limits = {k: _number(raw[k], f"budget.{k}") for k in BUDGET_KEYS if k in raw}
    warn_at = raw.get("warn_at", 0.8)
    ok = isinstance(warn_at, int | float) and not isinstance(warn_at, bool) and 0 < warn_at < 1
    _expect(ok, "budget.warn_at", "a fraction between 0 and 1", warn_at)
    return limits, float(warn_at)
