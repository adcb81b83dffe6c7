"""Configuration: the repo's `.daintree.toml` over the user's `config.toml`, merged key by key.

A repository's file is data until the user trusts it (docs/design.md 2a): it may tighten what the user's own config
allows (the sandbox, roles, budgets), never loosen it, and its commands wait for `daintree trust`. The shape of
the result is `config_model`; how one file's keys are checked is `config_parse`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from daintree_tui.core.config_model import (
    APPROVALS,
    BUDGET_KEYS,
    BUDGET_SCOPES,
    DEFAULT_BRANCH_PREFIX,
    HOOK_NAMES,
    KEYS,
    LINK_MODES,
    MCP_LEVELS,
    PRICE_KEYS,
    REPO_CONFIG_NAME,
    ROLE_ACTIONS,
    ROLE_KEYS,
    SANDBOX_MODES,
    AgentConfig,
    Config,
    HookSpec,
    Key,
    LinkSpec,
    Role,
    in_quiet_hours,
)
from daintree_tui.core.config_parse import MAX_CONFIG_BYTES, merge, parse, parse_roles, read_toml, tag_hooks
from daintree_tui.core.config_sandbox import sandbox_levels
from daintree_tui.core.log import warn
from daintree_tui.core.trust_record import is_trusted
from daintree_tui.core.user_dirs import user_config_dir, user_data_dir

__all__ = [  # the shape and the parser are re-exported: callers import the configuration from here
    "APPROVALS", "BUDGET_KEYS", "BUDGET_SCOPES", "DEFAULT_BRANCH_PREFIX", "HOOK_NAMES", "KEYS", "LINK_MODES",
    "MAX_CONFIG_BYTES", "MCP_LEVELS", "PRICE_KEYS", "REPO_CONFIG_NAME", "ROLE_ACTIONS", "ROLE_KEYS",
    "SANDBOX_MODES", "AgentConfig", "Config", "HookSpec", "Key", "LinkSpec", "Role", "in_quiet_hours", "load",
    "merge", "parse", "read_toml", "repo_command_keys", "user_config_dir", "user_data_dir",
]


def sources(root: Path) -> tuple[Path, ...]:
    """The files `load` reads for the repository at `root`: your config, the repository's, the trust records."""
    from daintree_tui.core.trust_record import trust_file

    return user_config_dir() / "config.toml", root / REPO_CONFIG_NAME, trust_file()


def signature(root: Path) -> tuple[tuple[int, int, int] | None, ...]:
    """What tells that a file `load` reads changed (inode, size, modification time; None when absent)."""
    out: list[tuple[int, int, int] | None] = []
    for path in sources(root):
        try:
            st = path.stat()
        except OSError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def load(root: Path) -> Config:
    """Load the effective configuration for the repository at `root`."""
    user_path = user_config_dir() / "config.toml"
    repo_path = root / REPO_CONFIG_NAME
    user = tag_hooks(read_toml(user_path), "user")
    repo_raw = read_toml(repo_path)
    if "hosts" in repo_raw:
        # Hosts are where we ssh to: only the user decides that, never a repository someone else wrote.
        warn(f"config: [hosts] in {repo_path} ignored: remote hosts belong in your own config "
             f"({user_path}), `daintree host add`")
        del repo_raw["hosts"]
    for section in ("notify", "serve", "checkpoints"):
        if section in repo_raw:
            # Where notices go, who reaches `daintree serve` and whether agents' turns are checkpointed are the
            # user's to say (core/user_config.py).
            warn(f"config: [{section}] in {repo_path} ignored: it belongs in your own config ({user_path})")
            del repo_raw[section]
    commands = repo_command_keys(repo_raw)
    repo = tag_hooks(repo_raw, "repo")
    cfg = parse(_spend_limits(user, repo), repo_path if repo_path.exists() else None)
    cfg.repo_commands = commands
    cfg.worktree_dir_source = "repo" if "worktree_dir" in repo else "user" if "worktree_dir" in user else "default"
    cfg.sandbox_repo_keys = _sandbox_keys(repo)
    if cfg.sandbox_repo_keys:  # what the repository's file may only lower: the user's own values beside the merged
        cfg.sandbox_user_levels = sandbox_levels(user)
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
    if not is_trusted(repo_path):
        warn(f"config: branch_prefix = {cfg.branch_prefix!r} in {repo_path} ignored: the repo config is not "
             f"trusted (run `daintree trust`); branches are {fallback}<name>")
        cfg.branch_prefix = fallback


_APPROVAL_PARTS = {"none": frozenset(), "checks": frozenset({"checks"}), "review": frozenset({"review"}),
                   "checks+review": frozenset({"checks", "review"})}


def stricter_approval(one: str, other: str) -> str:
    """What both of two `approval` values ask: "human" (a person approves each action) over all, else the checks
    and the review either asks for (`checks` and `review`: `checks+review`)."""
    if "human" in (one, other):
        return "human"
    parts = _APPROVAL_PARTS.get(one, frozenset()) | _APPROVAL_PARTS.get(other, frozenset())
    return next(name for name, asked in _APPROVAL_PARTS.items() if asked == parts)
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
    mine = parse_roles(user.get("roles"))
    for name, own in mine.items():
        merged = cfg.roles.get(name)
        if merged is None:
            continue
        allow = tuple(a for a in merged.allow if a in own.allow)
        approval = stricter_approval(merged.approval, own.approval)
        mcp = min(merged.mcp, own.mcp, key=_MCP_REACH.__getitem__)
        cfg.roles[name] = replace(merged, allow=allow, approval=approval, mcp=mcp)
    own_default = user.get("default_role")
    if isinstance(own_default, str) and own_default in cfg.roles:
        cfg.default_role = own_default


def repo_command_keys(repo: dict[str, Any]) -> dict[str, str]:
    """Every key of the repository's own file that carries a command, with the command: these run only after
    `daintree trust` (docs/design.md 2a). A new command-bearing key must be added here."""
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
