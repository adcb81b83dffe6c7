"""Agent presets: the command each agent runs, how it takes its first prompt, how it shows it is waiting."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace

from daintree_tui.core.config import Config
from daintree_tui.core.errors import ConfigError, InputError

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
                "waiting_pattern": self.waiting_pattern}


def builtin_presets() -> dict[str, Preset]:
    shell = os.environ.get("SHELL") or "/bin/sh"
    demo = f"{shlex.quote(sys.executable)} -m daintree_tui.demo.agent"
    return {
        "claude": Preset("claude", "claude"),
        "codex": Preset("codex", "codex"),
        "gemini": Preset("gemini", "gemini", prompt_mode="flag:--prompt-interactive"),
        "aider": Preset("aider", "aider", prompt_mode="type", waiting_pattern=r"^\S*> $"),
        "opencode": Preset("opencode", "opencode", prompt_mode="flag:--prompt"),
        "shell": Preset("shell", shlex.quote(shell), prompt_mode="type", waiting_pattern=r"[$#%>] ?$"),
        "demo": Preset("demo", demo, prompt_mode="flag:--task", waiting_pattern=r"> ?$"),
    }


def all_presets(cfg: Config) -> dict[str, Preset]:
    """Built-in presets with the config's overrides applied, plus the agents the config adds."""
    presets = builtin_presets()
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
            waiting_pattern=agent.waiting_pattern or base.waiting_pattern,
            max_minutes=agent.max_minutes if agent.max_minutes is not None else base.max_minutes,
            role=agent.role or base.role,
        )
    return presets


def resolve_preset(cfg: Config, name: str | None) -> Preset:
    """The preset called `name` (default: config `default_agent`); unknown names are bad input."""
    presets = all_presets(cfg)
    chosen = name or cfg.default_agent
    if chosen not in presets:
        raise InputError(f"unknown agent preset {chosen!r} (known: {', '.join(sorted(presets))})")
    return presets[chosen]
