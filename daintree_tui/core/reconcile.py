"""Reconcile tasks, the index and git after a crash (`doctor`, `doctor --fix`, every dashboard start)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from daintree_tui.core import admin_dirs, limits, ownership
from daintree_tui.core import git as g
from daintree_tui.core.errors import OperationError
from daintree_tui.core.fs_safe import replace_file_in, small_text
from daintree_tui.core.index import find
from daintree_tui.core.log import suppressed
from daintree_tui.core.models import LIVE, TaskStatus, WorktreeEntry, WorktreeStatus
from daintree_tui.core.ports import lease_block
from daintree_tui.core.project import Project
from daintree_tui.core.sandbox import AGENT_GIT_DIR, bring_in
from daintree_tui.core.store import read_json, remove_tree, write_json
from daintree_tui.core.tasks import TaskService
from daintree_tui.core.worktree_git import WorktreeGit
from daintree_tui.core.worktrees import WorktreeService


class Reconciler:
    """Finds disagreements between tasks, index and git; with `fix`, repairs each and logs `reconcile.fixed`."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.worktrees = WorktreeService(project)
        self.tasks = TaskService(project)
        self.findings: list[str] = []
        self.fix = False

    def _found(self, what: str) -> bool:
        """Record a finding; returns whether to repair it now."""
        self.findings.append(what)
        if self.fix:
            self.project.events.append("reconcile.fixed", fix=what)
        return self.fix

    def run(self, fix: bool) -> list[str]:
        self.fix = fix
        self.findings = []
        project = self.project
        self._check_tasks()
        if not project.is_git or not (project.state_dir.exists() or project.tasks_dir.exists()):
            return self.findings
        with project.lock.hold():
            entries = self.worktrees.index.load(heal=fix)
            if self.worktrees.index.recovered:
                self._found(self.worktrees.index.recovered)
            # First: every check below asks git, and git believes what each admin dir's `gitdir` says.
            self.findings += admin_dirs.guard(project, entries, fix=fix, quiet=True)
            self._check_journals(entries)
            if fix:
                self._bring_in(entries)
            self._check_admin_objects(entries)
            self._prune(entries)
            self._check_dirs(entries)
            self._adopt_orphans(entries)
            self._check_ports(entries)
            if fix:
                self.worktrees.index.save(entries)
            self._check_bindings(entries)
            self._check_leftovers(entries)
        return self.findings

    def _check_tasks(self) -> None:
        for task_id in self.tasks.ids_on_disk():
            path = self.tasks.path(task_id)
            data, problem = read_json(path, "task file")
            if problem and data is not None and self._found(problem):
                write_json(path, data)

    def _check_journals(self, entries: list[WorktreeEntry]) -> None:
        """Finish or undo what a journal says was in flight. A journal is data (it may have come with a clone):
        only its name and op are used, every path is derived from the name and checked against git."""
        for journal in self.worktrees.journals():
            name, op = journal["name"], journal["op"]
            entry = find(entries, name)
            if op == "create":
                self._undo_create(journal, entry)
            elif entry is not None and entry.live:
                self._finish_remove(entries, entry, bool(journal.get("complete_task") is True))
            elif self._found(f"remove of {name} had finished; cleared its journal"):
                self.worktrees.journal_clear(name)

    def _undo_create(self, journal: dict[str, object], entry: WorktreeEntry | None) -> None:
        name = str(journal["name"])
        root, project = self.project.root, self.project
        path = project.worktree_path(name)
        if entry is not None and entry.live:
            if self._found(f"create of {name} was interrupted after it was recorded; kept it"):
                self.worktrees.journal_clear(name)
            return
        if not self._found(f"create of {name} was interrupted; rolled it back"):
            return
        if path.exists() or path.is_symlink():
            problem = ownership.ownership_problem(project, path)
            reasons = [] if problem else ownership.work_at_risk(project, path)
            if problem or reasons:
                self._found(f"left {path} in place: {problem or '; '.join(reasons)}")
            else:
                self.worktrees.discard_worktree(path)
        branch = self.worktrees.branch_for(name)
        tip = g.rev_parse_commit(root, branch) if g.branch_exists(root, branch) else None
        # Only a branch still at the base it was made from, whose commits some other branch holds, may go.
        if (tip and tip == journal.get("base_commit") and journal.get("reset_branch") is not True
                and not (path.exists() or path.is_symlink()) and ownership.branch_safe_to_delete(root, branch)):
            g.git(root, "branch", "-D", branch, check=False)
        remove_tree(project.tmpdir_for(name))
        remove_tree(project.sandbox_home_for(name))
        self.worktrees.journal_clear(name)

    def _finish_remove(self, entries: list[WorktreeEntry], entry: WorktreeEntry, complete_task: bool) -> None:
        """An interrupted remove is finished only if the worktree is ours and nothing in it would be lost;
        otherwise it is rolled back: the worktree stays, live, and the journal goes."""
        name, path = entry.name, Path(entry.path)
        problem = ownership.ownership_problem(self.project, path) if path.exists() or path.is_symlink() else None
        reasons = [problem] if problem else self.worktrees.work_at_risk(entry)
        if reasons:
            if self._found(f"remove of {name} was interrupted, but {'; '.join(reasons)}: rolled the remove back "
                           "(the worktree stays)"):
                self.worktrees.journal_clear(name)
            return
        if self._found(f"remove of {name} was interrupted; finished it"):
            self.worktrees.finish_remove(entries, entry, complete_task)

    def _prune(self, entries: list[WorktreeEntry]) -> None:
        report = admin_dirs.prune(self.project, entries, dry_run=True, fix=self.fix, quiet=True)
        self.findings += [f for f in report.findings if f not in self.findings]
        if report.stale and self._found(f"git has stale worktree records: {report.stale[0]}"):
            admin_dirs.prune(self.project, entries, quiet=True)

    def _check_dirs(self, entries: list[WorktreeEntry]) -> None:
        listed = ownership.linked_worktrees(self.project, repair=self.fix)
        if not self.fix:  # what the fix's repair of the admin dirs makes git list again
            listed += [own.path for own in admin_dirs.owned_admin_dirs(self.project, entries)]
        for entry in entries:
            path = Path(entry.path)
            problem = ownership.ownership_problem(self.project, path, listed) if entry.live and path.is_dir() else None
            # The entries are changed in memory even in a report (only `fix` saves them), so the checks after
            # this one report what `--fix` would find after this fix, not what it makes moot.
            if problem:
                self._found(f"index entry {entry.name} is not one of our worktrees ({problem}); dropped it from "
                            "the live list, deleted nothing")
                entry.status, entry.removed_at, entry.ports = WorktreeStatus.REMOVED, time.time(), []
                continue
            gone = entry.live and not path.is_dir()
            if gone:
                fixing = self._found(f"worktree {entry.name}: its directory is gone; marked removed")
                released = entry.ports
                entry.status, entry.removed_at, entry.ports = WorktreeStatus.REMOVED, time.time(), []
                if released and fixing:
                    self.project.events.append("port.released", worktree=entry.brief(), ports=released,
                                               task=self.tasks.brief_of(entry.task_id))

    def _adopt_orphans(self, entries: list[WorktreeEntry]) -> None:
        live_paths = {Path(e.path) for e in entries if e.live}
        listed = ownership.linked_worktrees(self.project, repair=self.fix)
        for wt in self.worktrees.index.ours_in_git(repair=self.fix):
            if wt.path in live_paths or ownership.ownership_problem(self.project, wt.path, listed):
                continue
            self._found(f"git worktree {wt.path} is not in the index; adopted it as {wt.path.name}")
            entry = self.worktrees.index.entry_from_git(wt)  # in memory in a report too (see _check_dirs)
            old = find(entries, entry.name)
            if old is not None:
                entries.remove(old)
            entries.append(entry)

    def _check_ports(self, entries: list[WorktreeEntry]) -> None:
        cfg = self.project.config
        seen: set[int] = set()
        for entry in entries:
            if not entry.live:
                continue
            clash = not entry.ports or any(p in seen for p in entry.ports)
            if clash:
                fixing = self._found(f"worktree {entry.name}: ports missing or shared; leased a new block")
                entry.ports = lease_block(seen | {p for e in entries if e.live for p in e.ports
                                                  if e is not entry}, cfg.ports_range, cfg.ports_per_worktree)
                if fixing:
                    self.project.events.append("port.assigned", worktree=entry.brief(), ports=entry.ports,
                                               task=self.tasks.brief_of(entry.task_id))
            seen.update(entry.ports)

    def _check_bindings(self, entries: list[WorktreeEntry]) -> None:
        live = {e.name: e for e in entries if e.status in LIVE}
        tasks = {t.id: t for t in self.tasks.list()}
        for task in tasks.values():
            stale = task.worktree and task.worktree not in live
            if stale and self._found(f"task {task.id} is bound to {task.worktree!r}, which is not live; unbound it"):
                self.tasks.unbind(task.id)
        changed = False
        for entry in live.values():
            if entry.task_id is None:
                continue
            bound_task = tasks.get(entry.task_id)
            if bound_task is None:
                if self._found(f"worktree {entry.name} names task {entry.task_id}, which does not exist; unlinked"):
                    entry.task_id, changed = None, True
                continue
            unbound = bound_task.worktree != entry.name and (not bound_task.worktree or bound_task.worktree not in live)
            if unbound and self._found(f"task {bound_task.id} was not bound to its worktree {entry.name}; bound it"):
                self.tasks.bind(bound_task.id, entry.name)
        for task in tasks.values():
            bound = live.get(task.worktree)
            missing = bound is not None and bound.task_id is None and task.status != TaskStatus.COMPLETED
            if missing and bound and self._found(f"worktree {bound.name} did not record task {task.id}; linked it"):
                bound.task_id, changed = task.id, True
        if changed and self.fix:
            self.worktrees.index.save(entries)

    def _bring_in(self, entries: list[WorktreeEntry]) -> None:
        """What each live worktree's sandboxed git left in its quarantine and ref folder, checked, into the
        repository (core/agent_git.py): a commit made while no daintree looked is on its branch after a fix."""
        for entry in entries:
            if entry.live:
                with suppressed(OperationError, OSError):
                    bring_in(self.project, entry)

    def _check_admin_objects(self, entries: list[WorktreeEntry]) -> None:
        """A sandboxed worktree's HEAD and index name only objects the repository has. Both are its agent's to
        write, and the user's own `git gc` keeps every object they name: a detached HEAD at a commit that exists
        nowhere, or an index entry for such a blob (`update-index --cacheinfo`, `read-tree` of a tree made with
        `mktree --missing`), had every `git gc` of the repository fail ("fatal: bad object", "unable to read").
        Asked inside the worktree's sandbox (which sees its quarantine, brought in first with --fix); the fix
        puts HEAD back on the worktree's branch and the index back to HEAD (its files stay as they are)."""
        common = self.project.common_dir
        if common is None:
            return
        for entry in entries:
            path = Path(entry.path)
            admin = admin_dirs.admin_dir_named_by(common, path) if entry.live and path.is_dir() else None
            if admin is None:
                continue
            try:
                git = WorktreeGit(self.project, entry)
                if not git.confined:
                    continue
                head = small_text(admin / "HEAD") or ""
                detached = [] if head.startswith("ref: ") else [head or "HEAD"]
                staged = git("ls-files", "-s", "-z", check=False).stdout
                blobs = sorted({line.split(" ")[1] for line in staged.split("\0")
                                if line.count(" ") >= 2 and not line.startswith("160000")})
                if not detached and not blobs:
                    continue
                found = git("cat-file", "--batch-check", input="\n".join(detached + blobs) + "\n",
                            check=False).stdout
            except OperationError:
                continue
            missing = {line.split()[0] for line in found.splitlines() if line.endswith(" missing")}
            bad_head = bool(detached) and detached[0] in missing
            bad_index = sorted(missing - set(detached))
            if not bad_head and not bad_index:
                continue
            named = ", ".join(([f"HEAD {detached[0][:12]}"] if bad_head else []) + [b[:12] for b in bad_index[:3]])
            parts = (["HEAD"] if bad_head else []) + (["index"] if bad_index else [])
            fixes = (["HEAD back on its branch"] if bad_head else []) + \
                (["the index back to HEAD (its files stay)"] if bad_index else [])
            if not self._found(f"worktree {entry.name}: its {' and '.join(parts)} name objects the repository does "
                               f"not have ({named}): git gc fails on them; put {' and '.join(fixes)}"):
                continue
            with suppressed(OSError, OperationError):
                if bad_head:
                    replace_file_in(admin, "HEAD", f"ref: refs/heads/{entry.branch}\n")
                if bad_index:
                    git("read-tree", "HEAD", check=False)

    def _check_cgroups(self) -> None:
        """The groups of limited commands that a kill -9 left (empty, so nothing of anyone's runs in them); any
        project's, since the groups are the machine's."""
        # DAINTREE_SWEEP_AGE_S: how old an empty group must be (30 s: a starting command joins within ms); tests
        # lower it rather than wait.
        left = limits.leftovers(min_age_s=float(os.environ.get("DAINTREE_SWEEP_AGE_S", "30")))
        if left and self._found(f"{len(left)} empty cgroup(s) left by killed commands "
                                f"({', '.join(g.name for g in left[:5])}); removed them"):
            backend = limits.choose_backend()[0]
            if backend is not None:
                for group in left:
                    limits.remove(backend, group)

    def _check_leftovers(self, entries: list[WorktreeEntry]) -> None:
        run = self.project.state_dir / ".run"
        # A launch file (a session's environment, secrets included) that no pane read within a minute never will.
        stale = [p for p in run.glob("launch-*.json") if _age(p) > 60] if run.is_dir() else []
        if stale and self._found(f"{len(stale)} unread session launch file(s) in .run; deleted them"):
            for path in stale:
                path.unlink(missing_ok=True)
        self._check_cgroups()
        trash = self.project.trash_dir
        if trash.is_dir() and any(trash.iterdir()) and self._found("an interrupted delete left files in .trash"):
            self.worktrees.empty_trash()
        live = {e.name for e in entries if e.live}
        tmp_root = self.project.tmp_root
        if tmp_root.is_dir():
            for tmp in tmp_root.iterdir():
                if tmp.name.startswith(".merge-"):
                    if self._found(f"an interrupted merge left {tmp.name}; removed it (no branch was changed)"):
                        g.git(self.project.root, "worktree", "remove", "--force", "--force", str(tmp), check=False)
                        remove_tree(tmp)
                        admin_dirs.prune(self.project, entries, quiet=True)
                elif tmp.name not in live and self._found(f"temp dir of removed worktree {tmp.name}; deleted it"):
                    remove_tree(tmp)
        self._check_train(entries)
        homes = self.project.sandbox_homes
        if homes.is_dir() and not homes.is_symlink():
            for home in homes.iterdir():
                if home.name not in live and self._found(f"sandbox caches of removed worktree {home.name}; "
                                                         "deleted them"):
                    remove_tree(home)
        agent_git = self.project.state_dir / AGENT_GIT_DIR
        if agent_git.is_dir() and not agent_git.is_symlink():
            for folder in agent_git.iterdir():
                if folder.name not in live and self._found(f"git quarantine of removed worktree {folder.name}; "
                                                           "deleted it"):
                    remove_tree(folder)

    def _check_train(self, entries: list[WorktreeEntry]) -> None:
        """A merge train killed mid-step leaves its candidate worktrees in `.train/` (the target moved only to a
        tested commit, if at all): removed, unless a train is running now (it holds the train lock)."""
        train = self.project.train_root
        if not train.is_dir() or train.is_symlink() or not any(train.iterdir()):
            return
        try:
            with self.project.train_lock.hold():
                if not self._found(f"an interrupted merge train left {len(list(train.iterdir()))} temporary "
                                   "worktree(s) in .train; removed them"):
                    return
                for tmp in train.iterdir():
                    # No git runs in them: the gate ran the worktree's code there. The folder goes, then git's record.
                    if tmp.is_symlink() or not tmp.is_dir():
                        tmp.unlink(missing_ok=True)
                    else:
                        remove_tree(tmp)
                admin_dirs.prune(self.project, entries, quiet=True)
        except OperationError:
            pass  # a train is running: those are its own, in use


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0  # gone already: its pane read it


def reconcile(project: Project, fix: bool) -> list[str]:
    """Report (and with `fix`, repair) every disagreement between tasks, index and git."""
    return Reconciler(project).run(fix)
