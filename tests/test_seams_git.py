"""The seams of git (issue 26, items 2, 3 and 7): what a sandboxed agent writes in its admin dir, its objects and
its ref folder is data for the outside, never a path or a target. Each test is the attack as the issue writes it,
with real bubblewrap, real git and the real CLI; each failed on main before the quarantine and the agent's own
ref folder (core/agent_git.py) and the sandboxed git of core/worktree_git.py."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from daintree_tui.core.sandbox import BwrapSandbox
from tests.conftest import CLI, git
from tests.helpers.git_seams import ADMIN, COMMON, run_in_worktree

_OK, _WHY = BwrapSandbox().available()
pytestmark = pytest.mark.skipif(not _OK, reason=f"bubblewrap cannot run here: {_WHY}")


@pytest.mark.parametrize("strategy", ["commit", "rebase"])
def test_a_link_in_the_admin_dir_is_never_written_through_by_a_commit_or_a_merge(
        repo: Path, sandbox_env: Path, strategy: str) -> None:
    """`logs/HEAD -> ~/.bashrc` and `COMMIT_EDITMSG -> ~/.ssh/authorized_keys`, then a commit asked for (the user's
    `worktree commit`, which an inbox request replays) or a rebase merge (whose `reset --keep` ran outside): git
    appended `... commit: ; echo PWNED > $HOME/pwned #` to the user's .bashrc and replaced authorized_keys with
    the agent's message. Now that git runs inside the worktree's sandbox, where both files are read-only."""
    bashrc = sandbox_env / ".bashrc"
    bashrc.write_text("# the user's\n")
    keys = sandbox_env / ".ssh" / "authorized_keys"
    keys.parent.mkdir()
    keys.write_text("ssh-ed25519 AAAA the-users-key\n")
    cli = CLI(repo)
    cli.ok("worktree", "create", "a1")
    plant = f"ln -sf {bashrc} {ADMIN}/logs/HEAD && ln -sf {keys} {ADMIN}/COMMIT_EDITMSG"
    if strategy == "commit":
        run_in_worktree(cli, "a1", f"{plant} && echo work > work.txt")
        cli.ok("worktree", "commit", "a1", "-m", "; echo PWNED > $HOME/pwned #\nssh-rsa AAAA the-agents-key", "--all")
    else:
        run_in_worktree(cli, "a1",
                        f"echo work > work.txt && git add work.txt && git commit -qm 'agent work' && {plant}")
        (repo / "main.txt").write_text("main moves on\n")
        git(repo, "add", "main.txt")
        git(repo, "commit", "-q", "-m", "main moves")
        cli.ok("worktree", "merge", "a1", "--strategy", "rebase")
        assert (repo / "work.txt").read_text() == "work\n"
    assert bashrc.read_text() == "# the user's\n"
    assert keys.read_text() == "ssh-ed25519 AAAA the-users-key\n"
    assert not (sandbox_env / "pwned").exists()
    assert git(repo, "show", "wt/a1:work.txt") == "work\n"  # the work itself landed


def test_fan_out_links_in_the_object_store_never_catch_the_users_objects(repo: Path, sandbox_env: Path) -> None:
    """`objects/00..ff` made links into the agent's worktree: every object the user's git wrote afterwards landed
    there, the agent rewrote the user's blob, and the user's next commit held the agent's content. Inside, the
    shared store is read-only now; `objects/` is the agent's quarantine, and a link there is refused."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "a1")
    out = run_in_worktree(cli, "a1", f'cd {COMMON}/objects && for d in 00 0a 5f c6 ff; do rm -rf "$d"; '
                                     'mkdir -p "$PWD/../../.worktrees/a1/loot" 2>/dev/null; '
                                     'ln -s "$OLDPWD/loot" "$d" && echo linked; done; '
                                     "touch /run/daintree/objects/pack/x 2>/dev/null && echo shared-writable; true")
    assert "linked" in out and "shared-writable" not in out
    shared = repo / ".git" / "objects"
    assert not any(p.is_symlink() for p in shared.iterdir())
    (repo / "app.py").write_text("print('the user')\n")
    git(repo, "add", "app.py")
    git(repo, "commit", "-q", "-m", "the user's work")
    # The agent rewrites every object file it can reach in its worktree, then anything runs again.
    run_in_worktree(cli, "a1", 'find . -path ./.git -prune -o -type f -print | while read f; do chmod u+w "$f"; '
                               "printf 'x' > \"$f\"; done; true")
    cli.ok("worktree", "list")
    assert git(repo, "show", "HEAD:app.py") == "print('the user')\n"
    assert git(repo, "fsck", "--no-dangling") == ""
    assert not any(p.is_symlink() for p in shared.iterdir())


def test_only_objects_that_match_their_names_join_the_store(repo: Path, sandbox_env: Path) -> None:
    """What an agent writes as an object comes in only through the check: a forged object named after the user's
    uncommitted file, a link, a FIFO, bad zlib; its genuine objects (its commit) do come in."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "a1")
    (repo / "app.py").write_text("print('the user')\n")  # changed, not committed yet
    oid = git(repo, "hash-object", "app.py").strip()
    evil = b"print('the agent')\n"
    forged = zlib.compress(b"blob %d\0" % len(evil) + evil)
    quarantine = repo / ".worktrees" / ".agent-git" / "a1" / "objects"
    payload = repo / ".worktrees" / "a1" / "payload"
    payload.write_bytes(forged)
    out = run_in_worktree(cli, "a1", f'O={COMMON}/objects; mkdir -p "$O/{oid[:2]}" "$O/ab" "$O/cd" "$O/ef" && '
                               f'cp payload "$O/{oid[:2]}/{oid[2:]}" && ln -s /etc/passwd "$O/ab/{"1" * 38}" && '
                               f'mkfifo "$O/cd/{"2" * 38}" && printf garbage > "$O/ef/{"3" * 38}" && rm payload && '
                               "echo own > own.txt && git add own.txt && git commit -qm own && echo committed")
    assert "committed" in out  # every plant was written, in its quarantine (brought in as `run` returned)
    cli.ok("worktree", "list")  # the outside brings it in
    shared = repo / ".git" / "objects"
    assert not (shared / oid[:2] / oid[2:]).exists()
    assert not any((shared / d / n).exists() for d, n in (("ab", "1" * 38), ("cd", "2" * 38), ("ef", "3" * 38)))
    assert not any(p.is_file() for p in quarantine.rglob("*") if p.parent.name not in ("info", "pack"))
    assert git(repo, "show", "wt/a1:own.txt") == "own\n"  # its genuine commit came in, and the branch with it
    git(repo, "add", "app.py")
    assert git(repo, "cat-file", "-p", ":app.py") == "print('the user')\n"


def test_a_planted_ref_lock_or_folder_blocks_no_other_worktree(repo: Path, sandbox_env: Path) -> None:
    """`refs/heads/wt/b.lock` (a plain file made by a) left b unable to commit, inside or outside ("git -c failed:
    remove the file manually"), and a folder `refs/heads/wt/c/` blocked creating c. What a plants now lands in its
    own ref folder, seen by nobody else."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "a")
    cli.ok("worktree", "create", "b")
    run_in_worktree(cli, "a", f'R={COMMON}/refs/heads/wt; echo x > "$R/b.lock"; mkdir -p "$R/c/x"; '
                              f'echo 0000000000000000000000000000000000000000 > "$R/b"; true')
    assert not (repo / ".git" / "refs" / "heads" / "wt" / "b.lock").exists()
    assert not (repo / ".git" / "refs" / "heads" / "wt" / "c").exists()
    main = git(repo, "rev-parse", "main").strip()
    assert git(repo, "rev-parse", "wt/b").strip() == main
    run_in_worktree(cli, "b", "echo inside > i.txt && git add i.txt && git commit -qm inside")
    (repo / ".worktrees" / "b" / "o.txt").write_text("outside\n")
    cli.ok("worktree", "commit", "b", "-m", "outside", "--all")
    assert git(repo, "log", "--format=%s", "wt/b").split() == ["outside", "inside", *git(
        repo, "log", "--format=%s", "main").split()]
    cli.ok("worktree", "create", "c")
    assert git(repo, "rev-parse", "wt/c").strip() == main


def test_an_agent_moves_only_its_own_branch_and_only_to_whole_commits(repo: Path, sandbox_env: Path) -> None:
    """The agent's ref file is the one ref it can move; the outside takes its value only when the commit and all
    it reaches came in through the check, and never over a move the user made meanwhile."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "a")
    # A commit whose tree was never written: the branch must not point at it.
    run_in_worktree(cli, "a", f'echo {"e" * 40} > {COMMON}/refs/heads/wt/a; true')
    cli.ok("worktree", "list")
    main = git(repo, "rev-parse", "main").strip()
    assert git(repo, "rev-parse", "wt/a").strip() == main
    # The user moves the branch; the agent's next view is the user's value.
    (repo / "u.txt").write_text("user\n")
    git(repo, "add", "u.txt")
    git(repo, "commit", "-q", "-m", "user")
    git(repo, "update-ref", "refs/heads/wt/a", "main")
    out = run_in_worktree(cli, "a", "git rev-parse HEAD")
    assert out.strip() == git(repo, "rev-parse", "main").strip()


def test_a_commit_made_by_run_is_on_its_branch_when_run_returns(repo: Path, sandbox_env: Path) -> None:
    """Found by a new user's trial: `worktree run` returned 0 after a commit, and `git log wt/NAME` in the primary
    still showed the old tip until the next daintree command."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "r1")
    run_in_worktree(cli, "r1", "echo r > r.txt && git add r.txt && git commit -qm 'from run'")
    assert git(repo, "log", "-1", "--format=%s", "wt/r1").strip() == "from run"


def test_a_commit_the_agent_makes_as_a_look_starts_stays_on_its_branch(
        repo: Path, sandbox_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen in full parallel runs (the bake-off view test, under load): the dashboard's look at a new worktree (a
    confined `git status` for its facts) starts a sandbox, which brings in what the agent's git wrote and then
    gives the agent its branch. An agent committing between the two was given the old branch back over its
    commit, which left its branch for good (its reflog alone kept it). Here the commit lands in that moment."""
    from daintree_tui.core import agent_git
    from daintree_tui.core.index import Index, find
    from daintree_tui.core.project import Project
    from daintree_tui.core.worktree_git import WorktreeGit

    cli = CLI(repo)
    cli.ok("worktree", "create", "a")
    with monkeypatch.context() as patched:
        # No bring-in: the agent's commit is one its worktree's next look has not seen when it starts.
        patched.setattr(agent_git, "bring_in", lambda *args, **kwargs: None)
        run_in_worktree(cli, "a", "echo a > a.txt && git add a.txt && git commit -qm 'the agent'")
        project = Project.discover(repo)
        entry = find(Index(project).load(), "a")
        assert entry is not None
        WorktreeGit(project, entry).dirty_files()  # the look, as the dashboard's facts take it
    cli.ok("worktree", "list")
    assert git(repo, "log", "-1", "--format=%s", "wt/a").strip() == "the agent"
    assert run_in_worktree(cli, "a", "git log -1 --format=%s").strip() == "the agent"


def test_one_worktree_prepared_from_two_threads_at_once_fails_neither(repo: Path, tmp_path: Path) -> None:
    """Seen as a toast in a snapshot (`reconcile and load: FileNotFoundError ... 'alternates.<pid>.daintree-tmp'
    -> 'alternates'`): the dashboard's start-up reconcile and its git facts prepared a new worktree's sandbox
    folders at the same moment, and one thread removed the other's temporary file before its rename."""
    import threading

    from daintree_tui.core import agent_git

    git(repo, "branch", "wt/a")
    errors: list[BaseException] = []
    for round_ in range(20):
        paths = agent_git.AgentGit(tmp_path / f"agent-git-{round_}")
        start = threading.Barrier(6)

        def prepare(paths: agent_git.AgentGit = paths, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                agent_git.prepare(repo / ".git", "wt/a", paths, "a")
            except BaseException as exc:  # collected for the assertion
                errors.append(exc)

        threads = [threading.Thread(target=prepare) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert (paths.objects / "info" / "alternates").read_text() == f"{agent_git.SHARED_OBJECTS_MOUNT}\n"
    assert errors == []
