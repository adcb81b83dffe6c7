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
APPROVALS = ("human", "checks", "review", "checks+review", "none")
MCP_LEVELS = ("lead", "worker")
ROLE_KEYS = ("allow", "approval", "mcp", "sandbox")
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
    # repo may tighten the sandbox, but loosening it needs `daintree trust` like a command does (docs/design.md 2a).
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


# -- the key table: every key a config file may set, for people (the docs' configuration reference is generated
# from it, docs/hooks/reference.py) -------------------------------------------------------------------------------

EITHER = "either"
"""Your config or the repository's; the repository's wins, key by key."""
USER_ONLY = "user"
"""Your config only: the repository's is ignored, with a warning."""
AFTER_TRUST = "trust"
"""Either; the repository's counts only once you ran `daintree trust` (it carries a command, or a way around one)."""
TIGHTEN_ONLY = "tighten"
"""Either; the repository's may only make yours stricter (until `daintree trust`, or always: see the key)."""


@dataclass(frozen=True)
class Key:
    """One configuration key as the reference shows it. `field` names the `Config` attribute whose default is the
    key's default (the reference reads it from `Config()`, so it cannot drift); `default` is for keys without one."""

    name: str
    type: str
    help: str
    scope: str = EITHER
    field: str | None = None
    default: str | None = None


_HOOK_TYPE = "list of commands, or of {command, background, optional, timeout} tables"
_HOOK_HELP = {
    "post_create": "after a worktree is created; a failing one rolls the create back unless `optional = true`",
    "pre_remove": "before a worktree is removed",
    "post_remove": "after a remove, in the primary, outside the sandbox (what it runs of the repository is pinned "
                   "by `daintree trust`)",
    "pre_merge": "the gate of a merge: run in the worktree first; a failure refuses the merge",
    "on_session_exit": "when a session's agent exits (`DAINTREE_EXIT_CODE` is set)",
    "on_waiting": "when a session starts waiting for you",
}

KEYS: tuple[Key, ...] = (
    Key("worktree_dir", "string (path)", "where worktree directories go; the repository's must stay inside it "
        "(not its root, not `.git`), yours may put them beside it (`../wt`)", field="worktree_dir"),
    Key("branch_prefix", "string", "prefix of every worktree's branch", AFTER_TRUST, field="branch_prefix"),
    Key("base", "string (git ref)", "what a new worktree starts from unless `--base` says", field="base"),
    Key("default_agent", "string (preset)", "the agent of a session started without `--agent` (unset: the first "
        "installed of claude, codex, gemini, opencode, aider, else shell); a repository's that names its own "
        "agent command needs trust", field="default_agent"),
    Key("max_sessions", "integer >= 1", "sessions the queue (and the dashboard's auto queue) runs at once",
        field="max_sessions"),
    Key("default_role", "string (a `[roles.*]` name)", "the role of a session whose task and agent name none; the "
        "repository's counts only once trusted", TIGHTEN_ONLY, field="default_role"),
    Key("deps.include", "list of strings (gitignore patterns)", "ignored files copied into every new worktree",
        field="deps_include"),
    Key("deps.link", "list of paths, or of {path, mode} tables", "ignored directories linked into every new "
        "worktree (gitignore patterns over the ignored directories); mode `symlink`, `copy` or `none`",
        field="deps_link"),
    Key("ports.range", "[low, high] port numbers", "where worktrees lease their ports", field="ports_range"),
    Key("ports.per_worktree", "integer 1-100", "ports leased by each worktree (the first is `PORT`)",
        field="ports_per_worktree"),
    *(Key(f"hooks.{name}", _HOOK_TYPE, _HOOK_HELP[name], AFTER_TRUST, default="[]") for name in HOOK_NAMES),
    Key("hooks.timeout", "seconds > 0", "the timeout of every hook (a hook's own `timeout` wins)",
        field="hook_timeout"),
    Key("agents.<name>.command", "string (command line)", "the agent's program, a new preset or an override of a "
        "built-in's", AFTER_TRUST),
    Key("agents.<name>.prompt", "string (template)", "the first prompt: `{subject}`, `{description}`, "
        "`{worktree}`, `{port}`", default='"{subject}\\n\\n{description}"'),
    Key("agents.<name>.prompt_mode", '"arg", "flag:FLAG", "type" or "none"', "how the first prompt reaches the "
        "agent (the default of a new preset; the built-ins have their own); a repository's `flag:` needs trust (it "
        "adds options to the agent's command line)", default='"arg"'),
    Key("agents.<name>.waiting_pattern", "string (regular expression)", "the agent is waiting when its last "
        "screen line matches; a repository's needs trust (a pattern could stall every status poll)", AFTER_TRUST),
    Key("agents.<name>.max_minutes", "number > 0", "a session running longer is stopped (`session.timeout`)"),
    Key("agents.<name>.role", "string (a `[roles.*]` name)", "the role of this agent's sessions; a repository's "
        "counts only once trusted", TIGHTEN_ONLY),
    Key("agents.<name>.sandbox", '"auto", "on" or "off"', "the sandbox of this agent's sessions (a role's wins); a "
        "repository may turn it on, not off, until trusted", TIGHTEN_ONLY),
    Key("keys.<binding id>", "string (key)", "remap a dashboard key by its binding id, e.g. `remove = \"delete\"`"),
    Key("notifications.bell", "true or false", "ring the terminal bell on a waiting or exited session",
        field="bell"),
    Key("notifications.desktop", "true or false", "`notify-send` where it exists", field="desktop"),
    Key("notifications.on_waiting", "true or false", "notify when a session starts waiting", default="true"),
    Key("notifications.on_exited", "true or false", "notify when a session exits", default="true"),
    Key("notifications.quiet_hours", '["HH:MM", "HH:MM"]', "no bell or desktop notice in this window (it may wrap "
        "past midnight)", field="quiet_hours"),
    Key("sessions.waiting_debounce", "seconds > 0", "output quiet this long means `waiting` (agents without hooks)",
        field="waiting_debounce"),
    Key("sessions.stalled_after", "seconds > 0", "a session that drew nothing visible this long after its start is "
        "`stalled`", field="stalled_after"),
    Key("sessions.resume_after_restart", "true or false", "start the sessions a reboot took again, with their "
        "agents' resume, without asking (the dashboard's start, `doctor --fix`)", field="resume_after_restart"),
    Key("bakeoff.score", "string (command)", "the default score command of `bakeoff score`", AFTER_TRUST,
        field="bakeoff_score"),
    Key("events.max_mb", "number, 0-100000", "`events.jsonl` rotates to `events.jsonl.1` past this size",
        field="events_max_mb"),
    Key("roles.<name>.allow", "list drawn from commit, merge, pr, remove, push", "what a session in this role may "
        "do by itself; the repository's can only narrow yours until trusted", TIGHTEN_ONLY,
        default="[all of them]"),
    Key("roles.<name>.approval", '"none", "checks", "review", "checks+review" or "human"', "who must agree "
        "first: nobody; the `pre_merge` checks (and the pull request's CI) green on the head a merge lands; your "
        "`daintree review NAME --approve` of that head (a new commit asks again); both; or you, for each action "
        "the role's agent takes itself", TIGHTEN_ONLY, default='"none"'),
    Key("roles.<name>.mcp", '"lead" or "worker"', "the MCP tools this role's sessions get wired with (unset: none)",
        TIGHTEN_ONLY),
    Key("roles.<name>.sandbox", '"auto", "on" or "off"', "the sandbox of this role's sessions (wins over the "
        "agent's)", TIGHTEN_ONLY),
    Key("sandbox", '"auto", "on" or "off", or a table', "the string form of `sandbox.mode`", TIGHTEN_ONLY,
        field="sandbox_mode"),
    Key("sandbox.mode", '"auto", "on" or "off"', "`auto`: where bubblewrap works; `on`: refuse to start without "
        "it; `off`; a repository may turn it on, not off, until trusted", TIGHTEN_ONLY, field="sandbox_mode"),
    Key("sandbox.network", 'true, false, a list of "host[:port]", or "agent"', "false cuts the sandbox's network "
        "(`--unshare-net`); a list (or `\"agent\"`: the preset's API hosts plus `network_extra`) gives the command "
        "its own network namespace whose only way out is an allow-listing proxy; a repository may only tighten it "
        "until trusted", TIGHTEN_ONLY, default="true"),
    Key("sandbox.network_extra", 'list of "host[:port]"', "hosts added to the allow-list (and to `\"agent\"`)",
        TIGHTEN_ONLY, default="[]"),
    Key("sandbox.memory", 'a size ("4G", "512M")', "the memory of a session's, hook's or run's processes together, "
        "through a cgroup of its own (also per agent and role); a repository may only lower it until trusted",
        TIGHTEN_ONLY, default="unlimited"),
    Key("sandbox.pids", "whole number >= 1", "processes and threads at once (cgroup pids); a repository may only "
        "lower it until trusted", TIGHTEN_ONLY, default="unlimited"),
    Key("sandbox.cpu", "number of cores (2.0, 0.5)", "the CPU quota (cgroup cpu); a repository may only lower it "
        "until trusted", TIGHTEN_ONLY, default="unlimited"),
    Key("sandbox.writable", "list of absolute paths (or ~/...)", "more writable folders inside the sandbox (a "
        "trailing / creates a missing one); the repository's is ignored until trusted", TIGHTEN_ONLY,
        field="sandbox_writable"),
    *(Key(f'pricing."<model>".{k}', "number >= 0", f"{k.replace('_', ' ')} price per million tokens, for every "
          "model name that starts with `<model>`" + ("" if k in ("cache_read", "cache_write") else " (required)"),
          USER_ONLY) for k in PRICE_KEYS),
    *(Key(f"budget.{k}", "tokens > 0" if k.endswith("_tokens") else "number > 0 (the pricing's currency)",
          f"the spend limit {k.removesuffix('_tokens').replace('_', ' ')}"
          + (", in tokens (input + output + cache reads and writes)" if k.endswith("_tokens") else ""),
          TIGHTEN_ONLY) for k in BUDGET_KEYS),
    Key("budget.warn_at", "fraction between 0 and 1", "the share of a budget at which `budget.warning` fires",
        TIGHTEN_ONLY, field="budget_warn_at"),
    Key("notify.desktop", "true or false", "notify-send; with no desktop session, the dashboard's terminal (OSC "
        "777 / 9)", USER_ONLY, default="false"),
    Key("notify.webhook", "string (http:// or https:// URL)", "POST one JSON object a notice (`kind`, `worktree`, "
        "`task`, `agent`, `status`, `text`, `ts`, `host`)", USER_ONLY),
    Key("notify.ntfy", "string (http:// or https:// URL)", "the notice's text, as ntfy expects it", USER_ONLY),
    Key("notify.command", "list of strings (argv)", "run with the notice's JSON on stdin", USER_ONLY, default="[]"),
    Key("notify.kinds", "list drawn from waiting, done, failed, over_budget, train", "which transitions notify",
        USER_ONLY, default="[all of them]"),
    Key("notify.quiet_hours", '["HH:MM", "HH:MM"]', "nothing is sent in this window", USER_ONLY),
    Key("serve.allow_remote", "true or false", "`daintree serve --bind` may take an address beyond 127.0.0.1 (plain "
        "HTTP: the token is as safe as the network it crosses)", USER_ONLY, default="false"),
    Key("checkpoints.auto", "true or false", "a checkpoint of the worktree's files at each end of an agent's turn "
        "(`waiting`, `exited`); the repository's watcher runs beside the sessions to take them", USER_ONLY,
        default="true"),
    Key("hosts.<name>.ssh", "string (ssh destination or alias)", "how to reach the host (`~/.ssh/config` applies)",
        USER_ONLY),
    Key("hosts.<name>.repo", "string (absolute path or ~/...)", "the repository there", USER_ONLY),
    Key("hosts.<name>.max_sessions", "integer >= 1", "agents the queue may run there at once", USER_ONLY,
        default="3"),
    Key("hosts.<name>.daintree", "string (program)", "the program there, when not on a non-login shell's PATH",
        USER_ONLY, default='"daintree"'),
    Key("hosts.<name>.ssh_config", "string (path)", "an ssh config file of its own (or `DAINTREE_SSH_CONFIG`)",
        USER_ONLY),
)
"""Every key, in the order the reference lists them (tests/test_docs.py checks it against what `parse` accepts)."""
