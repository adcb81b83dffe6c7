"""Command palette: every dashboard action, by name, aware of what is selected."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from daintree_tui.tui.screens.main import MainScreen

COMMANDS = [
    ("New task", "new_task", "Create a task, its worktree and a session"),
    ("Open session", "open_session", "Focus the selected worktree's terminal"),
    ("Start or restart session", "start_session", "Pick an agent for the selected worktree"),
    ("Keep worktree", "keep", "Mark the selected worktree kept"),
    ("Remove worktree", "remove", "Remove the selected worktree (asks first)"),
    ("Show diff", "diff", "Diff the selected worktree against its base"),
    ("Commit", "commit", "Commit the agent's work in its worktree"),
    ("Merge back", "merge", "Merge the selected worktree's branch"),
    ("Open pull request", "pr", "Push and open a PR with gh"),
    ("Send task to session", "inject_task", "Paste the task's text into the agent"),
    ("Show events", "events", "The lifecycle log"),
    ("Copy worktree path", "copy_path", "Copy the selected worktree's path"),
    ("Bake-off", "bakeoff", "Several agents race on the selected task"),
    ("Toggle auto queue", "toggle_auto", "Start ready tasks by themselves"),
    ("Filter", "filter", "Filter tasks and worktrees"),
    ("Next session", "cycle_session(1)", "Jump to the next session"),
    ("Previous session", "cycle_session(-1)", "Jump to the previous session"),
    ("Help", "help", "All keys"),
    ("Quit", "quit_dashboard", "Leave the dashboard; agents keep running"),
]


class DashboardCommands(Provider):
    """Dashboard actions; ones that need a selected worktree appear only when there is one."""

    def _main(self) -> MainScreen | None:
        from daintree_tui.tui.screens.main import MainScreen

        screen = self.screen
        return screen if isinstance(screen, MainScreen) else None

    def _available(self) -> list[tuple[str, str, str]]:
        main = self._main()
        if main is None:
            return []
        selected = main.selected_worktree()
        out = []
        for title, action, help_text in COMMANDS:
            name = action.split("(")[0]
            if main.check_action(name, ()) is not True:
                continue
            if selected and name in ("keep", "remove", "diff", "copy_path", "start_session", "open_session",
                                     "commit", "merge", "pr", "inject_task"):
                title = f"{title}: {selected}"
            out.append((title, action, help_text))
        return out

    async def discover(self) -> Hits:
        main = self._main()
        for title, action, help_text in self._available():
            if main is not None:
                yield DiscoveryHit(title, partial(main.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        main = self._main()
        matcher = self.matcher(query)
        for title, action, help_text in self._available():
            score = matcher.match(title)
            if score > 0 and main is not None:
                yield Hit(score, matcher.highlight(title), partial(main.run_action, action), help=help_text)
