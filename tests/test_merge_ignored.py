"""Issue 26.5: a merge overwrote the primary's ignored files. git treats an ignored file as expendable: an agent
commits `.env` with `git add -f`, and `worktree merge` (ff, squash and rebase alike) replaced the user's own `.env`
in the primary with exit 0, while `worktree diff` showed it as one more added file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import CLI, events, git, trusted_config

USERS = b"API_KEY=the-users-own\n"


def ignoring(repo: Path, *patterns: str) -> None:
    (repo / ".gitignore").write_text("".join(f"{p}\n" for p in patterns))
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore")


def agent_forces(wt: Path, files: dict[str, str], message: str = "agent work") -> None:
    """The agent writes `files` (and a file of real work) and commits them all with `git add -f`."""
    for rel, text in files.items():
        (wt / rel).parent.mkdir(parents=True, exist_ok=True)
        (wt / rel).write_text(text)
    (wt / "work.py").write_text("x = 1\n")
    git(wt, "add", "-f", "--", "work.py", *files)
    git(wt, "commit", "-q", "-m", message)


def refused_and_unmoved(cli: CLI, repo: Path, strategy: str, *named: str) -> str:
    main_before, branch_before = git(repo, "rev-parse", "main"), git(repo, "rev-parse", "wt/w")
    proc = cli("worktree", "merge", "w", "--strategy", strategy)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    message = proc.stderr.strip()
    assert len(message.splitlines()) == 1 and "would replace files that git ignores" in message, message
    assert "nothing was changed" in message
    for path in named:
        assert path in message, message
    assert git(repo, "rev-parse", "main") == main_before
    assert git(repo, "rev-parse", "wt/w") == branch_before
    assert ".merge-" not in git(repo, "worktree", "list")
    return message


@pytest.mark.parametrize(("strategy", "diverged"), [("ff", False), ("squash", False), ("rebase", False),
                                                     ("squash", True), ("rebase", True)])
def test_a_merge_never_replaces_the_users_ignored_env(cli: CLI, repo: Path, strategy: str, diverged: bool) -> None:
    """The issue's reproduction: the user's `.env` (ignored) in the primary; the agent force-adds its own. With
    `diverged`, main has moved on: the squash and the rebase make a new commit, checked before main moves."""
    ignoring(repo, ".env")
    (repo / ".env").write_bytes(USERS)
    cli.ok("worktree", "create", "w")
    wt = repo / ".worktrees" / "w"
    agent_forces(wt, {".env": "API_KEY=the-agents\n"})
    if diverged:
        (repo / "other.py").write_text("y = 2\n")
        git(repo, "add", "other.py")
        git(repo, "commit", "-q", "-m", "main moved on")
    message = refused_and_unmoved(cli, repo, strategy, ".env")
    assert str(repo) in message
    assert (repo / ".env").read_bytes() == USERS
    assert not (repo / "work.py").exists()
    assert git(repo, "status", "--porcelain") == ""
    assert not any(e["event"] == "worktree.merge.before" for e in events(repo))  # refused before any check
    git(wt, "rm", "-q", "--cached", ".env")  # dropped from the branch: the work merges as usual
    git(wt, "commit", "-q", "-m", "not mine to ship")
    cli.ok("worktree", "merge", "w", "--strategy", strategy)
    assert (repo / ".env").read_bytes() == USERS and (repo / "work.py").read_text() == "x = 1\n"


@pytest.mark.parametrize("case", ["into an ignored folder", "an ignored folder made a file",
                                  "an ignored file made a folder", "under an ignored link",
                                  "a folder made a file over what it ignores"])
def test_ignored_folders_files_and_links_in_the_way(cli: CLI, repo: Path, case: str, tmp_path: Path) -> None:
    ignoring(repo, "build/", "logs", "cache", "*.log")
    (repo / "build").mkdir()
    (repo / "build" / "app.bin").write_bytes(b"\x00the user's build\n")
    (repo / "logs").write_bytes(b"the user's log\n")
    elsewhere = tmp_path / "cache-store"
    elsewhere.mkdir()
    (elsewhere / "entry").write_bytes(b"cached\n")
    (repo / "cache").symlink_to(elsewhere)
    (repo / "data").mkdir()
    (repo / "data" / "run.log").write_bytes(b"the user's run\n")
    cli.ok("worktree", "create", "w")
    wt = repo / ".worktrees" / "w"
    plant, named = {
        "into an ignored folder": ({"build/app.js": "planted\n"}, "build/"),
        "an ignored folder made a file": ({"build": "planted\n"}, "build/"),
        "an ignored file made a folder": ({"logs/today": "planted\n"}, "logs"),
        "under an ignored link": ({"cache/entry": "planted\n"}, "cache"),
        "a folder made a file over what it ignores": ({"data": "planted\n"}, "data/"),
    }[case]
    if case == "under an ignored link":
        (wt / "cache").unlink(missing_ok=True)
    agent_forces(wt, plant)
    for strategy in ("ff", "squash", "rebase"):
        refused_and_unmoved(cli, repo, strategy, named)
    assert (repo / "build" / "app.bin").read_bytes() == b"\x00the user's build\n"
    assert not (repo / "build" / "app.js").exists()
    assert (repo / "logs").read_bytes() == b"the user's log\n"
    assert (repo / "cache").is_symlink() and os.readlink(repo / "cache") == str(elsewhere)
    assert (elsewhere / "entry").read_bytes() == b"cached\n"
    assert (repo / "data" / "run.log").read_bytes() == b"the user's run\n"


def test_no_refusal_when_nothing_ignored_is_there(cli: CLI, repo: Path) -> None:
    """The same branch merges when the checkout has no such file; ignored files beside new ones (a `*.log` in a
    folder the branch adds to) are not in the way."""
    ignoring(repo, ".env", "*.log")
    (repo / "src").mkdir()
    (repo / "src" / "keep.py").write_text("k = 0\n")
    git(repo, "add", "src")
    git(repo, "commit", "-q", "-m", "src")
    (repo / "src" / "debug.log").write_bytes(b"the user's log\n")
    cli.ok("worktree", "create", "w")
    wt = repo / ".worktrees" / "w"
    agent_forces(wt, {".env": "API_KEY=the-agents\n", "src/new.py": "n = 1\n"})
    assert "replaces an ignored file" not in cli.ok("worktree", "diff", "w").stdout
    cli.ok("worktree", "merge", "w", "--strategy", "squash")
    assert (repo / ".env").read_text() == "API_KEY=the-agents\n"  # nothing of the user's was there to lose
    assert (repo / "src" / "debug.log").read_bytes() == b"the user's log\n"


def test_no_refusal_for_a_target_checked_out_nowhere(cli: CLI, repo: Path) -> None:
    """`--into release`, a branch no worktree has checked out: its ref moves and no file is written anywhere."""
    ignoring(repo, ".env")
    git(repo, "branch", "release")
    (repo / ".env").write_bytes(USERS)
    cli.ok("worktree", "create", "w", "--base", "release")
    agent_forces(repo / ".worktrees" / "w", {".env": "API_KEY=the-agents\n"})
    cli.ok("worktree", "merge", "w", "--into", "release")
    assert git(repo, "rev-parse", "release") == git(repo, "rev-parse", "wt/w")
    assert (repo / ".env").read_bytes() == USERS


def test_a_worktree_holding_the_target_is_the_checkout_checked(cli: CLI, repo: Path, tmp_path: Path) -> None:
    """The target checked out in another worktree (not the primary): its ignored files are the ones at stake."""
    ignoring(repo, ".env")
    git(repo, "branch", "release")
    other = tmp_path / "release-checkout"
    git(repo, "worktree", "add", "-q", str(other), "release")
    (other / ".env").write_bytes(USERS)
    cli.ok("worktree", "create", "w", "--base", "release")
    agent_forces(repo / ".worktrees" / "w", {".env": "API_KEY=the-agents\n"})
    proc = cli("worktree", "merge", "w", "--into", "release")
    assert proc.returncode == 1 and str(other) in proc.stderr and ".env" in proc.stderr, proc.stderr
    assert (other / ".env").read_bytes() == USERS


def test_diff_marks_a_path_that_replaces_an_ignored_file(cli: CLI, repo: Path) -> None:
    ignoring(repo, ".env", "build/")
    (repo / ".env").write_bytes(USERS)
    (repo / "build").mkdir()
    (repo / "build" / "app.bin").write_bytes(b"the user's build\n")
    cli.ok("worktree", "create", "w")
    wt = repo / ".worktrees" / "w"
    agent_forces(wt, {".env": "API_KEY=the-agents\n"})
    (wt / "build").mkdir()
    (wt / "build" / "out.js").write_text("staged, not committed\n")
    git(wt, "add", "-f", "build/out.js")
    text = cli.ok("worktree", "diff", "w").stdout
    assert text.startswith("replaces an ignored file: .env\nreplaces an ignored file: build/\n"), text
    assert "+API_KEY=the-agents" in text  # the diff itself follows
    stat = cli.ok("worktree", "diff", "w", "--stat").stdout
    assert stat.startswith("replaces an ignored file: .env\nreplaces an ignored file: build/\n"), stat
    assert any(line.startswith(" .env ") and "|" in line for line in stat.splitlines()), stat  # git's stat follows
    shown = cli.json("worktree", "diff", "w")
    assert shown["replaces_ignored"] == [".env", "build/"]
    assert shown["diff"].startswith("diff --git a/.env b/.env\n"), shown["diff"]  # a patch as git gives it
    (repo / ".env").unlink()  # nothing of the user's there any more: no mark
    assert cli.json("worktree", "diff", "w")["replaces_ignored"] == ["build/"]


async def test_the_dashboards_diff_shows_the_mark(cli: CLI, repo: Path) -> None:
    """The dashboard's diff view shows what the service gives it (`Backend.diff`): the mark first, in red."""
    from textual.app import App, ComposeResult

    from daintree_tui.core.project import Project
    from daintree_tui.services import Services
    from daintree_tui.tui.backend import Backend
    from daintree_tui.tui.widgets.diff_view import DiffView

    ignoring(repo, ".env")
    (repo / ".env").write_bytes(USERS)
    cli.ok("worktree", "create", "w")
    agent_forces(repo / ".worktrees" / "w", {".env": "API_KEY=the-agents\n"})
    text = Backend(Services(Project.discover(repo), pty_fallback=True)).diff("w")

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield DiffView(id="diff")

    app = One()
    async with app.run_test(size=(100, 30)) as pilot:
        view = app.query_one(DiffView)
        view.show("w", text)
        await pilot.pause()
        shown = [line.text for line in view.lines]
    assert shown[0].startswith("w: 2 files changed: ") and ".env" in shown[0], shown
    assert shown[1] == "replaces an ignored file: .env", shown
    assert not any(line.startswith("replaces") for line in shown[2:]), shown
    assert any("+API_KEY=the-agents" in line for line in shown), shown


def test_a_file_that_appears_while_the_checks_run_is_still_refused(cli: CLI, repo: Path) -> None:
    """Asked again of the new commit just before the target moves: here the user's own pre_merge check (run
    unconfined, the user's choice) writes the user's `.env` after the first look found none."""
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[sandbox]\nmode = "off"\n')
    ignoring(repo, ".env")
    trusted_config(repo, f"[hooks]\npre_merge = [\"printf 'API_KEY=the-users-own\\\\n' > {repo / '.env'}\"]\n")
    cli.ok("worktree", "create", "w")
    agent_forces(repo / ".worktrees" / "w", {".env": "API_KEY=the-agents\n"})
    refused_and_unmoved(cli, repo, "squash", ".env")
    assert (repo / ".env").read_bytes() == USERS
    failed = [e for e in events(repo) if e["event"] == "worktree.merge.failed"]
    assert failed and "would replace files that git ignores" in str(failed[-1]["error"])
