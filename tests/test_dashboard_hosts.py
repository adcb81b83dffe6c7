"""The dashboard with a remote host: a real sshd on 127.0.0.1 (tests/sshd.py), "localhost over SSH" with its own
repository and a demo agent in the far side's tmux; the dashboard polls it, attaches over ssh in its own PTY,
greys it when sshd dies and reattaches when it is back."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text

from daintree_tui.core.project import Project
from daintree_tui.services.remote import RemoteHost, get_host
from daintree_tui.tui.app import make_app
from daintree_tui.tui.hosts import matches, remote_entries
from daintree_tui.tui.screens.main import MainScreen
from daintree_tui.tui.widgets.task_table import TaskTable
from daintree_tui.tui.widgets.terminal import TerminalView
from daintree_tui.tui.widgets.worktree_table import WorktreeTable
from tests.conftest import CLI, trusted_config
from tests.helpers.dashboard import confirm, until
from tests.sshd import Sshd, sshd_available

pytestmark = [pytest.mark.usefixtures("tmux_socket", "quick_host_polls"),
              pytest.mark.skipif(not sshd_available(), reason="OpenSSH server or client not installed")]


@pytest.fixture
def quick_host_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard polls its hosts every 0.5 s here, not every 2 s: each test waits on several polls (a host
    going unreachable, coming back, a queue's passes), and what a poll shows does not depend on how often it runs."""
    from daintree_tui.tui.hosts import HostsWatch

    monkeypatch.setattr(HostsWatch, "interval", 0.5)


async def eventually(pilot: Any, predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Like `until`, for a predicate that blocks (ssh): it runs in a thread, never on the app's event loop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await asyncio.to_thread(predicate)
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await pilot.pause(0.2)


def row(table: WorktreeTable, key: str) -> dict[str, str]:
    return {column: str(cell) for column, cell in table.row_cells(key).items()}


def greyed(table: WorktreeTable, key: str) -> bool:
    cells = [c for c in table.row_cells(key).values() if str(c)]
    return all(isinstance(c, Text) and any("grey42" in str(span.style) for span in c.spans) for c in cells)


async def test_remote_host_in_the_dashboard_attach_type_unreachable_and_back(
        far: str, sshd: Sshd, repo: Path, cli: CLI) -> None:
    remote = CLI(repo, subprocess=True)
    remote.json("worktree", "create", "agent", "--agent", "demo", "--host", far)
    cli.json("worktree", "create", "agent")  # a local worktree of the same name: never touched from the remote row

    def screen_there() -> str:
        return str(remote.json("session", "capture", "agent", "--host", far)["screen"])

    app = make_app(Project.discover(repo))
    async with app.run_test(size=(220, 40), notifications=True) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        table = screen.query_one(WorktreeTable)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: "agent@far" in [str(k.value) for k in table.rows])
        assert [str(k.value) for k in table.rows] == ["agent", "agent@far"]  # local rows, then each host's
        assert row(table, "agent@far")["host"] == "far" and row(table, "agent@far")["name"] == "agent"
        assert row(table, "agent")["host"] == "local"
        await until(pilot, lambda: "▶" in row(table, "agent@far")["session"]
                    or "WAITING" in row(table, "agent@far")["session"])

        # The host filter.
        await pilot.press("slash", *"host:far", "enter")
        await until(pilot, lambda: [str(k.value) for k in table.rows] == ["agent@far"])
        await pilot.press("slash")
        await pilot.press("escape")
        await until(pilot, lambda: table.row_count == 2)

        # Enter on the remote row: its screen, over ssh, in the terminal's PTY; typing reaches the agent there.
        table.focus()
        table.select_name("agent@far")
        await until(pilot, lambda: screen.selected == "agent@far")
        await pilot.press("enter")
        await until(pilot, lambda: terminal.worktree == "agent@far" and terminal.has_focus)
        # Its question on screen first: typed while it draws its spinner, the echo would be drawn over.
        await until(pilot, lambda: "[y/n]" in terminal.screen_text(), timeout=60)
        await pilot.press(*"hello-from-here")
        await eventually(pilot, lambda: "hello-from-here" in screen_there())
        await until(pilot, lambda: "hello-from-here" in terminal.screen_text())
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: not terminal.has_focus)

        # Local-only actions on the remote row are refused; the local worktree of the same name stays as it was.
        await pilot.press("m")
        await pilot.press("C")
        await pilot.press("r")  # said the whole command that comments, not just `review NAME`
        await until(pilot, lambda: any("in a shell, `daintree review agent --comment PATH:LINE TEXT --host far`"
                                       in str(t.render()) for t in app.screen.query("Toast")))
        await pilot.pause(0.3)
        assert isinstance(app.screen, MainScreen)
        assert [w["name"] for w in cli.json("worktree", "list")] == ["agent"]

        # Keep goes through the host's own daintree: kept there, not here.
        await pilot.press("k")
        await confirm(pilot, app)
        await eventually(pilot, lambda: [w["status"] for w in remote.json("worktree", "list", "--host", far)]
                         == ["kept"])
        await until(pilot, lambda: "(kept)" in row(table, "agent@far")["name"])
        assert [w["status"] for w in cli.json("worktree", "list")] == ["active"]

        # The connection goes: sshd killed, the master closed. The host is greyed with its last state.
        sshd.kill()
        host = RemoteHost(get_host(far))
        await asyncio.to_thread(host.stop_master)
        await until(pilot, lambda: screen.hosts_watch.states[far].status == "unreachable")
        await until(pilot, lambda: greyed(table, "agent@far"))
        assert row(table, "agent@far")["host"] == "far ✗"
        await until(pilot, lambda: re.fullmatch(r"since \d\d:\d\d:\d\d, no answer",
                                                row(table, "agent@far").get("activity", "")))
        # At the width a 220-column dashboard gives its list, the time is within what the column shows (the
        # words came first, and their end, the time, was cut).
        shown = row(table, "agent@far")["activity"][:table.column_widths["activity"]]
        assert re.match(r"since \d\d:\d\d:\d\d", shown), (shown, table.column_widths)
        assert row(table, "agent@far")["name"].startswith("agent")  # the last known state stays
        await until(pilot, lambda: terminal.worktree is None)  # the ssh client ended with its connection
        assert "does not answer" in terminal.placeholder

        # sshd is back: the row is live again and the terminal reattaches by itself.
        sshd.start()
        await until(pilot, lambda: screen.hosts_watch.states[far].status == "ok", timeout=40)
        await until(pilot, lambda: not greyed(table, "agent@far"))
        await until(pilot, lambda: terminal.worktree == "agent@far")
        terminal.focus()
        await pilot.press(*"again-here")
        await eventually(pilot, lambda: "again-here" in screen_there())


def test_host_filter_words_and_remote_rows() -> None:
    from daintree_tui.services.hosts_feed import HostState

    raw = {"name": "feat", "path": "/srv/app/.worktrees/feat", "branch": "wt/feat", "base_ref": "main",
           "base_commit": "a" * 40, "status": "active"}
    state = HostState("box", 3, reachable=True, worktrees=(raw,), updated_at=1.0, checked_at=1.0)
    (entry,) = remote_entries(state)
    assert entry.name == "feat@box" and entry.extra["host"] == "box" and entry.extra["reachable"]
    assert matches("host:box", entry) and matches("host:b feat", entry)
    assert not matches("host:local", entry) and not matches("host:vm", entry) and not matches("other", entry)


def test_a_greyed_rows_time_survives_the_output_column_of_a_200_column_dashboard() -> None:
    """Found in a trial: at 200 columns, with a conflict column and a 12-letter name, the list is 84 cells wide
    and the output column 18: "no answer since 05:46:51" showed as "no answer since 05:46"."""
    from daintree_tui.services.hosts_feed import HostState
    from daintree_tui.tui.hosts import since
    from daintree_tui.tui.widgets.worktree_table import fit_columns

    state = HostState("box", 3, reachable=False, worktrees=(), updated_at=time.time() - 5, checked_at=time.time())
    width = dict((c.key, w) for c, w in fit_columns(84, 12, hosts=True, conflicts=True))["activity"]
    stamp = time.strftime("%H:%M:%S", time.localtime(state.updated_at))
    assert since(state)[:width].startswith(f"since {stamp}"), (since(state), width)


async def test_quick_create_on_a_host_attaches_over_ssh_and_shows_its_facts(
        far: str, far_repo: Path, repo: Path, cli: CLI) -> None:
    from textual.widgets import Input, Select

    from daintree_tui.tui.screens.new_task import LOCAL, NewTaskScreen

    remote = CLI(repo, subprocess=True)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(220, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        table = screen.query_one(WorktreeTable)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: screen.hosts_watch.states.get(far) and screen.hosts_watch.states[far].status
                    == "ok")

        # `n`: the dialog asks where, here first; the host's free slots are in its label.
        await pilot.press("n")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, NewTaskScreen) else None)
        where = dialog.query_one("#host", Select)
        assert where.value == LOCAL
        assert ("host far (2 of 2 free)", far) in dialog.hosts
        where.value = far
        dialog.query_one("#agent", Select).value = "shell"
        dialog.query_one("#subject", Input).focus()
        await pilot.press(*"fix the login", "enter")

        # Made there by its own CLI, the new row current, its terminal attached over ssh; nothing made here.
        key = "fix-the-login@far"
        await until(pilot, lambda: screen.selected == key and terminal.worktree == key and terminal.has_focus,
                    timeout=60)
        (made,) = await asyncio.to_thread(remote.json, "worktree", "list", "--host", far)
        assert made["name"] == "fix-the-login" and made["session"]["agent"] == "shell"
        assert [t["subject"] for t in await asyncio.to_thread(remote.json, "task", "list", "--host", far)] \
            == ["fix the login"]
        assert cli.json("worktree", "list") == [] and cli.json("task", "list") == []
        await pilot.press(*"echo typed-over-ssh", "enter")
        await until(pilot, lambda: "typed-over-ssh" in terminal.screen_text())
        await pilot.press("ctrl+right_square_bracket")

        # The remote row's dirty count, ahead/behind and disk use come from the host's own poll.
        await until(pilot, lambda: row(table, key)["dirty"] == "0" and row(table, key)["ab"] == "↑0↓0")
        table.styles.width = 200  # wide enough for the disk column
        await until(pilot, lambda: row(table, key).get("disk") not in (None, "-", "…"))
        (Path(made["path"]) / "new.txt").write_text("work in progress\n")
        await until(pilot, lambda: row(table, key)["dirty"] == "1")

        # The next `n` offers the host chosen last time first.
        await pilot.press("n")
        again = await until(pilot, lambda: app.screen if isinstance(app.screen, NewTaskScreen) else None)
        assert again.query_one("#host", Select).value == far
        await pilot.press("escape")


async def test_the_new_task_dialog_offers_the_hosts_own_agents_and_keeps_the_one_picked(
        far: str, far_repo: Path, repo: Path, cli: CLI) -> None:
    """Choosing Where reset the Agent and listed this machine's presets for a host: now a host's list is its own
    config's (its default first chosen), an agent picked stays where the host has it, and a host not reached keeps
    this machine's list with a note."""
    from textual.widgets import Button, Label, Select

    from daintree_tui.services.remote import HostConfig, save_host
    from daintree_tui.tui.screens.new_task import LOCAL, NewTaskScreen
    from tests.helpers.remote import DAINTREE

    (far_repo / ".daintree.toml").write_text('default_agent = "faronly"\n'
                                             '[agents.faronly]\ncommand = "sh -c \'exec cat\'"\n')
    trusted_config(repo, '[agents.localonly]\ncommand = "sh -c \'exec cat\'"\n')
    save_host(HostConfig("gone", "dt-gone.invalid", str(far_repo), daintree=DAINTREE))  # never resolves
    remote = CLI(repo, subprocess=True)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(220, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        await until(pilot, lambda: {n: s.status for n, s in screen.hosts_watch.states.items()}
                    == {far: "ok", "gone": "unreachable"}, timeout=40)
        await pilot.press("n")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, NewTaskScreen) else None)
        where, agent = dialog.query_one("#host", Select), dialog.query_one("#agent", Select)
        note = dialog.query_one("#agent-note", Label)
        local_default = agent.value
        assert "localonly" in dialog.shown_agents and "faronly" not in dialog.shown_agents

        where.value = far  # nothing picked yet: the host's own default
        await until(pilot, lambda: dialog.offered == far)
        assert "faronly" in dialog.shown_agents and "localonly" not in dialog.shown_agents
        assert agent.value == "faronly" and str(note.content) == f"The agents of host {far}"

        agent.value = "shell"  # picked: it stays wherever it exists
        where.value = LOCAL
        await until(pilot, lambda: dialog.offered == LOCAL and "localonly" in dialog.shown_agents)
        assert agent.value == "shell" and str(note.content) == ""
        where.value = far
        await until(pilot, lambda: dialog.offered == far)
        assert agent.value == "shell"
        where.value = "gone"
        await until(pilot, lambda: str(note.content).startswith("Host gone is not reached"))
        assert dialog.offered == LOCAL and "localonly" in dialog.shown_agents and agent.value == "shell"

        # Back to far with its own agent: `Task only` makes the task there with that agent.
        where.value = far
        await until(pilot, lambda: dialog.offered == far)
        agent.value = "faronly"
        dialog.query_one("#subject").focus()
        await pilot.press(*"on the far side")
        dialog.query_one("#task-only", Button).press()
        await until(pilot, lambda: not isinstance(app.screen, NewTaskScreen))
        made = await eventually(pilot, lambda: remote.json("task", "list", "--host", far))
        assert [(t["subject"], t.get("agent")) for t in made] == [("on the far side", "faronly")]
        assert local_default != "faronly"


async def test_auto_queue_fills_hosts_by_free_slots(sshd: Sshd, tmp_path: Path, repo: Path,
                                                    cli: CLI) -> None:
    from daintree_tui.services.remote import HostConfig, save_host
    from tests.conftest import make_repo
    from tests.helpers.remote import DAINTREE

    repo_a, repo_b = make_repo(tmp_path / "repo-a"), make_repo(tmp_path / "repo-b")
    save_host(HostConfig("a", "dt-far", str(repo_a), max_sessions=2, daintree=DAINTREE))
    save_host(HostConfig("b", "dt-other", str(repo_b), max_sessions=1, daintree=DAINTREE))
    (repo / ".daintree.toml").write_text("max_sessions = 1\n")
    ids = [cli.json("task", "create", f"job {n}", "--agent", "shell")["id"] for n in range(1, 6)]
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(220, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        table = screen.query_one(WorktreeTable)
        await until(pilot, lambda: {n: s.status for n, s in screen.hosts_watch.states.items()}
                    == {"a": "ok", "b": "ok"})
        await pilot.press("a")

        def owners() -> list[str]:
            return sorted(t["owner"] for t in cli.json("task", "list") if t["owner"])

        # One slot here, two on a, one on b: four tasks start, the fifth waits for a free slot.
        await eventually(pilot, lambda: len(owners()) == 4 and owners().count("host:a") == 2
                         and owners().count("host:b") == 1, timeout=60)
        local = {t["id"]: t for t in cli.json("task", "list")}
        hosted = [t for t in local.values() if t["owner"].startswith("host:")]
        assert sorted(t["owner"] for t in hosted) == ["host:a", "host:a", "host:b"]
        assert sum(1 for t in local.values() if t["status"] == "pending" and not t["owner"]) == 1
        assert len(cli.json("worktree", "list")) == 1
        tasks = screen.query_one(TaskTable)
        for task in hosted:
            name, host = task["remote"]["worktree"], task["remote"]["host"]
            await until(pilot, lambda key=f"{name}@{host}": key in [str(k.value) for k in table.rows])
            # The tasks list names where it went (it showed `-`), and the task follows its remote row.
            await until(pilot, lambda t=task, w=f"{name}@{host}": tasks.cell_text(str(t["id"]), "worktree") == w)
            tasks.focus()
            tasks.move_cursor(row=tasks.get_row_index(str(task["id"])))
            await until(pilot, lambda w=f"{name}@{host}": screen.selected == w)
        assert set(ids) == set(local)
        # Two more passes (each polls, then places): no slot left anywhere, so nothing more is placed.
        passes = screen.hosts_watch.passes
        await until(pilot, lambda: screen.hosts_watch.passes >= passes + 2)
        assert len(owners()) == 4


def test_remote_facts_take_only_well_formed_counts() -> None:
    from daintree_tui.core.worktrees import Facts
    from daintree_tui.services.hosts_feed import HostState
    from daintree_tui.tui.hosts import remote_facts, remote_facts_and_disk

    assert remote_facts({"exists": True, "dirty": 2, "ahead": 1, "behind": 0}) == Facts(True, 2, 1, 0)
    for bad in (None, [], {"exists": "yes", "dirty": 0, "ahead": 0, "behind": 0},
                {"exists": True, "dirty": -1, "ahead": 0, "behind": 0}, {"exists": True, "dirty": True, "ahead": 0,
                                                                          "behind": 0}, {"exists": True}):
        assert remote_facts(bad) is None, bad
    raw = {"name": "feat", "path": "/srv/app/.worktrees/feat", "branch": "wt/feat", "base_ref": "main",
           "base_commit": "a" * 40, "status": "active", "facts": {"exists": True, "dirty": 3, "ahead": 0,
                                                                  "behind": 4}, "disk_bytes": 2048}
    bare = {**raw, "name": "old", "facts": None, "disk_bytes": "big"}
    # Beyond any disk: human() of it overflowed a float and crashed the dashboard on the first poll.
    huge = {**raw, "name": "huge", "facts": {"exists": True, "dirty": 10**400, "ahead": 0, "behind": 0},
            "disk_bytes": 10**400}
    state = HostState("box", 3, reachable=True, worktrees=(raw, bare, huge), updated_at=1.0, checked_at=1.0)
    facts, disk = remote_facts_and_disk(remote_entries(state))
    assert facts == {"feat@box": Facts(True, 3, 0, 4)} and disk == {"feat@box": 2048}


async def test_a_hung_host_greys_within_two_polls_and_keys_typed_into_its_terminal_are_held(
        far: str, sshd: Sshd, repo: Path, cli: CLI) -> None:
    """sshd stopped (SIGSTOP: connections open and silent, not refused): within two polls its rows are greyed;
    the terminal that showed its session drops what is typed into it, with a notice, and runs no shortcut."""
    from daintree_tui.services.hosts_feed import POLL_TIMEOUT
    from daintree_tui.tui.hosts import HostsWatch
    from daintree_tui.tui.screens.new_task import NewTaskScreen

    remote = CLI(repo, subprocess=True)
    remote.json("worktree", "create", "agent", "--agent", "shell", "--host", far)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(220, 40), notifications=True) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        table = screen.query_one(WorktreeTable)
        terminal = screen.query_one(TerminalView)
        await until(pilot, lambda: "agent@far" in [str(k.value) for k in table.rows]
                    and screen.hosts_watch.states[far].status == "ok")
        table.focus()
        table.select_name("agent@far")
        await until(pilot, lambda: screen.selected == "agent@far")
        await pilot.press("enter")
        await until(pilot, lambda: terminal.worktree == "agent@far" and terminal.has_focus)

        frozen = sshd.freeze()
        try:
            began = time.monotonic()
            await until(pilot, lambda: screen.hosts_watch.states[far].status == "unreachable",
                        timeout=2 * (HostsWatch.interval + POLL_TIMEOUT) + 2)
            took = time.monotonic() - began
            assert took < 2 * (HostsWatch.interval + POLL_TIMEOUT), took
            await until(pilot, lambda: greyed(table, "agent@far"))
            # The attach's ssh ends with its connection (the keepalive): the terminal then holds what is typed.
            await until(pilot, lambda: terminal.worktree is None, timeout=20)
            assert terminal.has_focus and terminal.held == "agent@far"
            await pilot.press("d", "n", "z", "x")
            await pilot.pause(0.3)
            assert isinstance(app.screen, MainScreen) and not any(isinstance(s, NewTaskScreen)
                                                                   for s in app.screen_stack)
            assert screen.zoom == ""
            toasts = [str(t.render()) for t in app.screen.query("Toast")]
            assert sum("keys typed here are not sent" in t for t in toasts) == 1, toasts
            await pilot.press("ctrl+right_square_bracket")
            await until(pilot, lambda: not terminal.has_focus and terminal.held is None)
        finally:
            sshd.thaw(frozen)
        await until(pilot, lambda: screen.hosts_watch.states[far].status == "ok", timeout=40)
        await until(pilot, lambda: not greyed(table, "agent@far"))


async def test_a_host_down_at_start_has_a_greyed_row_that_says_never_reached(
        far: str, sshd: Sshd, repo: Path, cli: CLI) -> None:
    sshd.kill()
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(220, 40), notifications=True) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        table = screen.query_one(WorktreeTable)
        await until(pilot, lambda: "@far" in [str(k.value) for k in table.rows])
        assert greyed(table, "@far") and row(table, "@far")["host"] == "far ✗"
        table.styles.width = 200
        await until(pilot, lambda: row(table, "@far").get("activity") == "never reached")
        table.focus()
        table.select_name("@far")
        await until(pilot, lambda: screen.selected == "@far")
        await pilot.press("x")  # nothing of the host to remove: said, never asked
        await pilot.pause(0.3)
        assert isinstance(app.screen, MainScreen)
        assert any("nothing of it is known yet" in str(t.render()) for t in app.screen.query("Toast"))
        sshd.start()
        await until(pilot, lambda: screen.hosts_watch.states[far].status == "ok", timeout=40)
        await until(pilot, lambda: "@far" not in [str(k.value) for k in table.rows])


async def test_remove_on_a_remote_row_does_what_its_dialog_says(
        far: str, far_repo: Path, repo: Path, cli: CLI) -> None:
    """`x` on a remote row: the dialog says the host removes the worktree, and its branch when merged there;
    the host then has neither (a clean worktree's branch is merged: `wt/clean1` stayed before)."""
    from textual.widgets import Button, Static

    from daintree_tui.tui.screens.confirm import ConfirmScreen
    from tests.conftest import git

    remote = CLI(repo, subprocess=True)
    remote.json("worktree", "create", "clean1", "--host", far)
    assert git(far_repo, "branch", "--list", "wt/clean1").strip()
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(220, 40), notifications=True) as pilot:
        screen = app.screen
        assert isinstance(screen, MainScreen)
        table = screen.query_one(WorktreeTable)
        await until(pilot, lambda: "clean1@far" in [str(k.value) for k in table.rows])
        table.focus()
        table.select_name("clean1@far")
        await until(pilot, lambda: screen.selected == "clean1@far")
        await pilot.press("x")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, ConfirmScreen) else None)
        said = " ".join(str(w.render()) for w in dialog.query(Static))
        assert "removes the worktree, and its branch if that is merged there" in said, said
        dialog.query_one("#yes", Button).press()
        await until(pilot, lambda: any("Removed clean1 on host far, its branch deleted" in str(t.render())
                                       for t in app.screen.query("Toast")), timeout=30)
    assert remote.json("worktree", "list", "--host", far) == []
    assert git(far_repo, "branch", "--list", "wt/clean1").strip() == ""
