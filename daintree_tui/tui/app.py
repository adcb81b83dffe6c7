"""The daintree dashboard app. Kept small: screens own their logic; this wires services, keys and styles."""

from __future__ import annotations

import gc
import html
import shutil
import subprocess
import time
import weakref
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from daintree_tui.core.config import in_quiet_hours
from daintree_tui.core.errors import DaintreeError
from daintree_tui.core.project import Project
from daintree_tui.core.validate import escape_controls
from daintree_tui.services import Services
from daintree_tui.sessions.host import LocalScreen
from daintree_tui.sessions.last_words import telling_line
from daintree_tui.sessions.status import SessionStatus
from daintree_tui.tui.backend import Backend
from daintree_tui.tui.commands import DashboardCommands
from daintree_tui.tui.hosts import HostsWatch, is_remote
from daintree_tui.tui.keymap import leave_keys, user_keymap
from daintree_tui.tui.screens.main import MainScreen
from daintree_tui.tui.toast_warnings import WarningToasts
from daintree_tui.tui.widgets.terminal import TerminalView

if TYPE_CHECKING:
    from daintree_tui.sessions.manager import SessionInfo
    from daintree_tui.tui.away import TerminalNotices


def _styles_dir() -> Path:
    """Where app.tcss is: inside the package in an installed wheel (hatch's force-include maps the top-level
    styles/ there), else the source tree's styles/ beside the package (a checkout, an editable install)."""
    package = Path(__file__).resolve().parent.parent
    inside = package / "styles"
    return inside if inside.is_dir() else package.parent / "styles"


STYLES = _styles_dir() / "app.tcss"
DIALOG_BREAKPOINTS = [(0, "-short"), (25, "-tall")]
"""Screens 24 rows high or less get the class `-short`: the dialogs drop their spare lines there (app.tcss)."""


class DaintreeApp(App[None]):
    """Tasks, worktrees and one embedded terminal per agent."""

    CSS_PATH = STYLES
    TITLE = "daintree"
    COMMANDS = App.COMMANDS | {DashboardCommands}
    VERTICAL_BREAKPOINTS = DIALOG_BREAKPOINTS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit_dashboard", "Quit", show=False, priority=True, id="app_quit",
                tooltip="Quit too (in the terminal, ctrl+q goes to the agent)"),
    ]

    def __init__(self, backend: Backend, clock: Callable[[], float] = time.time,
                 clock_format: Callable[[float], str] | None = None) -> None:
        # ANSI colours reach the user's terminal as ANSI (not converted to Textual's palette), so the agent's
        # output inside the embedded terminal takes the user's own theme.
        super().__init__(ansi_color=True)
        self.warnings = WarningToasts(self)
        self.backend = backend
        self.clock = clock
        self.clock_format = clock_format
        self.keymap = user_keymap(backend.project.config.keys)
        self.exit_message = ""
        self.demo = False
        """Set by `daintree demo`, whose agents end with the dashboard."""
        self._dialogs_seen: weakref.WeakSet[Screen[object]] = weakref.WeakSet()
        self.told_default_agent = False  # the first quick-create names the agent it chose, and how to change it
        self.last_key_at = float("-inf")
        """When (monotonic) the user last pressed a key, to the dashboard or through it to an agent."""
        TerminalView.leave_keys = leave_keys(backend.project.config.keys)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            self.last_key_at = time.monotonic()
        await super().on_event(event)

    def typing_within(self, seconds: float) -> bool:
        """Whether a key came in the last `seconds`: a prompt that appears now may be answered by keys meant for
        something else."""
        return time.monotonic() - self.last_key_at < seconds

    def on_mount(self) -> None:
        self.screen_change_signal.subscribe(self, self.clear_toasts_for_a_dialog)
        self.warnings.show_pending()
        if self.keymap:
            self.set_keymap(self.keymap)

    def get_default_screen(self) -> MainScreen:
        # The dashboard is the app's first screen, not one pushed over a blank one: composed inside Textual's start-up
        # batch, its first layout is drawn once, when the batch ends (pushed from on_mount, a first frame was drawn
        # and thrown away inside the batch, then drawn again: 30-40 ms of a 120 ms start).
        return MainScreen()

    def clear_toasts_for_a_dialog(self, screen: Screen[object]) -> None:
        """A dialog that opens clears the toasts raised before it: they sat over its buttons (at 80x24 three of
        them hid "Merge" and "Cancel"), and they told of what came before it. Toasts it raises itself show."""
        if isinstance(screen, ModalScreen) and screen not in self._dialogs_seen:
            self._dialogs_seen.add(screen)
            self.clear_notifications()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # While the terminal has focus every key belongs to the agent: priority bindings stand aside.
        terminal_owns_keys = isinstance(self.focused, TerminalView) and self.focused.owns_keys
        return not (terminal_owns_keys and action in ("quit_dashboard", "command_palette", "quit"))

    def on_key(self, event: events.Key) -> None:
        """Type-ahead: a printable key that bubbled up unhandled while a text box has focus was typed right
        after the key that opened the box (`/` then `cart`, `n` then the subject) and went to the widget that
        had focus a moment before. It belongs in the box; the bindings already left it alone, since a focused
        box consumes printable keys."""
        box = self.focused
        if isinstance(box, Input) and event.is_printable and event.character:
            box.insert_text_at_cursor(event.character)
            event.stop()

    def attach(self, terminal: TerminalView, name: str) -> None:
        """Show session `name` in `terminal`: a tmux client in a PTY, or the fallback host's own screen; a remote
        session (`NAME@HOST`) is an ssh-run tmux client in the same kind of PTY."""
        if is_remote(name):
            argv = terminal.screen.query_one(HostsWatch).attach_argv(name)
            if argv is None:
                terminal.detach()  # its host does not answer: the placeholder says so
                terminal.hold(name)  # what is typed into it meanwhile is the agent's, never a shortcut
            else:
                terminal.attach_command(name, argv, hold_on_drop=True)
            return
        host = self.backend.host
        how = host.attach(name) if host is not None else None
        if isinstance(how, LocalScreen):  # the session runs in this process: shown from its own screen
            terminal.attach_emulator(name, how.emulator, how.lock, how.subscribe, how.write, how.resize)
        elif how is not None:
            terminal.attach_command(name, how)

    def announce(self, due: list[tuple[str, SessionInfo]]) -> None:
        """Sessions that started waiting or exited: notify, ring the bell, tell the desktop; once for all that one
        poll found (the demo's three agents, waiting at once, made three toasts over the terminal)."""
        if not due:  # most polls: the config's three stats stay off the event loop
            return
        cfg = self.backend.project.config
        said = [(name, info, self.what_happened(info)) for name, info in due
                if cfg.notify_on.get(str(info.status), True)]
        if not said:
            return
        lines = [f"{name}: {info.agent} {what}" for name, info, what in said]
        waiting = any(str(info.status) in ("waiting", "stalled") for _, info, _ in said)
        self.notify("\n".join(lines), title="daintree", severity="warning" if waiting else "information")
        if in_quiet_hours(cfg.quiet_hours, time.strftime("%H:%M", time.localtime(self.clock()))):
            return
        if cfg.bell:
            self.bell()
        if cfg.desktop and not self.watcher_tells_desktop and shutil.which("notify-send"):
            # The body is markup to desktop notifiers (<a href>, <img src>, entities): the agent's last line is
            # shown as text, never obeyed.
            body = html.escape(escape_controls("\n".join(lines)), quote=False)
            subprocess.Popen(["notify-send", "daintree", body],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @cached_property
    def watcher_tells_desktop(self) -> bool:
        """Whether the user's `[notify] desktop = true` has the notify watcher tell the desktop (once for all
        dashboards): this dashboard then does not too."""
        from daintree_tui.core.errors import ConfigError
        from daintree_tui.core.user_config import load_notify_config

        try:
            return load_notify_config().desktop
        except ConfigError:
            return False

    def on_terminal_notices(self, message: TerminalNotices) -> None:
        """Notices the watcher left for a dashboard's terminal (no desktop session where it runs): shown by the
        terminal itself, OSC 777 / OSC 9. Textual has no public call that writes a control sequence; `bell()`
        writes its BEL through the driver the same way."""
        from daintree_tui.services.notify import osc_notification

        driver = getattr(self, "_driver", None)
        if driver is None or self.is_web:
            return
        for notice in message.notices:
            driver.write(osc_notification(notice))

    @staticmethod
    def what_happened(info: SessionInfo) -> str:
        if str(info.status) == "stalled":
            return (f"has drawn nothing since it started: hung, or a blank screen (`daintree session log "
                    f"{info.name}` has what it printed)")
        what = "is waiting for you" if str(info.status) == "waiting" else (
            f"exited ({info.exit_code})" if info.exit_code is not None else "exited")
        if info.exit_code not in (None, 0) and info.log:
            why = telling_line(Path(info.log))  # the pane may not show it: tmux scrolls it away
            if why:
                what += f": {why}"
        return what

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Every notification with its terminal controls shown, never obeyed: messages carry names, task text,
        errors and remote hosts' words, and Textual writes a notification's ESC straight to the terminal. Never
        markup either: an agent's last line `[/x]` ended the dashboard (MarkupError when the toast rendered)."""
        super().notify(escape_controls(message), title=escape_controls(title), severity=severity,
                       timeout=timeout, markup=False)

    def report_worker_failure(self, event: Worker.StateChanged) -> None:
        """Every worker failure becomes a one-line notification; nothing crashes the dashboard."""
        if event.state != WorkerState.ERROR or event.worker.error is None:
            return
        error = event.worker.error
        message = str(error) if isinstance(error, DaintreeError) else f"{type(error).__name__}: {error}"
        self.notify(message, title=event.worker.description or "error", severity="error", timeout=8)

    def quit_dashboard(self) -> None:
        if self.backend.persistent_sessions:
            # Counted: "agents keep running" was said also when every agent had exited.
            live = self.live_agents()
            said = f"agents keep running in tmux ({live} now)" if live else "no agent is running"
            message = f"daintree: {said}; `daintree --repo {self.backend.project.root}` brings you back"
        else:
            message = "daintree: sessions ended with the dashboard (tmux is not installed)"
            if self.backend.host is not None:
                self.backend.host.close()
        if self.demo:  # its agents end with it (the demo then says how many it stopped)
            message = "daintree: closing the demo"
        self.exit_message = message
        self.exit(message=message)

    def action_quit_dashboard(self) -> None:
        self.quit_dashboard()

    def live_agents(self) -> int:
        """This repository's sessions whose agent still runs, as the dashboard last saw them."""
        main = next((s for s in self.screen_stack if isinstance(s, MainScreen)), None)
        if main is None:
            return 0
        return sum(1 for name, info in main.sessions.items()
                   if not is_remote(name) and info.status != SessionStatus.EXITED)


def make_app(services: Services | Project, clock: Callable[[], float] = time.time,
             clock_format: Callable[[float], str] | None = None, backend: Backend | None = None) -> DaintreeApp:
    """The one factory the CLI and the tests use. The CLI hands in the services it built for this process (with
    what every interface adds to them, `cli.common.build_services`); a project alone gets the dashboard's own:
    sessions on a PTY without tmux, and no inbox kinds from the layers above."""
    if backend is None:
        if isinstance(services, Project):
            services = Services(services, pty_fallback=True)
        backend = Backend(services, clock=clock)
    return DaintreeApp(backend, clock=clock, clock_format=clock_format)


def run_dashboard(services: Services, demo: bool = False) -> int:
    # What is imported by now lives as long as the process: out of the collector's reach, a full collection in
    # the middle of start-up (22 ms here, just before the first frame) walks only what start-up makes.
    gc.freeze()
    app = make_app(services)
    app.demo = demo
    app.run()
    return app.return_code or 0
