"""Command palette: the dashboard's bindings by description, aware of the current worktree."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.markup import escape

if TYPE_CHECKING:
    from daintree_tui.tui.bindings import KeyRow
    from daintree_tui.tui.screens.main import MainScreen


class DashboardCommands(Provider):
    """Every dashboard binding (one per id); those that act on a worktree name it, and hide without one."""

    def _main(self) -> MainScreen | None:
        from daintree_tui.tui.screens.main import MainScreen

        screen = self.screen
        return screen if isinstance(screen, MainScreen) else None

    def _available(self) -> list[tuple[str, str, str]]:
        main = self._main()
        if main is None:
            return []
        rows: list[KeyRow] = main.help_rows()
        out = []
        for row in rows:
            name = row.action.split("(")[0]
            if name in ("command_palette", "leave", "jump_session") or main.check_action(name, ()) is not True:
                continue
            title = f"{row.description}: {main.selected}" if row.needs_worktree else row.description
            out.append((title, row.action, escape(f"{row.help} (key: {row.keys})")))  # help is markup
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
