"""Checkpoints with the agent as the attacker (issue 30 item 4, the class of issue 26): what an agent (or a lead
agent that instructs it) puts into a checkpoint is data for the outside, never markup, a control or a cost
without a bound."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import CLI, wait_for
from tests.helpers.checkpoints import TURNS, listed, open_timeline
from tests.helpers.config import write_user_config
from tests.helpers.sandbox import needs_bwrap

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@needs_tmux
async def test_a_prompt_with_markup_is_shown_as_text_in_the_timeline(repo: Path, tmux_socket: str,
                                                                      watcher: None) -> None:
    """A lead agent's `session_send` is the worker's turn prompt, named in its checkpoint: `[/x]` in it crashed
    the dashboard when the timeline drew it (a DataTable parses a str cell as markup: MarkupError), and
    `[@click=...]` made the cell a link to an action."""
    from daintree_tui.core.project import Project
    from daintree_tui.mcp.access import Access
    from daintree_tui.mcp.tools import DaintreeTools
    from daintree_tui.services import Services
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.screens.checkpoints import CheckpointsScreen
    from tests.helpers.dashboard import until

    write_user_config(TURNS)
    cli = CLI(repo)
    cli.ok("worktree", "create", "w", "--agent", "turns")
    wait_for(lambda: listed(cli, "w"), timeout=30)
    prompt = "[/x] [@click=app.quit]fix[/] the [red]bug"
    lead = DaintreeTools(Services(Project.discover(repo)), Access("lead"))
    lead.call("session_send", {"name": "w", "text": prompt})
    found = wait_for(lambda: (found := listed(cli, "w")) and len(found) == 2 and found, timeout=30)
    assert found[1]["prompt"] == prompt  # kept as it was given (the JSON is data)

    app = make_app(Project.discover(repo))
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        timeline = await open_timeline(pilot, "w")
        # Its row shows every bracket as typed, and the dashboard is still there (the agent's exit may have added a
        # third checkpoint by now: the row is looked for, not counted).
        await until(pilot, lambda: timeline.row_count >= 2 and any(
            prompt in timeline.render_line(y).text for y in range(1, timeline.row_count + 1)))
        assert app.is_running and isinstance(app.screen, CheckpointsScreen)


@needs_bwrap
def test_bytes_that_are_not_utf8_are_checkpointed_shown_and_restored(repo: Path, cli: CLI) -> None:
    """The agent names a file `n\\xff.txt` and writes Latin-1 into another: the outside decoded git's output as
    strict UTF-8, so every checkpoint of that worktree failed with an internal error (the turn's, `create`, and the
    one a restore takes first: no restore either), and `checkpoint diff` of the Latin-1 file too. The names are
    the bytes they are (a restore must find the very file), shown escaped."""
    cli.ok("worktree", "create", "w")
    wt = repo / ".worktrees" / "w"
    script = "printf 'caf\\351\\n' > latin.txt; printf 'x\\n' > \"$(printf 'n\\377.txt')\""
    proc = cli("worktree", "run", "w", "--", "sh", "-c", script)
    assert proc.returncode == 0, proc.stderr
    odd = os.fsdecode(b"n\xff.txt")
    assert (wt / odd).read_bytes() == b"x\n"
    made = cli.json("checkpoint", "create", "w")["checkpoint"]
    assert made["id"] == 1 and made["files"] == 2
    step = cli("checkpoint", "diff", "w", "1", "--step")
    assert step.returncode == 0, step.stderr
    assert "+caf\\xe9" in step.stdout and "n\\377.txt" in step.stdout  # git quotes the name, the byte shown
    listed_files = cli("checkpoint", "diff", "w", "1", "--step", "--stat")
    assert listed_files.returncode == 0 and "  n\\xff.txt" in listed_files.stdout, listed_files.stderr
    (wt / odd).unlink()
    (wt / "latin.txt").write_bytes(b"other\n")
    restored = cli.json("checkpoint", "restore", "w", "1")
    assert restored["exact"] is True and restored["before"] == 2
    assert (wt / odd).read_bytes() == b"x\n" and (wt / "latin.txt").read_bytes() == b"caf\xe9\n"


QUIET = """
[agents.quiet]
command = "sh -c 'echo ready; sleep 600'"
prompt_mode = "none"
"""


@needs_tmux
def test_a_flood_of_turn_ends_queues_one_checkpoint_per_worktree(repo: Path, tmux_socket: str) -> None:
    """The agent's own word on its state comes through its inbox (`session signal`, 20 requests a pass): flipping
    `running`/`waiting` queued one checkpoint (a sandbox, a tree read, the objects checked) per flip on the
    observer's one worker thread, which also runs the user's hooks and every other worktree's checkpoints: a
    backlog without bound. A checkpoint reads the files as they are when it runs, so one waiting per worktree
    loses nothing."""
    import json
    import threading
    import time

    from daintree_tui.core.project import Project
    from daintree_tui.services import Services

    write_user_config(QUIET)
    cli = CLI(repo)
    cli.ok("worktree", "create", "w", "--agent", "quiet")
    services = Services(Project.discover(repo))
    inbox = services.project.inbox_for("w")
    wait_for(lambda: inbox.is_dir() and "ready" in cli("session", "capture", "w").stdout, timeout=30)
    observer = services.observer  # `[checkpoints] auto` is off here (no watcher races this one): taken by hand
    ran: list[str] = []

    released = threading.Event()

    def counted(name: str, status: object) -> object:
        ran.append(str(status))
        released.wait(60)  # the first is slow (a tree of some size): every flip meanwhile waits behind it
        return services.ops.checkpoints.turn(name, str(status))  # what `auto = true` runs

    observer.after_turn = counted
    (repo / ".worktrees" / "w" / "work.txt").write_text("work\n")
    for n in range(20):  # what the agent writes into its inbox, as its `daintree session signal` would
        state = "running" if n % 2 == 0 else "waiting"
        body = {"id": f"{n:032x}", "kind": "signal", "payload": {"state": state}, "created_at": time.time()}
        (inbox / f"req-{n:032x}.json").write_text(json.dumps(body))
        services.observe_tick()
    released.set()
    assert observer.wait_for_hooks(60)
    assert len(ran) == 2, ran  # the one running, and one for all the flips meanwhile: not one per flip (10)
    assert ran[-1] == "waiting"
    made = listed(cli, "w")
    assert len(made) == 1 and made[0]["reason"] == "waiting"  # the files were checkpointed all the same



def _signal(inbox: Path, n: int, state: str) -> None:
    """What the agent writes into its inbox, as its `daintree session signal` would."""
    import json
    import time

    body = {"id": f"{n:032x}", "kind": "signal", "payload": {"state": state}, "created_at": time.time()}
    (inbox / f"req-{n:032x}.json").write_text(json.dumps(body))


@needs_tmux
def test_a_flood_of_turn_ends_queues_one_hook_run_per_worktree_and_kind(repo: Path, tmux_socket: str) -> None:
    """The same flood, for the user's hooks: each flip to `waiting` queued its own `on_waiting` run (a sandbox, a
    shell, whatever the user's command does) on the one worker thread. A run waiting to begin is the run of every
    such flip meanwhile; one that has begun is not, so a hook still runs after each real transition."""
    import threading

    from daintree_tui.core.project import Project
    from daintree_tui.services import Services

    write_user_config(QUIET + '[hooks]\non_waiting = ["echo $DAINTREE_WORKTREE >> $TMPDIR/waiting.txt"]\n')
    cli = CLI(repo)
    cli.ok("worktree", "create", "w", "--agent", "quiet")
    services = Services(Project.discover(repo))
    inbox = services.project.inbox_for("w")
    marker = repo / ".worktrees" / ".tmp" / "w" / "waiting.txt"
    wait_for(lambda: inbox.is_dir() and "ready" in cli("session", "capture", "w").stdout, timeout=30)
    wait_for(lambda: services.observer.wait_for_hooks(60) and not services.observe_tick().transitions)
    before = marker.read_text().count("w\n") if marker.exists() else 0
    observer = services.observer
    released = threading.Event()
    observer.after_turn = lambda name, status: released.wait(60)  # the worker busy: every flip waits behind it
    for n in range(20):
        _signal(inbox, n, "running" if n % 2 == 0 else "waiting")
        services.observe_tick()
    released.set()
    assert observer.wait_for_hooks(60)
    assert marker.read_text().count("w\n") - before == 1  # one run for the 10 waits, after the last of them
    for n in range(20, 22):  # a wait after that run began: its own run
        _signal(inbox, n, "running" if n % 2 == 0 else "waiting")
        services.observe_tick()
    assert observer.wait_for_hooks(60)
    assert marker.read_text().count("w\n") - before == 2

@needs_bwrap
async def test_a_huge_step_diff_is_cut_and_the_timeline_stays_live(repo: Path, cli: CLI) -> None:
    """Any file under 64 MiB goes into a checkpoint, and the timeline showed each step's diff whole: 40 MiB of
    lines the agent wrote were read whole into the dashboard and highlighted on its event loop (about 2.5 s a
    MiB: minutes frozen, on each move of the cursor onto that step). The diff is cut, and says so."""
    from daintree_tui.core.checkpoints import DIFF_LIMIT
    from daintree_tui.core.project import Project
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.widgets.diff_view import DiffView
    from tests.helpers.dashboard import configure, until

    cli.ok("worktree", "create", "w")
    proc = cli("worktree", "run", "w", "--", "sh", "-c", "yes 'a line of the agent' | head -c 41943040 > notes.txt")
    assert proc.returncode == 0, proc.stderr
    assert cli.json("checkpoint", "create", "w")["checkpoint"]["id"] == 1
    patch = cli.json("checkpoint", "diff", "w", "1", "--step")["patch"]
    assert len(patch) < DIFF_LIMIT + 1024 and "diff cut at" in patch  # the CLI's: larger, cut all the same
    configure(repo)
    app = make_app(Project.discover(repo))

    def shown() -> str:
        return "\n".join(str(line.text) for line in app.screen.query_one(DiffView).lines)

    async with app.run_test(size=(120, 40)) as pilot:
        timeline = await open_timeline(pilot, "w")
        await until(pilot, lambda: timeline.row_count == 1)
        await until(pilot, lambda: "diff cut at" in shown(), timeout=30)
        assert len(app.screen.query_one(DiffView).lines) < 20000



@needs_bwrap
@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_a_name_that_is_not_utf8_is_shown_by_worktree_diff(repo: Path, sandbox: str) -> None:
    """The agent names files `c\xff.txt` (committed, then changed) and `n\xff.txt` (untracked, Latin-1 in it)
    from inside its sandbox: `worktree diff` and `--stat` ended in an internal error (UnicodeDecodeError) over
    git's output where the worktree's git runs unconfined, as the checkpoints did before they read it as bytes.
    The names are the bytes they are, shown escaped; the dashboard's `d` reads the same."""
    cli = CLI(repo, subprocess=True)  # stdout as the shell has it: strict UTF-8 would refuse a lone surrogate
    cli.ok("worktree", "create", "w")
    script = ("printf 'one\\n' > \"$(printf 'c\\377.txt')\"; git add -A; git commit -qm odd; "
              "printf 'two\\n' >> \"$(printf 'c\\377.txt')\"; printf 'caf\\351\\n' > \"$(printf 'n\\377.txt')\"")
    proc = cli("worktree", "run", "w", "--", "sh", "-c", script)
    assert proc.returncode == 0, proc.stderr
    write_user_config(f'sandbox = "{sandbox}"\n')  # the agent's files are as they are; only the outside's git differs
    shown = cli("worktree", "diff", "w")
    assert shown.returncode == 0, shown.stderr
    assert '"b/c\\377.txt"' in shown.stdout and '"b/n\\377.txt"' in shown.stdout and "+caf\\xe9" in shown.stdout
    stat = cli("worktree", "diff", "w", "--stat")
    assert stat.returncode == 0, stat.stderr
    assert " n\\xff.txt (untracked) | 1 +" in stat.stdout and '"c\\377.txt" | 2 ++' in stat.stdout
    assert "+caf\udce9" in cli.json("worktree", "diff", "w")["diff"]  # JSON: the byte as its lone surrogate


@needs_bwrap
async def test_a_huge_worktree_diff_is_cut_and_the_diff_view_stays_live(repo: Path, cli: CLI) -> None:
    """`worktree diff` read the whole of what git printed of the agent's files (each untracked one up to 8 MiB,
    as many as it likes, and a committed one of any size) and the dashboard's `d` highlighted it all on its event
    loop. Both are cut now, and say so: 8 MiB for the CLI, 256 KiB for the diff view."""
    from daintree_tui.core.project import Project
    from daintree_tui.core.review import DIFF_LIMIT
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.widgets.diff_view import DiffView
    from tests.helpers.dashboard import configure, main_screen, select, until

    cli.ok("worktree", "create", "w")
    script = ("yes 'a committed line' | head -c 6291456 > big.txt; git add big.txt; git commit -qm big; "
              "for n in 1 2 3; do yes 'an untracked line' | head -c 4194304 > u$n.txt; done")
    proc = cli("worktree", "run", "w", "--", "sh", "-c", script)
    assert proc.returncode == 0, proc.stderr
    patch = cli.ok("worktree", "diff", "w").stdout
    assert DIFF_LIMIT - 1024 < len(patch) < DIFF_LIMIT + 1024
    assert patch.endswith("[diff cut at 8 MiB: `--stat` lists every file that differs]\n")
    assert "+++ b/u1.txt" in patch and "b/u3.txt" not in patch  # the first untracked file fills what is left
    stat = cli.ok("worktree", "diff", "w", "--stat").stdout
    assert "big.txt" in stat and " u3.txt (untracked) |" in stat and "cut" not in stat
    configure(repo)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = main_screen(app)
        await until(pilot, lambda: len(screen.entries) == 1)
        await select(pilot, screen, "w")
        await pilot.press("d")
        view = screen.query_one(DiffView)
        await until(pilot, lambda: view.worktree == "w"
                    and any("diff cut at 256 KiB" in str(line.text) for line in view.lines[-3:]), timeout=30)
        assert len(view.lines) < 20000


def _long_chain(repo: Path, name: str, count: int) -> None:
    """`count` checkpoints of worktree `name` as a daintree before the `Checkpoint-Seq` trailer recorded them
    (commit-tree's messages, one file that changes each step), written at once by `git fast-import`."""
    import subprocess

    stream = []
    for n in range(1, count + 1):
        message = (f"daintree checkpoint of {name} (waiting)\n\nCheckpoint-Ts: {1.7e9 + n:.3f}\n"
                   f"Checkpoint-Reason: waiting\nCheckpoint-Files: 1\nCheckpoint-Prompt: step {n}\n").encode()
        content = f"{n}\n".encode()
        stream += [f"commit refs/daintree/checkpoints/{name}\n".encode(),
                   f"committer daintree checkpoint <checkpoint@daintree.invalid> {1_700_000_000 + n} +0000\n"
                   f"data {len(message)}\n".encode(), message,
                   f"deleteall\nM 100644 inline step.txt\ndata {len(content)}\n".encode(), content, b"\n"]
    subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet"], input=b"".join(stream), check=True)


def test_a_long_chain_costs_a_read_of_what_is_shown(repo: Path, cli: CLI) -> None:
    """The chain has no bound (a checkpoint a turn, for as long as the worktree lives), and each list, timeline
    and turn's checkpoint read all of it: with 50 000, 1.2 s of `git log` and parsing each. The next checkpoint
    reads the tip alone, a listing the newest 200 (`--all`: every one), with ids as in the whole chain."""
    from daintree_tui.core import git as g
    from daintree_tui.core.project import Project
    from daintree_tui.mcp.access import Access
    from daintree_tui.mcp.tools import DaintreeTools
    from daintree_tui.services import Services

    cli.ok("worktree", "create", "w")
    _long_chain(repo, "w", 5000)
    listed_now = listed(cli, "w")
    assert [c["id"] for c in listed_now] == list(range(4801, 5001))  # counted once: no trailer says so
    assert listed_now[-1]["prompt"] == "step 5000"
    shown = cli.ok("checkpoint", "list", "w").stdout
    assert "the newest 200 of 5000 (--all lists every one)" in shown and "\n4801 " in shown
    every = cli.json("checkpoint", "list", "w", "--all")
    assert len(every) == 5000 and every[0]["id"] == 1 and every[0]["prompt"] == "step 1"
    lead = DaintreeTools(Services(Project.discover(repo)), Access("lead"))
    assert lead.call("checkpoint_list", {"name": "w"}) == listed_now
    assert lead.call("checkpoint_list", {"name": "w", "all": True}) == every
    (repo / ".worktrees" / "w" / "step.txt").write_text("mine\n")
    made = cli.json("checkpoint", "create", "w")["checkpoint"]
    assert made["id"] == 5001
    message = g.git(repo, "log", "-1", "--format=%B", made["commit"]).stdout
    assert "Checkpoint-Seq: 5001\n" in message  # its id, read from the tip from now on
    assert [c["id"] for c in listed(cli, "w")][-2:] == [5000, 5001]
    # Older than the listing: by id and by a commit's digits; a step's diff from the one before.
    assert cli.json("checkpoint", "diff", "w", "1", "--step")["from"] == "base"
    step = cli.json("checkpoint", "diff", "w", "2", "--step")
    assert (step["from"], step["to"]) == ("1", "2") and "-1\n+2\n" in step["patch"]
    old = every[99]["commit"]
    shown_by_digits = cli.json("checkpoint", "diff", "w", old[:10], "101")
    assert (shown_by_digits["from"], shown_by_digits["to"]) == ("100", "101")
    assert cli("checkpoint", "diff", "w", "5002").returncode == 2
    restored = cli.json("checkpoint", "restore", "w", "3")
    assert restored["before"] == 5001 and (repo / ".worktrees" / "w" / "step.txt").read_text() == "3\n"
    assert cli.json("checkpoint", "restore", "w", "5001")["before"] == 5002


async def test_the_timeline_shows_the_newest_and_keeps_the_cursor_on_an_id(repo: Path, cli: CLI) -> None:
    """The timeline reads the newest 200: its rows are ids 101..300, and after a restore its cursor goes back to
    the restored id (it went to the row of that number: id 250 put it on the newest)."""
    from daintree_tui.core.project import Project
    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.screens.confirm import ConfirmScreen
    from tests.helpers.dashboard import configure, until

    cli.ok("worktree", "create", "w")
    _long_chain(repo, "w", 300)
    configure(repo)
    app = make_app(Project.discover(repo))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        timeline = await open_timeline(pilot, "w")
        screen = app.screen
        await until(pilot, lambda: timeline.row_count == 200 and timeline.selected is not None)
        assert timeline.selected is not None and timeline.selected.id == 300
        assert "the newest 200 of 300" in str(screen.query_one("#checkpoints-title").render())
        timeline.move_cursor(row=149)
        await until(pilot, lambda: timeline.selected is not None and timeline.selected.id == 250)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen.is_mounted)
        await pilot.click("#yes")
        await until(pilot, lambda: any("restored checkpoint 250" in str(t.render())
                                       for t in app.screen.query("Toast")))
        await until(pilot, lambda: timeline.row_count == 200 and timeline.checkpoints[-1].id == 301)
        assert timeline.selected is not None and timeline.selected.id == 250
        assert (repo / ".worktrees" / "w" / "step.txt").read_text() == "250\n"
