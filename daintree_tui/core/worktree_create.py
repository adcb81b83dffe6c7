"""Creating a worktree (docs/design.md section 3): validated before any side effect, then, under the lock, every step
with its undo, so that a create either completes or rolls back everything it did (worktree dir, branch, index
entry, ports, task binding); its journal lets `doctor --fix` undo one a `kill -9` interrupted."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from daintree_tui.core import admin_dirs, deps
from daintree_tui.core import git as g
from daintree_tui.core.config import DEFAULT_BRANCH_PREFIX
from daintree_tui.core.errors import DaintreeError, InputError, OperationError
from daintree_tui.core.index import Index, find
from daintree_tui.core.log import suppressed, warn
from daintree_tui.core.models import Task, WorktreeEntry
from daintree_tui.core.project import Project
from daintree_tui.core.store import remove_tree, write_json
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.validate import check_name
from daintree_tui.core.worktree_journal import Journal


def base_ref_error(root: Path, base_ref: str) -> InputError:
    """Why `base_ref` gives no commit. In a repository made with `git init` a moment ago even HEAD names none, and
    "invalid base ref 'HEAD'" told a newcomer nothing of what to do."""
    if g.rev_parse_commit(root, "HEAD") is None:
        return InputError("the repository has no commit yet, and a worktree starts from one: commit first "
                          "(git commit --allow-empty -m 'first commit' will do)")
    return InputError(f"invalid base ref {base_ref!r}: it names no commit")


def _import_the_steps_after_the_add() -> None:
    """Import what a create needs after `git worktree add` while git checks the files out: the add is the create's
    critical path, and these imports (hooks and what they run, ports and `socket`) would otherwise follow it.
    Git is started first: a thread importing beside it delayed its start (see `git.git_while`)."""
    from daintree_tui.core import hooks, ports  # noqa: F401


class _Undo:
    """A stack of compensating actions, run newest first; each failure is reported, none stops the rest."""

    def __init__(self) -> None:
        self._steps: list[tuple[str, Callable[[], object]]] = []

    def push(self, what: str, step: Callable[[], object]) -> None:
        self._steps.append((what, step))

    def run(self) -> None:
        for what, step in reversed(self._steps):
            try:
                step()
            except Exception as exc:  # keep undoing: one failed step must not strand the others
                warn(f"rollback: could not {what}: {exc}")
        self._steps.clear()


class WorktreeCreation:
    """`worktree create` over one project (WorktreeService.create_reporting)."""

    def __init__(self, project: Project, index: Index, tasks: TaskService, journal: Journal) -> None:
        self.project = project
        self.index = index
        self.tasks = tasks
        self.journal = journal

    def _branch_name_ok(self, branch: str) -> bool:
        """Whether git takes `branch` (of a name `validate_name` passed) as a branch name. Under the default
        prefix it always does: a valid name breaks none of check-ref-format's rules for a component (no leading
        '.', no '..', no '.lock' or '.' at the end, none of `~^:?*[\\ @{` or controls)."""
        if self.project.config.branch_prefix == DEFAULT_BRANCH_PREFIX:
            return True
        return g.branch_name_ok(self.project.root, branch)

    def _validate_create(self, entries: list[WorktreeEntry], name: str, task_id: int | None,
                         base_ref: str) -> tuple[Task | None, str, bool]:
        existing = find(entries, name)
        if existing is not None and existing.live:
            raise InputError(f"worktree {name!r} already exists ({existing.status})")
        task = None
        if task_id is not None:
            task = self.tasks.get(task_id)
            bound = find(entries, task.worktree) if task.worktree else None
            if bound is not None and bound.live:
                raise InputError(f"task {task_id} is already bound to worktree {bound.name!r}")
        candidates = g.ref_candidates(self.project.root, base_ref)
        if len(candidates) > 1:
            raise InputError(f"ambiguous base ref {base_ref!r}: it names {' and '.join(candidates)}; "
                             "give the full name")
        branch = self.project.branch_for(name)
        root = self.project.root
        target = candidates[0] if candidates else base_ref
        base_commit: str | None = self.project.fresh_head() if target == "HEAD" else None
        if base_commit:  # discovery asked git a moment ago
            branch_taken = g.branch_exists(root, branch)
        else:
            base_commit, branch_taken = g.both(lambda: g.rev_parse_commit(root, target),
                                               lambda: g.branch_exists(root, branch))
        if base_commit is None:
            raise base_ref_error(root, base_ref)
        reset_branch = False
        if branch_taken:
            # The branch of a removed worktree of the same name may be reused when resetting it loses nothing.
            reusable = (existing is not None and existing.branch == branch
                        and g.is_ancestor(self.project.root, branch, base_commit))
            if not reusable:
                raise InputError(f"branch {branch} already exists (delete it or choose another name)")
            reset_branch = True
        path = self.project.worktree_path(name)
        if path.is_symlink() or (path.exists() and (not path.is_dir() or any(path.iterdir()))):
            raise InputError(f"target directory {path} exists and is not empty")
        return task, base_commit, reset_branch

    def create(self, name: str, task_id: int | None = None,
               base: str | None = None) -> tuple[WorktreeEntry, deps.DepsReport]:
        """Create worktree `name` on branch `wt/<name>` from `base`, bound to task `task_id`; the entry, and what
        the new worktree got from the primary (files copied, dirs linked).

        Raises:
            InputError: rejected before any side effect.
            OperationError: a step failed; everything done so far was rolled back.
        """
        project = self.project
        project.require_git()
        check_name(name, new=True)
        problem = project.state_dir_problem()
        if problem:
            raise OperationError(problem)
        branch = self.project.branch_for(name)
        # The hooks path the add will pin is asked for beside the name check (two forks at once, not in turn), when
        # either needs git at all: discovery asked for the path, and `wt/` + a valid name is a valid branch.
        name_ok, hooks = g.both(lambda: self._branch_name_ok(branch), project.pinned_hooks)
        if not name_ok:
            raise InputError(f"invalid worktree name {name!r}: {branch} is not a valid branch name")
        base_ref = base or self.project.config.base
        checkout = g.ParallelCheckout(project.root)  # git answers while the checks below run
        with project.lock.hold():
            entries = self.index.load(heal=True)
            task, base_commit, reset_branch = self._validate_create(entries, name, task_id, base_ref)
            entry, provided = self._create_locked(entries, name, task, base_ref, base_commit, reset_branch,
                                                  [*hooks, *checkout.options()])
            if task is not None:  # the events after this point show the task as the create left it: bound
                task = self.tasks.find(task.id) or task
        from daintree_tui.core.hooks import run_hooks  # loaded while git checked out: start-up speed (see above)

        try:
            run_hooks(project, "post_create", entry)
        except DaintreeError as exc:
            with project.lock.hold():
                self._rollback_created(entry, reset_branch)
            task = self.tasks.find(task.id) if task is not None else None  # unbound again by the rollback
            project.events.append("worktree.create.failed", worktree=entry.brief(), error=str(exc),
                                  task=task.brief() if task else None)
            raise OperationError(f"create {name} rolled back: {exc}") from None
        project.events.append("worktree.create.after", worktree=entry.brief(), task=task.brief() if task else None)
        return entry, provided

    def _create_locked(self, entries: list[WorktreeEntry], name: str, task: Task | None, base_ref: str,
                       base_commit: str, reset_branch: bool,
                       options: list[str]) -> tuple[WorktreeEntry, deps.DepsReport]:
        project, root = self.project, self.project.root
        branch = self.project.branch_for(name)
        path = project.worktree_path(name)
        old_tip = g.rev_parse_commit(root, branch) if reset_branch else None
        project.ensure_excluded()
        self.journal.write(name, op="create", path=str(path), branch=branch, base_commit=base_commit,
                            reset_branch=reset_branch)
        brief = {"name": name, "path": str(path), "branch": branch}
        project.events.append("worktree.create.before", worktree=brief, task=task.brief() if task else None)
        undo = _Undo()
        try:
            # Pushed before the add (and so run after the directory's removal: git keeps a checked-out branch):
            # `git worktree add -b` creates the branch first and leaves it behind when the checkout fails.
            if old_tip:
                undo.push("restore the branch", lambda: g.git(root, "branch", "-f", branch, old_tip))
            else:
                undo.push("delete the branch", lambda: self._delete_new_branch(branch))
            path.parent.mkdir(parents=True, exist_ok=True)
            admin_dirs.guard(project, entries)  # the add reads every record: none may claim this path, or hang it
            skip = [project.worktrees_root, project.state_dir, project.tasks_dir]

            def while_git_checks_out() -> deps.IgnoredScan:
                scan = deps.IgnoredScan(root, skip)  # reads the primary; the add writes only in `path`
                _import_the_steps_after_the_add()
                return scan

            # Pushed before the add too: when the scan beside it fails (no thread could start: a fork storm's
            # process limit), git has added the worktree all the same, and it stayed behind the rollback. The
            # target was checked new (or empty), so whatever is there after a failed add is the add's.
            undo.push("remove the worktree directory", lambda: self.discard_worktree(path))
            scan = g.git_while(root, *options, "worktree", "add", "--quiet", "-B" if reset_branch else "-b", branch,
                               str(path), base_commit, meanwhile=while_git_checks_out)
            assert project.common_dir is not None
            provided = deps.provide(root, path, self.project.config, project.common_dir, skip, scan)
            copied, linked = provided.copied, provided.linked
            # Each step's event as it happens, in the order docs/design.md 3 gives the steps (a rollback logs its own
            # create.failed after them).
            if copied or linked:
                project.events.append("deps.linked", worktree=brief, copied=copied, linked=linked,
                                      task=task.brief() if task else None)
            tmpdir = project.tmpdir_for(name)
            if tmpdir.is_symlink():
                tmpdir.unlink()  # TMPDIR must be a folder of ours, not wherever a committed link points
            tmpdir.mkdir(parents=True, exist_ok=True)
            undo.push("remove the temp dir", lambda: remove_tree(tmpdir))
            leased = [p for e in entries if e.live for p in e.ports]
            from daintree_tui.core.ports import lease_block  # loaded while git checked out, as hooks

            ports = lease_block(leased, self.project.config.ports_range, self.project.config.ports_per_worktree)
            entry = WorktreeEntry(name=name, path=str(path), branch=branch, base_ref=base_ref,
                                  base_commit=base_commit, task_id=task.id if task else None, ports=ports,
                                  created_at=time.time())
            project.events.append("port.assigned", worktree=entry.brief(), ports=ports,
                                  task=task.brief() if task else None)
            previous = list(entries)
            self.index.save([e for e in entries if e.name != name] + [entry])
            undo.push("restore the index", lambda: self.index.save(previous))
            if task is not None:
                before = task.to_dict()
                self.tasks.bind(task.id, name)
                undo.push("restore the task", lambda: write_json(self.tasks.path(task.id), before))
        except BaseException as exc:
            undo.run()
            self.journal.clear(name)
            reason = str(exc) if isinstance(exc, DaintreeError) else f"{type(exc).__name__}: {exc}"
            project.events.append("worktree.create.failed", worktree=brief, task=task.brief() if task else None,
                                  error=reason)
            if isinstance(exc, DaintreeError):
                raise
            if isinstance(exc, OSError):
                raise OperationError(f"create {name} failed and was rolled back: {exc}") from None
            raise
        self.journal.clear(name)
        return entry, provided

    def _delete_new_branch(self, branch: str) -> None:
        """Delete the branch this create just made. git deletes even a loose ref by rewriting packed-refs, which
        a full disk refuses: the branch stayed, and the next create of the name said it exists. Then its loose
        file goes, as git's own delete would have left it (only a regular file that packed-refs does not name)."""
        root = self.project.root
        if not g.branch_exists(root, branch):
            return
        try:
            g.git(root, "branch", "-D", branch)
        except OperationError:
            common = self.project.common_dir
            ref = f"refs/heads/{branch}"
            if common is None or (common / ref).is_symlink() or not (common / ref).is_file() \
                    or _packed_ref(common, ref):
                raise
            loose = common / ref
            loose.unlink()
            with suppressed(OSError):
                (common / "logs" / ref).unlink()

    def discard_worktree(self, path: Path) -> None:
        """Remove a worktree directory this process just made (never the user's: create checked it was new)."""
        g.git(self.project.root, "worktree", "remove", "--force", "--force", str(path), check=False)
        remove_tree(path)
        admin_dirs.prune(self.project)

    def _rollback_created(self, entry: WorktreeEntry, reset_branch: bool) -> None:
        """Undo a create whose post_create hook failed (the index entry and task binding exist already)."""
        self.discard_worktree(Path(entry.path))
        if not reset_branch:
            with suppressed(OperationError):
                self._delete_new_branch(entry.branch)
        remove_tree(self.project.tmpdir_for(entry.name))
        remove_tree(self.project.sandbox_home_for(entry.name))
        entries = [e for e in self.index.load(heal=True) if e.name != entry.name]
        self.index.save(entries)
        if entry.task_id is not None:
            self.tasks.unbind(entry.task_id)


def _packed_ref(common_dir: Path, ref: str) -> bool:
    """Whether `packed-refs` names `ref` (then only git may delete it); True when the file cannot be read."""
    try:
        lines = (common_dir / "packed-refs").read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return any(line.split(" ", 1)[-1].strip() == ref for line in lines if not line.startswith(("#", "^")))
