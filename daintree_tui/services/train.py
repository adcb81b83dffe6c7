"""The merge train: land several worktrees on one branch, one after another, each tested before it lands.

Each step builds the candidate (the target's tip as it is now, plus the worktree's work by the strategy) in a
temporary worktree of its own under `.worktrees/.train/`, made with no hook, never in the primary; runs the gate
there (the `pre_merge` hooks, trusted as for `worktree merge`, and `--test CMD`), confined to the worktree's own
sandbox with the candidate writable; and only then moves the target to the commit it tested, by a fast-forward
(the primary's checkout follows only when it has the target checked out clean, as `worktree merge` does). A
conflict or a failed gate leaves the target where it was and tells the worktree's agent, as one bracketed paste
into its live session, which files conflict or how the checks ended; then the train goes on with the next.

Killed at any step (`kill -9`), the target holds only tested commits, the temporary worktrees stay under
`.worktrees/.train/` for `doctor --fix` to remove, and no agent's worktree or the primary lost anything: the
train writes neither, but for the target's own checkout advancing and, after a rebase landed, the agent's branch
following its rebased commits (inside its sandbox, as `worktree merge` does).

The steps of each merge are `Merger`'s own (core/merge.py); this module composes them around the gate.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daintree_tui.core import admin_dirs, ownership, trust
from daintree_tui.core import git as g
from daintree_tui.core.environment import worktree_env
from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.hooks import HookFailed, run_hooks
from daintree_tui.core.log import suppressed
from daintree_tui.core.merge import NO_HOOKS
from daintree_tui.core.models import TaskStatus, WorktreeEntry
from daintree_tui.core.radar_merge import Merges
from daintree_tui.core.runner import run_command
from daintree_tui.core.sandbox import bring_in, wrap_command
from daintree_tui.core.store import remove_tree
from daintree_tui.core.worktree_git import WorktreeGit
from daintree_tui.sessions.last_words import readable_lines

if TYPE_CHECKING:
    from daintree_tui.services.container import Services

STRATEGIES = ("squash", "rebase", "merge")
DEFAULT_STRATEGY = "squash"
RESULTS = ("merged", "conflict", "failed", "skipped")
TEST_TIMEOUT = 1200.0  # seconds for `--test CMD`: a test suite takes longer than a hook (hooks.timeout)
TAIL_LINES = 40  # of a failed gate's output, pasted to its agent
TAIL_CHARS = 4000
NOT_ENTERED = "pasted into its session but not entered: its screen did not take the paste (a dialog?)"


@dataclass(frozen=True)
class TrainResult:
    """What became of one worktree."""

    worktree: str
    result: str  # one of RESULTS
    commit: str | None = None
    files: tuple[str, ...] = ()
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"worktree": self.worktree, "result": self.result}
        if self.commit is not None:
            out["commit"] = self.commit
        if self.files:
            out["files"] = list(self.files)
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    def line(self) -> str:
        text = f"{self.worktree}: {self.result}"
        if self.commit:
            text += f" at {self.commit[:10]}"
        if self.files:
            text += f" in {', '.join(self.files[:8])}" + (f" and {len(self.files) - 8} more"
                                                         if len(self.files) > 8 else "")
        return text + (f" ({self.reason})" if self.reason else "")


@dataclass(frozen=True)
class TrainProgress:
    """One step of the train as it happens: `stage` is checking, building, gating, landing or done (then
    `result`)."""

    worktree: str
    stage: str
    index: int  # 1-based, in the train's order
    total: int
    result: TrainResult | None = None

    def line(self) -> str:
        where = f"[{self.index}/{self.total}]"
        return f"{where} {self.result.line()}" if self.result is not None else f"{where} {self.worktree}: {self.stage}"


@dataclass
class _Step:
    entry: WorktreeEntry
    target: str
    holder: Path | None = None
    target_tip: str = ""
    branch_tip: str = ""
    files: list[str] = field(default_factory=list)


class Train:
    """Lands worktrees one by one on their target branch (see the module's docstring)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.project = services.project
        self.merger = services.review.merger  # the steps of a merge (core/merge.py)
        self.worktrees = services.worktrees

    # -- which worktrees, in which order ---------------------------------------------------------------------

    def finished(self, into: str | None = None) -> list[str]:
        """Every live worktree with commits its target lacks and no running agent (its session waiting, exited,
        or none): what the train lands when given no names."""
        root = self.project.root
        states = self._session_states()
        landed = Merges(root)  # a squash landed earlier, its target moved on since: nothing of it is left to land
        names = []
        for entry in self.worktrees.entries():
            if states.get(entry.name) not in (None, "waiting", "exited") or not Path(entry.path).is_dir():
                continue
            with suppressed(DaintreeError):
                bring_in(self.project, entry, quick=True)
                target = self.merger.target_branch(entry, into)
                tip, target_tip = g.rev_parse_commit(root, entry.branch), g.rev_parse_commit(root, target)
                if tip and target_tip and target != entry.branch and not g.is_ancestor(root, tip, target_tip) \
                        and not landed.recorded_landed(entry.extra, tip, target, target_tip) \
                        and self._adds_to(target_tip, tip):
                    names.append(entry.name)
        return names

    def _adds_to(self, target_tip: str, tip: str) -> bool:
        """Whether merging `tip` would change the target: a squashed branch is never its ancestor, and lands
        nothing twice. A conflict counts (the train reports it)."""
        root = self.project.root
        merged = g.git(root, "merge-tree", "--write-tree", target_tip, tip, check=False)
        tree = merged.stdout.split("\n", 1)[0].strip()
        return merged.returncode != 0 or tree != g.git(root, "rev-parse", f"{target_tip}^{{tree}}").stdout.strip()

    def _session_states(self) -> dict[str, str]:
        if self.services.host is None:
            return {}
        try:
            return {s.name: str(s.status) for s in self.services.sessions.list()}
        except DaintreeError:
            return {}

    def order(self, names: Sequence[str]) -> list[str]:
        """Fewest predicted conflicts first (the radar, over every live worktree), then the oldest."""
        entries = {e.name: e for e in self.worktrees.entries()}
        try:
            report = self.services.radar.scan()
            conflicts = {name: len(report.others(name)) for name in names}
        except DaintreeError:
            conflicts = {}
        return sorted(names, key=lambda n: (conflicts.get(n, 0), entries[n].created_at if n in entries else 0.0, n))

    # -- the train -------------------------------------------------------------------------------------------

    def run(self, names: Sequence[str] | None = None, *, into: str | None = None, strategy: str = DEFAULT_STRATEGY,
            test: str | None = None, remove: bool = False, complete_task: bool = False,
            on_progress: Callable[[TrainProgress], None] | None = None) -> list[TrainResult]:
        """Land `names` (default: `finished()`), in `order`; one result per worktree.

        Raises:
            InputError: a bad strategy, an unknown worktree or target, before anything is done.
            OperationError: inside a session, another train running, or a gate that cannot run for want of trust.
        """
        project = self.project
        project.require_git()
        if strategy not in STRATEGIES:
            raise InputError(f"invalid strategy {strategy!r} (expected one of: {', '.join(STRATEGIES)})")
        if test is not None and not test.strip():
            raise InputError("--test needs a command")
        if ownership.inside_session(project):
            # A train lands other agents' work and runs checks over it: a person's operation.
            raise OperationError("daintree train is refused from inside a session: run it outside, as a person")
        wanted = list(dict.fromkeys(names or []))
        for name in wanted:
            self.worktrees.get(name, live=True)  # unknown or removed: exit 2, nothing done
        if into is not None and wanted:
            self.merger.target_branch(self.worktrees.get(wanted[0]), into)  # a bad --into: exit 2 likewise
        self._require_gate_trusted()
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(project.train_lock.hold())
            except OperationError:
                raise OperationError("another merge train is running in this repository; wait for it to end") \
                    from None
            chosen = self.order(wanted or self.finished(into))
            results = []
            for index, name in enumerate(chosen, start=1):
                def said(stage: str, index: int = index, name: str = name) -> None:
                    if on_progress is not None:
                        on_progress(TrainProgress(name, stage, index, len(chosen)))

                said("checking")
                result = self._land(name, into, strategy, test, remove, complete_task, said)
                results.append(result)
                if on_progress is not None:
                    on_progress(TrainProgress(name, "done", index, len(chosen), result))
            return results

    def _require_gate_trusted(self) -> None:
        """The gate fails closed, as a merge's does: checks of the repository's that cannot run refuse the train."""
        cfg = self.project.config
        if any(spec.source == "repo" for spec in cfg.hooks.get("pre_merge", [])) and not trust.repo_config_trusted(cfg):
            raise OperationError(f"the pre_merge checks cannot run: the repository's .daintree.toml "
                                 f"{trust.untrusted_state(cfg.repo_config_path)}; review it, then run `daintree trust`")

    def _land(self, name: str, into: str | None, strategy: str, test: str | None, remove: bool,
              complete_task: bool, said: Callable[[str], None]) -> TrainResult:
        """One step: never raises for the worktree's own state (that is its result)."""
        try:
            step = self._check(name, into)
        except DaintreeError as exc:
            return TrainResult(name, "skipped", reason=str(exc))
        if isinstance(step, TrainResult):
            return step
        entry = step.entry
        brief = {**entry.brief(), "target": step.target, "strategy": strategy}
        task = self.worktrees.tasks.brief_of(entry.task_id)
        tmp = self.project.train_root / f"{name}-{os.urandom(4).hex()}"
        try:
            said("building")
            try:
                built = self._build(step, strategy, tmp)
            except OperationError as exc:
                return self._failed(step, brief, task, str(exc), "")
            if built is None:
                told = self._tell(name, self._conflict_text(step))
                self.project.events.append("train.conflict", worktree=brief, files=step.files, task=task,
                                           target_commit=step.target_tip)
                return TrainResult(name, "conflict", files=tuple(step.files),
                                   reason=f"conflicts with {step.target}" + self._told(told))
            if built == step.target_tip:
                return TrainResult(name, "skipped", reason=f"nothing to land: its work is in {step.target} already")
            said("gating")
            failure = self._gate(entry, tmp, test)
            if failure is not None:
                return self._failed(step, brief, task, *failure)
            said("landing")
            try:
                self.merger.refuse_unsafe(entry, step.target, step.holder, step.target_tip, built)
                with self.merger.hooks_as_they_are(step.holder or self.project.root) as hooks:
                    self.merger.advance(step.target, step.target_tip, built, step.holder, hooks)
            except OperationError as exc:
                return self._failed(step, brief, task, str(exc), "", tell=False)
        finally:
            self._discard(tmp)
        if strategy == "rebase":
            # The agent's branch follows its rebased commits, inside its sandbox (as `worktree merge` does).
            WorktreeGit(self.project, entry)("reset", "-q", "--keep", built, check=False)
            with suppressed(DaintreeError):
                bring_in(self.project, entry)
        self.worktrees.mark_landed(name, step.branch_tip, step.target, built)  # the radar leaves it out now
        self.project.events.append("train.merged", worktree=brief, commit=built, task=task)
        return TrainResult(name, "merged", commit=built, reason=self._after(entry, strategy, remove, complete_task))

    def _check(self, name: str, into: str | None) -> _Step | TrainResult:
        """What a merge checks first; a TrainResult (skipped) for what stops this worktree before any build."""
        review = self.merger
        entry = review.entry(name)
        target = review.target_branch(entry, into)
        if target == entry.branch:
            return TrainResult(name, "skipped", reason=f"{target} is its own branch")
        owner = next((e for e in self.worktrees.entries() if e.live and e.branch == target), None)
        if owner is not None and review.confined(owner):
            return TrainResult(name, "skipped", reason=f"{target} is worktree {owner.name}'s own branch, checked "
                               "out in its sandbox: not moved from here")
        dirty = WorktreeGit(self.project, entry).dirty_files()
        if dirty:
            return TrainResult(name, "skipped", reason=f"uncommitted changes: {', '.join(dirty[:5])}"
                               + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
                               + "; commit them first (daintree worktree commit)")
        holder = review.checked_out_at(target)
        if holder is not None:
            untracked = set(g.git(holder, "ls-files", "--others", "--exclude-standard", "-z").stdout.split("\0"))
            held_dirty = [f for f in g.dirty_files(holder) if f not in untracked]
            if held_dirty:
                return TrainResult(name, "skipped", reason=f"{target} is checked out at {holder} with uncommitted "
                                   f"changes ({', '.join(held_dirty[:5])})")
        root = self.project.root
        branch_tip, target_tip = g.rev_parse_commit(root, entry.branch), g.rev_parse_commit(root, target)
        if branch_tip is None or target_tip is None:
            return TrainResult(name, "skipped", reason=f"{entry.branch} or {target} names no commit")
        if g.is_ancestor(root, branch_tip, target_tip):
            return TrainResult(name, "skipped", reason=f"already merged into {target}")
        missing = self.services.ops.review.approval_missing(name, head=branch_tip)  # of the very head it merges
        if missing:
            return TrainResult(name, "skipped", reason="not approved for a merge: " + "; ".join(missing))
        step = _Step(entry, target, holder, target_tip, branch_tip)
        review.refuse_unsafe(entry, target, holder, f"{target_tip}...{branch_tip}")
        return step

    def _build(self, step: _Step, strategy: str, tmp: Path) -> str | None:
        """The candidate commit, built in `tmp` (a detached worktree with no hook); None on a conflict (its files
        in `step.files`); the target's tip when the work adds nothing to it."""
        root = self.project.root
        entry = step.entry
        tmp.parent.mkdir(parents=True, exist_ok=True)
        start = step.branch_tip if strategy == "rebase" else step.target_tip
        g.git(root, *NO_HOOKS, "worktree", "add", "--quiet", "--detach", str(tmp), start)
        subject = self.merger.commit_subject(entry)
        if strategy == "rebase":
            proc = g.git(tmp, *NO_HOOKS, "rebase", "--quiet", step.target_tip, check=False)
            if proc.returncode != 0:
                step.files = self._conflicted(tmp)
                g.git(tmp, "rebase", "--abort", check=False)
                if not step.files:
                    raise OperationError(f"rebase failed: {g.last_line(proc.stderr) or proc.returncode}")
                return None
        else:
            message = subject if subject == f"Merge {entry.branch}" else f"Merge {entry.branch}: {subject}"
            args = ["merge", "--squash", step.branch_tip] if strategy == "squash" else \
                ["merge", "--no-ff", "--no-edit", "-m", message, step.branch_tip]
            proc = g.git(tmp, *NO_HOOKS, *args, check=False)
            if proc.returncode != 0:
                step.files = self._conflicted(tmp)
                if not step.files:
                    raise OperationError(f"merge failed: {g.last_line(proc.stderr) or proc.returncode}")
                return None
            if strategy == "squash":
                if g.git(tmp, "diff", "--cached", "--quiet", check=False).returncode == 0:
                    return step.target_tip  # its changes are in the target already
                g.git(tmp, *NO_HOOKS, "commit", "-q", "-m", subject)
        return g.git(tmp, "rev-parse", "HEAD").stdout.strip()

    @staticmethod
    def _conflicted(tmp: Path) -> list[str]:
        out = g.git(tmp, "diff", "--name-only", "-z", "--diff-filter=U", check=False).stdout
        return list(dict.fromkeys(p for p in out.split("\0") if p))

    def _gate(self, entry: WorktreeEntry, tmp: Path, test: str | None) -> tuple[str, str] | None:
        """Run the checks in the candidate, confined to the worktree's sandbox with the candidate writable (its
        `.git` file, which says which repository it is, read-only); (why, the end of the output) when they fail."""
        mounts: dict[str, Any] = {"writable": (tmp,), "read_only": (tmp / ".git",)}
        extra = {"DAINTREE_WORKTREE_PATH": str(tmp), "DAINTREE_TRAIN": "1"}
        try:
            run_hooks(self.project, "pre_merge", entry, cwd=tmp, extra_env=extra, **mounts)
        except HookFailed as exc:
            return str(exc), exc.output
        except OperationError as exc:
            return str(exc), ""
        if test:
            env = {**worktree_env(self.project, entry), **extra}
            try:
                argv = wrap_command(self.project, entry, ["/bin/sh", "-c", test], env, cwd=tmp, **mounts)
            except OperationError as exc:  # sandbox "on" and it cannot work here: the check cannot run
                return str(exc), ""
            result = run_command(argv, tmp, env, TEST_TIMEOUT)
            if result.exit_code != 0:
                why = f"timed out after {TEST_TIMEOUT:.0f} s" if result.timed_out else f"exited {result.exit_code}"
                return f"--test {test!r} {why}", result.stdout + result.stderr
        return None

    def _failed(self, step: _Step, brief: dict[str, Any], task: Any, why: str, output: str,
                tell: bool = True) -> TrainResult:
        told = self._tell(step.entry.name, self._failure_text(step, why, output)) if tell else "not told"
        self.project.events.append("train.failed", worktree=brief, error=why, output=_tail(output, 2000), task=task)
        return TrainResult(step.entry.name, "failed", reason=why + (self._told(told) if tell else ""))

    def _after(self, entry: WorktreeEntry, strategy: str, remove: bool, complete_task: bool) -> str | None:
        """--remove and --complete-task, as `worktree merge` does them; a note when they could not be done."""
        try:
            if remove:
                removed = self.services.ops.remove(entry.name, complete_task=complete_task,
                                                   delete_branch=strategy != "squash")
                return "; ".join(removed.warnings) or None
            if complete_task and entry.task_id is not None:
                self.worktrees.tasks.update(entry.task_id, status=TaskStatus.COMPLETED)
        except DaintreeError as exc:
            return f"landed, but {'not removed' if remove else 'its task was not completed'}: {exc}"
        return None

    def _discard(self, tmp: Path) -> None:
        """Delete a candidate worktree. No git runs in it after the gate (whatever the checks left there is the
        worktree's code's doing): the folder goes, then git's record of it."""
        if tmp.exists() or tmp.is_symlink():
            remove_tree(tmp)
            admin_dirs.prune(self.project)

    # -- telling the agent -------------------------------------------------------------------------------------

    def _tell(self, name: str, text: str) -> str | None:
        """Paste `text` into the worktree's live session, then Enter once the paste shows (`paste_then_enter`);
        None when told, else why not."""
        if self.services.host is None:
            return "no session host"
        try:
            if not self.services.sessions.paste_then_enter(name, text):
                return NOT_ENTERED
        except DaintreeError as exc:
            return str(exc)
        return None

    @staticmethod
    def _told(why_not: str | None) -> str:
        if why_not is NOT_ENTERED:
            return "; " + NOT_ENTERED
        return "; its agent was told" if why_not is None else ""

    def _conflict_text(self, step: _Step) -> str:
        files = "\n".join(f"- {f}" for f in step.files[:50])
        return (f"daintree train: your branch {step.entry.branch} was not landed: it conflicts with {step.target} "
                f"as it is now ({step.target_tip[:12]}) in these files:\n{files}\nBring {step.target} into your "
                f"branch (`git rebase {step.target}` or `git merge {step.target}`), resolve the conflicts and commit; "
                "the next train will try again.")

    def _failure_text(self, step: _Step, why: str, output: str) -> str:
        tail = _tail(output, TAIL_CHARS)
        shown = f"\nThe end of its output:\n```\n{tail}\n```" if tail else ""
        return (f"daintree train: your branch {step.entry.branch} was not landed on {step.target}: the checks "
                f"failed on {step.target} with your work merged in: {why}.{shown}\nFix it on your branch and "
                "commit; the next train will try again.")


def _tail(text: str, chars: int) -> str:
    """The last lines of a command's output as a person reads them: its terminal controls (colours, an OSC
    clipboard write, a progress bar's carriage returns) are not text to paste into an agent."""
    return "\n".join(readable_lines(text)[-TAIL_LINES:])[-chars:]
