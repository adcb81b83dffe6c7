"""git in an agent's worktree, run where the agent's own writes cannot steer it (docs/design.md 2a, rule 9).

The worktree, its admin dir (`.git/worktrees/<name>/`: HEAD, index, logs, COMMIT_EDITMSG) and its branch are the
agent's to write. A git run here over them follows what it finds: `logs/HEAD -> ~/.bashrc` had the user's commit
append to the user's shell start-up, `COMMIT_EDITMSG -> ~/.ssh/authorized_keys` replaced that file with the
agent's message. So every git that reads or writes those (`status`, `diff`, `add`, `write-tree`, `reset`) runs
inside the worktree's own sandbox, with the agent's mounts and no network: a link there reaches only what the
agent could reach anyway, and what git writes lands in the quarantine and the agent's ref folder, which the
outside brings in checked (`bring_in`). What needs the user's keys (signing a commit) runs here, on objects
only (`commit-tree`, `update-ref`), never on the worktree's files.

Where the worktree has no sandbox (`sandbox = "off"`, or bubblewrap cannot work here), its agent runs as the user
anyway, and so does this git.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

from daintree_tui.core import git as g
from daintree_tui.core.capped import BYTES, Capped, read_capped
from daintree_tui.core.errors import OperationError
from daintree_tui.core.models import WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.roles import worktree_role
from daintree_tui.core.sandbox import SandboxSpec, bring_in, choose, program_dirs, spec_for

GIT_TIMEOUT = 60.0  # seconds: an index the agent made a FIFO never answers
# What git says here names the agent's files, in bytes that need not be UTF-8 (`n\xff.txt`): read as the bytes
# they are (lone surrogates, which escape_controls shows as `\xff`), never a UnicodeDecodeError; with no sandbox
# too (`worktree diff` ended in an internal error there).
_BYTES = BYTES


class WorktreeGit:
    """git for one worktree: `run` has the signature of `core.git.git`, so the helpers there take it."""

    def __init__(self, project: Project, entry: WorktreeEntry) -> None:
        self.project = project
        self.entry = entry
        self.path = Path(entry.path)
        choice = choose(project.config, role=worktree_role(project, entry.name, entry))
        self.confined = choice.active
        self._backend = choice.backend
        self._spec: SandboxSpec | None = None
        self._prepared = False
        self._problem: OperationError | None = None
        if self.confined:
            try:
                self._spec = replace(spec_for(project, entry, network=False),
                                     readable=program_dirs(["git"], os.environ))
            except OperationError as exc:  # no admin dir to bind: nothing git could inspect there either
                self._problem = exc

    def run(self, cwd: Path, *args: str, check: bool = True, input: str | None = None,
            timeout: float = GIT_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """`git -C cwd args...` inside the worktree's sandbox (as `core.git.git` where it has none)."""
        if self._problem is not None:
            raise self._problem
        argv, env = g.command(cwd, *args)
        if self._spec is None:
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, env=env, input=input, errors=_BYTES,
                                      stdin=None if input is not None else subprocess.DEVNULL, check=False)
            except FileNotFoundError:
                raise OperationError(g.NO_GIT) from None
            if check and proc.returncode != 0:
                raise OperationError(f"git {args[0]} failed: {g.last_line(proc.stderr) or f'exit {proc.returncode}'}")
            return proc
        return self._confined(argv, env, args[0], check, input, timeout)

    def capped(self, args: list[str], limit: int, *, shell: str | None = None) -> Capped:
        """At most `limit` bytes of what `git args...` (or `sh -c shell` with `args` as "$@") prints in the
        worktree, in its sandbox as `run` and `run_shell`: a diff is as large as the agent's files.

        Raises:
            OperationError: no answer in GIT_TIMEOUT, git failed.
        """
        if self._problem is not None:
            raise self._problem
        if shell is None:
            argv, env = g.command(self.path, *args)
        else:
            _, env = g.command(self.path)
            argv = ["sh", "-c", shell, "sh", *args]
        if self._spec is not None:
            argv = self._backend.wrap(argv, self._spec, prepared=self._prepared)
            self._prepared = True
        read = read_capped(argv, env, limit, cwd=self.path, timeout=GIT_TIMEOUT)
        what = "diff" if shell is not None else args[0]
        if read.timed_out:
            raise OperationError(f"git {what} in {self.entry.name} gave no answer in {GIT_TIMEOUT:.0f} s")
        if not read.cut and read.returncode != 0:
            raise OperationError(f"git {what} failed: {g.last_line(read.stderr) or f'exit {read.returncode}'}")
        return read

    def run_shell(self, script: str, args: list[str]) -> subprocess.CompletedProcess[str]:
        """`sh -c script` in the worktree, with git's environment, `args` as "$@": several git calls in one
        sandbox (ours: never a script of the agent's or the repository's)."""
        _, env = g.command(self.path)
        argv = ["sh", "-c", script, "sh", *args]
        if self._problem is not None:
            raise self._problem
        if self._spec is None:
            return subprocess.run(argv, cwd=self.path, capture_output=True, text=True, env=env, errors=_BYTES,
                                  stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT, check=False)
        return self._confined(argv, env, "diff", False, None, GIT_TIMEOUT)

    def _confined(self, argv: list[str], env: dict[str, str], what: str, check: bool, input: str | None,
                  timeout: float) -> subprocess.CompletedProcess[str]:
        assert self._spec is not None
        args = (what,)
        # One preparation (folders made, what the agent's git wrote brought in) for all the git calls of one look.
        wrapped = self._backend.wrap(argv, self._spec, prepared=self._prepared)
        self._prepared = True
        try:
            proc = subprocess.run(wrapped, capture_output=True, text=True, env=env, input=input, timeout=timeout,
                                  stdin=None if input is not None else subprocess.DEVNULL, errors=_BYTES)
        except subprocess.TimeoutExpired:
            raise OperationError(f"git {args[0]} in {self.entry.name} gave no answer in {timeout:.0f} s") from None
        except FileNotFoundError:
            raise OperationError(g.NO_GIT) from None
        if check and proc.returncode != 0:
            raise OperationError(f"git {args[0]} failed: {g.last_line(proc.stderr) or f'exit {proc.returncode}'}")
        return proc

    def __call__(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """`run` in the worktree's own folder."""
        return self.run(self.path, *args, check=check, input=input)

    def bring_in(self) -> str | None:
        """What the agent's git wrote, checked and brought into the repository; the branch's commit after."""
        return bring_in(self.project, self.entry)

    def dirty_files(self) -> list[str]:
        return g.dirty_files(self.path, run=self.run)

    def untracked(self) -> list[str]:
        out = self("ls-files", "--others", "--exclude-standard", "-z").stdout
        return [p for p in out.split("\0") if p]
