"""Every interface reaches the same checks (`services/operations/`): an agent whose command the repository's
untrusted `.daintree.toml` sets is refused from the CLI, the dashboard, the queue, the bake-off and the MCP tools,
each time before anything is made (no task, worktree, branch, bake-off or session is left behind) and without its
command ever running. The dashboard's quick-create and its enter on a task made the task and the worktree first
and refused only at the session's start; its restart stopped the running agent, then refused the new one."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from daintree_tui.core.errors import OperationError
from daintree_tui.core.project import Project
from daintree_tui.services import Services
from tests.conftest import CLI, git, wait_for

pytestmark = pytest.mark.usefixtures("tmux_socket")

USER_AGENT = (f"{sys.executable} -c \"import sys; print('agent ready', flush=True); "
              "[print('echo:', l.strip(), flush=True) for l in sys.stdin]\"")


@pytest.fixture
def marker(repo: Path, tmp_path: Path) -> Path:
    """The repository's own agent (its default) writes this file if it ever runs; the repository is not trusted.
    The user's own config (trusted: it is theirs) has an agent `mine` for the sessions that must survive."""
    ran = tmp_path / "repo-agent-ran"
    (repo / ".daintree.toml").write_text(
        f'default_agent = "repo-agent"\n[agents.repo-agent]\ncommand = "sh -c \'touch {ran}; sleep 60\'"\n')
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "daintree"
    user.mkdir(parents=True, exist_ok=True)
    (user / "config.toml").write_text(f"[agents.mine]\ncommand = '''{USER_AGENT}'''\n[notifications]\nbell = false\n")
    return ran


def refused(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 1 and "agents.repo-agent.command" in proc.stderr \
        and "daintree trust" in proc.stderr, (proc.returncode, proc.stderr)


def nothing_made(repo: Path, marker: Path, *, tasks: int, worktrees: frozenset[str] | set[str] = frozenset(),
                 sessions: frozenset[str] | set[str] = frozenset()) -> None:
    """Only what the test made itself is there: `tasks` tasks, these worktrees and sessions; the agent never ran."""
    cli = CLI(repo)
    assert len(cli.json("task", "list")) == tasks
    assert {w["name"] for w in cli.json("worktree", "list", "--all")} == set(worktrees)
    assert set(git(repo, "branch", "--list", "--format=%(refname:short)", "wt/*").split()) == {
        f"wt/{name}" for name in worktrees}
    assert {s["name"] for s in cli.json("session", "list")} == set(sessions)
    assert cli.json("bakeoff", "list") == []
    assert not marker.exists()


def test_the_cli_refuses_an_untrusted_agent_before_it_makes_anything(repo: Path, marker: Path) -> None:
    cli = CLI(repo, subprocess=True)  # the real command, as a shell runs it
    cli.ok("task", "create", "Fix login")
    cli.ok("worktree", "create", "here")
    refused(cli("worktree", "create", "w", "--task", "1", "--agent", "repo-agent"))
    refused(cli("session", "start", "here"))  # the default agent is the repository's own
    refused(cli("session", "start", "here", "--agent", "repo-agent", "--prompt", "go"))
    refused(cli("bakeoff", "create", "1", "--agents", "mine,repo-agent"))
    nothing_made(repo, marker, tasks=1, worktrees={"here"})
    assert json.loads(cli.ok("task", "show", "1", "--json").stdout)["status"] == "pending"


def test_the_queue_refuses_an_untrusted_agent_before_it_makes_a_worktree(repo: Path, marker: Path) -> None:
    cli = CLI(repo, subprocess=True)
    cli.ok("task", "create", "Queued", "--agent", "repo-agent")
    proc = cli("queue", "run", "--once")
    refused(proc)  # its error, on stderr as it happens; exit 1: a task could not start
    assert "task 1:" in proc.stderr
    # The same pass from the services, as the dashboard's auto-queue runs it: the next task, the same refusal.
    cli.ok("task", "create", "Queued too", "--agent", "repo-agent")
    report = Services(Project.discover(repo)).queue.step()
    assert report.started == [] and len(report.errors) == 1 and "daintree trust" in report.errors[0]
    nothing_made(repo, marker, tasks=2)


def test_the_bakeoff_refuses_an_untrusted_agent_before_any_candidate(repo: Path, marker: Path) -> None:
    CLI(repo).ok("task", "create", "Race")
    services = Services(Project.discover(repo))
    with pytest.raises(OperationError, match="daintree trust"):
        services.ops.bakeoff.create(1, ["mine", "repo-agent"])
    nothing_made(repo, marker, tasks=1)


async def test_the_mcp_tools_refuse_an_untrusted_agent(repo: Path, marker: Path) -> None:
    """Through a real MCP client (`daintree mcp` over stdio), and through the tool object a sandboxed session's
    inbox calls."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    from daintree_tui.mcp.access import LEAD, Access
    from daintree_tui.mcp.tools import DaintreeTools

    cli = CLI(repo)
    cli.ok("task", "create", "Race")
    cli.ok("worktree", "create", "here")
    params = StdioServerParameters(command=sys.executable, args=["-m", "daintree_tui", "mcp", "--repo", str(repo)],
                                   cwd=str(repo), env=dict(os.environ))
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for tool, arguments in (("session_start", {"name": "here"}),
                                    ("session_start", {"name": "here", "agent": "repo-agent"}),
                                    ("bakeoff_create", {"task_id": 1, "agents": ["repo-agent"]})):
                result = await session.call_tool(tool, arguments)
                text = str(result.content[0].text)  # type: ignore[union-attr]
                assert result.is_error and "daintree trust" in text, (tool, text)
    tools = DaintreeTools(Services(Project.discover(repo)), Access(LEAD))
    for tool, arguments in (("session_start", {"name": "here"}),
                            ("bakeoff_create", {"task_id": 1, "agents": ["mine", "repo-agent"]})):
        with pytest.raises(OperationError, match="daintree trust"):
            await asyncio.to_thread(tools.call, tool, arguments)
    nothing_made(repo, marker, tasks=1, worktrees={"here"})


async def test_the_dashboard_refuses_an_untrusted_agent_before_it_makes_anything(repo: Path, marker: Path,
                                                                                 tmux_socket: str) -> None:
    """`n` (quick-create), enter on a task (start for it), `b` (bake-off) and `s` (restart with another agent),
    from the keyboard: each says why in a notification and leaves nothing behind; the running agent stays."""
    from textual.widgets import OptionList, SelectionList

    from daintree_tui.tui.app import make_app
    from daintree_tui.tui.screens.main import MainScreen
    from daintree_tui.tui.widgets.task_table import TaskTable
    from daintree_tui.tui.widgets.worktree_table import WorktreeTable

    cli = CLI(repo)
    cli.ok("task", "create", "Write docs")
    cli.ok("worktree", "create", "busy", "--agent", "mine")
    app = make_app(Project.discover(repo))

    async def until(predicate: Any, timeout: float = 30.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate():
            assert asyncio.get_running_loop().time() < deadline, f"condition not met in time; said: {said}"
            await pilot.pause(0.05)

    def on_top(name: str) -> bool:
        return type(app.screen).__name__ == name and app.screen.is_mounted and bool(app.screen.children)

    said: list[str] = []
    notify = app.notify

    def noting(message: str, **options: Any) -> None:  # every toast, also those gone by the time one looks
        said.append(message)
        notify(message, **options)

    app.notify = noting  # type: ignore[method-assign]

    def told(count: int) -> bool:
        return sum("daintree trust" in m and "repo-agent" in m for m in said) >= count

    async with app.run_test(size=(140, 45), notifications=True) as pilot:
        await until(lambda: on_top("ConfirmScreen"))  # trust this repository's commands? Not now.
        await pilot.press("escape")
        await until(lambda: isinstance(app.screen, MainScreen) and "busy" in app.screen.sessions)
        screen = app.screen
        assert isinstance(screen, MainScreen)

        await pilot.press("n")
        await until(lambda: on_top("NewTaskScreen"))
        await pilot.press(*"Fix login bug", "enter")
        await until(lambda: told(1))

        await until(lambda: isinstance(app.screen, MainScreen) and bool(screen.tasks))
        screen.query_one(TaskTable).focus()
        await pilot.press("enter")
        await until(lambda: told(2))

        await pilot.press("b")
        await until(lambda: on_top("BakeoffNewScreen"))
        app.screen.query_one(SelectionList).select("repo-agent")
        await pilot.click("#start")
        await until(lambda: told(3))

        await until(lambda: isinstance(app.screen, MainScreen))
        screen.query_one(WorktreeTable).focus()
        screen.query_one(WorktreeTable).select_name("busy")
        await until(lambda: screen.selected == "busy")
        await pilot.press("s")
        await until(lambda: on_top("AgentPickerScreen"))
        options = app.screen.query_one(OptionList)
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        options.highlighted = ids.index("repo-agent")
        await pilot.press("enter")
        await until(lambda: on_top("ConfirmScreen"))  # replace the running mine? Yes: then it is refused
        await pilot.click("#yes")
        await until(lambda: told(4))
    alive = subprocess.run(["tmux", "-L", tmux_socket, "has-session", "-t", "=dt-busy"], capture_output=True)
    assert alive.returncode == 0
    wait_for(lambda: CLI(repo).json("session", "list")[0]["agent"] == "mine")
    nothing_made(repo, marker, tasks=1, worktrees={"busy"}, sessions={"busy"})


def test_the_services_of_every_process_know_the_inbox_kinds_its_interfaces_add(repo: Path) -> None:
    """`Services.inbox_kinds` was a class registry that importing cli/dispatch filled: services built by a process
    that never imported the CLI could not apply a sandboxed session's MCP calls, and importing it changed every
    Services of the process. Now whoever builds a process's services gives them what its interfaces add."""
    import daintree_tui.cli.dispatch  # noqa: F401 - importing the CLI adds nothing to any Services
    from daintree_tui.cli.common import build_services
    from daintree_tui.tui.app import make_app

    project = Project.discover(repo)
    assert Services(project).inbox_kinds == {}
    assert set(build_services(project).inbox_kinds) == {"mcp"}  # the CLI's, `session watch`'s, doctor's
    dashboard = build_services(project, pty_fallback=True)  # what `daintree` hands the dashboard
    assert make_app(dashboard).backend.services is dashboard and set(dashboard.inbox_kinds) == {"mcp"}
