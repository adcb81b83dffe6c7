"""The configuration's shape: the records every layer reads, and the names and values its keys may take.

Loading and validating are `config_parse` (one file's table into a `Config`) and `config` (the repo's file over
the user's, with what an untrusted repository may not change).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from daintree_tui.core.limits import Limits

REPO_CONFIG_NAME = ".daintree.toml"
HOOK_NAMES = ("post_create", "pre_remove", "post_remove", "pre_merge", "on_session_exit", "on_waiting")
LINK_MODES = ("symlink", "copy", "none")
SANDBOX_MODES = ("auto", "on", "off")
ROLE_ACTIONS = ("commit", "merge", "pr", "remove", "push")
APPROVALS = ("human", "checks", "none")
MCP_LEVELS = ("lead", "worker")
PRICE_KEYS = ("input", "output", "cache_read", "cache_write")
BUDGET_SCOPES = ("per_session", "per_task", "daily")
BUDGET_KEYS = (*BUDGET_SCOPES, *(f"{s}_tokens" for s in BUDGET_SCOPES))


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

NetworkSetting = bool | str | tuple[str, ...]  # False, True, "agent" or the allow-list's entries


@dataclass(frozen=True)
class SandboxLevel:
    """What one `[sandbox]`-like table (top level, `[agents.X.sandbox]`, `[roles.Y.sandbox]`) sets; None: unset."""

    limits: Limits = field(default_factory=Limits)
    network: NetworkSetting | None = None
    network_extra: tuple[str, ...] | None = None


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
    # Limits and network rule per level ("sandbox", "agents.<name>", "roles.<name>"): merged, and the user's own
    # file alone (what a repository's file may only lower before trust; see core/sandbox/containment.py).
    sandbox_levels: dict[str, SandboxLevel] = field(default_factory=dict)
    sandbox_user_levels: dict[str, SandboxLevel] = field(default_factory=dict)
    repo_config_path: Path | None = None
    worktree_dir_source: str = "default"  # "repo", "user" or "default": the repo may only point inside itself
    repo_commands: dict[str, str] = field(default_factory=dict)  # command-bearing keys the repo's file sets
    events_max_mb: float = 20.0
    pricing: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> per-million prices
    budget: dict[str, float] = field(default_factory=dict)  # per_session, per_task, daily (+ `_tokens`)
    budget_warn_at: float = 0.8


@dataclass(frozen=True)
class Role:
    """What an agent in this role may do by itself (`allow`), and who must agree first (`approval`)."""

    name: str
    allow: tuple[str, ...]
    approval: str  # one of APPROVALS
    mcp: str | None = None  # one of MCP_LEVELS: the MCP tool set its sessions get wired with; None: not wired
    sandbox: str | None = None  # "auto", "on" or "off": the sandbox mode of this role's sessions (see Sandbox)


def in_quiet_hours(quiet: tuple[str, str] | None, now_hhmm: str) -> bool:
    """Whether `now_hhmm` falls in the quiet window (which may wrap past midnight)."""
    if quiet is None:
        return False
    start, end = quiet
    if start <= end:
        return start <= now_hhmm < end
    return now_hhmm >= start or now_hhmm < end
