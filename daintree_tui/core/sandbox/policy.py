"""Which sandbox a command gets, by config: the mode that applies (role over agent over top level), the folders it
may write besides its worktree, and the rule that whatever a sandboxed session asks for is confined too. Pure
policy: it reads the config and the trust record, and runs no git.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from daintree_tui.core.config import Config
from daintree_tui.core.errors import OperationError
from daintree_tui.core.log import warn
from daintree_tui.core.sandbox.backends import BwrapSandbox, NoSandbox
from daintree_tui.core.sandbox.spec import Sandbox
from daintree_tui.core.trust_record import is_trusted


@dataclass(frozen=True)
class Choice:
    """The sandbox one command gets: the backend, whether it confines, and why (one line, for people)."""

    backend: Sandbox
    mode: str  # the effective config mode: auto, on or off
    reason: str

    @property
    def active(self) -> bool:
        return not isinstance(self.backend, NoSandbox)

    def to_dict(self) -> dict[str, object]:
        return {"backend": self.backend.name, "mode": self.mode, "active": self.active, "reason": self.reason}


def _repo_trusted(cfg_path: Path | None) -> bool:
    return cfg_path is not None and is_trusted(cfg_path)


def effective_mode(cfg: Config, agent: str | None = None, role: str | None = None) -> tuple[str, str]:
    """The mode that applies (role over agent over top level) and the key it came from.

    A repository's `.daintree.toml` is data until trusted: it may turn the sandbox on, never off.
    """
    levels: list[tuple[str, str | None]] = []
    if role is not None and role in cfg.roles:
        levels.append((f"roles.{role}.sandbox", cfg.roles[role].sandbox))
    if agent is not None and agent in cfg.agents:
        levels.append((f"agents.{agent}.sandbox", cfg.agents[agent].sandbox))
    levels.append(("sandbox.mode", cfg.sandbox_mode if "sandbox.mode" in cfg.sandbox_repo_keys
                   or cfg.sandbox_mode != "auto" else None))
    for key, value in levels:
        if value is None:
            continue
        if value == "off" and key in cfg.sandbox_repo_keys and not _repo_trusted(cfg.repo_config_path):
            warn(f"config: {key} = \"off\" in .daintree.toml ignored: the repo config is not trusted "
                 "(run `daintree trust`)")
            continue
        return value, key
    return "auto", "default"


def writable_paths(cfg: Config, extra: Sequence[str] = ()) -> tuple[Path, ...]:
    """The caller's extra folders (an agent's own state) and `sandbox.writable` (the latter only from a trusted
    repo config when the repo set it)."""
    configured = list(cfg.sandbox_writable)
    if configured and "sandbox.writable" in cfg.sandbox_repo_keys and not _repo_trusted(cfg.repo_config_path):
        warn("config: sandbox.writable in .daintree.toml ignored: the repo config is not trusted "
             "(run `daintree trust`)")
        configured = []
    out: dict[Path, None] = {}
    for raw in (*extra, *configured):
        path = Path(raw).expanduser()
        if raw.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)  # a folder the user named: bind it even if new
        out[path] = None
    return tuple(out)


# Set while a request from a sandboxed session's inbox is applied: whatever it starts (a session, a bake-off, a
# `worktree run`, a hook) must be confined too, or a sandboxed lead escapes by delegating to an agent or a role
# that the user runs unsandboxed.
_SANDBOXED_CALLER: ContextVar[str | None] = ContextVar("daintree_sandboxed_caller", default=None)


@contextlib.contextmanager
def on_behalf_of_sandboxed(worktree: str) -> Iterator[None]:
    """Within the block, `choose` refuses (fails closed) every command that would run unconfined."""
    token = _SANDBOXED_CALLER.set(worktree)
    try:
        yield
    finally:
        _SANDBOXED_CALLER.reset(token)


def sandboxed_caller() -> str | None:
    """The worktree of the sandboxed session whose inbox request is being applied, if any (on_behalf_of_sandboxed)."""
    return _SANDBOXED_CALLER.get()


def choose(cfg: Config, agent: str | None = None, role: str | None = None,
           backend: Sandbox | None = None) -> Choice:
    """The sandbox for a command, by config: `off` never confines, `on` fails closed, `auto` confines where the
    backend works and says so plainly where it does not.

    Raises:
        OperationError: mode `on` and the backend cannot work here (one line naming why).
    """
    mode, key = effective_mode(cfg, agent, role)
    caller = _SANDBOXED_CALLER.get()
    if mode == "off":
        if caller is not None:
            raise OperationError(f"refused: {caller} runs in a sandbox and may not start what runs without one "
                                 f"({key} is \"off\")")
        return Choice(NoSandbox(f"not sandboxed: {key} is \"off\""), mode, f"off ({key})")
    sandbox = backend if backend is not None else BwrapSandbox()
    ok, why = sandbox.available()
    if ok:
        return Choice(sandbox, mode, f"sandboxed: {why}")
    if mode == "on" or caller is not None:
        raise OperationError(f"sandbox is {'on (' + key + ')' if mode == 'on' else 'required'} but cannot work "
                             f"here: {why}")
    return Choice(NoSandbox(f"not sandboxed: {why}"), mode, f"not sandboxed: {why}")
