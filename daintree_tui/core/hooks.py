"""Workflow hooks, and the trust that repo-supplied hook commands need before they run (like direnv)."""

from __future__ import annotations

import hashlib
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from daintree_tui.core.config import HookSpec, user_data_dir
from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.log import warn
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.runner import run_command
from daintree_tui.core.sandbox import wrap_command
from daintree_tui.core.store import read_json, write_json


def trust_file() -> Path:
    return user_data_dir() / "trust.json"


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def is_trusted(config_path: Path) -> bool:
    data, _ = read_json(trust_file(), "trust record")
    if not isinstance(data, dict):
        return False
    try:
        return data.get(str(config_path.resolve())) == file_sha256(config_path)
    except OSError:
        return False


def trust(project: Project) -> dict[str, str]:
    """Record the repo config's current hash for this user; a later change needs trust again."""
    path = project.root / ".daintree.toml"
    if not path.is_file():
        raise InputError(f"nothing to trust: {path} does not exist")
    data, _ = read_json(trust_file(), "trust record")
    records = data if isinstance(data, dict) else {}
    digest = file_sha256(path)
    records[str(path.resolve())] = digest
    write_json(trust_file(), records)
    return {"path": str(path), "sha256": digest}


@dataclass(frozen=True)
class HookOutcome:
    command: str
    exit_code: int | None  # None: not run (untrusted) or started in the background
    optional: bool = False
    skipped: str = ""

    @property
    def failed(self) -> bool:
        return self.exit_code not in (None, 0)


def hook_log(project: Project, name: str) -> Path:
    return project.logs_dir / f"{name}.hooks.log"


def run_hooks(project: Project, hook: str, entry: WorktreeEntry, *, cwd: Path | None = None,
              extra_env: dict[str, str] | None = None) -> list[HookOutcome]:
    """Run the commands of one hook in the worktree; stop at the first failing one that is not optional.

    Raises:
        OperationError: a non-optional command failed (or timed out); the message names it and its exit code.
    """
    specs: list[HookSpec] = project.config.hooks.get(hook, [])
    if not specs:
        return []
    cfg_path = project.config.repo_config_path
    trusted = cfg_path is not None and is_trusted(cfg_path)
    env = worktree_env(project, entry)
    env["DAINTREE_HOOK"] = hook
    env.update(extra_env or {})
    workdir = cwd or Path(entry.path)
    log = hook_log(project, entry.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    # Hooks run in the agent's worktree (a test command runs the agent's code): same sandbox as its session.
    # post_remove is the exception: its worktree is gone, and it runs in the primary, which no agent can write.
    sandboxed = hook != "post_remove" and Path(entry.path).is_dir()

    def command_argv(command: str, background: bool = False) -> list[str]:
        argv = ["/bin/sh", "-c", command]
        return wrap_command(project, entry, argv, env, cwd=workdir, background=background) if sandboxed else argv

    outcomes = []
    for spec in specs:
        if spec.source == "repo" and not trusted:
            warn(f"hook {hook}: skipped {spec.command!r}: .daintree.toml is not trusted (run `daintree trust`)")
            outcomes.append(HookOutcome(spec.command, None, spec.optional, skipped="untrusted"))
            continue
        if spec.background:
            with log.open("ab") as fh:
                fh.write(f"--- {hook} (background): {spec.command}\n".encode())
                fh.flush()
                subprocess.Popen(command_argv(spec.command, background=True), cwd=workdir, env=env,
                                 stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
            project.events.append("hook.ran", worktree=entry.brief(), hook=hook, command=spec.command,
                                  background=True)
            outcomes.append(HookOutcome(spec.command, None, spec.optional))
            continue
        result = run_command(command_argv(spec.command), workdir, env, spec.timeout or project.config.hook_timeout)
        with log.open("a", encoding="utf-8") as text_log:
            text_log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {hook}: {spec.command} -> {result.exit_code}\n")
            text_log.write(result.stdout + result.stderr)
        tail = (result.stdout + result.stderr)[-2000:]
        outcome = HookOutcome(spec.command, result.exit_code, spec.optional)
        outcomes.append(outcome)
        if outcome.failed:
            why = "timed out" if result.timed_out else f"exited {result.exit_code}"
            project.events.append("hook.failed", worktree=entry.brief(), hook=hook, command=spec.command,
                                  exit_code=result.exit_code, output=tail, error=why)
            if not spec.optional:
                raise OperationError(f"{hook} hook {spec.command!r} {why}")
        else:
            project.events.append("hook.ran", worktree=entry.brief(), hook=hook, command=spec.command,
                                  exit_code=0, output=tail)
    return outcomes


def trust_status(project: Project) -> dict[str, object]:
    path = project.root / ".daintree.toml"
    return {"path": str(path), "exists": path.is_file(), "trusted": path.is_file() and is_trusted(path),
            "record": str(trust_file())}
