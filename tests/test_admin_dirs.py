"""Git's admin dirs of linked worktrees (`.git/worktrees/<id>/`) against what an agent writes in its own (issue 26,
item 4): a forged `gitdir` (worktree a's naming `.worktrees/b/.git`) had every `git worktree prune` the outside
runs (`doctor --fix`, each dashboard start, `gc`, after each merge and remove) delete b's record as a duplicate,
and b was no longer a git repository. Real bubblewrap, real git, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from daintree_tui.core.sandbox import BwrapSandbox
from tests.conftest import CLI, git

_OK, _WHY = BwrapSandbox().available()
pytestmark = pytest.mark.skipif(not _OK, reason=f"bubblewrap cannot run here: {_WHY}")

# Runs in worktree a's sandbox: a's record names b's worktree (the reproduction).
FORGE = 'printf "%s\\n" "$TARGET" > "$(git rev-parse --absolute-git-dir)/gitdir"'


def _admin(repo: Path, name: str) -> Path:
    return repo / ".git" / "worktrees" / name


def _worktree(repo: Path, name: str) -> Path:
    return repo / ".worktrees" / name


def _with_work(cli: CLI, repo: Path, name: str) -> str:
    """A worktree with a commit of its own (so a reflog with two lines); its tip."""
    cli.ok("worktree", "create", name)
    cli.ok("worktree", "run", name, "--", "sh", "-c", f"echo {name} > {name}.txt && git add {name}.txt && "
           f"git commit -qm '{name} work'")
    cli.ok("doctor", "--fix")  # brings the commit in from the sandbox's quarantine onto the branch
    return git(_worktree(repo, name), "rev-parse", "HEAD").strip()


def _assert_intact(repo: Path, name: str, tip: str) -> None:
    """Still a git repository with its index, HEAD and reflog, and its record names it."""
    wt, admin = _worktree(repo, name), _admin(repo, name)
    for part in ("index", "HEAD", "logs/HEAD", "gitdir"):
        assert (admin / part).is_file() and not (admin / part).is_symlink(), f"{name} lost {part}"
    assert (admin / "gitdir").read_text() == f"{wt}/.git\n"
    assert git(wt, "rev-parse", "--absolute-git-dir").strip() == str(admin)
    assert git(wt, "rev-parse", "HEAD").strip() == tip
    assert git(wt, "symbolic-ref", "HEAD").strip() == f"refs/heads/wt/{name}"
    assert len(git(wt, "reflog", "HEAD").splitlines()) >= 2
    assert not git(wt, "status", "--porcelain")


def _forge(repo: Path, name: str, text: str) -> None:
    """What a's agent could write before `gitdir` was read-only inside its sandbox (a session an older daintree
    started still can): the same bytes, put in place from outside."""
    gitdir = _admin(repo, name) / "gitdir"
    gitdir.unlink()
    gitdir.write_text(text)


def test_the_sandbox_no_longer_lets_an_agent_rewrite_its_gitdir(repo: Path, sandbox_env: Path) -> None:
    """The issue's reproduction as written: from inside a's sandbox, a's `gitdir` rewritten to name b; every way
    to put other bytes there is refused now (write, replace, link, delete, FIFO), and b survives every prune."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "a")
    tip = _with_work(cli, repo, "b")
    target = f"{_worktree(repo, 'b')}/.git"
    gitdir = _admin(repo, "a") / "gitdir"
    for script in (FORGE, 'd=$(git rev-parse --absolute-git-dir); printf "%s\\n" "$TARGET" > "$d/x" && '
                          'mv -f "$d/x" "$d/gitdir"',
                   'ln -sf "$TARGET" "$(git rev-parse --absolute-git-dir)/gitdir"',
                   'rm -f "$(git rev-parse --absolute-git-dir)/gitdir"',
                   'd=$(git rev-parse --absolute-git-dir); rm -f "$d/gitdir"; mkfifo "$d/gitdir"'):
        proc = cli("worktree", "run", "a", "--", "env", f"TARGET={target}", "sh", "-c", script)
        assert proc.returncode != 0, (script, proc.stdout, proc.stderr)
        assert gitdir.is_file() and not gitdir.is_symlink()
        assert gitdir.read_text() == f"{_worktree(repo, 'a')}/.git\n", script
    cli.ok("doctor", "--fix")
    _assert_intact(repo, "b", tip)


def _prune_by(cli: CLI, repo: Path, how: str) -> None:
    if how == "doctor":
        cli.ok("doctor", "--fix")
    elif how == "merge":  # of a third worktree: the merge prunes its temporary worktree's record
        _with_work(cli, repo, "c")
        cli.ok("worktree", "merge", "c")
    elif how == "remove":
        cli.ok("worktree", "create", "c")
        cli.ok("worktree", "remove", "c")
    elif how == "gc":
        cli.ok("gc")
    else:  # the dashboard's start reconciles as doctor --fix does; the user's create reads every record too
        cli.ok("worktree", "create", "c")


@pytest.mark.parametrize("how", ["doctor", "merge", "remove", "gc", "create"])
def test_a_forged_gitdir_never_costs_another_worktree_its_record(repo: Path, sandbox_env: Path,
                                                                  how: str) -> None:
    cli = CLI(repo)
    cli.ok("worktree", "create", "a")
    tip = _with_work(cli, repo, "b")
    _forge(repo, "a", f"{_worktree(repo, 'b')}/.git\n")
    # What git alone does with it: b is the "duplicate" (proof that the forgery is the issue's).
    assert "worktrees/b: duplicate entry" in subprocess.run(
        ["git", "-C", str(repo), "worktree", "prune", "--dry-run", "--verbose"], capture_output=True,
        text=True).stderr
    _prune_by(cli, repo, how)
    _assert_intact(repo, "b", tip)
    # a's record is repaired from the index, said as a reconcile fix, and a works (its sandbox finds its record).
    assert (_admin(repo, "a") / "gitdir").read_text() == f"{_worktree(repo, 'a')}/.git\n"
    events = [json.loads(line) for line in (repo / ".worktrees" / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "reconcile.fixed" and "git's record" in e["fix"] and e["worktree"]["name"] == "a"
               for e in events)
    cli.ok("worktree", "run", "a", "--", "git", "status")
    assert {w["name"] for w in cli.json("worktree", "list")} >= {"a", "b"}
    assert not (_admin(repo, "b") / "locked").exists()  # the prune's lock went with it


def test_a_linked_gitdir_is_replaced_not_written_through(repo: Path, sandbox_env: Path, tmp_path: Path) -> None:
    user_file = tmp_path / "notes.txt"
    user_file.write_text("the user's own file\n")
    cli = CLI(repo)
    cli.ok("worktree", "create", "a")
    tip = _with_work(cli, repo, "b")
    gitdir = _admin(repo, "a") / "gitdir"
    gitdir.unlink()
    gitdir.symlink_to(user_file)
    proc = cli.ok("doctor", "--fix")
    assert "is a symbolic link" in proc.stdout
    assert user_file.read_text() == "the user's own file\n"
    assert not gitdir.is_symlink() and gitdir.read_text() == f"{_worktree(repo, 'a')}/.git\n"
    _assert_intact(repo, "b", tip)
    cli.ok("worktree", "run", "a", "--", "git", "status")


@pytest.mark.parametrize("form", ["fifo", "huge", "folder", "missing", "outside", "relative", "primary"])
def test_every_bad_gitdir_is_rewritten_from_the_index(repo: Path, sandbox_env: Path, tmp_path: Path,
                                                      form: str) -> None:
    """A FIFO hung `git worktree prune` (and doctor with it); a huge file was read whole; a path outside or the
    primary's `.git` made git list a there (or prune a as the primary's duplicate)."""
    setup, cli = CLI(repo), CLI(repo, subprocess=True)  # after the damage, a hang shows as a timeout
    setup.ok("worktree", "create", "a")
    tip = _with_work(setup, repo, "b")
    gitdir = _admin(repo, "a") / "gitdir"
    gitdir.unlink()
    if form == "fifo":
        os.mkfifo(gitdir)
    elif form == "huge":
        with gitdir.open("wb") as fh:
            fh.truncate(200 * 1024 * 1024)
    elif form == "folder":
        (gitdir / "x").mkdir(parents=True)
    elif form != "missing":
        text = {"outside": f"{tmp_path}/elsewhere/.git", "relative": "../../../.worktrees/b/.git",
                "primary": str(repo / ".git")}[form]
        gitdir.write_text(text + "\n")
    proc = cli("doctor", "--fix", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert gitdir.is_file() and gitdir.read_text() == f"{_worktree(repo, 'a')}/.git\n"
    _assert_intact(repo, "b", tip)
    assert git(_worktree(repo, "a"), "rev-parse", "--absolute-git-dir").strip() == str(_admin(repo, "a"))
    again = cli("doctor", timeout=60)
    assert again.returncode == 0, again.stdout  # nothing left to find


def test_a_record_of_no_worktree_claiming_a_live_path_is_the_one_pruned(repo: Path, sandbox_env: Path) -> None:
    """An admin dir no index entry owns (made by hand here; sorted before b, so git keeps it and prunes b)."""
    cli = CLI(repo)
    tip = _with_work(cli, repo, "b")
    impostor = _admin(repo, "a-impostor")
    impostor.mkdir()
    (impostor / "HEAD").write_text(tip + "\n")
    (impostor / "commondir").write_text("../..\n")
    (impostor / "gitdir").write_text(f"{_worktree(repo, 'b')}/.git\n")
    cli.ok("doctor", "--fix")
    _assert_intact(repo, "b", tip)
    assert not impostor.exists()


def test_an_agents_lock_on_its_record_neither_hangs_a_listing_nor_outlives_its_remove(
        repo: Path, sandbox_env: Path) -> None:
    cli = CLI(repo, subprocess=True)
    cli.ok("worktree", "create", "a")
    # A lock the agent writes from inside (its record is writable there): kept the record after the remove,
    # and the next create of the name was refused ("a missing but locked worktree").
    cli.ok("worktree", "run", "a", "--", "sh", "-c", 'echo mine > "$(git rev-parse --absolute-git-dir)/locked"')
    cli.ok("worktree", "remove", "a")
    assert not _admin(repo, "a").exists()
    cli.ok("worktree", "create", "a")
    # A FIFO there: `git worktree list` reads a lock's reason whole, and waited for a writer forever; a folder
    # made it die ("failed to read"), and every listing of ours with it.
    locked = _admin(repo, "a") / "locked"
    for how in ('mkfifo "$L"', 'mkdir -p "$L/x"'):
        proc = cli("worktree", "run", "a", "--", "sh", "-c", f'L="$(git rev-parse --absolute-git-dir)/locked"; {how}')
        assert proc.returncode == 0 and os.path.lexists(locked), proc.stderr
        listed = cli("worktree", "list", "--json", timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert not os.path.lexists(locked), how


def test_a_user_lock_stays_and_an_interrupted_prunes_lock_goes(repo: Path, sandbox_env: Path) -> None:
    from daintree_tui.core.admin_dirs import LOCK_MARK

    cli = CLI(repo)
    cli.ok("worktree", "create", "a")
    cli.ok("worktree", "create", "b")
    git(repo, "worktree", "lock", "--reason", "on a USB disk", str(_worktree(repo, "a")))
    (_admin(repo, "b") / "locked").write_text(f"{LOCK_MARK}999999999\n")  # no such process
    cli.ok("doctor", "--fix")
    assert (_admin(repo, "a") / "locked").read_text() == "on a USB disk\n"
    assert not (_admin(repo, "b") / "locked").exists()


def test_an_agent_that_deletes_its_head_gets_it_back_from_the_index(repo: Path, sandbox_env: Path) -> None:
    """With `gitdir` read-only inside, an agent that empties its record leaves a worktree without HEAD (`git fsck`
    of the whole repository then fails), not one git forgets: the index says which branch it was on."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "a")
    proc = cli("worktree", "run", "a", "--", "sh", "-c", 'rm -f "$(git rev-parse --absolute-git-dir)/HEAD"')
    assert proc.returncode == 0, proc.stderr
    assert not (_admin(repo, "a") / "HEAD").exists()
    assert subprocess.run(["git", "-C", str(repo), "fsck"], capture_output=True).returncode != 0
    cli.ok("doctor", "--fix")
    assert (_admin(repo, "a") / "HEAD").read_text() == "ref: refs/heads/wt/a\n"
    git(repo, "fsck")


def test_a_merge_never_runs_git_where_a_forged_record_says_the_target_is(repo: Path, sandbox_env: Path,
                                                                          tmp_path: Path) -> None:
    """The merge asks git where its target is checked out, and checks that checkout for uncommitted work there:
    a's record saying `release` is checked out at a repository of the agent's choosing had the user's git run
    that repository's config (a `core.fsmonitor` command) outside every sandbox."""
    mark = tmp_path / "fsmonitor-ran"
    evil = tmp_path / "evil"
    git(tmp_path, "init", "-q", str(evil))
    git(evil, "config", "core.fsmonitor", f"touch {mark}; false")
    git(repo, "branch", "release")
    cli = CLI(repo)
    cli.ok("worktree", "create", "a")
    _with_work(cli, repo, "c")
    proc = cli("worktree", "run", "a", "--", "sh", "-c",
               'echo "ref: refs/heads/release" > "$(git rev-parse --absolute-git-dir)/HEAD"')
    assert proc.returncode == 0, proc.stderr  # HEAD is the agent's to write
    _forge(repo, "a", f"{evil}/.git\n")
    cli("worktree", "merge", "c", "--into", "release")
    assert not mark.exists(), "the merge ran git in the repository a's record named"
    assert (_admin(repo, "a") / "gitdir").read_text() == f"{_worktree(repo, 'a')}/.git\n"


def test_a_record_found_by_name_alone_is_never_another_worktrees(repo: Path, sandbox_env: Path,
                                                                 tmp_path: Path) -> None:
    """A worktree whose `.git` file is gone is matched to a record by git's naming (`worktrees/<name>`); the user's
    own `git worktree add ../x` holds the record `x` (daintree's x then got `x1`), and it stays the user's."""
    mine = tmp_path / "x"
    git(repo, "worktree", "add", "-q", "-b", "mine", str(mine))
    cli = CLI(repo)
    cli.ok("worktree", "create", "x")
    assert git(_worktree(repo, "x"), "rev-parse", "--absolute-git-dir").strip() == str(_admin(repo, "x1"))
    (_worktree(repo, "x") / ".git").unlink()
    cli("doctor", "--fix")
    assert (_admin(repo, "x") / "gitdir").read_text() == f"{mine}/.git\n"
    assert git(mine, "rev-parse", "--abbrev-ref", "HEAD").strip() == "mine"


def test_every_prune_and_repair_goes_through_the_guard() -> None:
    """No module of ours asks git to prune or repair worktree records but the guard's: a new call would trust
    every admin dir again."""
    import ast
    import itertools

    package = Path(__file__).resolve().parent.parent / "daintree_tui"
    found = []
    for path in package.rglob("*.py"):
        if path.name == "admin_dirs.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                words = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if any(a == "worktree" and b in ("prune", "repair") for a, b in itertools.pairwise(words)):
                    found.append(f"{path.relative_to(package)}:{node.lineno}")
    assert not found, found
