"""A second attacker-minded pass over the seams of git (issue 26): a sandboxed agent tries to make the outside (the
user's git, `worktree commit`, `merge`, `list`, `doctor --fix`, the dashboard's poll) act on what it wrote. Each
test is one attack with real bubblewrap, real git and the real CLI, and failed before its fix."""

from __future__ import annotations

import hashlib
import os
import resource
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from daintree_tui.core.sandbox import BwrapSandbox
from tests.conftest import CLI, git
from tests.helpers.git_seams import ADMIN, COMMON, run_in_worktree

_OK, _WHY = BwrapSandbox().available()
pytestmark = pytest.mark.skipif(not _OK, reason=f"bubblewrap cannot run here: {_WHY}")


def _repository_is_whole(repo: Path) -> None:
    """What the user's own git says of the whole repository after the attack."""
    fsck = subprocess.run(["git", "-C", str(repo), "fsck", "--no-dangling"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    gc = subprocess.run(["git", "-C", str(repo), "gc", "--quiet"], capture_output=True, text=True)
    assert gc.returncode == 0 and "fatal" not in gc.stderr, gc.stderr


@pytest.mark.parametrize("forged", ["head", "gitdir"])
def test_an_agents_head_never_makes_its_worktree_the_checkout_a_merge_advances(
        repo: Path, sandbox_env: Path, forged: str) -> None:
    """The target (`develop`, a1's base) is checked out nowhere. Agent b writes its admin dir's HEAD as
    `ref: refs/heads/develop`, keeps its status clean with `assume-unchanged` and plants `.husky/post-merge`: a
    merge of a1 (which an agent asks for through its inbox) found develop "checked out" in b's worktree and ran
    `git merge --ff-only` there, outside b's sandbox, with the hooks of b's `.husky` (a relative core.hooksPath):
    b's script ran as the user. With b's `gitdir` also made the primary's `.git`, the primary was listed as
    holding develop, and the merge fast-forwarded the user's main instead."""
    mark = sandbox_env / "pwned-by-holder"
    (repo / ".husky").mkdir()
    (repo / ".husky" / "post-merge").write_text("#!/bin/sh\nexit 0\n")
    (repo / ".husky" / "post-merge").chmod(0o755)
    git(repo, "add", ".husky")
    git(repo, "commit", "-q", "-m", "husky")
    git(repo, "config", "core.hooksPath", ".husky")
    git(repo, "branch", "develop")
    main = git(repo, "rev-parse", "main").strip()
    cli = CLI(repo)
    cli.ok("worktree", "create", "a1", "--base", "develop")
    cli.ok("worktree", "create", "b")
    gitdir = f"echo {repo / '.git'} > {ADMIN}/gitdir; " if forged == "gitdir" else ""
    run_in_worktree(cli, "b", f"printf '#!/bin/sh\\ntouch {mark}\\n' > .husky/post-merge && "
                              "git update-index --assume-unchanged .husky/post-merge && "
                              f"echo 'ref: refs/heads/develop' > {ADMIN}/HEAD && {gitdir}git status --short")
    run_in_worktree(cli, "a1", "echo w > w.txt && git add w.txt && git commit -qm w")
    cli.ok("worktree", "merge", "a1")
    assert not mark.exists(), "b's hook ran outside its sandbox"
    assert git(repo, "rev-parse", "main").strip() == main
    assert git(repo, "rev-parse", "develop").strip() == git(repo, "rev-parse", "wt/a1").strip()


def test_a_merge_into_another_sandboxed_agents_own_branch_is_refused(repo: Path, sandbox_env: Path) -> None:
    """`--into wt/b`: b's checkout is b's agent's; git run there from outside follows its links and hooks."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "a1")
    cli.ok("worktree", "create", "b")
    run_in_worktree(cli, "a1", "echo w > w.txt && git add w.txt && git commit -qm w")
    before = git(repo, "rev-parse", "wt/b")
    proc = cli("worktree", "merge", "a1", "--into", "wt/b")
    assert proc.returncode == 1 and "worktree b's own branch" in proc.stderr, proc.stderr
    assert git(repo, "rev-parse", "wt/b") == before


def test_a_commit_never_names_a_tree_that_is_not_whole(repo: Path, sandbox_env: Path) -> None:
    """The agent writes a tree naming a blob that exists nowhere (`mktree --missing`) and reads it into its index
    (`read-tree`, which primes the index's cache of trees): the sandboxed `write-tree` answers with that tree
    without looking at a blob, the check takes the tree (its content is what its name says), and the commit made
    outside put wt/a1 on it: `git fsck` said missing blob and `git gc` failed, for the whole repository."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "a1")
    ghost = "e" * 40
    run_in_worktree(cli, "a1", f"T=$( (git ls-tree HEAD; printf '100644 blob {ghost}\\tghost.txt\\n') "
                               '| git mktree --missing) && git read-tree "$T" && test "$(git write-tree)" = "$T"')
    before = git(repo, "rev-parse", "wt/a1")
    proc = cli("worktree", "commit", "a1", "-m", "work")
    assert proc.returncode == 1 and "did not come through" in proc.stderr, proc.stdout + proc.stderr
    assert git(repo, "rev-parse", "wt/a1") == before
    assert git(repo, "fsck", "--no-dangling") == ""


# 1,500 levels (3,000 characters: within PATH_MAX) by one `mkdir -p`; a loop of 1,500 mkdir processes made them
# in 2 s of CPU per folder.
DEEP = 'mkdir -p "$(printf "d/%.0s" $(seq 1500))"'


def test_folders_too_deep_for_python_never_stop_remove_or_doctor(repo: Path, sandbox_env: Path) -> None:
    """Folders 1,500 levels deep (made in a second) in the agent's quarantine, its caches and its inbox: Python's
    recursive rmtree raised RecursionError out of `worktree remove` (the worktree already moved to the trash, its
    entry still active) and out of every `doctor --fix` after it, and out of the dashboard's poll."""
    from daintree_tui.core.project import Project
    from daintree_tui.services import Services
    from daintree_tui.services.inbox import process_inboxes

    cli = CLI(repo)
    cli.ok("worktree", "create", "a1")
    run_in_worktree(cli, "a1", f'(cd {COMMON}/objects/pack && {DEEP}) && (cd "$HOME/.cache" && {DEEP}) && '
                               f"(cd /run/daintree/inbox && {DEEP})")
    state = repo / ".worktrees"
    cli.ok("worktree", "remove", "a1", "--force")
    assert not (state / ".agent-git" / "a1").exists()
    assert cli.json("worktree", "list", "--all")[0]["status"] == "removed"
    process_inboxes(Services(Project.discover(repo)))
    assert not (state / ".inbox" / "a1").exists()
    cli.ok("doctor", "--fix")
    assert cli("doctor").returncode == 0


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _copy(offset: int, size: int) -> bytes:
    op, args = 0x80, bytearray()
    for i, byte in enumerate([(offset >> (8 * i)) & 0xFF for i in range(4)] +
                             [(size >> (8 * i)) & 0xFF for i in range(3)]):
        if byte:
            op |= 1 << i
            args.append(byte)
    return bytes([op]) + bytes(args)


def delta_bomb(levels: int, first: int = 1 << 20) -> bytes:
    """A pack of a few KB: a blob of zeros, then `levels` deltas, each copying its base twice (OFS_DELTA)."""
    body = bytearray(b"PACK" + struct.pack(">II", 2, levels + 1))
    offsets = [len(body)]
    body += bytes([0x30 | (first & 0x0F) | 0x80]) + _varint(first >> 4) + zlib.compress(b"\0" * first, 9)
    size, chunk = first, 8 << 20
    for _ in range(levels):
        ins = b"".join(_copy(pos, min(chunk, size - pos)) for _ in range(2) for pos in range(0, size, chunk))
        data = _varint(size) + _varint(2 * size) + ins
        offsets.append(len(body))
        head = bytearray([0x60 | (len(data) & 0x0F) | (0x80 if len(data) >> 4 else 0)])
        if len(data) >> 4:
            head += _varint(len(data) >> 4)
        distance, enc = offsets[-1] - offsets[-2], bytearray()
        enc.append(distance & 0x7F)
        distance >>= 7
        while distance:
            distance -= 1
            enc.append(0x80 | (distance & 0x7F))
            distance >>= 7
        body += head + bytes(reversed(enc)) + zlib.compress(data, 9)
        size *= 2
    return bytes(body + hashlib.sha1(body).digest())


def test_a_delta_bomb_in_the_quarantine_is_refused_within_a_memory_cap(
        repo: Path, sandbox_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2 KB pack whose deltas each double their base, up to a 4 GiB blob of zeros, beside an `.idx`: the
    outside's `git index-pack` of it, at the dashboard's poll, took 6.5 GB of memory (and 8 GiB more for each
    level added, the host's memory before long). It now runs in an address space of PACK_MEMORY: the pack is
    refused, and nothing of it joins the store."""
    from daintree_tui.core import quarantine

    # The cap as the product sets it for an OBJECT_LIMIT of 64 MiB, not 1 GiB: the same refusal, without the
    # outside rebuilding (and hashing) objects of up to 1 GiB first, 15 s of CPU.
    monkeypatch.setattr(quarantine, "PACK_MEMORY", 3 * (64 << 20) + (256 << 20))
    cli = CLI(repo)  # in this process: the cap is read where the pack is taken
    cli.ok("worktree", "create", "a1")
    bomb = delta_bomb(12)
    (repo / ".worktrees" / "a1" / "bomb.pack").write_bytes(bomb)
    # `worktree run` brings in what its command wrote before it returns.
    proc = cli("worktree", "run", "a1", "--", "sh", "-c", f'P={COMMON}/objects/pack; mv bomb.pack '
               f'"$P/pack-{"1" * 40}.pack" && echo x > "$P/pack-{"1" * 40}.idx"')
    assert proc.returncode == 0 and "refused 1 object" in proc.stderr, proc.stderr
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    assert peak < 4 << 30, f"a child of the outside peaked at {peak >> 20} MiB"
    assert not list((repo / ".worktrees" / ".agent-git" / "a1" / "objects" / "pack").iterdir())
    assert git(repo, "count-objects", "-v").count("packs: 0") == 1


def test_one_poll_looks_at_a_bounded_part_of_a_flooded_quarantine(
        repo: Path, sandbox_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent fills its quarantine with empty files named like objects (200,000 in a second or two; the
    outside needed 20 s for them, and the dashboard's poll, which brings in at every tick, stalled every inbox
    behind it). One poll now looks at QUICK_ENTRIES of them; a command takes the rest."""
    from daintree_tui.core import agent_git
    from daintree_tui.core.project import Project
    from daintree_tui.services import Services
    from daintree_tui.services.inbox import process_inboxes

    quick = 500  # a tenth of agent_git.QUICK_ENTRIES: the same bound, a tenth of the files to make and check
    monkeypatch.setattr(agent_git, "QUICK_ENTRIES", quick)
    cli = CLI(repo)  # in this process: the bound is read where the poll takes entries
    cli.ok("worktree", "create", "a1")
    total = 3 * quick
    run_in_worktree(cli, "a1", f'cd {COMMON}/objects && for d in $(seq 10 40); do mkdir "$d"; done && '
                               f"seq 1 {total} | awk '{{printf \"%d/%038x\\n\", 10 + $1 % 31, $1}}' | "
                               "while read f; do : > \"$f\"; done")
    quarantine = repo / ".worktrees" / ".agent-git" / "a1" / "objects"

    def left() -> int:
        return sum(1 for d in quarantine.iterdir() if d.name not in ("info", "pack") for _ in d.iterdir())

    before = left()  # `worktree run` took one poll's worth as it returned
    assert total > before >= total - quick
    process_inboxes(Services(Project.discover(repo)))
    assert left() >= before - quick
    cli.ok("worktree", "list")
    assert left() == 0


def test_one_poll_inflates_a_bounded_number_of_bytes(
        repo: Path, sandbox_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One zlib bomb (600 MiB of zeros in 600 KB) copied under three names that it does not hash to: each copy
    is checked whole before its name is found wrong (1.4 s for each GiB here); 5,000 copies held one poll of
    the dashboard for hours. A poll now inflates at most QUICK_BYTES (512 MiB), the object it is in finished;
    a command takes the rest."""
    from daintree_tui.core import agent_git
    from daintree_tui.core.project import Project
    from daintree_tui.services import Services
    from daintree_tui.services.inbox import process_inboxes

    # A sixteenth of the product's bound (QUICK_BYTES, 512 MiB) and of the bomb: the same three polls, without
    # inflating and hashing 1.8 GiB of zeros (4 s of CPU).
    monkeypatch.setattr(agent_git, "QUICK_BYTES", agent_git.QUICK_BYTES // 16)
    size = (600 << 20) // 16
    pack = zlib.compressobj(9)
    parts = [pack.compress(b"blob %d\0" % size)]
    zeros = b"\0" * (1 << 20)
    parts += [pack.compress(zeros) for _ in range(size >> 20)]
    (repo / "bomb").write_bytes(b"".join([*parts, pack.flush()]))
    cli = CLI(repo)  # in this process: the bound is read where the poll inflates
    cli.ok("worktree", "create", "a1")
    run_in_worktree(cli, "a1", f'mkdir -p {COMMON}/objects/11 && for i in 1 2 3; do '
                               f'cp {repo / "bomb"} {COMMON}/objects/11/$(printf %038x $i); done')
    fanout = repo / ".worktrees" / ".agent-git" / "a1" / "objects" / "11"
    assert len(list(fanout.iterdir())) == 2  # `worktree run` checked one as it returned
    process_inboxes(Services(Project.discover(repo)))
    assert len(list(fanout.iterdir())) == 1
    cli.ok("worktree", "list")
    assert not list(fanout.iterdir())


def test_a_fifo_for_an_index_never_hangs_the_users_git_gc(repo: Path, sandbox_env: Path) -> None:
    """The agent makes its admin dir's `index` a FIFO: the user's own `git gc` in the primary (and the
    `gc --auto` after a commit) opens every worktree's index and waited for a writer for ever. The next poll of
    the dashboard (and anything that lists worktrees) removes it."""
    from daintree_tui.core.project import Project
    from daintree_tui.services import Services
    from daintree_tui.services.inbox import process_inboxes

    cli = CLI(repo)
    cli.ok("worktree", "create", "a1")
    run_in_worktree(cli, "a1", f'rm {ADMIN}/index && mkfifo {ADMIN}/index')
    process_inboxes(Services(Project.discover(repo)))
    gc = subprocess.run(["git", "-C", str(repo), "gc", "--quiet"], capture_output=True, text=True, timeout=60)
    assert gc.returncode == 0, gc.stderr


@pytest.mark.parametrize("plant", ["head", "index", "tree"])
def test_doctor_fixes_a_head_or_index_that_names_objects_nowhere(repo: Path, sandbox_env: Path, plant: str) -> None:
    """The agent's admin dir names an object that exists nowhere: HEAD detached at it, an index entry for it, or
    a tree of its own (`mktree --missing`) read into the index. The user's `git gc` keeps what every worktree's
    HEAD and index name, and failed on it for the whole repository. `doctor` says so; `doctor --fix` puts HEAD
    back on the branch and the index back to HEAD, the agent's files untouched."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "a1")
    ghost = "e" * 40
    script = {
        "head": f"echo {ghost} > {ADMIN}/HEAD",
        "index": f"git update-index --add --cacheinfo 100644,{ghost},ghost.txt",
        "tree": f"T=$( (git ls-tree HEAD; printf '100644 blob {ghost}\\tghost.txt\\n') | git mktree --missing) && "
                'git read-tree "$T"',
    }[plant]
    run_in_worktree(cli, "a1", f"echo mine > mine.txt && {script}")
    gc = subprocess.run(["git", "-C", str(repo), "gc", "--quiet"], capture_output=True, text=True)
    assert gc.returncode != 0  # the attack as it was
    report = cli("doctor")
    assert report.returncode == 1 and "git gc fails" in report.stdout, report.stdout + report.stderr
    cli.ok("doctor", "--fix")
    _repository_is_whole(repo)
    assert (repo / ".git" / "worktrees" / "a1" / "HEAD").read_text() == "ref: refs/heads/wt/a1\n"
    assert (repo / ".worktrees" / "a1" / "mine.txt").read_text() == "mine\n"
    assert cli("doctor").returncode == 0


def _deep_folder(path: Path, levels: int = 1500) -> None:
    """`path` made a folder `levels` deep (through descriptors: the whole path is longer than PATH_MAX)."""
    path.mkdir()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


def test_a_deep_folder_for_head_in_the_admin_dir_never_stops_a_listing(repo: Path, sandbox_env: Path) -> None:
    """The agent makes its admin dir's HEAD a folder 1,500 levels deep (what its sandbox lets it write, as
    `rm HEAD; mkdir HEAD; cd HEAD; mkdir d; cd d; ...`): the listing removes a folder where git reads a file, and
    Python's rmtree raised RecursionError out of every `worktree list` and `doctor --fix`."""
    cli = CLI(repo, subprocess=True)  # the process's own stack, as the user's command has it
    cli.ok("worktree", "create", "a1")
    head = repo / ".git" / "worktrees" / "a1" / "HEAD"
    head.unlink()
    _deep_folder(head)
    cli.ok("worktree", "list")
    assert not head.is_dir()
    cli.ok("doctor", "--fix")


def test_programs_an_agent_writes_in_its_worktree_never_run_outside_from_a_relative_path(
        repo: Path, sandbox_env: Path, tmp_path: Path) -> None:
    """A PATH with a relative entry (`.`, `node_modules/.bin`) is searched in the current folder. Run from inside an
    agent's worktree, `daintree` found the agent's own `git` (every command's first step) and `bwrap` (the sandbox
    itself, run as the user) there: both ran outside the sandbox."""
    cli = CLI(repo)
    cli.ok("worktree", "create", "one")
    wt = repo / ".worktrees" / "one"
    marker = tmp_path / "ran-outside"
    planted = wt / "node_modules" / ".bin"
    planted.mkdir(parents=True)
    for name in ("git", "bwrap", "tmux", "sh", "env", "true"):
        for folder in (wt, planted):
            (folder / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\nexit 1\n")
            (folder / name).chmod(0o755)
    env = {"PATH": f".{os.pathsep}node_modules/.bin{os.pathsep}{os.pathsep}{os.environ['PATH']}"}
    for args in (("worktree", "list"), ("worktree", "status", "one"),
                 ("session", "start", "one", "--agent", "shell"), ("session", "stop", "one")):
        proc = CLI(repo, subprocess=True)(*args, cwd=wt, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
    assert not marker.exists(), marker.read_text()


def test_an_unsandboxed_sessions_own_python_never_imports_the_worktrees(repo: Path, tmp_path: Path,
                                                                      tmux_socket: str) -> None:
    """Without the sandbox, daintree's own Python in a session (the demo agent here; the hooks' signal script and
    the MCP server the same way) runs as the user in the worktree, where `python -m` looked first: a
    `daintree_tui/__init__.py` an earlier, sandboxed session wrote there ran."""
    from tests.conftest import trusted_config, wait_for

    trusted_config(repo, 'sandbox = "off"\n')
    cli = CLI(repo)
    cli.ok("worktree", "create", "u")
    marker = tmp_path / "imported"
    plant = repo / ".worktrees" / "u" / "daintree_tui" / "__init__.py"
    plant.parent.mkdir()
    plant.write_text(f"open({str(marker)!r}, 'a').write('imported\\n')\n")
    cli.ok("session", "start", "u", "--agent", "demo")
    wait_for(lambda: cli("session", "capture", "u").stdout.strip(), timeout=30)
    cli.ok("session", "stop", "u")
    assert not marker.exists()
