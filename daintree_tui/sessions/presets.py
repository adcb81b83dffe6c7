"""Agent presets: the command each agent runs, how it takes its first prompt, how it shows it is waiting."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from daintree_tui.core import trust
from daintree_tui.core.config import Config
from daintree_tui.core.errors import ConfigError, InputError
from daintree_tui.core.log import warn
from daintree_tui.core.spawn import python_module
from daintree_tui.sessions.agents import AgentIntegration, integration_for

DEFAULT_PROMPT = "{subject}\n\n{description}"


@dataclass(frozen=True)
class Preset:
    """An agent preset.

    `prompt_mode` says how a first prompt reaches the agent: `arg` (appended as the last argument),
    `flag:<FLAG>` (as `FLAG prompt`), `type` (typed into the pane once it runs), or `none` (never).
    """

    name: str
    command: str
    prompt_mode: str = "arg"
    prompt_template: str = DEFAULT_PROMPT
    waiting_pattern: str | None = None
    max_minutes: float | None = None
    role: str | None = None

    def argv(self, prompt: str | None = None) -> list[str]:
        """The command line, with the first prompt where this agent takes it."""
        try:
            argv = shlex.split(self.command)
        except ValueError as exc:
            raise InputError(f"agent {self.name}: cannot parse its command {self.command!r}: {exc}") from None
        if not argv:
            raise InputError(f"agent {self.name}: empty command")
        if prompt:
            if self.prompt_mode == "arg":
                argv.append(prompt)
            elif self.prompt_mode.startswith("flag:"):
                argv += [self.prompt_mode[5:], prompt]
        return argv

    @property
    def api_hosts(self) -> tuple[str, ...]:
        """The hosts its agent program needs (`[sandbox] network = "agent"`): by its name, else its program's."""
        try:
            program = Path(self.argv()[0]).name
        except InputError:
            program = ""
        return API_HOSTS.get(self.name) or API_HOSTS.get(program, ())

    def render_prompt(self, **fields: object) -> str:
        """The first prompt from the template; unknown placeholders stay as they are."""
        values = {k: "" if v is None else str(v) for k, v in fields.items()}
        text = re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), self.prompt_template)
        return text.strip()

    def check_program(self, env: Mapping[str, str] | None = None) -> None:
        """Raise a clear error naming the program when it is not on PATH."""
        program = self.argv()[0]
        path = (env or os.environ).get("PATH", os.defpath)
        if os.sep in program:
            if not os.access(program, os.X_OK):
                raise InputError(f"agent {self.name}: program {program!r} does not exist or is not executable")
        elif shutil.which(program, path=path) is None:
            raise InputError(f"agent {self.name}: program {program!r} is not on PATH")

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "command": self.command, "prompt_mode": self.prompt_mode,
                "waiting_pattern": self.waiting_pattern, **self.agent_facts()}

    # -- agent integration (issue 14): installed, hooks, usage, resume, interrupt --------------------------------

    @property
    def program(self) -> str:
        try:
            argv = shlex.split(self.command)
        except ValueError:
            return ""
        return argv[0] if argv else ""

    @property
    def integration(self) -> AgentIntegration | None:
        """The agent's own integration (hooks, usage records, resume), by the program it runs."""
        return integration_for(self.program)

    def program_path(self, env: Mapping[str, str] | None = None) -> str | None:
        """Where the program is found (None when it is not installed)."""
        program = self.program
        if not program:
            return None
        if os.sep in program:
            return program if os.access(program, os.X_OK) else None
        return shutil.which(program, path=(env or os.environ).get("PATH", os.defpath))

    def installed(self, env: Mapping[str, str] | None = None) -> bool:
        return self.program_path(env) is not None

    @property
    def status_source(self) -> str:
        """`hooks` when the agent reports its own state, `output` when status comes from its output going quiet."""
        return "hooks" if self.integration is not None else "output"

    @property
    def interrupt_keys(self) -> tuple[str, ...]:
        """tmux key names that stop the agent's current turn (Esc for claude/gemini/opencode, ctrl+c otherwise)."""
        integration = self.integration
        return integration.interrupt_keys if integration is not None else ("C-c",)

    @property
    def can_resume(self) -> bool:
        return self.integration is not None

    def resume_argv(self) -> list[str]:
        """The command line that continues the agent's last conversation in its worktree (no first prompt).

        Raises InputError for agents that cannot resume.
        """
        integration = self.integration
        if integration is None:
            raise InputError(f"agent {self.name}: {self.program or 'its program'} has no resume command")
        return integration.resume_argv(self.argv())

    def agent_facts(self, env: Mapping[str, str] | None = None) -> dict[str, object]:
        integration = self.integration
        return {"program": self.program, "installed": self.installed(env), "path": self.program_path(env),
                "status_source": self.status_source,
                "hooks": integration.hook_mechanism if integration else None,
                "usage_source": integration.usage_source if integration else None,
                "resume": " ".join(integration.resume_args) if integration else None,
                "interrupt": " ".join(self.interrupt_keys)}


# What each agent CLI contacts to work (its model API, its sign-in, its telemetry and feature flags), for
# `[sandbox] network = "agent"`: from each vendor's documentation of its network needs (claude: "Network access
# requirements"; codex and gemini: their sign-in flows); anything else they try is a `sandbox.denied` event the
# worktree's detail shows, with the line to add to `network_extra`.
API_HOSTS: dict[str, tuple[str, ...]] = {
    "claude": ("api.anthropic.com", "statsig.anthropic.com", "sentry.io", "console.anthropic.com", "claude.ai"),
    "codex": ("api.openai.com", "chatgpt.com", "auth.openai.com"),
    "gemini": ("generativelanguage.googleapis.com", "oauth2.googleapis.com", "cloudcode-pa.googleapis.com",
               "play.googleapis.com", "accounts.google.com"),
    "opencode": ("opencode.ai", "models.dev", "api.anthropic.com", "api.openai.com"),
    "aider": ("api.openai.com", "api.anthropic.com", "openrouter.ai"),
}


def builtin_presets() -> dict[str, Preset]:
    shell = os.environ.get("SHELL") or "/bin/sh"
    demo = shlex.join(python_module("daintree_tui.demo.agent"))
    return {
        "claude": Preset("claude", "claude"),
        "codex": Preset("codex", "codex"),
        "gemini": Preset("gemini", "gemini", prompt_mode="flag:--prompt-interactive"),
        # Its prompt, or one of its yes/no questions (io.py's confirm_ask: "... (Y)es/(N)o [Yes]: ", with
        # "/(A)ll/(S)kip all" and "/(D)on't ask again" between, so only the end is matched: a long question wraps):
        # its sign-in, "add this file?", "run this?" wait for you too, and showed `running` for ever, notifying
        # nothing.
        "aider": Preset("aider", "aider", prompt_mode="type", waiting_pattern=r"^\S*> $|\[(Yes|No)\]: $"),
        "opencode": Preset("opencode", "opencode", prompt_mode="flag:--prompt"),
        # A shell never gets a first prompt: task text typed into it would run as commands.
        "shell": Preset("shell", shlex.quote(shell), prompt_mode="none", waiting_pattern=r"[$#%>] ?$"),
        "demo": Preset("demo", demo, prompt_mode="flag:--task", waiting_pattern=r"> ?$"),
    }


_WARNED_PATTERNS: set[str] = set()


def _untrusted_patterns(cfg: Config) -> set[str]:
    """Agents whose `waiting_pattern` comes from a repository config not yet trusted: such a pattern is code (a
    regular expression that can take forever) and is ignored, with a warning, until `daintree trust`."""
    keys = [k for k in cfg.repo_commands if k.startswith("agents.") and k.endswith(".waiting_pattern")]
    if not keys or trust.repo_config_trusted(cfg):
        return set()
    names = {k[len("agents."):-len(".waiting_pattern")] for k in keys}
    if names <= _WARNED_PATTERNS:
        return names  # said once per process: the dashboard polls this every second
    _WARNED_PATTERNS.update(names)
    warn(f"config: waiting_pattern of {', '.join(sorted(names))} in .daintree.toml ignored: .daintree.toml "
         f"{trust.untrusted_state(cfg.repo_config_path)} (run `daintree trust`)")
    return names


def all_presets(cfg: Config) -> dict[str, Preset]:
    """Built-in presets with the config's overrides applied, plus the agents the config adds."""
    presets = builtin_presets()
    untrusted = _untrusted_patterns(cfg)
    for name, agent in cfg.agents.items():
        base = presets.get(name)
        if base is None:
            if not agent.command:
                raise ConfigError(f"config: agents.{name}.command is required for a new agent")
            base = Preset(name, agent.command)
        presets[name] = replace(
            base,
            command=agent.command or base.command,
            prompt_template=agent.prompt or base.prompt_template,
            prompt_mode=agent.prompt_mode or base.prompt_mode,
            waiting_pattern=(base.waiting_pattern if name in untrusted else agent.waiting_pattern)
            or base.waiting_pattern,
            max_minutes=agent.max_minutes if agent.max_minutes is not None else base.max_minutes,
            role=agent.role or base.role,
        )
    presets["shell"] = replace(presets["shell"], prompt_mode="none")  # no config can make a shell take a prompt
    return presets


AUTO_DEFAULT_ORDER = ("claude", "codex", "gemini", "opencode", "aider")


def default_agent_name(cfg: Config, env: Mapping[str, str] | None = None) -> str:
    """Config `default_agent`, else the first installed of claude, codex, gemini, opencode, aider, else `shell`."""
    if cfg.default_agent:
        return cfg.default_agent
    presets = all_presets(cfg)
    for name in AUTO_DEFAULT_ORDER:
        if name in presets and presets[name].installed(env):
            return name
    return "shell"


def resolve_preset(cfg: Config, name: str | None) -> Preset:
    """The preset called `name` (default: config `default_agent`, else the first installed agent); unknown
    names are bad input."""
    presets = all_presets(cfg)
    chosen = name or default_agent_name(cfg)
    if chosen not in presets:
        raise InputError(f"unknown agent preset {chosen!r} (known: {', '.join(sorted(presets))})")
    return presets[chosen]


# -- MCP wiring ------------------------------------------------------------------------------------------------
# How each agent CLI takes an MCP server for one run, without a byte written to the user's own files:
# claude reads `--mcp-config FILE`; codex takes `-c key=value` overrides of its config.toml (values in TOML, of
# which a JSON string or list of strings is a valid spelling); gemini merges `mcpServers` from the system-defaults
# settings file named by GEMINI_CLI_SYSTEM_DEFAULTS_PATH (its lowest layer: the user's settings still win);
# opencode merges the config given in OPENCODE_CONFIG_CONTENT over its own.
MCP_SERVER_NAME = "daintree"
MCP_AGENTS = ("claude", "codex", "gemini", "opencode")
GEMINI_DEFAULTS_ENV = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"
GEMINI_DEFAULTS_FILE = Path("/etc/gemini-cli/system-defaults.json")
GEMINI_DEFAULTS_NAME = "daintree-mcp-gemini-defaults.json"
OPENCODE_CONFIG_ENV = "OPENCODE_CONFIG_CONTENT"


@dataclass(frozen=True)
class McpWiring:
    """What a session adds to carry the MCP server into its agent.

    Attributes:
        args: inserted after the agent's own arguments (before a first prompt).
        env: added to the session's environment.
        files: path -> content, written (0600) before the agent starts.
    """

    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    files: dict[Path, str] = field(default_factory=dict)


def mcp_agent_kind(preset: Preset) -> str | None:
    """Which MCP-capable agent CLI a preset runs (by its program's name, so `claude --model x` counts)."""
    program = Path(preset.argv()[0]).name
    return program if program in MCP_AGENTS else None


def _json_object(text: str | None) -> dict[str, Any]:
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def mcp_wiring(kind: str, server: Sequence[str], state_dir: Path, env: Mapping[str, str]) -> McpWiring:
    """The wiring of MCP server command `server` into agent `kind` for one session (files go in `state_dir`)."""
    command, args = server[0], list(server[1:])
    stdio: dict[str, Any] = {"command": command, "args": args}
    if kind == "claude":
        path = state_dir / "mcp-claude.json"
        servers = {"mcpServers": {MCP_SERVER_NAME: stdio}}
        return McpWiring(("--mcp-config", str(path)), files={path: json.dumps(servers)})
    if kind == "codex":
        key = f"mcp_servers.{MCP_SERVER_NAME}"
        return McpWiring(("-c", f"{key}.command={json.dumps(command)}", "-c", f"{key}.args={json.dumps(args)}"))
    if kind == "gemini":
        # Keep whatever system defaults were in force: ours replaces the file Gemini would have read.
        given = Path(env.get(GEMINI_DEFAULTS_ENV) or GEMINI_DEFAULTS_FILE)
        if given.name == GEMINI_DEFAULTS_NAME:  # a parent session's wiring, not the user's defaults
            given = GEMINI_DEFAULTS_FILE
        try:
            defaults = _json_object(given.read_text(encoding="utf-8"))
        except OSError:
            defaults = {}
        defaults.setdefault("mcpServers", {})[MCP_SERVER_NAME] = stdio
        path = state_dir / GEMINI_DEFAULTS_NAME
        return McpWiring(env={GEMINI_DEFAULTS_ENV: str(path)}, files={path: json.dumps(defaults)})
    if kind == "opencode":
        config = _json_object(env.get(OPENCODE_CONFIG_ENV))
        config.setdefault("mcp", {})[MCP_SERVER_NAME] = {"type": "local", "command": [command, *args],
                                                         "enabled": True}
        return McpWiring(env={OPENCODE_CONFIG_ENV: json.dumps(config)})
    raise InputError(f"no MCP wiring for agent {kind!r} (known: {', '.join(MCP_AGENTS)})")


def unwire_mcp(env: dict[str, str]) -> None:
    """Drop the wiring a session's environment inherited from the session that started it (a lead's server
    starts workers): each session gets its own wiring or none, never its parent's."""
    if Path(env.get(GEMINI_DEFAULTS_ENV, "")).name == GEMINI_DEFAULTS_NAME:
        del env[GEMINI_DEFAULTS_ENV]
    config = _json_object(env.get(OPENCODE_CONFIG_ENV))
    if MCP_SERVER_NAME in (config.get("mcp") or {}):
        del config["mcp"][MCP_SERVER_NAME]
        env[OPENCODE_CONFIG_ENV] = json.dumps(config)


def mcp_snippet(kind: str, server: Sequence[str]) -> str:
    """The config a person adds once to have the server in every run of agent `kind`."""
    command, args = server[0], list(server[1:])
    if kind == "claude":  # a project's .mcp.json, or `claude --mcp-config FILE`
        return json.dumps({"mcpServers": {MCP_SERVER_NAME: {"command": command, "args": args}}}, indent=2)
    if kind == "codex":  # ~/.codex/config.toml
        return f"[mcp_servers.{MCP_SERVER_NAME}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}"
    if kind == "gemini":  # ~/.gemini/settings.json
        return json.dumps({"mcpServers": {MCP_SERVER_NAME: {"command": command, "args": args}}}, indent=2)
    if kind == "opencode":  # ~/.config/opencode/opencode.json
        return json.dumps({"$schema": "https://opencode.ai/config.json", "mcp": {MCP_SERVER_NAME: {
            "type": "local", "command": [command, *args], "enabled": True}}}, indent=2)
    raise InputError(f"no MCP config for agent {kind!r} (known: {', '.join(MCP_AGENTS)})")


def session_mcp_wiring(cfg: Config, preset: Preset, role: str | None, server: Sequence[str], state_dir: Path,
                       env: Mapping[str, str]) -> McpWiring | None:
    """The wiring for a session whose role asks for the MCP server (`[roles.<role>] mcp = ...`), if its agent
    takes MCP servers; None otherwise."""
    configured = cfg.roles.get(role) if role is not None else None
    if configured is None or configured.mcp is None:
        return None
    kind = mcp_agent_kind(preset)
    return mcp_wiring(kind, server, state_dir, env) if kind is not None else None


def refuse_prompt_for(preset: Preset, prompt: str | None) -> None:
    """A first prompt for an agent that takes none (the shell) is bad input, never dropped without a word."""
    if prompt is not None and preset.prompt_mode == "none":
        raise InputError(f"agent {preset.name} takes no first prompt (in a shell it would run as commands): "
                         "start an agent, or leave out --prompt")
