"""DESIGN.md and the issues read word by word against the real CLI (the seventh audit): each test is a promise
that the product broke, with what it did in the docstring."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import CLI, events, git, make_repo, trusted_config, wait_for


def test_every_event_about_a_bound_worktree_names_its_task(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """DESIGN 1: three planes "linked by ids", each event `{"event", "ts", "task": {...}, "worktree": {...}}`.
    Of the events about a worktree bound to a task, `deps.linked`, `hook.ran`/`hook.failed`, `session.*`,
    `worktree.commit`, `worktree.merge.*` and `port.released` carried `"task": {}`: a reader of the log could not
    tell which task a session's exit or a merge belonged to."""
    (repo / ".gitignore").write_text(".env\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore .env")
    (repo / ".env").write_text("A=1\n")
    trusted_config(repo, '[hooks]\npost_create = ["true"]\npre_merge = ["true"]\n'
                         "[agents.worker]\ncommand = \"sh -c 'echo done > work.txt; exit 3'\"\n")
    cli.ok("task", "create", "Bound work")
    cli.ok("worktree", "create", "bound", "--task", "1", "--agent", "worker")
    wait_for(lambda: cli.json("session", "list")[0]["status"] == "exited")
    cli.ok("session", "watch", "--once")  # the one owner that records transitions (DESIGN 2, services)
    cli.ok("worktree", "commit", "bound", "-m", "work", "--all")
    cli.ok("worktree", "merge", "bound")
    cli.ok("worktree", "remove", "bound")
    about_bound = [e for e in events(repo) if e["worktree"].get("name") == "bound"]
    kinds = {e["event"] for e in about_bound}
    assert {"deps.linked", "hook.ran", "session.started", "session.exited", "worktree.commit",
            "worktree.merge.before", "worktree.merge.after", "port.released"} <= kinds, kinds
    unnamed = [e["event"] for e in about_bound if e["task"].get("id") != 1]
    assert unnamed == [], unnamed
    exited = next(e for e in about_bound if e["event"] == "session.exited")
    assert exited["task"] == {"id": 1, "subject": "Bound work", "status": "in_progress"}
    assert exited["exit_code"] == 3


def test_updating_a_bound_task_names_its_worktree(cli: CLI, repo: Path) -> None:
    """The other direction of the same link: `task update` of a task bound to a worktree logged `task.updated`
    and `task.completed` with `"worktree": {}`, where binding and unbinding it name the worktree."""
    cli.ok("task", "create", "Linked")
    cli.ok("worktree", "create", "linked", "--task", "1")
    cli.ok("task", "update", "1", "--owner", "me", "--status", "completed")
    updated, completed = events(repo)[-2:]
    assert (updated["event"], completed["event"]) == ("task.updated", "task.completed")
    assert updated["worktree"] == completed["worktree"] == {"name": "linked"}
    assert completed["task"] == {"id": 1, "subject": "Linked", "status": "completed"}


def test_send_from_a_missing_clipboard_is_one_short_line(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """Errors are one clear line on stderr: `session send NAME --clipboard` without a clipboard printed
    pyperclip's paragraph (its newline escaped into a literal `\\n`, a URL and three apt-get commands)."""
    trusted_config(repo, "[agents.cat]\ncommand = \"cat\"\n")
    cli.ok("worktree", "create", "clip", "--agent", "cat")
    proc = cli("session", "send", "clip", "--clipboard", env={"DISPLAY": "", "WAYLAND_DISPLAY": ""})
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "\\n" not in proc.stderr and "http" not in proc.stderr, proc.stderr
    # Without a display every clipboard program fails (or reads nothing): either way one line saying so.
    assert proc.stderr.startswith(("daintree: no clipboard available", "daintree: the clipboard is empty"))


def test_the_live_feed_shows_only_this_repositorys_sessions(repo: Path, tmp_path: Path, tmux_socket: str) -> None:
    """"each session is marked with its repository, so a repository lists, stops and replaces only its own"
    (README, one tmux server per repository): with DAINTREE_TMUX_SOCKET shared, the dashboard's live feed listed
    the other repository's sessions too: it announced "NAME: ? is waiting for you" for each and counted them in
    "agents keep running in tmux (N now)" on quit. `session list` already kept to its own."""
    from daintree_tui.core.project import Project
    from daintree_tui.sessions.live import LiveSessions
    from daintree_tui.sessions.manager import SessionManager

    other = make_repo(tmp_path / "other")
    agent = "[agents.idle]\ncommand = \"sh -c 'echo ready; exec cat'\"\n"
    for where in (repo, other):
        trusted_config(where, agent)
    CLI(other).ok("worktree", "create", "theirs", "--agent", "idle")
    cli = CLI(repo)
    cli.ok("worktree", "create", "mine", "--agent", "idle")
    assert [s["name"] for s in cli.json("session", "list")] == ["mine"]

    live = LiveSessions(SessionManager(Project.discover(repo)), record=lambda change: None).start()
    try:
        live.events.poke()
        wait_for(lambda: {r.worktree for r in live.events.records().values()} == {"mine", "theirs"})
        assert [info.name for info in live.infos()] == ["mine"]
    finally:
        live.close()


def test_remove_logs_its_steps_between_remove_before_and_after(cli: CLI, repo: Path, tmux_socket: str) -> None:
    """DESIGN 3: remove "runs `pre_remove` hooks, stops the session, removes the dir, releases ports, marks the
    entry removed, and unbinds its task". The log opened with `worktree.remove.before` only after the hooks had
    run and the session had been stopped (hook.ran and session.exited came first), and a failing pre_remove hook
    refused the remove with no `worktree.remove.failed`, where create logs create.before first and
    create.failed on any failing step."""
    trusted_config(repo, '[hooks]\npre_remove = ["true"]\n'
                         "[agents.idle]\ncommand = \"sh -c 'echo ready; exec cat'\"\n")
    cli.ok("task", "create", "Ordered removal")
    cli.ok("worktree", "create", "ordered", "--task", "1", "--agent", "idle")
    start = len(events(repo))
    cli.ok("worktree", "remove", "ordered", "--complete-task")
    kinds = [e["event"] for e in events(repo)[start:]]
    assert kinds[0] == "worktree.remove.before" and kinds[-1] == "worktree.remove.after", kinds
    assert kinds.index("hook.ran") < kinds.index("session.exited") < kinds.index("port.released"), kinds

    trusted_config(repo, '[hooks]\npre_remove = ["exit 7"]\n')
    cli.ok("worktree", "create", "guarded")
    start = len(events(repo))
    refused = cli("worktree", "remove", "guarded")
    assert refused.returncode == 1 and "pre_remove" in refused.stderr
    assert [e["event"] for e in events(repo)[start:]] == [
        "worktree.remove.before", "hook.failed", "worktree.remove.failed"]
    assert (repo / ".worktrees" / "guarded").is_dir()
    assert [e["name"] for e in cli.json("worktree", "list")] == ["guarded"]


def test_a_name_whose_session_log_is_another_worktrees_hook_log_is_refused(cli: CLI, repo: Path) -> None:
    """Issue 10.7: "names that collide with state files are rejected (exit 2)". Worktree `a`'s hook log is
    `.worktrees/.logs/a.hooks.log`, which is also the session log of a worktree named `a.hooks`: its agent's
    output went into `a`'s hook log, `session log a.hooks` printed `a`'s hook output, and `gc` after removing `a`
    deleted the live session's log."""
    proc = cli("worktree", "create", "a.hooks")
    assert proc.returncode == 2 and "reserved" in proc.stderr, proc.stderr
    assert cli.json("worktree", "list", "--all") == []
    assert git(repo, "branch", "--list", "wt/*") == ""
    cli.ok("worktree", "create", "a.hooksmith")  # only the suffix is reserved


def test_list_and_remove_work_without_du_and_rm(cli: CLI, repo: Path, tmp_path: Path) -> None:
    """Errors are one clear line, never a traceback, and exit 0 is success: on a PATH without `du` and `rm` (a
    minimal image: git and a shell only) `worktree list` was `internal error: FileNotFoundError: 'du'`, and
    `worktree remove` removed the worktree, then said `remove failed: ... 'rm'` with exit 1 (its background
    delete could not start). The list measures the tree itself; the remove deletes the trash itself."""
    cli.ok("worktree", "create", "measured")
    (repo / ".worktrees" / "measured" / "data.bin").write_bytes(b"x" * 64 * 1024)
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("git", "sh"):
        found = shutil.which(tool)
        assert found is not None
        (bare / tool).symlink_to(found)
    minimal = {"PATH": str(bare)}
    listed = cli("worktree", "list", "--json", env=minimal)
    assert listed.returncode == 0, listed.stderr
    [entry] = [e for e in json.loads(listed.stdout) if e["name"] == "measured"]
    assert entry["disk_bytes"] >= 64 * 1024
    removed = cli("worktree", "remove", "measured", "--force", env=minimal)
    assert removed.returncode == 0, removed.stderr
    assert not (repo / ".worktrees" / "measured").exists()
    trash = repo / ".worktrees" / ".trash"
    assert not trash.is_dir() or not any(trash.iterdir())
