"""`daintree sandbox check`: what a session in this repo could and could not write, found by trying it.

One small Python program runs inside the session's sandbox (the same mount table a session of the worktree's own
agent gets: its session's, else its task's, else the default agent) and attempts each write. Every attempt is
harmless when it succeeds: a probe file is removed at once, `.git/config` is only opened for appending, a ref that
moves is moved back at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from daintree_tui.core import git as g
from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import InputError, OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.limits import Limits
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.mounts import SHARED_OBJECTS_MOUNT
from daintree_tui.core.project import Project
from daintree_tui.core.tasks import TaskService
from daintree_tui.sessions.containment_check import ContainmentResult, check_limits, check_network
from daintree_tui.sessions.presets import all_presets, resolve_preset
from daintree_tui.sessions.sandbox import SessionSandbox, session_sandbox
from daintree_tui.sessions.session_info import read_session_record

# Runs inside the sandbox: argv[1] is a JSON list of [label, kind, target, extra]; prints one JSON result list.
PROBE_PROGRAM = r"""
import json, os, subprocess, sys
out = []
for label, kind, target, extra in json.loads(sys.argv[1]):
    try:
        if kind == "create":
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            os.unlink(target)
        elif kind == "append":
            os.close(os.open(target, os.O_WRONLY | os.O_APPEND))
        elif kind == "move-ref":
            # Move the ref to a new commit for real (a no-op update is skipped by git), then put it back.
            def git(*args):
                proc = subprocess.run(["git", "-C", extra, *args], capture_output=True, text=True, env=env)
                if proc.returncode != 0:
                    raise OSError(0, (proc.stderr.strip().splitlines() or ["git failed"])[-1])
                return proc.stdout.strip()
            env = dict(os.environ, GIT_AUTHOR_NAME="daintree", GIT_AUTHOR_EMAIL="sandbox@daintree.invalid",
                       GIT_COMMITTER_NAME="daintree", GIT_COMMITTER_EMAIL="sandbox@daintree.invalid")
            old = git("rev-parse", "--verify", target)
            new = git("commit-tree", old + "^{tree}", "-p", old, "-m", "daintree sandbox probe")
            git("update-ref", target, new, old)
            git("update-ref", target, old, new)
        out.append([label, True, ""])
    except OSError as exc:
        out.append([label, False, exc.strerror or str(exc)])
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Probe:
    """One attempted write and what the boundary should say about it."""

    label: str
    kind: str  # create, append, move-ref
    target: str
    expect_writable: bool
    extra: str = ""


@dataclass(frozen=True)
class ProbeResult:
    label: str
    target: str
    writable: bool
    expected_writable: bool
    detail: str

    @property
    def holds(self) -> bool:
        return self.writable == self.expected_writable

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.label, "target": self.target, "writable": self.writable,
                "expected": "writable" if self.expected_writable else "read-only", "holds": self.holds,
                "detail": self.detail}


@dataclass(frozen=True)
class CheckReport:
    worktree: str
    sandbox: dict[str, object]
    results: list[ProbeResult]
    agent: str = ""  # the preset whose sandbox was checked
    agent_from: str = ""  # where that came from: --agent, its session, its task, the default agent
    containment: list[ContainmentResult] = field(default_factory=list)  # each limit and the network rule, tried

    @property
    def holds(self) -> bool:
        return all(r.holds for r in self.results) and all(r.holds for r in self.containment)

    def to_dict(self) -> dict[str, Any]:
        return {"worktree": self.worktree, "agent": self.agent, "agent_from": self.agent_from,
                "sandbox": self.sandbox, "holds": self.holds, "results": [r.to_dict() for r in self.results],
                "containment": [r.to_dict() for r in self.containment]}


def probes(project: Project, entry: WorktreeEntry, others: list[WorktreeEntry], sandbox: SessionSandbox,
           tag: str) -> list[Probe]:
    root = project.root
    common = project.common_dir
    assert common is not None
    own = Path(entry.path)
    home = Path.home()
    base = g.git(root, "symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip() or "main"
    out = [
        Probe("primary working tree", "create", str(root / f".daintree-probe-{tag}"), False),
        Probe("daintree state (.worktrees)", "create", str(project.state_dir / f".daintree-probe-{tag}"), False),
        Probe("$HOME", "create", str(home / f".daintree-probe-{tag}"), False),
        Probe(".git/config", "append", str(common / "config"), False),
        Probe(".git/hooks", "create", str(common / "hooks" / f"daintree-probe-{tag}"), False),
        Probe(f"refs/heads/{base}", "move-ref", f"refs/heads/{base}", False, str(own)),
    ]
    if others:
        other = others[0]
        out.append(Probe(f"another worktree ({other.name})", "create",
                         str(Path(other.path) / f".daintree-probe-{tag}"), False))
    # Other agents' branches are not in this sandbox at all (its refs/heads/wt/ is a folder of its own, see
    # core/agent_git.py): what could move them is the shared object store and ref folder, both read-only here.
    out.append(Probe("the shared object store", "create", str(SHARED_OBJECTS_MOUNT / f".daintree-probe-{tag}"),
                     False))
    out += [
        Probe("its own worktree", "create", str(own / f".daintree-probe-{tag}"), True),
        Probe(f"its own branch ({entry.branch})", "move-ref", f"refs/heads/{entry.branch}", True, str(own)),
        Probe("TMPDIR", "create", str(project.tmpdir_for(entry.name) / f".daintree-probe-{tag}"), True),
        Probe("/tmp", "create", f"/tmp/.daintree-probe-{tag}", True),
    ]
    spec = sandbox.spec
    for path in (spec.writable if spec is not None else ()):
        if path.is_dir():
            out.append(Probe(f"agent state {path.name or path}", "create", str(path / f".daintree-probe-{tag}"),
                             True))
    return out


def worktree_agent(project: Project, entry: WorktreeEntry) -> tuple[str | None, str]:
    """The agent a worktree's sessions run, and where that was found: its session record's, else its task's (the
    queue's `--agent`); (None, "the default agent") when neither names a preset this config knows."""
    known = all_presets(project.config)
    record = read_session_record(project, entry.name)
    if record is not None and record.agent in known:
        return record.agent, "its session"
    task = TaskService(project).find(entry.task_id) if entry.task_id is not None else None
    wanted = task.extra.get("agent") if task is not None else None
    if isinstance(wanted, str) and wanted in known:
        return wanted, f"its task #{entry.task_id}"
    return None, "the default agent"


def check(project: Project, name: str, agent: str | None = None) -> CheckReport:
    """Try every probe inside the sandbox a session of `agent` (default: the worktree's own, `worktree_agent`) in
    worktree `name` would get. `daintree sandbox check` of an opencode worktree checked claude's folders."""
    project.require_git()
    entries = Index(project).load()
    entry = find(entries, name)
    if entry is None or not entry.live:
        raise InputError(f"no live worktree named {name!r}")
    others = [e for e in entries if e.live and e.name != name and Path(e.path).is_dir()]
    agent, agent_from = (agent, "--agent") if agent else worktree_agent(project, entry)
    preset = resolve_preset(project.config, agent)
    sandbox = session_sandbox(project, entry, preset)
    tag = os.urandom(4).hex()
    plan = probes(project, entry, others, sandbox, tag)
    if sandbox.spec is None:
        # Nothing confines it: every probe would really write (and move main). Say so without trying.
        return CheckReport(name, sandbox.record(), [
            ProbeResult(p.label, p.target, True, p.expect_writable, "no sandbox: not tried") for p in plan],
            preset.name, agent_from)
    # Not a terminal: no controlling terminal (like a hook). The writes are tried without the containment
    # layers, which are tried on their own below.
    spec = replace(sandbox.spec, interactive=False)
    sandbox = replace(sandbox, spec=spec)
    env = worktree_env(project, entry)
    argv = replace(sandbox, containment=None).wrap([sys.executable, "-I", "-c", PROBE_PROGRAM,
                                                    json.dumps([[p.label, p.kind, p.target, p.extra]
                                                                for p in plan])], dict(env))
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=entry.path,
                          stdin=subprocess.DEVNULL, timeout=120)
    try:
        raw = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise OperationError(f"sandbox check could not run: {proc.stderr.strip() or proc.returncode}") from None
    results = [ProbeResult(p.label, p.target, bool(ok), p.expect_writable, str(detail))
               for p, (_, ok, detail) in zip(plan, raw, strict=True)]
    contained: list[ContainmentResult] = []
    if sandbox.containment is not None:
        contained = check_limits(sandbox.containment, entry.name, sandbox.choice.mode)
        # The network alone here: the limits were tried above, in a group of their own.
        bare = replace(sandbox, containment=replace(sandbox.containment, limits=Limits()), reason_file=None)
        contained += check_network(sandbox.containment, bare.wrap, dict(env), Path(entry.path))
    return CheckReport(name, sandbox.record(), results, preset.name, agent_from, contained)


def describe_containment(result: ContainmentResult) -> str:
    return f"{'ok  ' if result.holds else 'FAIL'} {result.what}: {result.detail}"


def describe(result: ProbeResult) -> str:
    state = "writable " if result.writable else "read-only"
    mark = "ok  " if result.holds else "FAIL"
    why = f" ({result.detail})" if result.detail and (not result.writable or not result.holds) else ""
    return f"{mark} {state} {result.label}{why}"
