"""Trust: what may run (docs/design.md 2a rule 2). Every config key that carries a command runs from the repository's
`.daintree.toml` only after `daintree trust`, which records the file's bytes (`trust_record`) and the scripts its
unconfined hooks run (`pinned`); a command a user gave on their own command line may run again from state.

Trusted: the user's own config, the user's own command line outside a session, and the trust record. Everything
else (anything in the repository, whatever lies under `.worktrees/` and `.tasks/`, task text, names, what an agent
writes or sets) is data. What may be deleted is `ownership`; where a write may go, `fs_safe`; whether a state file
is daintree's own, `state_files`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from daintree_tui.core.config_model import REPO_CONFIG_NAME, Config
from daintree_tui.core.errors import ConfigError, InputError, OperationError
from daintree_tui.core.fs_safe import private_dir
from daintree_tui.core.store import atomic_write_text, read_json, write_json
from daintree_tui.core.trust_record import (  # re-exported: callers ask trust
    changed_since_trust,
    file_sha256,
    is_trusted,
    trust_diff,
    trust_file,
    trust_key,
    trust_lock,
    trusted_copy,
    untrusted_state,
)

if TYPE_CHECKING:
    from daintree_tui.core.project import Project

__all__ = ["changed_since_trust", "command_remembered", "command_trusted", "file_sha256", "is_trusted",
           "remember_command", "repo_config_trusted", "require_agent_trusted", "require_trusted",
           "scripts_changed_since_trust", "trust", "trust_diff", "trust_file", "trust_key", "trust_status",
           "trusted_copy", "unconfined_scripts", "untrusted_commands", "untrusted_message", "untrusted_state"]


def trust(project: Project) -> dict[str, str]:
    """Record the repo config's current hash for this user, and keep a copy of what was trusted."""
    import hashlib  # here: loading OpenSSL's library is 3-6 ms of every command's start

    path = project.root / REPO_CONFIG_NAME
    if not path.is_file():
        raise InputError(f"nothing to trust: {path} does not exist")
    content = path.read_bytes()  # hashed and kept as read once: what was shown to be trusted is what is kept
    digest = hashlib.sha256(content).hexdigest()
    scripts_now = unconfined_scripts(project)
    copy = trusted_copy(path)
    with trust_lock().hold():
        try:
            private_dir(copy.parent)
            atomic_write_text(copy, content.decode("utf-8", errors="replace"))  # 0600 (mkstemp)
        except OSError as exc:
            raise OperationError(f"cannot write {copy}: {exc.strerror or exc}") from None
        data, _ = read_json(trust_file(), "trust record")
        records = data if isinstance(data, dict) else {}
        records[trust_key(path)] = digest
        scripts = records.get("scripts")
        scripts = scripts if isinstance(scripts, dict) else {}
        scripts[trust_key(path)] = scripts_now
        records["scripts"] = scripts
        write_json(trust_file(), records)
    return {"path": str(path), "sha256": digest}


def unconfined_scripts(project: Project) -> dict[str, str]:
    """The repository's files (path -> sha256) that the repo config's unconfined hooks (post_remove) run."""
    from daintree_tui.core.pinned import UNCONFINED_HOOKS, named_files  # here: it loads hashlib (start-up)

    try:
        hooks = project.config.hooks
    except ConfigError:  # a config that does not load runs no hook; fixed, it is another file to trust
        return {}
    commands = [spec.command for hook in UNCONFINED_HOOKS for spec in hooks.get(hook, []) if spec.source == "repo"]
    return named_files(project.root, commands) if commands else {}


def scripts_changed_since_trust(project: Project) -> list[str]:
    """The repository files an unconfined hook of the repo config runs that changed since `daintree trust` (a
    merged branch may have changed them: they would run the agent's code outside its sandbox)."""
    from daintree_tui.core.pinned import changed  # here, as above

    path = project.root / REPO_CONFIG_NAME
    data, _ = read_json(trust_file(), "trust record")
    scripts = data.get("scripts") if isinstance(data, dict) else None
    recorded = scripts.get(trust_key(path)) if isinstance(scripts, dict) else None
    return changed(recorded, unconfined_scripts(project))


def _command_key(project: Project, command: str) -> str:
    import hashlib  # here, as above

    return hashlib.sha256(f"{project.root.resolve()}\0{command}".encode()).hexdigest()


def remember_command(project: Project, command: str) -> None:
    """Record (in the user's data dir) that this user gave `command` for this repository on their own command
    line, so a state file that names it later (a bake-off's score command) may run it; no other may."""
    key = _command_key(project, command)
    if command_remembered(project, command):
        return  # no write, so no lock (a read-only data dir still runs a command it remembers)
    with trust_lock().hold():
        data, _ = read_json(trust_file(), "trust record")
        records = data if isinstance(data, dict) else {}
        given = records.get("commands")
        given = [c for c in given if isinstance(c, str)] if isinstance(given, list) else []
        if key not in given:
            records["commands"] = [*given, key][-1000:]
            write_json(trust_file(), records)


def command_remembered(project: Project, command: str) -> bool:
    data, _ = read_json(trust_file(), "trust record")
    given = data.get("commands") if isinstance(data, dict) else None
    return isinstance(given, list) and _command_key(project, command) in given


def trust_status(project: Project) -> dict[str, object]:
    path = project.root / REPO_CONFIG_NAME
    trusted = path.is_file() and is_trusted(path)
    changed = path.is_file() and changed_since_trust(path)
    return {"path": str(path), "exists": path.is_file(), "trusted": trusted, "changed": changed,
            "diff": trust_diff(path) if changed else None, "record": str(trust_file()),
            "commands": dict(project.config.repo_commands)}


def repo_config_trusted(cfg: Config) -> bool:
    return cfg.repo_config_path is not None and is_trusted(cfg.repo_config_path)


def untrusted_commands(cfg: Config) -> dict[str, str]:
    """The command-bearing keys of the repository's config that may not run yet (empty once trusted)."""
    if not cfg.repo_commands or repo_config_trusted(cfg):
        return {}
    return dict(cfg.repo_commands)


def command_trusted(cfg: Config, key: str) -> bool:
    """Whether the command under `key` may run: it is the user's own, or the repo's file is trusted."""
    return key not in cfg.repo_commands or repo_config_trusted(cfg)


def untrusted_message(key: str, command: str, config_path: Path | None = None) -> str:
    return (f"{key} = {command!r} comes from the repository's {REPO_CONFIG_NAME}, which "
            f"{untrusted_state(config_path)}: review the file, then run `daintree trust`")


def require_trusted(cfg: Config, key: str) -> None:
    """Refuse (exit 1) to run a repository command the user has not trusted."""
    if not command_trusted(cfg, key):
        raise OperationError(untrusted_message(key, cfg.repo_commands[key], cfg.repo_config_path))


def require_agent_trusted(cfg: Config, agent: str) -> None:
    """Refuse (exit 1) an agent whose command (or first-prompt flag) the repository's untrusted file sets: said
    before a create that would start it, so a refusal leaves no worktree behind."""
    for key in ("command", "prompt_mode"):
        require_trusted(cfg, f"agents.{agent}.{key}")
