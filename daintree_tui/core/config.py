"""Configuration: the repo's `.daintree.toml` over the user's `config.toml`, merged key by key.

Every key is validated here so that a bad value is one clear error naming the key, never a traceback later.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from daintree_tui.core.errors import ConfigError
from daintree_tui.core.log import warn
from daintree_tui.core.validate import escape_controls

REPO_CONFIG_NAME = ".daintree.toml"
HOOK_NAMES = ("post_create", "pre_remove", "post_remove", "pre_merge", "on_session_exit", "on_waiting")
LINK_MODES = ("symlink", "copy", "none")


def user_config_dir() -> Path:
    """The user's config directory (platformdirs; honours XDG_CONFIG_HOME)."""
    from platformdirs import user_config_dir as _dir

    return Path(_dir("daintree", appauthor=False))


def user_data_dir() -> Path:
    """Where per-user records (trusted configs) live: never inside a repository."""
    from platformdirs import user_data_dir as _dir

    return Path(_dir("daintree", appauthor=False))


@dataclass(frozen=True)
class LinkSpec:
    """One `deps.link` entry: a path in the primary and how it reaches each worktree."""

    path: str
    mode: str = "symlink"


@dataclass(frozen=True)
class HookSpec:
    """One hook command and where it came from (repo commands need trust)."""

    command: str
    source: str  # "repo" or "user"
    background: bool = False
    optional: bool = False
    timeout: float | None = None


@dataclass(frozen=True)
class AgentConfig:
    """An agent preset as configured: overrides of the built-in presets, or new ones."""

    command: str | None = None
    prompt: str | None = None
    prompt_mode: str | None = None
    waiting_pattern: str | None = None
    max_minutes: float | None = None
    role: str | None = None
    sandbox: str | None = None  # "auto", "on" or "off": overrides the top-level mode for this agent


DEFAULT_BRANCH_PREFIX = "wt/"


@dataclass
class Config:
    """The effective configuration of one repository."""

    worktree_dir: str = ".worktrees"
    branch_prefix: str = DEFAULT_BRANCH_PREFIX
    base: str = "HEAD"
    deps_include: list[str] = field(default_factory=lambda: [".env", ".env.*", ".envrc"])
    deps_link: list[LinkSpec] = field(default_factory=lambda: [LinkSpec("node_modules")])
    ports_range: tuple[int, int] = (3100, 3999)
    ports_per_worktree: int = 3
    hooks: dict[str, list[HookSpec]] = field(default_factory=dict)
    hook_timeout: float = 120.0
    agents: dict[str, AgentConfig] = field(default_factory=dict)
    default_agent: str = ""  # "": the first installed of claude, codex, gemini, opencode, aider, else shell
    keys: dict[str, str] = field(default_factory=dict)
    bell: bool = True
    desktop: bool = True
    notify_on: dict[str, bool] = field(default_factory=lambda: {"waiting": True, "exited": True})
    quiet_hours: tuple[str, str] | None = None
    waiting_debounce: float = 2.0
    stalled_after: float = 30.0  # seconds without a visible character since a start: the session is `stalled`
    resume_after_restart: bool = False  # sessions lost with their tmux server are resumed without asking
    max_sessions: int = 3
    bakeoff_score: str | None = None
    roles: dict[str, Role] = field(default_factory=dict)
    default_role: str | None = None
    sandbox_mode: str = "auto"
    sandbox_network: bool = True
    sandbox_writable: list[str] = field(default_factory=list)
    # Sandbox keys the repository's own file set ("sandbox", "agents.x.sandbox", "roles.y.sandbox", ...): a
    # repo may tighten the sandbox, but loosening it needs `daintree trust` like a command does (DESIGN 2a).
    sandbox_repo_keys: frozenset[str] = frozenset()
    repo_config_path: Path | None = None
    worktree_dir_source: str = "default"  # "repo", "user" or "default": the repo may only point inside itself
    repo_commands: dict[str, str] = field(default_factory=dict)  # command-bearing keys the repo's file sets
    events_max_mb: float = 20.0
    pricing: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> per-million prices
    budget: dict[str, float] = field(default_factory=dict)  # per_session, per_task, daily (+ `_tokens`)
    budget_warn_at: float = 0.8


_TOP_KEYS = {
    "worktree_dir", "branch_prefix", "base", "deps", "ports", "hooks", "agents", "default_agent", "keys",
    "notifications", "sessions", "max_sessions", "roles", "default_role", "bakeoff", "hosts", "sandbox", "events",
    "pricing", "budget", "notify", "serve",
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
SANDBOX_MODES = ("auto", "on", "off")
_SANDBOX_KEYS = {"mode", "network", "writable"}


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


def _tag_hooks(data: dict[str, Any], source: str) -> dict[str, Any]:
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
        if "sandbox" in value:
            _expect(value["sandbox"] in SANDBOX_MODES, f"{key}.sandbox", 'one of "auto", "on", "off"',
                    value["sandbox"])
        agents[name] = AgentConfig(
            command=value.get("command"), prompt=value.get("prompt"), prompt_mode=mode,
            waiting_pattern=value.get("waiting_pattern"),
            max_minutes=None if max_minutes is None else _number(max_minutes, f"{key}.max_minutes"),
            role=value.get("role"), sandbox=value.get("sandbox"),
        )
    return agents


ROLE_ACTIONS = ("commit", "merge", "pr", "remove", "push")
APPROVALS = ("human", "checks", "none")
MCP_LEVELS = ("lead", "worker")


@dataclass(frozen=True)
class Role:
    """What an agent in this role may do by itself (`allow`), and who must agree first (`approval`)."""

    name: str
    allow: tuple[str, ...]
    approval: str  # one of APPROVALS
    mcp: str | None = None  # one of MCP_LEVELS: the MCP tool set its sessions get wired with; None: not wired
    sandbox: str | None = None  # "auto", "on" or "off": the sandbox mode of this role's sessions (see Sandbox)


def _parse_roles(raw: Any) -> dict[str, Role]:
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
        sandbox = value.get("sandbox")
        _expect(sandbox is None or sandbox in SANDBOX_MODES, f"{key}.sandbox", 'one of "auto", "on", "off"',
                sandbox)
        unknown = [k for k in value if k not in ("allow", "approval", "mcp", "sandbox")]
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
    cfg.roles = _parse_roles(data.get("roles"))
    _parse_sandbox(cfg, data.get("sandbox"))
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
    if "network" in raw:
        _expect(isinstance(raw["network"], bool), "sandbox.network", "true or false", raw["network"])
        cfg.sandbox_network = raw["network"]
    if "writable" in raw:
        paths = _str_list(raw["writable"], "sandbox.writable")
        _expect(all(p.startswith(("/", "~")) for p in paths), "sandbox.writable",
                "absolute paths (or ~/...)", paths)
        cfg.sandbox_writable = paths


def _sandbox_keys(data: dict[str, Any]) -> frozenset[str]:
    """The sandbox settings present in one config tree, as dotted keys."""
    keys: set[str] = set()
    raw = data.get("sandbox")
    if isinstance(raw, str):
        keys.add("sandbox.mode")
    elif isinstance(raw, dict):
        keys.update(f"sandbox.{k}" for k in raw)
    for section in ("agents", "roles"):
        table = data.get(section)
        if isinstance(table, dict):
            keys.update(f"{section}.{name}.sandbox" for name, value in table.items()
                        if isinstance(value, dict) and "sandbox" in value)
    return frozenset(keys)


# -- usage pricing and budgets (issue 14) ----------------------------------------------------------------------

PRICE_KEYS = ("input", "output", "cache_read", "cache_write")
BUDGET_SCOPES = ("per_session", "per_task", "daily")
BUDGET_KEYS = (*BUDGET_SCOPES, *(f"{s}_tokens" for s in BUDGET_SCOPES))


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


def load(root: Path) -> Config:
    """Load the effective configuration for the repository at `root`."""
    user_path = user_config_dir() / "config.toml"
    repo_path = root / REPO_CONFIG_NAME
    user = _tag_hooks(read_toml(user_path), "user")
    repo_raw = read_toml(repo_path)
    if "hosts" in repo_raw:
        # Hosts are where we ssh to: only the user decides that, never a repository someone else wrote.
        warn(f"config: [hosts] in {repo_path} ignored: remote hosts belong in your own config "
             f"({user_path}), `daintree host add`")
        del repo_raw["hosts"]
    for section in ("notify", "serve"):
        if section in repo_raw:
            # Where notices go and who reaches `daintree serve` are the user's to say (core/user_config.py).
            warn(f"config: [{section}] in {repo_path} ignored: it belongs in your own config ({user_path})")
            del repo_raw[section]
    commands = repo_command_keys(repo_raw)
    repo = _tag_hooks(repo_raw, "repo")
    cfg = parse(_spend_limits(user, repo), repo_path if repo_path.exists() else None)
    cfg.repo_commands = commands
    cfg.worktree_dir_source = "repo" if "worktree_dir" in repo else "user" if "worktree_dir" in user else "default"
    cfg.sandbox_repo_keys = _sandbox_keys(repo)
    _keep_user_network(cfg, user, repo_path)
    _keep_user_branch_prefix(cfg, user, repo_path)
    if "roles" in user or "default_role" in user:
        _keep_user_policy(cfg, user, repo, repo_path)
    return cfg


def _keep_user_network(cfg: Config, user: dict[str, Any], repo_path: Path) -> None:
    """An untrusted repository config may turn the sandbox's network off, never back on: the user turns it off
    where an agent with a network could act outside (credentials, an abstract D-Bus or X socket)."""
    raw = user.get("sandbox")
    if not (cfg.sandbox_network and "sandbox.network" in cfg.sandbox_repo_keys and isinstance(raw, dict)
            and raw.get("network") is False):
        return
    from daintree_tui.core.hooks import is_trusted  # function-level: hooks imports this module

    if not is_trusted(repo_path):
        warn(f"config: sandbox.network = true in {repo_path} ignored: the repo config is not trusted "
             "(run `daintree trust`)")
        cfg.sandbox_network = False


def _keep_user_branch_prefix(cfg: Config, user: dict[str, Any], repo_path: Path) -> None:
    """An untrusted repository config cannot choose the branches' prefix: a sandbox can write its prefix's ref
    folder (a branch made there after it started is writable to it), so `branch_prefix = "release/"` in a clone
    would hand running agents the user's next release branches."""
    own = user.get("branch_prefix")
    fallback = own if isinstance(own, str) else DEFAULT_BRANCH_PREFIX
    if cfg.branch_prefix == fallback:
        return
    from daintree_tui.core.trust import is_trusted  # function-level: trust imports this module

    if not is_trusted(repo_path):
        warn(f"config: branch_prefix = {cfg.branch_prefix!r} in {repo_path} ignored: the repo config is not "
             f"trusted (run `daintree trust`); branches are {fallback}<name>")
        cfg.branch_prefix = fallback


_APPROVAL_STRICTNESS = {"none": 0, "checks": 1, "human": 2}
_MCP_REACH: dict[str | None, int] = {None: 0, "worker": 1, "lead": 2}


def _keep_user_policy(cfg: Config, user: dict[str, Any], repo: dict[str, Any], repo_path: Path) -> None:
    """An untrusted repository config may tighten the user's own roles, never loosen them.

    The repo's file is merged over the user's, so `[roles.worker] approval = "none"` or `default_role = "lead"`
    in a cloned repository would otherwise hand every agent the right to merge, push or remove with nobody
    asked (and a lead's MCP tools). Until `daintree trust`: a role both define allows only what both allow, asks
    the stricter approval and gets the lesser MCP level; the user's `default_role` stands.
    """
    raw_agents = repo.get("agents")
    repo_agents: dict[str, Any] = raw_agents if isinstance(raw_agents, dict) else {}
    picks_role = any(isinstance(a, dict) and "role" in a for a in repo_agents.values())
    if not ("roles" in repo or "default_role" in repo or picks_role):
        return
    from daintree_tui.core.hooks import is_trusted  # function-level: hooks imports this module

    if is_trusted(repo_path):
        return
    # Nor may it pick a role for an agent (`agents.claude.role = "lead"`): the user's choice, if any, stands.
    raw_user_agents = user.get("agents")
    user_agents: dict[str, Any] = raw_user_agents if isinstance(raw_user_agents, dict) else {}
    for name, agent in cfg.agents.items():
        if isinstance(repo_agents.get(name), dict) and "role" in repo_agents[name]:
            own = user_agents.get(name)
            own_role = own.get("role") if isinstance(own, dict) else None
            cfg.agents[name] = replace(agent, role=own_role if isinstance(own_role, str) else None)
    mine = _parse_roles(user.get("roles"))
    for name, own in mine.items():
        merged = cfg.roles.get(name)
        if merged is None:
            continue
        allow = tuple(a for a in merged.allow if a in own.allow)
        approval = max(merged.approval, own.approval, key=_APPROVAL_STRICTNESS.__getitem__)
        mcp = min(merged.mcp, own.mcp, key=_MCP_REACH.__getitem__)
        cfg.roles[name] = replace(merged, allow=allow, approval=approval, mcp=mcp)
    own_default = user.get("default_role")
    if isinstance(own_default, str) and own_default in cfg.roles:
        cfg.default_role = own_default


def repo_command_keys(repo: dict[str, Any]) -> dict[str, str]:
    """Every key of the repository's own file that carries a command, with the command: these run only after
    `daintree trust` (DESIGN.md 2a). A new command-bearing key must be added here."""
    out: dict[str, str] = {}
    hooks = repo.get("hooks")
    if isinstance(hooks, dict):
        for name in HOOK_NAMES:
            items = hooks.get(name)
            items = [items] if isinstance(items, str | dict) else items if isinstance(items, list) else []
            for i, item in enumerate(items):
                command = item.get("command") if isinstance(item, dict) else item
                out[f"hooks.{name}[{i}]"] = str(command)
    agents = repo.get("agents")
    if isinstance(agents, dict):
        for name, value in agents.items():
            if isinstance(value, dict) and "command" in value:
                out[f"agents.{name}.command"] = str(value["command"])
            # `flag:X` puts X on the agent's command line (`--dangerously-skip-permissions`, `--mcp-config` with
            # a repo prompt holding a server's command): as much a command as `command` itself.
            mode = value.get("prompt_mode") if isinstance(value, dict) else None
            if isinstance(mode, str) and mode.startswith("flag:"):
                out[f"agents.{name}.prompt_mode"] = mode
            # A regular expression runs on every status poll against what the agent prints: `(.|.)*\0` takes
            # forever on one line of 30 characters and freezes `session list` and the dashboard.
            pattern = value.get("waiting_pattern") if isinstance(value, dict) else None
            if isinstance(pattern, str):
                out[f"agents.{name}.waiting_pattern"] = pattern
    default = repo.get("default_agent")
    if isinstance(default, str) and f"agents.{default}.command" in out:
        out["default_agent"] = out[f"agents.{default}.command"]
    bakeoff = repo.get("bakeoff")
    if isinstance(bakeoff, dict) and "score" in bakeoff:
        out["bakeoff.score"] = str(bakeoff["score"])
    return out


def _spend_limits(user: dict[str, Any], repo: dict[str, Any]) -> dict[str, Any]:
    """Merge, except that a repository can only tighten the user's budgets and never sets prices: both decide
    what an agent may spend, and the repo's config is data, not the user's word."""
    merged = merge(user, {k: v for k, v in repo.items() if k != "pricing"})
    if "pricing" in repo:
        warn("config: [pricing] in the repository's .daintree.toml is ignored (set prices in your own config)")
    if "pricing" in user:
        merged["pricing"] = user["pricing"]
    user_budget, repo_budget = user.get("budget"), repo.get("budget")
    if isinstance(user_budget, dict) and isinstance(repo_budget, dict):
        budget = {**user_budget, **repo_budget}
        for key in BUDGET_KEYS:
            values = [b[key] for b in (user_budget, repo_budget) if isinstance(b.get(key), int | float)]
            if len(values) == 2:
                budget[key] = min(values)
        merged["budget"] = budget
    return merged


def in_quiet_hours(quiet: tuple[str, str] | None, now_hhmm: str) -> bool:
    """Whether `now_hhmm` falls in the quiet window (which may wrap past midnight)."""
    if quiet is None:
        return False
    start, end = quiet
    if start <= end:
        return start <= now_hhmm < end
    return now_hhmm >= start or now_hhmm < end
