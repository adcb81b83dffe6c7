"""Workflow hooks, and the trust that repo-supplied hook commands need before they run (like direnv)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from daintree_tui.core.config import HookSpec
from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import OperationError
from daintree_tui.core.fs_safe import open_private_append, private_dir
from daintree_tui.core.log import warn
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.runner import run_command
from daintree_tui.core.sandbox import wrap_command
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.trust import (  # re-exported: callers import trust from here
    file_sha256,
    is_trusted,
    repo_config_trusted,
    scripts_changed_since_trust,
    trust,
    trust_file,
    trust_status,
    untrusted_state,
)

__all__ = ["GATE_HOOKS", "HookFailed", "HookOutcome", "file_sha256", "hook_log", "is_trusted", "run_hooks", "trust",
           "trust_file", "trust_status"]

# Hooks that decide whether an operation may go on: one that cannot run for want of trust refuses it (fail closed).
GATE_HOOKS = ("pre_merge",)


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


class HookFailed(OperationError):
    """A hook's command failed: the message names it; `output` is the end of what it printed."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


def run_hooks(project: Project, hook: str, entry: WorktreeEntry, *, cwd: Path | None = None,
              extra_env: dict[str, str] | None = None, writable: Sequence[Path] = (),
              read_only: Sequence[Path] = ()) -> list[HookOutcome]:
    """Run the commands of one hook in the worktree; stop at the first failing one that is not optional.
    `writable` and `read_only` add to the sandbox's mounts (`wrap_command`): the merge train's gate runs in a
    candidate checkout of daintree's own.

    Raises:
        HookFailed: a non-optional command failed (or timed out); the message names it and its exit code.
    """
    specs: list[HookSpec] = project.config.hooks.get(hook, [])
    if not specs:
        return []
    trusted = repo_config_trusted(project.config)
    task = TaskService(project).brief_of(entry.task_id)  # each hook event names the worktree's task
    env = worktree_env(project, entry)
    env["DAINTREE_HOOK"] = hook
    env.update(extra_env or {})
    workdir = cwd or Path(entry.path)
    log = hook_log(project, entry.name)
    private_dir(log.parent)
    # Hooks run in the agent's worktree (a test command runs the agent's code): same sandbox as its session.
    # post_remove is the exception: its worktree is gone, and it runs in the primary, which no agent can write.
    sandboxed = hook != "post_remove" and Path(entry.path).is_dir()
    def command_argv(command: str, background: bool = False) -> list[str]:
        argv = ["/bin/sh", "-c", command]
        if not sandboxed:
            return argv
        return wrap_command(project, entry, argv, env, cwd=workdir, background=background, kind="hook",
                            writable=writable, read_only=read_only)

    # Unconfined, a repository script runs only as it was when the user trusted the config (core/pinned.py).
    changed = scripts_changed_since_trust(project) if not sandboxed and trusted else []
    outcomes = []
    for spec in specs:
        if spec.source == "repo" and trusted and changed:
            warn(f"hook {hook}: skipped {spec.command!r}: it runs outside the sandbox and "
                 f"{', '.join(changed[:5])} changed since `daintree trust` (review, then run `daintree trust`)")
            project.events.append("hook.failed", worktree=entry.brief(), hook=hook, command=spec.command,
                                  exit_code=None, output="", error=f"changed since trust: {', '.join(changed[:5])}",
                                  task=task)
            outcomes.append(HookOutcome(spec.command, None, spec.optional, skipped="changed"))
            continue
        if spec.source == "repo" and not trusted:
            state = untrusted_state(project.config.repo_config_path)
            if hook in GATE_HOOKS:
                raise OperationError(f"{hook} check {spec.command!r} cannot run: the repository's .daintree.toml "
                                     f"{state}; review it, then run `daintree trust` (or skip the checks "
                                     "with --no-verify)")
            warn(f"hook {hook}: skipped {spec.command!r}: .daintree.toml {state}; review it, then run "
                 "`daintree trust`")
            outcomes.append(HookOutcome(spec.command, None, spec.optional, skipped="untrusted"))
            continue
        if spec.background:
            with open_private_append(log) as fh:
                fh.write(f"--- {hook} (background): {spec.command}\n".encode())
                fh.flush()
                subprocess.Popen(command_argv(spec.command, background=True), cwd=workdir, env=env,
                                 stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
            project.events.append("hook.ran", worktree=entry.brief(), hook=hook, command=spec.command,
                                  background=True, task=task)
            outcomes.append(HookOutcome(spec.command, None, spec.optional))
            continue
        result = run_command(command_argv(spec.command), workdir, env, spec.timeout or project.config.hook_timeout)
        with open_private_append(log) as fh:
            fh.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {hook}: {spec.command} -> {result.exit_code}\n"
                     .encode())
            fh.write((result.stdout + result.stderr).encode("utf-8", errors="replace"))
        tail = (result.stdout + result.stderr)[-2000:]
        outcome = HookOutcome(spec.command, result.exit_code, spec.optional)
        outcomes.append(outcome)
        if outcome.failed:
            why = "timed out" if result.timed_out else f"exited {result.exit_code}"
            project.events.append("hook.failed", worktree=entry.brief(), hook=hook, command=spec.command,
                                  exit_code=result.exit_code, output=tail, error=why, task=task)
            if not spec.optional:
                raise HookFailed(f"{hook} hook {spec.command!r} {why}", tail)
        else:
            project.events.append("hook.ran", worktree=entry.brief(), hook=hook, command=spec.command,
                                  exit_code=0, output=tail, task=task)
    return outcomes
